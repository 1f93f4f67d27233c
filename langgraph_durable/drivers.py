"""The only place that talks to servers: I/O operations and their sync and async drivers.

Every saver operation is written once, as a generator that ``yield``s the operations
below and receives their results (sans-I/O). ``run_sync`` executes it with blocking
clients (``redis.Redis``, ``pymongo.MongoClient``); ``run_async`` with asyncio clients
(``redis.asyncio.Redis``, ``pymongo.AsyncMongoClient`` or Motor). Nothing else in the
package has a sync and an async twin.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Generator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import redis.exceptions
from pymongo.errors import PyMongoError

from .errors import TierUnavailableError

# --------------------------------------------------------------------------- operations


@dataclass
class Script:
    """Run the registered Lua script ``name`` (one round trip; EVALSHA, loaded on demand)."""

    name: str
    keys: Sequence[str]
    args: Sequence[Any]


@dataclass
class Pipeline:
    """Send Redis commands in one pipeline (one round trip, no MULTI); returns their replies.

    With ``raise_on_error=False`` a failing command's exception is returned in its place.
    """

    commands: Sequence[Sequence[Any]]
    raise_on_error: bool = True


@dataclass
class Mongo:
    """Call ``method`` on a MongoDB collection; cursors (``find``, ``aggregate``) become lists."""

    collection: str
    method: str
    args: Sequence[Any] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)


@dataclass
class Scan:
    """Every Redis key matching the glob ``match`` (SCAN with ``COUNT count``, on every
    primary of a cluster); returns the keys. Many round trips on a large keyspace: for
    administration (listing threads), never on a saver's hot path."""

    match: str
    count: int = 1000


@dataclass
class Parallel:
    """Run several operations; concurrently under asyncio, in order with sync clients."""

    ops: Sequence[Any]


@dataclass
class Sleep:
    """Wait ``seconds`` without holding the event loop."""

    seconds: float


Op = Script | Pipeline | Mongo | Scan | Parallel | Sleep
_TIMED = (Script, Pipeline, Mongo)
Plan = Generator[Any, Any, Any]

_CURSOR_METHODS = {"find", "aggregate", "list_indexes"}


@dataclass
class Clients:
    """One side's clients: a Redis client, a MongoDB database and registered Lua scripts."""

    redis: Any
    db: Any
    scripts: dict[str, str]
    redis_name: str = "redis"
    mongo_name: str = "mongodb"
    _registered: dict[str, Any] = field(default_factory=dict)
    observer: Callable[[Any, float, bool], None] | None = None
    """Called after each Script, Pipeline and Mongo operation with ``(op, seconds, ok)``
    (round-trip time from ``time.perf_counter``); ``None`` = not timed (metrics.py sets it)."""

    def script(self, name: str) -> Any:
        """The client's registered ``Script`` object for ``name`` (EVALSHA with fallback)."""
        obj = self._registered.get(name)
        if obj is None:
            obj = self._registered[name] = self.redis.register_script(self.scripts[name])
        return obj


def _wrap(exc: Exception, clients: Clients, op: Any) -> Exception:
    if isinstance(exc, (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)):
        what = op.name if isinstance(op, Script) else type(op).__name__.lower()
        return TierUnavailableError(f"Redis {clients.redis_name} did not answer ({what}): {exc}")
    if isinstance(exc, PyMongoError) and type(exc).__name__ in {
        "ServerSelectionTimeoutError", "AutoReconnect", "NetworkTimeout", "ConnectionFailure",
    }:
        return TierUnavailableError(
            f"MongoDB {clients.mongo_name} did not answer ({op.collection}.{op.method}): {exc}"
        )
    return exc


# --------------------------------------------------------------------------- sync driver

_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    """Threads for the sync driver's ``Parallel`` operations (created on first use)."""
    global _POOL
    if _POOL is None:
        with _POOL_LOCK:
            if _POOL is None:
                _POOL = ThreadPoolExecutor(max_workers=8, thread_name_prefix="lgd-parallel")
    return _POOL



def _exec_sync(op: Any, c: Clients) -> Any:
    if isinstance(op, Script):
        return c.script(op.name)(keys=list(op.keys), args=list(op.args))
    if isinstance(op, Pipeline):
        pipe = c.redis.pipeline(transaction=False)
        for cmd in op.commands:
            pipe.execute_command(*cmd)
        return pipe.execute(raise_on_error=op.raise_on_error)
    if isinstance(op, Mongo):
        result = getattr(c.db[op.collection], op.method)(*op.args, **op.kwargs)
        return list(result) if op.method in _CURSOR_METHODS else result
    if isinstance(op, Scan):
        return list(c.redis.scan_iter(match=op.match, count=op.count))
    if isinstance(op, Parallel):
        if len(op.ops) < 2:
            return [_exec_sync_wrapped(o, c) for o in op.ops]
        # concurrent round trips (redis-py and PyMongo clients are thread-safe)
        return list(_pool().map(lambda o: _exec_sync_wrapped(o, c), op.ops))
    if isinstance(op, Sleep):
        time.sleep(op.seconds)
        return None
    raise TypeError(f"unknown operation {op!r}")


def _exec_sync_wrapped(op: Any, c: Clients) -> Any:
    obs = c.observer
    if obs is not None and type(op) in _TIMED:
        t0 = time.perf_counter()
        try:
            result = _exec_sync_wrapped_untimed(op, c)
        except Exception:
            obs(op, time.perf_counter() - t0, False)
            raise
        obs(op, time.perf_counter() - t0, True)
        return result
    return _exec_sync_wrapped_untimed(op, c)


def _exec_sync_wrapped_untimed(op: Any, c: Clients) -> Any:
    try:
        return _exec_sync(op, c)
    except Exception as exc:
        wrapped = _wrap(exc, c, op)
        if wrapped is exc:
            raise
        raise wrapped from exc


def run_sync(plan: Plan, clients: Clients) -> Any:
    """Drive ``plan`` to completion with blocking clients; returns its return value."""
    send: Any = None
    error: BaseException | None = None
    while True:
        try:
            op = plan.throw(error) if error is not None else plan.send(send)
        except StopIteration as stop:
            return stop.value
        error = None
        try:
            send = _exec_sync_wrapped(op, clients)
        except Exception as exc:  # handed back to the plan, which may handle it
            error, send = exc, None


# --------------------------------------------------------------------------- async driver


async def _exec_async(op: Any, c: Clients) -> Any:
    if isinstance(op, Script):
        return await c.script(op.name)(keys=list(op.keys), args=list(op.args))
    if isinstance(op, Pipeline):
        pipe = c.redis.pipeline(transaction=False)
        for cmd in op.commands:
            pipe.execute_command(*cmd)
        return await pipe.execute(raise_on_error=op.raise_on_error)
    if isinstance(op, Mongo):
        result = getattr(c.db[op.collection], op.method)(*op.args, **op.kwargs)
        if op.method in _CURSOR_METHODS:
            if asyncio.iscoroutine(result):  # AsyncMongoClient.aggregate is a coroutine
                result = await result
            return await result.to_list(None)
        return await result
    if isinstance(op, Scan):
        return [k async for k in c.redis.scan_iter(match=op.match, count=op.count)]
    if isinstance(op, Parallel):
        return list(await asyncio.gather(*(_exec_async_wrapped(o, c) for o in op.ops)))
    if isinstance(op, Sleep):
        await asyncio.sleep(op.seconds)
        return None
    raise TypeError(f"unknown operation {op!r}")


async def _exec_async_wrapped(op: Any, c: Clients) -> Any:
    obs = c.observer
    if obs is not None and type(op) in _TIMED:
        t0 = time.perf_counter()
        try:
            result = await _exec_async_wrapped_untimed(op, c)
        except Exception:
            obs(op, time.perf_counter() - t0, False)
            raise
        obs(op, time.perf_counter() - t0, True)
        return result
    return await _exec_async_wrapped_untimed(op, c)


async def _exec_async_wrapped_untimed(op: Any, c: Clients) -> Any:
    try:
        return await _exec_async(op, c)
    except Exception as exc:
        wrapped = _wrap(exc, c, op)
        if wrapped is exc:
            raise
        raise wrapped from exc


def _step(plan: Plan, send: Any, error: BaseException | None) -> Any:
    """One step of ``plan`` (for a worker thread); its end comes back as the value."""
    try:
        return plan.throw(error) if error is not None else plan.send(send)
    except StopIteration as stop:
        return stop


async def run_async(plan: Plan, clients: Clients, *, offload: bool = False) -> Any:
    """Drive ``plan`` to completion with asyncio clients; returns its return value.

    With ``offload`` the plan's own steps (serializing, decoding) run in a worker thread,
    so a serializer that does blocking I/O (``ExternalRefSerializer`` uploading to S3)
    never blocks the event loop; the round trips stay on the loop."""
    send: Any = None
    error: BaseException | None = None
    while True:
        try:
            if offload:
                # StopIteration cannot cross a Future: the step returns it as a value
                op = await asyncio.to_thread(_step, plan, send, error)
                if isinstance(op, StopIteration):
                    raise op
            else:
                op = plan.throw(error) if error is not None else plan.send(send)
        except StopIteration as stop:
            return stop.value
        error = None
        try:
            send = await _exec_async_wrapped(op, clients)
        except Exception as exc:
            error, send = exc, None
