"""The I/O operations plans yield, typed by their replies (sans-I/O; nothing here talks
to a server).

Every saver operation is written once, as a plan: a generator that ``yield``s the
operations below and receives their replies. ``io.drivers`` executes a plan with blocking
or asyncio clients; plans, the hot and durable tiers' modules and the core import this
module, never the drivers or a client library.

An operation is a small frozen dataclass typed by its reply (``Op[T]``): a plan that
yields ``Find(...)`` receives a ``list`` of documents. The drivers normalise replies, so
a plan never sees which protocol (RESP2 or RESP3) or which client (PyMongo, Motor) ran
it: a Redis hash is a ``dict`` of bytes, a stream entry a ``(id, {field: value})``
pair. ``ask(op)`` gives a plan the reply with its type (``x = yield from ask(op)``).
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, TypeVar

T = TypeVar("T")

Doc = dict[str, Any]
"""A MongoDB document as the drivers return it."""

StreamEntry = tuple[bytes, dict[bytes, bytes]]
"""A Redis stream entry: ``(entry id, {field: value})``."""

# --------------------------------------------------------------------------- operations


class Op(Generic[T]):
    """An I/O operation whose reply has type ``T`` (base of every operation below)."""

    __slots__ = ()


Plan = Generator[Op[Any], Any, T]
"""A sans-I/O plan returning ``T``: yields operations, receives their replies."""


def ask(op: Op[T]) -> Generator[Op[Any], Any, T]:
    """``reply = yield from ask(op)``: yield ``op`` and get its reply typed as ``T``."""
    reply: T = yield op
    return reply


def _as_is(raw: Any) -> Any:
    return raw


@dataclass(frozen=True)
class Script(Op[T]):
    """Run the registered Lua script ``name`` (one round trip; EVALSHA, loaded on demand).
    Built by the builders of ``hot/scripts.py`` (and ``hot/effects.py``,
    ``hot/registry.py``), which name every KEYS and ARGV field; the reply is
    ``decode(raw reply)``, typed ``T`` (``PageReply.of`` for PAGE...): the drivers call
    ``reply_of`` once, so a plan reads fields, never positions. An error reply whose first
    word is one of ``refusals`` (the codes the script's Lua header names) is raised as
    ``errors.ScriptRefused`` (any other error as the client raised it).

    With ``wait_replicas`` = n > 0 the script call and ``WAIT n wait_timeout_ms`` are sent
    in one pipeline on one connection (still one round trip): on a Redis Cluster that of
    the primary owning ``keys[0]``'s slot. ``WAIT`` then counts the replicas holding this
    script's writes; fewer than n raises ``ReplicationTimeoutError`` (the script's writes
    stay on the primary). A ``MOVED`` reply (the slot moved, e.g. in a failover) reloads
    the cluster's slot map and sends once more; an ``ASK`` sends once more to the node it
    names (``ASKING`` first); a lost connection to a cluster node reloads the slot map
    before the error is raised, so the next call finds a promoted replica."""

    name: str
    keys: Sequence[str]
    args: Sequence[Any]
    wait_replicas: int = 0
    wait_timeout_ms: int = 0
    decode: Callable[[Any], T] = field(default=_as_is, compare=False, repr=False)
    refusals: frozenset[str] = frozenset()

    def reply_of(self, raw: Any) -> T:
        """The typed reply of the script's raw reply (as the Redis client returned it)."""
        return self.decode(raw)


@dataclass(frozen=True)
class Pipeline(Op[list[Any]]):
    """Send Redis commands in one pipeline (one round trip, no MULTI); returns their
    replies, normalised (``normalise``) by command name.

    With ``raise_on_error=False`` a failing command's exception is returned in its place.
    """

    commands: Sequence[Sequence[Any]]
    raise_on_error: bool = True


@dataclass(frozen=True)
class LoadScripts(Op[list[bytes]]):
    """Load Lua scripts into the script cache of the Redis server (``SCRIPT LOAD``, one
    pipeline), or of every primary of a cluster (redis-py's ``script_load`` sends it to
    each; a cluster pipeline cannot); returns their SHA1 digests. A node that joins or is
    promoted later loads a script on first use (``Script``: EVALSHA, then EVAL)."""

    sources: Sequence[str]


@dataclass(frozen=True)
class Scan(Op[list[bytes]]):
    """Every Redis key matching the glob ``match`` (SCAN with ``COUNT count``, on every
    primary of a cluster); returns the keys. Many round trips on a large keyspace: for
    administration (listing threads), never on a saver's hot path."""

    match: str
    count: int = 1000


@dataclass(frozen=True)
class Parallel(Op[list[Any]]):
    """Run several operations; concurrently under asyncio, in order with sync clients.
    Returns their replies in order."""

    ops: Sequence[Op[Any]]


@dataclass(frozen=True)
class Sleep(Op[None]):
    """Wait ``seconds`` without holding the event loop."""

    seconds: float


class MongoOp(Op[T]):
    """A call on one MongoDB collection: ``method`` with ``call()``'s arguments.
    ``cursor`` operations (find, aggregate) reply with a list of documents."""

    __slots__ = ()
    method: ClassVar[str]
    cursor: ClassVar[bool] = False
    collection: str

    def call(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """Positional and keyword arguments of the collection method."""
        raise NotImplementedError


@dataclass(frozen=True)
class Find(MongoOp[list[Doc]]):
    """``find(filter, projection, sort, limit)``; every matching document, as a list."""

    method: ClassVar[str] = "find"
    cursor: ClassVar[bool] = True
    collection: str
    filter: Mapping[str, Any]
    projection: Mapping[str, Any] | None = None
    sort: Sequence[tuple[str, int]] | None = None
    limit: int = 0

    def call(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        kw: dict[str, Any] = {}
        if self.projection is not None:
            kw["projection"] = dict(self.projection)
        if self.sort is not None:
            kw["sort"] = list(self.sort)
        if self.limit:
            kw["limit"] = self.limit
        return (dict(self.filter),), kw


@dataclass(frozen=True)
class FindOne(MongoOp["Doc | None"]):
    """``find_one(filter, projection)``: the first matching document or None."""

    method: ClassVar[str] = "find_one"
    collection: str
    filter: Mapping[str, Any]
    projection: Mapping[str, Any] | None = None

    def call(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        kw = {"projection": dict(self.projection)} if self.projection is not None else {}
        return (dict(self.filter),), kw


@dataclass(frozen=True)
class Aggregate(MongoOp[list[Doc]]):
    """``aggregate(pipeline)``: the result documents, as a list."""

    method: ClassVar[str] = "aggregate"
    cursor: ClassVar[bool] = True
    collection: str
    pipeline: Sequence[Mapping[str, Any]]

    def call(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        return ([dict(s) for s in self.pipeline],), {}


@dataclass(frozen=True)
class BulkWrite(MongoOp[Any]):
    """``bulk_write(requests, ordered=...)`` (``ReplaceOne``/``UpdateOne``/``DeleteOne``
    models); replies with PyMongo's ``BulkWriteResult``; raises ``BulkWriteError``."""

    method: ClassVar[str] = "bulk_write"
    collection: str
    requests: Sequence[Any]
    ordered: bool = False

    def call(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        return (list(self.requests),), {"ordered": self.ordered}


@dataclass(frozen=True)
class DeleteMany(MongoOp[Any]):
    """``delete_many(filter)``; replies with PyMongo's ``DeleteResult``."""

    method: ClassVar[str] = "delete_many"
    collection: str
    filter: Mapping[str, Any]

    def call(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        return (dict(self.filter),), {}


@dataclass(frozen=True)
class Mongo(MongoOp[Any]):
    """Any other collection method, by name (set-up, migrations, tools): ``method`` with
    ``args`` and ``kwargs``; ``find``/``aggregate``/``list_indexes`` replies become lists.
    Plans of the saver use the typed operations above."""

    collection: str
    method: str  # type: ignore[misc]
    args: Sequence[Any] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)

    def call(self) -> tuple[tuple[Any, ...], dict[str, Any]]:
        return tuple(self.args), dict(self.kwargs)

    @property
    def is_cursor(self) -> bool:
        """True when the method returns a cursor."""
        return self.method in _CURSOR_METHODS


_CURSOR_METHODS = frozenset({"find", "aggregate", "list_indexes"})
