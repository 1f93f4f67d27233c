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

import enum
import threading
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, TypeVar

from ..errors import DurableSaverError

T = TypeVar("T")
T_co = TypeVar("T_co", covariant=True)

BsonValue = Any
"""A value MongoDB stores (str, int, float, bool, None, bytes, datetime, a list or a
document of these). ``Any``: BSON's recursive shape is wider than mypy can check without
a cast at every read."""

Doc = dict[str, BsonValue]
"""A MongoDB document as the drivers return it (and as the package builds one)."""

DocView = Mapping[str, BsonValue]
"""A MongoDB document read and not changed (a ``Doc`` or any mapping of its fields)."""

Query = Mapping[str, object]
"""A MongoDB filter, update document, projection or aggregation stage: built by the
package and passed through to the driver unread (so ``object``, not ``BsonValue``)."""

CallArgs = tuple[tuple[object, ...], dict[str, object]]
"""Positional and keyword arguments of a PyMongo collection method (``MongoOp.call``)."""

StreamEntry = tuple[bytes, dict[bytes, bytes]]
"""A Redis stream entry: ``(entry id, {field: value})``."""

# --------------------------------------------------------------------------- write models
# The package's own MongoDB write models, index spec, results and errors: plans build
# these; ``io.drivers`` translates them to PyMongo's at execution and PyMongo's results
# and errors back (sync and async alike), so nothing but the drivers imports PyMongo.


@dataclass(frozen=True, slots=True)
class InsertDoc:
    """Insert ``doc`` (PyMongo's ``InsertOne``); a duplicate ``_id`` is write error 11000."""

    doc: Query


@dataclass(frozen=True, slots=True)
class ReplaceDoc:
    """Replace the document matching ``filter`` by ``doc``, inserting it when ``upsert``
    and none matches (PyMongo's ``ReplaceOne``)."""

    filter: Query
    doc: Query
    upsert: bool = False


@dataclass(frozen=True, slots=True)
class UpdateDoc:
    """Apply the update operators ``update`` (``$set``, ``$setOnInsert``, ``$max``...) to
    the document matching ``filter``, inserting one when ``upsert`` and none matches
    (PyMongo's ``UpdateOne``)."""

    filter: Query
    update: Query
    upsert: bool = False


@dataclass(frozen=True, slots=True)
class DeleteDoc:
    """Delete the document matching ``filter`` (PyMongo's ``DeleteOne``)."""

    filter: Query


WriteModel = InsertDoc | ReplaceDoc | UpdateDoc | DeleteDoc
"""One request of a ``BulkWrite``."""


@dataclass(frozen=True, slots=True)
class Index:
    """An index ``setup()`` creates (PyMongo's ``IndexModel``): ``keys`` = ``(field,
    1 ascending | -1 descending)`` pairs in order; ``name``; ``sparse``; ``unique``;
    ``expire_after_s`` = seconds after a date field's value that MongoDB's TTL monitor
    deletes the document (None: no TTL)."""

    keys: tuple[tuple[str, int], ...]
    name: str
    sparse: bool = False
    unique: bool = False
    expire_after_s: int | None = None


@dataclass(frozen=True, slots=True)
class BulkResult:
    """What a bulk write did (PyMongo's ``BulkWriteResult``'s counts): documents
    ``inserted``, ``matched`` and ``modified`` by replacements and updates, ``deleted``,
    ``upserted`` (inserted by an upsert)."""

    inserted: int = 0
    matched: int = 0
    modified: int = 0
    deleted: int = 0
    upserted: int = 0


@dataclass(frozen=True, slots=True)
class WriteFailure:
    """One write error (or write-concern error) of a bulk write: ``index`` of the request
    in the ``BulkWrite``'s ``requests`` (-1 for a write-concern error), MongoDB's error
    ``code`` (11000 = duplicate key), ``code_name`` (e.g. ``UnsatisfiableWriteConcern``;
    "" when the server sent none) and ``message`` (MongoDB's ``errmsg``: it can quote the
    document's key, so it is not logged)."""

    index: int
    code: int
    message: str = ""
    code_name: str = ""


DUPLICATE_KEY = 11000
"""MongoDB's error code of a duplicate key (an insert of an ``_id`` already there)."""


class BulkWriteFailed(DurableSaverError):
    """A ``BulkWrite`` on ``collection`` that MongoDB answered with write errors or a
    write-concern error (PyMongo's ``BulkWriteError``). Unordered, every request without
    an error was applied: ``result`` counts them. ``write_errors``: the requests that
    failed (``WriteFailure.index`` into the requests); ``write_concern_errors``: the write
    concern not met (the writes were applied but are not durable as configured)."""

    def __init__(self, collection: str, write_errors: Sequence[WriteFailure],
                 write_concern_errors: Sequence[WriteFailure] = (),
                 result: BulkResult | None = None) -> None:
        codes = sorted({e.code for e in write_errors})
        concern = sorted({f"{e.code} {e.code_name}".strip() for e in write_concern_errors})
        super().__init__(
            f"bulk write on MongoDB collection {collection!r}: {len(write_errors)} write "
            f"errors, codes {codes}" + (f"; write concern errors: {', '.join(concern)}"
                                       if concern else ""))
        self.collection = collection
        self.write_errors = tuple(write_errors)
        self.write_concern_errors = tuple(write_concern_errors)
        self.result = result if result is not None else BulkResult()

    def only_duplicates(self) -> bool:
        """True when every failed request is a duplicate key (11000) and the write concern
        was met: the documents were there already."""
        return not self.write_concern_errors and all(
            e.code == DUPLICATE_KEY for e in self.write_errors)

    def duplicates(self) -> list[int]:
        """Indexes (into the requests) of the requests that failed with a duplicate key."""
        return [e.index for e in self.write_errors if e.code == DUPLICATE_KEY]


class CommandFailed(DurableSaverError):
    """A MongoDB operation on ``collection`` refused by the server (PyMongo's
    ``OperationFailure`` other than a bulk write's): its ``method``, MongoDB's error
    ``code`` (e.g. 27 = IndexNotFound, 11000 = duplicate key, 13 = Unauthorized; 0 when the
    server sent none) and ``message``."""

    def __init__(self, collection: str, method: str, code: int, message: str) -> None:
        super().__init__(f"MongoDB refused {method} on collection {collection!r} "
                         f"(code {code}): {message}")
        self.collection = collection
        self.method = method
        self.code = code
        self.message = message


# --------------------------------------------------------------------------- operations


class Op(Generic[T_co]):
    """An I/O operation whose reply has type ``T_co`` (base of every operation below;
    covariant: a ``Script[PutReply]`` is an ``Op[object]``)."""

    __slots__ = ()


OpReply = Any
"""What a driver sends back into a plan: the reply of the operation the plan just yielded,
typed as that operation's ``T``, which ``Generator``'s one send type cannot follow
(``ask`` gives it back typed). ``Any``, not ``object``: plans unpack replies
(``docs, stones = yield Parallel([...])``)."""

Plan = Generator[Op[object], OpReply, T]
"""A sans-I/O plan returning ``T``: yields operations, receives their replies."""


def ask(op: Op[T]) -> Generator[Op[object], OpReply, T]:
    """``reply = yield from ask(op)``: yield ``op`` and get its reply typed as ``T``."""
    reply: T = yield op
    return reply


RedisReply = Any
"""A Redis reply as redis-py returns it, before a decoder reads it: bytes, an int, None
or a list of these, nested (a Lua script's table). Its shape is the command's or the
script's (a script's Lua header says it), and its decoder (``PutReply.of``...) unpacks it
as that; ``Any`` because that shape is not in the static types (``object`` would make
every decoder re-check what the script guarantees)."""


def _as_is(raw: RedisReply) -> RedisReply:
    return raw


class Refusal(str, enum.Enum):
    """The codes a Lua script of the hot tier refuses a call with (the first word of its
    ``redis.error_reply``, as its Lua header names it): ``Script.refusals`` declares them
    and plans compare ``errors.ScriptRefused.code`` with them. A ``str``: a member equals
    (and hashes as) its value, so ``"OUTBOX_FULL" in frozenset({Refusal.OUTBOX_FULL})``;
    each member's name is its value."""

    OUTBOX_FULL = "OUTBOX_FULL"
    """The thread's outbox partition holds its share of ``max_outbox`` entries: nothing
    was written (detail empty)."""
    DELETED = "DELETED"
    """The checkpoint the call names was deleted (detail: the deletion time, ms)."""
    UNKNOWN = "UNKNOWN"
    """Redis cannot tell whether the named checkpoint was deleted: MongoDB's tombstones
    can (detail: the checkpoint_id)."""
    STALE_HEAD = "STALE_HEAD"
    """The namespace's latest checkpoint is no longer the one the run started from
    (detail: the latest checkpoint_id)."""
    MISSING_ITEMS = "MISSING_ITEMS"
    """Redis lacks items the call took as held (detail: how many)."""


@dataclass(frozen=True)
class Script(Op[T]):
    """Run the registered Lua script ``name`` (one round trip; EVALSHA, loaded on demand).
    Built by the builders of ``hot/scripts.py`` (and ``hot/effect_scripts.py``,
    ``hot/registry_scripts.py``), which name every KEYS and ARGV field; the reply is
    ``decode(raw reply)``, typed ``T`` (``PageReply.of`` for PAGE...): the drivers call
    ``reply_of`` once, so a plan reads fields, never positions. An error reply whose first
    word is one of ``refusals`` (the ``Refusal`` codes the script's Lua header names) is
    raised as ``errors.ScriptRefused`` (any other error as the client raised it).

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
    args: Sequence[object]
    wait_replicas: int = 0
    wait_timeout_ms: int = 0
    decode: Callable[[RedisReply], T] = field(default=_as_is, compare=False, repr=False)
    refusals: frozenset[Refusal] = frozenset()

    def reply_of(self, raw: RedisReply) -> T:
        """The typed reply of the script's raw reply (as the Redis client returned it)."""
        return self.decode(raw)


@dataclass(frozen=True)
class Pipeline(Op[list[RedisReply]]):
    """Send Redis commands in one pipeline (one round trip, no MULTI); returns their
    replies, normalised (``normalise``) by command name.

    With ``raise_on_error=False`` a failing command's exception is returned in its place.
    """

    commands: Sequence[Sequence[object]]
    raise_on_error: bool = True


class ReadGate:
    """Which connection a flusher's blocking read (``GatedRead``) waits on, so another
    thread can end the wait (``CLIENT UNBLOCK``): ``client_id`` and the server's
    ``address``, set while the read waits, under ``lock`` (``io/gated_read.py``);
    ``starting`` while its command is sent and its id not yet set; ``refused`` once the
    server refused ``CLIENT`` (the read then ends by itself)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.client_id: int | None = None
        self.address: object = None
        self.starting = False
        self.refused = False


@dataclass(frozen=True)
class GatedRead(Pipeline):
    """A ``Pipeline`` of one blocking command (``XREADGROUP ... BLOCK``) that ``gate`` can
    end early: the blocking driver sends ``CLIENT ID`` before it on the same connection
    and publishes the id in ``gate`` while it waits. The asyncio driver, or a ``gate``
    the server refused, runs it as a plain ``Pipeline`` (it ends after its ``BLOCK``)."""

    gate: ReadGate | None = None


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
class Parallel(Op[list[object]]):
    """Run several operations; concurrently under asyncio, in order with sync clients.
    Returns their replies in order."""

    ops: Sequence[Op[object]]


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

    def call(self) -> CallArgs:
        """Positional and keyword arguments of the collection method."""
        raise NotImplementedError


@dataclass(frozen=True)
class Find(MongoOp[list[Doc]]):
    """``find(filter, projection, sort, limit, skip)``; every matching document, as a
    list (``limit`` 0: no limit; ``skip``: documents passed over first)."""

    method: ClassVar[str] = "find"
    cursor: ClassVar[bool] = True
    collection: str
    filter: Query
    projection: Query | None = None
    sort: Sequence[tuple[str, int]] | None = None
    limit: int = 0
    skip: int = 0

    def call(self) -> CallArgs:
        kw: dict[str, object] = {}
        if self.projection is not None:
            kw["projection"] = dict(self.projection)
        if self.sort is not None:
            kw["sort"] = list(self.sort)
        if self.limit:
            kw["limit"] = self.limit
        if self.skip:
            kw["skip"] = self.skip
        return (dict(self.filter),), kw


@dataclass(frozen=True)
class FindOne(MongoOp["Doc | None"]):
    """``find_one(filter, projection)``: the first matching document or None."""

    method: ClassVar[str] = "find_one"
    collection: str
    filter: Query
    projection: Query | None = None

    def call(self) -> CallArgs:
        kw: dict[str, object] = {} if self.projection is None else {
            "projection": dict(self.projection)}
        return (dict(self.filter),), kw


@dataclass(frozen=True)
class Aggregate(MongoOp[list[Doc]]):
    """``aggregate(pipeline)``: the result documents, as a list."""

    method: ClassVar[str] = "aggregate"
    cursor: ClassVar[bool] = True
    collection: str
    pipeline: Sequence[Query]

    def call(self) -> CallArgs:
        return ([dict(s) for s in self.pipeline],), {}


@dataclass(frozen=True)
class BulkWrite(MongoOp[BulkResult]):
    """``bulk_write(requests, ordered=...)`` of the package's write models (``InsertDoc``,
    ``ReplaceDoc``, ``UpdateDoc``, ``DeleteDoc``); replies with a ``BulkResult``; raises
    ``BulkWriteFailed`` when a request failed or the write concern was not met."""

    method: ClassVar[str] = "bulk_write"
    collection: str
    requests: Sequence[WriteModel]
    ordered: bool = False

    def call(self) -> CallArgs:
        return (list(self.requests),), {"ordered": self.ordered}


@dataclass(frozen=True)
class DeleteMany(MongoOp[int]):
    """``delete_many(filter)``; replies with the number of documents deleted."""

    method: ClassVar[str] = "delete_many"
    collection: str
    filter: Query

    def call(self) -> CallArgs:
        return (dict(self.filter),), {}


@dataclass(frozen=True)
class FindOneAndUpdate(MongoOp["Doc | None"]):
    """``find_one_and_update(filter, update, upsert=...)``: the matching document after
    the update (``return_document`` AFTER), or None when none matched and not ``upsert``."""

    method: ClassVar[str] = "find_one_and_update"
    collection: str
    filter: Query
    update: Query
    upsert: bool = False

    def call(self) -> CallArgs:
        return (dict(self.filter), dict(self.update)), {"upsert": self.upsert,
                                                        "return_document": "after"}


@dataclass(frozen=True)
class CreateIndexes(MongoOp[list[str]]):
    """``create_indexes(indexes)`` (idempotent for an index of the same keys and options);
    replies with the names of the indexes."""

    method: ClassVar[str] = "create_indexes"
    collection: str
    indexes: Sequence[Index]

    def call(self) -> CallArgs:
        return (list(self.indexes),), {}


@dataclass(frozen=True)
class Mongo(MongoOp[object]):
    """Any other collection method, by name (set-up, migrations, tools): ``method`` with
    ``args`` and ``kwargs``; ``find``/``aggregate``/``list_indexes`` replies become lists;
    a list argument of write models or ``Index``es becomes PyMongo's. Other replies are
    PyMongo's, unchanged. Plans of the saver use the typed operations above."""

    collection: str
    method: str  # type: ignore[misc]
    args: Sequence[object] = ()
    kwargs: Mapping[str, object] = field(default_factory=dict)

    def call(self) -> CallArgs:
        return tuple(self.args), dict(self.kwargs)

    @property
    def is_cursor(self) -> bool:
        """True when the method returns a cursor."""
        return self.method in _CURSOR_METHODS


_CURSOR_METHODS = frozenset({"find", "aggregate", "list_indexes"})
