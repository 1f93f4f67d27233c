"""The only place that talks to servers: the sync and async drivers of the operations of
``core.ops``.

Every saver operation is written once, as a plan: a generator that ``yield``s
operations (``core.ops``) and receives their replies (sans-I/O). ``run_sync`` executes a plan with
blocking clients (``redis.Redis``, ``pymongo.MongoClient``); ``run_async`` with asyncio
clients (``redis.asyncio.Redis``, ``pymongo.AsyncMongoClient`` or Motor). Each operation
type has one handler in one table (``_HANDLERS``), written once for both: a generator
yielding each client call's result, which the blocking driver sends straight back and the
asyncio driver awaits (``_Api`` holds the few real differences: threads or ``gather``,
``list`` or ``to_list``, the script batchers). Beside this module: ``client_set.Clients``,
``mongo_calls`` (PyMongo's models and results), ``redis_replies`` (reply shapes),
``op_errors`` (what an error becomes), ``replication`` (a script with ``WAIT``).

An operation is a small frozen dataclass typed by its reply (``Op[T]``): a plan that
yields ``Find(...)`` receives a ``list`` of documents. The drivers normalise replies, so
a plan never sees which protocol (RESP2 or RESP3) or which client (PyMongo, Motor) ran
it: a Redis hash is a ``dict`` of bytes, a stream entry a ``(id, {field: value})``
pair. ``ask(op)`` gives a plan the reply with its type (``x = yield from ask(op)``).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine, Generator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, NoReturn, TypeVar

from ..core.drive import Steps, adrive, drive
from ..core.ops import BulkWrite as BulkWrite  # tools import it from here
from ..core.ops import (
    GatedRead,
    LoadScripts,
    MongoOp,
    Op,
    Parallel,
    Pipeline,
    Plan,
    Scan,
    Script,
    Sleep,
    T,
)
from .client_set import Clients as Clients
from .coalesce import shareable
from .gated_read import read_sync
from .mongo_calls import bulk_write_failed as bulk_write_failed
from .mongo_calls import is_cursor, mongo_call, mongo_reply
from .mongo_calls import to_pymongo as to_pymongo
from .op_errors import wrap
from .redis_replies import normalise as normalise
from .redis_replies import pipeline_replies
from .replication import ReloadSlots, ToPrimary, on_node_async, on_node_sync, replicated

R = TypeVar("R")

Handler = Callable[[Any, Clients, "_Api"], Generator[Any, Any, Any]]
"""How one operation type is carried out, for both APIs: a generator yielding each client
call's result (blocking: the value, sent straight back; asyncio: an awaitable, awaited
and its value sent back or its error thrown in)."""


@dataclass(frozen=True)
class _Api:
    """What differs between blocking and asyncio clients beyond a method call's result
    being awaitable; each returns the value (blocking) or an awaitable of it (asyncio)."""

    batcher: Callable[[Clients], Any]
    """The script batcher of ``Clients`` (``call(sha, source, keys, args)``), or None."""
    shared: Callable[[Clients, Pipeline], Any]
    """The batcher a ``Pipeline`` of shared reads goes in (``commands(...)``), or None."""
    cursor: Callable[[Any], Any]
    """A MongoDB cursor's documents as a list."""
    scan: Callable[[Any], Any]
    """The keys of ``scan_iter`` as a list."""
    parallel: Callable[[Sequence[Op[Any]], Clients], Any]
    """The replies of operations run concurrently, in order."""
    sleep: Callable[[float], Any]
    on_node: Callable[[Clients, ToPrimary], Any]
    """A ``ToPrimary`` on a Redis Cluster (``replication.on_node_sync``/``_async``)."""
    gated: Callable[[GatedRead, Clients], Any] | None
    """A ``GatedRead``'s raw reply (``gated_read.read_sync``); None: run as a Pipeline."""


# --------------------------------------------------------------------------- the handlers


def _script(op: Script[Any], c: Clients, api: _Api) -> Generator[Any, Any, Any]:
    if op.wait_replicas > 0:
        return (yield from _inline(replicated(op, c), c, api))
    batcher = api.batcher(c)
    if batcher is not None:
        return (yield batcher.call(c.script(op.name).sha, c.scripts[op.name], op.keys,
                                   op.args))
    return (yield c.script(op.name)(keys=list(op.keys), args=list(op.args)))


def _load_scripts(op: LoadScripts, c: Clients, api: _Api) -> Generator[Any, Any, Any]:
    if not c.cluster:
        return (yield from _pipeline(Pipeline([["SCRIPT", "LOAD", s] for s in op.sources]),
                                     c, api))
    shas = []  # on a cluster redis-py sends each source to every primary
    for src in op.sources:
        shas.append((yield c.redis.script_load(src)))
    return shas


def _pipeline(op: Pipeline, c: Clients, api: _Api) -> Generator[Any, Any, Any]:
    batcher = api.shared(c, op)
    if batcher is not None:
        replies = yield batcher.commands(op.commands)
        if op.raise_on_error:
            for reply in replies:
                if isinstance(reply, Exception):
                    raise reply
        return pipeline_replies(op, replies)
    pipe = c.redis.pipeline(transaction=False)
    for cmd in op.commands:
        pipe.execute_command(*cmd)
    return pipeline_replies(op, (yield pipe.execute(raise_on_error=op.raise_on_error)))


def _gated(op: GatedRead, c: Clients, api: _Api) -> Generator[Any, Any, Any]:
    if api.gated is None or op.gate is None or op.gate.refused or c.cluster:
        return (yield from _pipeline(op, c, api))
    return pipeline_replies(op, [(yield api.gated(op, c))])


def _mongo(op: MongoOp[Any], c: Clients, api: _Api) -> Generator[Any, Any, Any]:
    args, kwargs = mongo_call(op)
    result = getattr(c.db[op.collection], op.method)(*args, **kwargs)
    if is_cursor(op):
        return (yield api.cursor(result))
    return mongo_reply(op, (yield result))


def _scan(op: Scan, c: Clients, api: _Api) -> Generator[Any, Any, Any]:
    return (yield api.scan(c.redis.scan_iter(match=op.match, count=op.count)))


def _parallel(op: Parallel, c: Clients, api: _Api) -> Generator[Any, Any, Any]:
    return list((yield api.parallel(op.ops, c)))


def _sleep(op: Sleep, c: Clients, api: _Api) -> Generator[Any, Any, Any]:
    yield api.sleep(op.seconds)


def _to_primary(op: ToPrimary, c: Clients, api: _Api) -> Generator[Any, Any, Any]:
    if c.cluster:
        return (yield api.on_node(c, op))
    pipe = c.redis.pipeline(transaction=False)
    for cmd in op.commands:
        pipe.execute_command(*cmd)
    return (yield pipe.execute(raise_on_error=False))


def _reload_slots(op: ReloadSlots, c: Clients, api: _Api) -> Generator[Any, Any, Any]:
    yield c.redis.nodes_manager.initialize()


_HANDLERS: dict[type, Handler] = {
    Script: _script, LoadScripts: _load_scripts, Pipeline: _pipeline, GatedRead: _gated,
    MongoOp: _mongo,
    Scan: _scan, Parallel: _parallel, Sleep: _sleep, ToPrimary: _to_primary,
    ReloadSlots: _reload_slots,
}
"""The one table of operation types and their handlers (a subclass, e.g. each
``MongoOp``, finds its base's on first use)."""


def _handler(op: Op[Any]) -> Handler:
    t = type(op)
    handler = _HANDLERS.get(t)
    if handler is None:
        base = next((b for b in t.__mro__[1:] if b in _HANDLERS), None)
        if base is None:
            raise TypeError(f"unknown operation {op!r}")
        handler = _HANDLERS[t] = _HANDLERS[base]
    return handler


def _inline(plan: Plan[R], c: Clients, api: _Api) -> Generator[Any, Any, R]:
    """Run ``plan`` inside a handler: each step by its handler, unobserved; a step's
    error is thrown into the plan (``replication.replicated`` handles some)."""
    steps = Steps(plan)
    for step in steps:
        try:
            steps.send((yield from _handler(step)(step, c, api)))
        except Exception as exc:
            steps.throw(exc)
    return steps.value  # type: ignore[return-value]


# --------------------------------------------------------------------------- the two APIs

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


def _parallel_sync(ops: Sequence[Op[Any]], c: Clients) -> list[Any]:
    if len(ops) < 2:
        return [execute_sync(o, c) for o in ops]
    # concurrent round trips (redis-py and PyMongo clients are thread-safe)
    return list(_pool().map(lambda o: execute_sync(o, c), ops))


async def _cursor_list(result: Any) -> list[Any]:
    if asyncio.iscoroutine(result):  # AsyncMongoClient.aggregate is a coroutine
        result = await result
    return await result.to_list(None)  # type: ignore[no-any-return]


async def _scan_list(keys: Any) -> list[Any]:
    return [k async for k in keys]


_SYNC = _Api(batcher=lambda c: c.sync_batcher(), shared=lambda c, op: None, cursor=list,
             scan=list, parallel=_parallel_sync, sleep=time.sleep, on_node=on_node_sync,
             gated=read_sync)
_ASYNC = _Api(
    batcher=lambda c: c.batcher() if c.coalesce else None,
    shared=lambda c, op: (c.batcher() if c.coalesce and not c.cluster and shareable(op.commands)
                          else None),
    cursor=_cursor_list, scan=_scan_list, sleep=asyncio.sleep, on_node=on_node_async,
    gated=None,
    parallel=lambda ops, c: asyncio.gather(*(execute_async(o, c) for o in ops)))


def _given(result: Any) -> Any:
    """A handler's yielded result as the driver answers it: itself (blocking clients), or
    the awaitable ``adrive`` awaits (asyncio clients)."""
    return result


_TIMED = (Script, Pipeline, LoadScripts, MongoOp)  # GatedRead: a Pipeline
"""The operations ``Clients.observer`` is told about."""


def _execute(op: Op[Any], c: Clients, api: _Api) -> Generator[Any, Any, Any]:
    """One operation, sync and async alike: its handler's reply decoded (a script's typed
    reply, ``Script.reply_of``: the one place a raw script reply is decoded); timed by
    ``c.observer``; an error as ``op_errors.wrap`` makes it (raised ``from`` the client's)."""
    t0 = time.perf_counter()
    try:
        raw = yield from _handler(op)(op, c, api)
        result = op.reply_of(raw) if isinstance(op, Script) else raw
    except Exception as exc:
        _raise_failed(op, c, t0, exc)
    _observe(op, c, t0, True)
    return result


def _observe(op: Op[Any], c: Clients, t0: float, ok: bool) -> None:
    """Tell ``c.observer`` (if any) how ``op`` (one of ``_TIMED``) went since ``t0``."""
    if c.observer is not None and isinstance(op, _TIMED):
        c.observer(op, time.perf_counter() - t0, ok)


def _raise_failed(op: Op[Any], c: Clients, t0: float, exc: Exception) -> NoReturn:
    """Tell the observer that ``op`` failed with ``exc`` and raise what ``op_errors.wrap``
    makes of it (``exc`` itself, or an error raised ``from`` it)."""
    _observe(op, c, t0, False)
    wrapped = wrap(exc, op, c.redis_name, c.mongo_name)
    if wrapped is exc:
        raise exc
    raise wrapped from exc


async def _batched_script(op: Script[T], c: Clients) -> T:
    """``_execute`` of a ``Script`` sent through the asyncio batcher (every ``put`` and
    ``put_writes``), written out: what a call holds while its reply is awaited is this
    coroutine and the batcher's, not the handler generators' (fewer young objects for
    the garbage collector; docs/speed.md, "The garbage collector")."""
    t0 = time.perf_counter()
    try:
        result = op.reply_of(await c.batcher().call(c.script(op.name).sha,
                                                    c.scripts[op.name], op.keys, op.args))
    except Exception as exc:
        _raise_failed(op, c, t0, exc)
    _observe(op, c, t0, True)
    return result


def execute_sync(op: Op[T], clients: Clients) -> T:
    """Execute one operation with blocking ``clients`` and return its normalised reply;
    a server that does not answer raises ``TierUnavailableError`` (other errors as the
    client raised them). Timed by ``clients.observer``."""
    return drive(_execute(op, clients, _SYNC), _given)  # type: ignore[no-any-return]


def execute_async(op: Op[T], clients: Clients) -> Coroutine[Any, Any, T]:
    """``execute_sync`` with asyncio ``clients``: the coroutine to await (made here, not
    awaited here: one coroutine less alive per call while it waits)."""
    if type(op) is Script and not op.wait_replicas and clients.coalesce:
        return _batched_script(op, clients)
    return adrive(_execute(op, clients, _ASYNC), _given)


def run_with(plan: Plan[R], execute: Callable[[Op[Any]], Any]) -> R:
    """Drive ``plan`` to completion, ``execute(op)`` giving each operation's reply (or
    raising its error, which is thrown into the plan: the plan may handle it); returns
    the plan's return value. ``run_sync`` is this with ``execute_sync``; tests pass canned
    replies (``tests/unit``)."""
    return drive(plan, execute)


def run_sync(plan: Plan[R], clients: Clients) -> R:
    """Drive ``plan`` to completion with blocking clients; returns its return value.
    An operation's error is thrown into the plan, which may handle it."""
    return run_with(plan, lambda op: execute_sync(op, clients))


async def run_with_async(plan: Plan[R], execute: Callable[[Op[Any]], Awaitable[Any]]) -> R:
    """``run_with`` under asyncio: ``await execute(op)`` gives each operation's reply."""
    return await adrive(plan, execute)


def run_async(plan: Plan[R], clients: Clients) -> Coroutine[Any, Any, R]:
    """Drive ``plan`` to completion with asyncio clients: a coroutine giving its return
    value (``adrive``'s, returned rather than awaited in one more coroutine).

    Plans never block (they do no I/O of their own: values are serialized before a plan
    is made and decoded after it returns), so every step runs on the event loop."""
    step = clients.async_step
    if step is None:  # made once per clients: one object less alive per call

        def step(op: Op[Any], clients: Clients = clients) -> Awaitable[Any]:
            return execute_async(op, clients)  # looked up at each call: tools hook it

        clients.async_step = step
    return adrive(plan, step)
