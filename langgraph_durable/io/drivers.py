"""The only place that talks to servers: the sync and async drivers of the operations of
``core.ops``.

Every saver operation is written once, as a plan: a generator that ``yield``s
operations (``core.ops``) and receives their replies (sans-I/O). ``run_sync`` executes a plan with
blocking clients (``redis.Redis``, ``pymongo.MongoClient``); ``run_async`` with asyncio
clients (``redis.asyncio.Redis``, ``pymongo.AsyncMongoClient`` or Motor). Nothing else in
the package has a sync and an async twin.

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
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

import redis.exceptions
from pymongo import DeleteOne, IndexModel, InsertOne, ReplaceOne, ReturnDocument, UpdateOne
from pymongo.errors import BulkWriteError, OperationFailure, PyMongoError
from redis.asyncio.cluster import PipelineCommand

from ..core.ops import (  # noqa: F401  (plans and tools import them from here too)
    Aggregate,
    BulkResult,
    BulkWrite,
    BulkWriteFailed,
    CommandFailed,
    CreateIndexes,
    DeleteDoc,
    DeleteMany,
    Doc,
    Find,
    FindOne,
    FindOneAndUpdate,
    Index,
    InsertDoc,
    LoadScripts,
    Mongo,
    MongoOp,
    Op,
    Parallel,
    Pipeline,
    Plan,
    ReplaceDoc,
    Scan,
    Script,
    Sleep,
    StreamEntry,
    T,
    UpdateDoc,
    WriteFailure,
    WriteModel,
    ask,
)
from ..errors import (
    CorruptRecordError,
    ReplicationTimeoutError,
    ScriptRefused,
    TierUnavailableError,
)
from .coalesce import SHARED_READS, ScriptBatcher
from .coalesce_sync import SyncScriptBatcher, sync_batchable

R = TypeVar("R")

def _is_cursor(op: MongoOp[Any]) -> bool:
    return op.is_cursor if isinstance(op, Mongo) else type(op).cursor


# --------------------------------------------------------------------------- MongoDB models
# The one place the package's MongoDB models (``core.ops``) become PyMongo's and PyMongo's
# results and errors become the package's, for the sync and the async driver alike.


def to_pymongo(model: WriteModel | Index) -> Any:
    """PyMongo's write model (``InsertOne``, ``ReplaceOne``, ``UpdateOne``, ``DeleteOne``)
    or ``IndexModel`` for one of the package's; raises ``TypeError`` for anything else.
    Public for tools that call PyMongo themselves (``cli/transfer.py``)."""
    t = type(model)
    if t is InsertDoc:  # the flusher's most common model: first
        assert isinstance(model, InsertDoc)
        return InsertOne(model.doc)
    if t is UpdateDoc:
        assert isinstance(model, UpdateDoc)
        return UpdateOne(model.filter, model.update, upsert=model.upsert)
    if t is ReplaceDoc:
        assert isinstance(model, ReplaceDoc)
        return ReplaceOne(model.filter, model.doc, upsert=model.upsert)
    if t is DeleteDoc:
        assert isinstance(model, DeleteDoc)
        return DeleteOne(model.filter)
    if t is Index:
        assert isinstance(model, Index)
        kw: dict[str, Any] = {"name": model.name}
        if model.sparse:
            kw["sparse"] = True
        if model.unique:
            kw["unique"] = True
        if model.expire_after_s is not None:
            kw["expireAfterSeconds"] = model.expire_after_s
        return IndexModel(list(model.keys), **kw)
    raise TypeError(f"not a MongoDB write model or index: {model!r}")


_MODELS = (InsertDoc, ReplaceDoc, UpdateDoc, DeleteDoc, Index)


def _mongo_call(op: MongoOp[Any]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """``op.call()`` with the package's models made PyMongo's: a list argument of write
    models or indexes, and ``return_document`` "after"/"before"."""
    args, kwargs = op.call()
    if any(isinstance(a, list) and a and isinstance(a[0], _MODELS) for a in args):
        args = tuple([InsertOne(m.doc) if type(m) is InsertDoc else to_pymongo(m)
                      for m in a] if isinstance(a, list) and a
                     and isinstance(a[0], _MODELS) else a for a in args)
    rd = kwargs.get("return_document")
    if isinstance(rd, str):
        kwargs["return_document"] = (ReturnDocument.AFTER if rd == "after"
                                     else ReturnDocument.BEFORE)
    return args, kwargs


def _mongo_reply(op: MongoOp[Any], result: Any) -> Any:
    """A MongoDB reply as plans see it: ``BulkWrite`` -> ``BulkResult``, ``DeleteMany`` ->
    the deleted count; others unchanged."""
    if isinstance(op, BulkWrite):
        if not result.acknowledged:  # w=0: MongoDB tells no counts
            return BulkResult()
        return BulkResult(result.inserted_count, result.matched_count,
                          result.modified_count, result.deleted_count,
                          result.upserted_count)
    if isinstance(op, DeleteMany):
        return result.deleted_count if result.acknowledged else 0
    return result


def _failures(errors: Any) -> list[WriteFailure]:
    return [WriteFailure(int(e.get("index", -1)), int(e.get("code") or 0),
                         str(e.get("errmsg", "")), str(e.get("codeName", "")))
            for e in errors or []]


def bulk_write_failed(collection: str, exc: BulkWriteError) -> BulkWriteFailed:
    """PyMongo's ``BulkWriteError`` on ``collection`` as the package's ``BulkWriteFailed``
    (each write error's index, code and message; write-concern errors; the counts of what
    was applied)."""
    d = exc.details or {}
    result = BulkResult(int(d.get("nInserted", 0)), int(d.get("nMatched", 0)),
                        int(d.get("nModified", 0)), int(d.get("nRemoved", 0)),
                        int(d.get("nUpserted", 0)))
    return BulkWriteFailed(collection, _failures(d.get("writeErrors")),
                           _failures(d.get("writeConcernErrors")), result)


# --------------------------------------------------------------------------- replies


def _pairs(raw: Any) -> dict[bytes, bytes]:
    """A Redis hash reply (RESP3 map or RESP2 flat list) as a dict."""
    if raw is None:
        return {}
    if isinstance(raw, dict):
        return dict(raw)
    return dict(zip(raw[::2], raw[1::2]))


def _entries(raw: Any) -> list[StreamEntry]:
    return [(eid, _pairs(fields)) for eid, fields in raw or []]


def normalise(command: str, reply: Any) -> Any:
    """One Redis reply in the shape plans see, whatever the protocol:
    ``HGETALL`` -> ``dict``; ``XREADGROUP``/``XREAD`` -> ``list[StreamEntry]`` (the first
    stream's; ``[]`` for none); ``XAUTOCLAIM`` -> ``list[StreamEntry]`` (the claimed
    entries); ``XRANGE``/``XREVRANGE`` -> ``list[StreamEntry]``; ``HSCAN`` -> ``(cursor,
    dict)``; others unchanged."""
    if isinstance(reply, Exception):
        return reply
    if command == "HGETALL":
        return _pairs(reply)
    if command in ("XREADGROUP", "XREAD"):
        if not reply:
            return []
        if isinstance(reply, dict):  # RESP3: {stream: [entries]} (or [[entries]])
            first = next(iter(reply.values()))
            if first and isinstance(first[0], list) and first[0] and isinstance(
                    first[0][0], (list, tuple)):
                first = first[0]
            return _entries(first)
        return _entries(reply[0][1])
    if command == "XAUTOCLAIM":
        return _entries(reply[1]) if reply else []
    if command in ("XRANGE", "XREVRANGE"):
        return _entries(reply)
    if command == "HSCAN":
        return (reply[0], _pairs(reply[1]))
    return reply


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


def _what(op: Any) -> str:
    return op.name if isinstance(op, Script) else type(op).__name__.lower()


def _refusal(exc: Exception, op: Any) -> ScriptRefused | None:
    """The ``ScriptRefused`` that a script's error reply ``exc`` stands for: a Redis
    ``ResponseError`` whose first word is one of the op's ``refusals``; else None."""
    if not isinstance(op, Script) or not op.refusals or not isinstance(
            exc, redis.exceptions.ResponseError):
        return None
    refused = ScriptRefused.parse(op.name, str(exc))
    return refused if refused.code in op.refusals else None


def _wrong_type(exc: Exception, op: Any) -> CorruptRecordError | None:
    """The ``CorruptRecordError`` that a script's ``WRONGTYPE`` error reply stands for (a
    key among the script's KEYS holds another type than the script reads: a damaged or
    foreign key; the plan running the script names which one, ``plans/read.py``
    ``damaged_keys_plan``); else None. Only that reply of a ``Script``: any other error
    (NOSCRIPT, OOM, a lost connection) keeps its own type."""
    if not isinstance(op, Script) or type(exc) is not redis.exceptions.ResponseError:
        return None
    text = str(exc)
    if not text.startswith("WRONGTYPE"):
        return None
    return CorruptRecordError(
        f"Redis script {op.name!r} met a key of the wrong type among {list(op.keys)!r}: "
        f"{text}", tier="hot")


def _wrap(exc: Exception, clients: Clients, op: Any) -> Exception:
    refused = _refusal(exc, op) or _wrong_type(exc, op)
    if refused is not None:
        return refused
    if isinstance(exc, (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)):
        return TierUnavailableError(
            f"Redis {clients.redis_name} did not answer ({_what(op)}): {exc}", tier="hot",
            server=clients.redis_name, operation=_what(op), reason=str(exc))
    if isinstance(exc, PyMongoError) and type(exc).__name__ in {
        "ServerSelectionTimeoutError", "AutoReconnect", "NetworkTimeout", "ConnectionFailure",
    }:
        where = f"{op.collection}.{op.method}" if isinstance(op, MongoOp) else _what(op)
        return TierUnavailableError(
            f"MongoDB {clients.mongo_name} did not answer ({where}): {exc}", tier="durable",
            server=clients.mongo_name, operation=where, reason=str(exc))
    if isinstance(exc, OperationFailure) and isinstance(op, MongoOp):
        if isinstance(exc, BulkWriteError):
            return bulk_write_failed(op.collection, exc)
        message = (exc.details or {}).get("errmsg") or str(exc)
        return CommandFailed(op.collection, op.method, int(exc.code or 0), str(message))
    return exc


def _pipeline_replies(op: Pipeline, replies: list[Any]) -> list[Any]:
    return [normalise(str(cmd[0]).upper(), r) for cmd, r in zip(op.commands, replies)]


# --------------------------------------------------------------------------- replicated scripts


@dataclass(frozen=True)
class _ToPrimary(Op[list[Any]]):
    """A step of ``_replicated``: send ``commands`` in one pipeline on one connection to
    the primary owning ``key``'s slot (the only server, off a cluster), or to ``node``
    (``(host, port)``, after an ``ASK``); the reply is the list of command replies, an
    error in place of a failed command's."""

    key: str
    commands: list[list[Any]]
    node: tuple[str, int] | None = None


@dataclass(frozen=True)
class _ReloadSlots(Op[None]):
    """A step of ``_replicated``: reload the cluster client's slot map (``CLUSTER SLOTS``)."""


def _replicated(op: Script[Any], c: Clients) -> Plan[Any]:
    """``Script`` with ``wait_replicas`` > 0, sans-I/O (the sync and async drivers only
    carry out the steps): the script call and ``WAIT`` in one pipeline; ``EVAL`` after a
    ``NOSCRIPT``; one more try after ``MOVED``/``ASK``; the slot map reloaded after a lost
    connection to a cluster node (the error is then raised). Returns the script's reply;
    raises its error, or ``ReplicationTimeoutError`` when ``WAIT`` counts too few."""
    tail = [len(op.keys), *op.keys, *op.args]
    call: list[Any] = ["EVALSHA", c.script(op.name).sha, *tail]
    wait = ["WAIT", op.wait_replicas, op.wait_timeout_ms]
    node: tuple[str, int] | None = None
    redirected = False
    while True:
        commands = [["ASKING"], call, wait] if node is not None else [call, wait]
        try:
            replies = yield _ToPrimary(op.keys[0], commands, node)
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError):
            if c.cluster:
                try:
                    yield _ReloadSlots()
                except redis.exceptions.RedisError:
                    pass  # no node answers yet: the next call reloads again
            raise
        reply, count = replies[-2:]
        if isinstance(reply, redis.exceptions.NoScriptError) and call[0] == "EVALSHA":
            call = ["EVAL", c.scripts[op.name], *tail]
            continue
        if isinstance(reply, redis.exceptions.AskError) and c.cluster and not redirected:
            redirected = True  # MovedError is an AskError too
            if isinstance(reply, redis.exceptions.MovedError):
                yield _ReloadSlots()
                node = None
            else:
                node = (reply.host, int(reply.port))
            continue
        if isinstance(reply, Exception):
            raise reply
        if isinstance(count, Exception):
            raise count
        if int(count) < op.wait_replicas:
            timeout_s = op.wait_timeout_ms / 1000
            raise ReplicationTimeoutError(
                f"{op.name} (key {op.keys[0]!r}) is stored on the Redis primary, but WAIT "
                f"confirmed it on {int(count)} of the {op.wait_replicas} replica(s) "
                f"required within {timeout_s} s",
                wanted=op.wait_replicas, replicas=int(count), timeout_s=timeout_s)
        return reply


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


def _load_scripts_op(op: LoadScripts, c: Clients) -> Op[Any] | None:
    """How to run ``LoadScripts`` on ``c``: a pipeline, or None when each source is sent by
    ``script_load`` (a cluster, where redis-py sends it to every primary)."""
    return None if c.cluster else Pipeline([["SCRIPT", "LOAD", src] for src in op.sources])


def _step_sync(step: Op[Any], c: Clients) -> Any:
    """Carry out one step of ``_replicated`` with a blocking client."""
    assert isinstance(step, (_ToPrimary, _ReloadSlots))
    if isinstance(step, _ReloadSlots):
        c.redis.nodes_manager.initialize()
        return None
    r = c.redis
    if c.cluster:
        node = (r.get_node(host=step.node[0], port=step.node[1]) if step.node is not None
                else r.get_node_from_key(step.key))
        r = r.get_redis_connection(node)
    pipe = r.pipeline(transaction=False)
    for cmd in step.commands:
        pipe.execute_command(*cmd)
    return pipe.execute(raise_on_error=False)


def _exec_sync(op: Op[Any], c: Clients) -> Any:
    if isinstance(op, Script):
        if op.wait_replicas > 0:
            return run_with(_replicated(op, c), lambda step: _step_sync(step, c))
        batcher = c.sync_batcher()
        if batcher is not None:
            return batcher.call(c.script(op.name).sha, c.scripts[op.name], op.keys, op.args)
        return c.script(op.name)(keys=list(op.keys), args=list(op.args))
    if isinstance(op, LoadScripts):
        as_pipe = _load_scripts_op(op, c)
        if as_pipe is not None:
            return _exec_sync(as_pipe, c)
        return [c.redis.script_load(src) for src in op.sources]
    if isinstance(op, Pipeline):
        pipe = c.redis.pipeline(transaction=False)
        for cmd in op.commands:
            pipe.execute_command(*cmd)
        return _pipeline_replies(op, pipe.execute(raise_on_error=op.raise_on_error))
    if isinstance(op, MongoOp):
        args, kwargs = _mongo_call(op)
        result = getattr(c.db[op.collection], op.method)(*args, **kwargs)
        return list(result) if _is_cursor(op) else _mongo_reply(op, result)
    if isinstance(op, Scan):
        return list(c.redis.scan_iter(match=op.match, count=op.count))
    if isinstance(op, Parallel):
        if len(op.ops) < 2:
            return [execute_sync(o, c) for o in op.ops]
        # concurrent round trips (redis-py and PyMongo clients are thread-safe)
        return list(_pool().map(lambda o: execute_sync(o, c), op.ops))
    if isinstance(op, Sleep):
        time.sleep(op.seconds)
        return None
    raise TypeError(f"unknown operation {op!r}")


def _decoded(op: Op[Any], raw: Any) -> Any:
    """The reply a plan receives: a script's typed reply (``Script.reply_of``; the one
    place a raw script reply is decoded, sync and async alike), others as executed."""
    return op.reply_of(raw) if isinstance(op, Script) else raw


def _timed(op: Op[Any]) -> bool:
    return isinstance(op, (Script, Pipeline, LoadScripts, MongoOp))


def _failed(op: Op[Any], clients: Clients, t0: float, exc: Exception) -> Exception:
    """What an operation's error becomes (sync and async drivers alike): timed by
    ``clients.observer``; a server that does not answer becomes ``TierUnavailableError``
    (returned, to be raised ``from exc``), any other error is returned unchanged."""
    if clients.observer is not None:
        _observed(op, clients, t0, False)
    return _wrap(exc, clients, op)


def _observed(op: Op[Any], clients: Clients, t0: float, ok: bool) -> None:
    """Tell ``clients.observer`` (set) how long ``op`` took since ``t0``."""
    if _timed(op):
        assert clients.observer is not None
        clients.observer(op, time.perf_counter() - t0, ok)


def execute_sync(op: Op[T], clients: Clients) -> T:
    """Execute one operation with blocking ``clients`` and return its normalised reply;
    a server that does not answer raises ``TierUnavailableError`` (other errors as the
    client raised them). Timed by ``clients.observer``."""
    t0 = time.perf_counter()
    try:
        result: T = _decoded(op, _exec_sync(op, clients))
    except Exception as exc:
        wrapped = _failed(op, clients, t0, exc)
        if wrapped is exc:
            raise
        raise wrapped from exc
    if clients.observer is not None:
        _observed(op, clients, t0, True)
    return result


def run_with(plan: Plan[R], execute: Callable[[Op[Any]], Any]) -> R:
    """Drive ``plan`` to completion, ``execute(op)`` giving each operation's reply (or
    raising its error, which is thrown into the plan: the plan may handle it); returns
    the plan's return value. ``run_sync`` is this with ``execute_sync``; tests pass canned
    replies (``tests/unit``)."""
    send: Any = None
    error: BaseException | None = None
    while True:
        try:
            op = plan.throw(error) if error is not None else plan.send(send)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        error = None
        try:
            send = execute(op)
        except Exception as exc:  # handed back to the plan, which may handle it
            error, send = exc, None


def run_sync(plan: Plan[R], clients: Clients) -> R:
    """Drive ``plan`` to completion with blocking clients; returns its return value.
    An operation's error is thrown into the plan, which may handle it."""
    return run_with(plan, lambda op: execute_sync(op, clients))


# --------------------------------------------------------------------------- async driver


async def _step_async(step: Op[Any], c: Clients) -> Any:
    """Carry out one step of ``_replicated`` with an asyncio client (a cluster node's
    pipeline is ``ClusterNode.execute_pipeline``: one connection, one write)."""
    assert isinstance(step, (_ToPrimary, _ReloadSlots))
    r = c.redis
    if isinstance(step, _ReloadSlots):
        await r.nodes_manager.initialize()
        return None
    if c.cluster:
        await r.initialize()  # a no-op once done: needed when this is its first command
        node = (r.get_node(host=step.node[0], port=step.node[1]) if step.node is not None
                else r.get_node_from_key(step.key))
        if node is None:
            raise redis.exceptions.ConnectionError(f"no cluster node for {step.node}")
        cmds = [PipelineCommand(i, *cmd) for i, cmd in enumerate(step.commands)]
        await node.execute_pipeline(cmds)
        return [cmd.result for cmd in cmds]
    pipe = r.pipeline(transaction=False)
    for cmd in step.commands:
        pipe.execute_command(*cmd)
    return await pipe.execute(raise_on_error=False)


def _shared(op: Pipeline) -> bool:
    """Whether ``op`` may go in the asyncio batcher's shared batch: every command one of
    ``coalesce.SHARED_READS`` (reads that never block: a blocking read would hold every
    call of its batch)."""
    return all(str(cmd[0]).upper() in SHARED_READS for cmd in op.commands)


async def _exec_async(op: Op[Any], c: Clients) -> Any:
    if isinstance(op, Script):
        if op.wait_replicas > 0:
            return await run_with_async(_replicated(op, c), lambda step: _step_async(step, c))
        if c.coalesce:
            sha = c.script(op.name).sha
            return await c.batcher().call(sha, c.scripts[op.name], op.keys, op.args)
        return await c.script(op.name)(keys=list(op.keys), args=list(op.args))
    if isinstance(op, LoadScripts):
        as_pipe = _load_scripts_op(op, c)
        if as_pipe is not None:
            return await _exec_async(as_pipe, c)
        return [await c.redis.script_load(src) for src in op.sources]
    if isinstance(op, Pipeline):
        if c.coalesce and not c.cluster and _shared(op):
            replies = await c.batcher().commands(op.commands)
            if op.raise_on_error:
                for reply in replies:
                    if isinstance(reply, Exception):
                        raise reply
            return _pipeline_replies(op, replies)
        pipe = c.redis.pipeline(transaction=False)
        for cmd in op.commands:
            pipe.execute_command(*cmd)
        return _pipeline_replies(op, await pipe.execute(raise_on_error=op.raise_on_error))
    if isinstance(op, MongoOp):
        args, kwargs = _mongo_call(op)
        result = getattr(c.db[op.collection], op.method)(*args, **kwargs)
        if _is_cursor(op):
            if asyncio.iscoroutine(result):  # AsyncMongoClient.aggregate is a coroutine
                result = await result
            return await result.to_list(None)
        return _mongo_reply(op, await result)
    if isinstance(op, Scan):
        return [k async for k in c.redis.scan_iter(match=op.match, count=op.count)]
    if isinstance(op, Parallel):
        return list(await asyncio.gather(*(execute_async(o, c) for o in op.ops)))
    if isinstance(op, Sleep):
        await asyncio.sleep(op.seconds)
        return None
    raise TypeError(f"unknown operation {op!r}")


async def execute_async(op: Op[T], clients: Clients) -> T:
    """``execute_sync`` with asyncio ``clients``."""
    t0 = time.perf_counter()
    try:
        result: T = _decoded(op, await _exec_async(op, clients))
    except Exception as exc:
        wrapped = _failed(op, clients, t0, exc)
        if wrapped is exc:
            raise
        raise wrapped from exc
    if clients.observer is not None:
        _observed(op, clients, t0, True)
    return result


async def run_with_async(plan: Plan[R], execute: Callable[[Op[Any]], Awaitable[Any]]) -> R:
    """``run_with`` under asyncio: ``await execute(op)`` gives each operation's reply."""
    send: Any = None
    error: BaseException | None = None
    while True:
        try:
            op = plan.throw(error) if error is not None else plan.send(send)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]
        error = None
        try:
            send = await execute(op)
        except Exception as exc:  # handed back to the plan, which may handle it
            error, send = exc, None


async def run_async(plan: Plan[R], clients: Clients) -> R:
    """Drive ``plan`` to completion with asyncio clients; returns its return value.

    Plans never block (they do no I/O of their own: values are serialized before a plan
    is made and decoded after it returns), so every step runs on the event loop."""
    return await run_with_async(plan, lambda op: execute_async(op, clients))
