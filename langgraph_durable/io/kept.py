"""Connections the asyncio script batcher keeps between its batches (the io layer; used by
``coalesce.ScriptBatcher``).

Taking a connection from redis-py's asyncio pool and giving it back costs a condition, a
lock, a timeout and the pool's observability records each way: a third of a lone call's
client CPU (docs/speed.md, "A connection kept between calls"). So a batch answered without
error leaves its connection here for the next batch, when the pool is large enough to
spare it (``keep_limit``):

- a kept connection is checked before it is used again as the pool checks one it hands
  out (connected, nothing to read: the server did not close it), and repaired by the
  pool's own ``ensure_connection`` otherwise;
- those not used for ``IDLE_RELEASE_S`` go back to the pool (a saver that stopped
  calling holds none of a pool its owner shares);
- ``release`` (a saver closing) gives them all back and keeps none from then on, so a
  batch still on the wire gives its connection back when answered; ``stop`` does the
  same from another thread.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

HOLD_MIN_POOL = 8
"""A batcher (``coalesce.ScriptBatcher``, ``coalesce_sync.SyncScriptBatcher``) keeps
connections between batches only on a pool of at least this many (the asyncio one, one per
this many, at most as many as it may have batches on the wire; the blocking one sends one
batch at a time and keeps one). On a smaller pool each batch takes one and gives it back,
leaving the pool whole to the other commands."""

IDLE_RELEASE_S = 1.0
"""Seconds after which kept connections that no batch used go back to the pool."""


def keep_limit(pool: Any, max_in_flight: int) -> int:
    """How many connections a batcher with at most ``max_in_flight`` batches on the wire
    keeps from ``pool``: one per ``HOLD_MIN_POOL`` of its ``max_connections``, at most
    ``max_in_flight``; 0 for a smaller pool or one without ``ensure_connection``."""
    size = getattr(pool, "max_connections", 0)
    if (not isinstance(size, int) or size < HOLD_MIN_POOL
            or not hasattr(pool, "ensure_connection")):
        return 0
    return max(1, min(max_in_flight, size // HOLD_MIN_POOL))


class KeptConnections:
    """The connections one batcher keeps from ``pool`` (at most ``limit``), on one event
    loop at a time."""

    def __init__(self, pool: Any, limit: int) -> None:
        self.pool = pool
        self.limit = limit
        """Most connections kept (0: none; ``release`` and ``stop`` set it)."""
        self.idle: list[Any] = []
        """Connections kept while no batch uses them (the next batches take them)."""
        self._used = False  # a batch took one since the last look (``_look``)
        self._timer: asyncio.TimerHandle | None = None
        self._tasks: set[asyncio.Task[Any]] = set()

    async def take(self) -> Any:
        """A connection for a batch: a kept one (checked) or one from the pool."""
        self._used = True
        if not self.idle:
            return await self.pool.get_connection()
        conn = self.idle.pop()
        try:
            if not conn.is_connected or await _readable(conn):
                await self.pool.ensure_connection(conn)
        except BaseException:
            await self.pool.release(conn)
            raise
        return conn

    async def give(self, conn: Any, answered: bool) -> None:
        """After a batch: keep ``conn`` if the batch was ``answered`` without error and
        there is room, else give it back to the pool."""
        if answered and len(self.idle) < self.limit:
            self.idle.append(conn)
            if self._timer is None:
                self._timer = asyncio.get_running_loop().call_later(IDLE_RELEASE_S,
                                                                    self._look)
            return
        await self.pool.release(conn)

    def _look(self) -> None:
        """Every ``IDLE_RELEASE_S`` while connections are kept: give them back if no batch
        took one since the last look."""
        self._timer = None
        if self._used and self.idle:
            self._used = False
            self._timer = asyncio.get_running_loop().call_later(IDLE_RELEASE_S, self._look)
        else:
            self._drop_idle()

    def _drop_idle(self) -> None:
        """Give the idle connections back to the pool in tasks of this loop."""
        idle, self.idle = self.idle, []
        for conn in idle:
            task = asyncio.ensure_future(self.pool.release(conn))
            self._tasks.add(task)  # keep a reference until it is done
            task.add_done_callback(self._tasks.discard)

    def _take_idle(self) -> list[Any]:
        """The idle connections, no longer kept, and no idle timer."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        idle, self.idle = self.idle, []
        return idle

    async def moved(self) -> None:
        """The batcher's calls now come from another event loop: what was kept belongs
        to the old one's transports; give it back to the pool (which repairs it before
        handing it out again), as a batch of the old loop would have."""
        for conn in self._take_idle():
            with contextlib.suppress(Exception):
                await self.pool.release(conn)

    async def release(self) -> None:
        """Give every kept connection back to the pool and keep none from now on. On the
        batcher's event loop."""
        self.limit = 0
        for conn in self._take_idle():
            await self.pool.release(conn)

    def stop(self, loop: asyncio.AbstractEventLoop) -> None:
        """``release`` from another thread: keep none from now on, and give the kept ones
        back in ``loop`` (the batcher's) if it still runs."""
        self.limit = 0
        if loop.is_running() and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # closed meanwhile
                loop.call_soon_threadsafe(self._drop_idle)


async def _readable(conn: Any) -> bool:
    """Whether an idle connection has data to read or was closed by the server (what
    the pool's ``ensure_connection`` looks for); an error counts as True."""
    check = getattr(conn, "can_read", None) or conn.can_read_destructive
    try:
        return bool(await check())
    except Exception:
        return True
