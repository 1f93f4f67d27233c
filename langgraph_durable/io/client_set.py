"""``Clients``: one side's server clients (a Redis client, a MongoDB database, the Lua
scripts registered on it) with what the drivers (``io/drivers.py``) keep per side: the
script batchers, the names errors quote, the observer that times operations."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .coalesce import ScriptBatcher
from .coalesce_sync import SyncScriptBatcher, sync_batchable


@dataclass
class Clients:
    """One side's clients: a Redis client, a MongoDB database and registered Lua scripts."""

    redis: Any
    db: Any
    scripts: dict[str, str]
    redis_name: str = "redis"
    mongo_name: str = "mongodb"
    _registered: dict[str, Any] = field(default_factory=dict)
    cluster: bool = False
    """True when ``redis`` is a Redis Cluster client (commands without a key go to every
    primary, not down a pipeline)."""
    observer: Callable[[Any, float, bool], None] | None = None
    """Called after each Script, Pipeline and MongoDB operation with ``(op, seconds, ok)``
    (round-trip time from ``time.perf_counter``); ``None`` = not timed (metrics.py sets it)."""
    coalesce: bool = True
    """Asyncio clients: ``Script`` calls (without ``wait_replicas``), and off a cluster
    ``Pipeline``s of non-blocking reads (``coalesce.SHARED_READS``), that arrive in the
    same event-loop turn go to Redis as one pipeline, with a bounded number of batches on
    the wire (``coalesce.ScriptBatcher``: a burst of calls never waits for the pool). Blocking
    clients (not a cluster's): calls that OS threads make while another batch is on the
    wire go together as the next one (``coalesce_sync.SyncScriptBatcher``). False sends each
    on its own."""
    _batcher: ScriptBatcher | None = None
    async_step: Callable[[Any], Any] | None = None
    """``io.drivers.run_async``'s step (``execute_async`` bound to these clients), made
    on first use."""
    _sync_batcher: SyncScriptBatcher | None = None

    def script(self, name: str) -> Any:
        """The client's registered ``Script`` object for ``name`` (EVALSHA with fallback)."""
        obj = self._registered.get(name)
        if obj is None:
            obj = self._registered[name] = self.redis.register_script(self.scripts[name])
        return obj

    def batcher(self) -> ScriptBatcher:
        """The asyncio clients' ``ScriptBatcher`` (made on first use)."""
        if self._batcher is None:
            self._batcher = ScriptBatcher(self.redis)
        return self._batcher

    def release_held(self) -> None:
        """Give the connection the blocking batcher keeps between batches back to the
        Redis client's pool (``kept.HOLD_MIN_POOL``), and keep none from now on."""
        if self._sync_batcher is not None:
            self._sync_batcher.release()

    async def arelease_held(self) -> None:
        """Give the connections the asyncio batcher keeps between batches back to the Redis
        client's pool, and keep none from now on; on the client's event loop."""
        if self._batcher is not None:
            await self._batcher.release()

    def stop_keeping(self, loop: Any) -> None:
        """``arelease_held`` from another thread: the asyncio batcher keeps no connection
        from now on, and gives back those it keeps in ``loop`` (its own) if that runs."""
        if self._batcher is not None:
            self._batcher.kept.stop(loop)

    def sync_batcher(self) -> SyncScriptBatcher | None:
        """The blocking clients' ``SyncScriptBatcher`` (made on first use); None on a Redis
        Cluster or with ``coalesce`` False."""
        if not self.coalesce or self.cluster:
            return None
        if self._sync_batcher is None:
            if not sync_batchable(self.redis):
                return None
            self._sync_batcher = SyncScriptBatcher(self.redis)
        return self._sync_batcher
