"""Garbage collection of external objects (``extref``) for a :class:`DurableSaver`.

(Formerly ``langgraph_durable.blobs`` and ``langgraph_durable.extref_gc``, which still
import: ``_moved.py``. Here "blob" means an *external object*, an object of the external
blob store, never a channel value.)

With :class:`~langgraph_durable.serde.ExternalRefSerializer` as the saver's ``serde``,
DataFrames, arrays and values over ``threshold_bytes`` live in a blob store and the saver
stores small ``("extref", envelope)`` values that name them. Deleting checkpoints
(``delete_thread``, ``delete_for_runs``, ``prune``) removes those envelopes but never the
blobs, which other checkpoints, threads or savers may share (a blob is keyed by its content
hash). :func:`collect_saver_garbage` finds the blobs nothing references any more and deletes
the ones older than a grace period.

What is scanned (:func:`referenced_blob_keys`)
----------------------------------------------
Every stored typed value whose type is ``"extref"``, decoded with
:func:`~langgraph_durable.serde.refs_in` (envelopes only; no blob is read):

1. **Redis first**: the ``cp`` (checkpoint and metadata), ``bl`` (channel values) and ``w``
   (pending writes) hashes of every thread under the saver's ``key_prefix``, found with
   ``SCAN MATCH {<prefix>:*`` (the prefix glob-escaped; the ``{`` of the hash tag is a
   literal in Redis patterns) and read with ``HSCAN``;
2. **then MongoDB**: documents of ``checkpoints`` (``type``/``metadata_type``), ``blobs``
   and ``writes`` (``type``) equal to ``"extref"``, in pages ordered by ``_id`` (a value
   stored in chunks is reassembled first, see ``durable/chunks.py``).

Why it is safe against concurrent writers
-----------------------------------------
* *A value present when the scan starts is found.* A thread's Redis keys only expire (the
  hot window) after everything in them reached MongoDB, and MongoDB is scanned after Redis,
  so a value is in Redis when Redis is scanned or already in MongoDB when MongoDB is.
  Deletions during the scan only leave extra keys in the referenced set (blobs kept).
* *A value written after the scan started references a young blob.* The serializer uploads
  a blob (or, for a blob that already exists, refreshes its modification time once it is
  older than the store's ``touch_after_s``: 60 s local, 300 s S3) *before* the checkpoint
  or write naming it is stored. Such a blob is therefore younger than ``grace_period_s``
  when the store is listed, which happens after the scan, and is kept. The grace period
  must exceed ``touch_after_s`` plus the longest time between a value's serialization and
  the end of its ``put``; the default, one hour, leaves a wide margin.
* Right before each delete the blob is looked at again (``stat``) and kept if it was
  refreshed meanwhile; the remaining window is one delete request.

Scope: only what *this* saver stores (its ``key_prefix`` in Redis, its ``database`` and
``collection_prefix`` in MongoDB). A blob store shared with other savers or serializers
must be collected with all their references: pass them as ``also_referenced``
(e.g. ``referenced_blob_keys(other_saver)``), or give each saver its own store or prefix.
On a Redis Cluster the keys are found with ``SCAN`` on every primary.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Generator, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import ormsgpack

from ..core.items import NODE_MAGIC
from ..core.ops import Aggregate, Find, Pipeline, Plan, Scan
from ..core.records import CheckpointRecord, WriteRecord, unpack_blob
from ..durable.chunks import load_plan
from ..hot.keys import binding_key, heartbeats_key, prefix_pattern, thread_keys_of
from ..outbox.group import dead_letter_key
from ..plans.context import Context
from ..serde.external import EXTREF_TYPE, refs_in
from ..serde.gc import DEFAULT_KEY_PATTERN, GcReport, acollect_garbage, collect_garbage

if TYPE_CHECKING:
    from ..serde.stores import BlobStore

_T = TypeVar("_T")


class SaverRuntime(Protocol):
    """What the collector needs of a saver (a ``DurableSaver``): its plan ``context`` and
    ``serde``, and ``run``/``arun`` to run plans (its old name is kept: it was the saver's
    base class)."""

    @property
    def context(self) -> Context: ...

    @property
    def serde(self) -> Any: ...

    def run(self, plan: Generator[Any, Any, _T]) -> _T: ...

    async def arun(self, plan: Generator[Any, Any, _T]) -> _T: ...

__all__ = [
    "StorageFootprint",
    "acollect_saver_garbage",
    "areferenced_blob_keys",
    "collect_saver_garbage",
    "referenced_blob_keys",
    "referenced_keys_plan",
    "storage_footprint",
]

SCAN_COUNT = 1000
"""``COUNT`` hint of each ``SCAN``/``HSCAN`` and size of each MongoDB page."""
HSCAN_BATCH = 64
"""Hashes read per pipelined round of ``HSCAN``."""
_MARKER = EXTREF_TYPE.encode()
_HASHES = ("cp", "bl", "w", "it")
_EMPTY_INDEX = ormsgpack.packb([""])


def scan_pattern(prefix: str) -> str:
    """``SCAN MATCH`` pattern of every key of every thread of ``prefix`` (glob-escaped);
    ``hot.keys.prefix_pattern``, kept under this name for its users."""
    return prefix_pattern(prefix)


def thread_hash(prefix: str, key: str) -> tuple[str, str] | None:
    """``(thread_id, "cp" | "bl" | "w" | "it")`` if ``key`` is one of those hashes of a thread of
    ``prefix`` (exactly as :class:`~langgraph_durable.hot.keys.ThreadKeys` names it), else
    ``None``."""
    keys = thread_keys_of(prefix, key)
    kind = keys.suffix_of(key) if keys is not None else None
    return (keys.thread_id, kind) if keys is not None and kind in _HASHES else None


def _typed_values(kind: str, raw: bytes, where: str) -> list[tuple[str, bytes]]:
    """The typed values inside one Redis hash value of ``kind``."""
    if kind == "it" and raw[:2] == NODE_MAGIC:
        return []  # a node holds digests only
    if kind in ("bl", "it"):
        typed = unpack_blob(raw, where)
        return [typed] if typed is not None else []
    if kind == "w":
        return [WriteRecord.unpack(raw, where).value]
    rec = CheckpointRecord.unpack("", "", raw, _EMPTY_INDEX)
    return [rec.checkpoint, rec.metadata]


def _refs_of_hash_values(kind: str, key: str, values: Iterable[Any], found: set[str]) -> None:
    for raw in values:
        if not raw or _MARKER not in raw:  # an extref value always holds its type name
            continue
        for type_, data in _typed_values(kind, bytes(raw), f"redis key {key!r}"):
            found |= refs_in(type_, data)


def _redis_plan(prefix: str, found: set[str]) -> Plan:
    """Add the references held in the thread hashes of ``prefix`` to ``found`` (``SCAN``
    on every primary of a cluster, then ``HSCAN`` of each hash, pipelined)."""
    hashes: list[tuple[str, str]] = []
    for k in (yield Scan(scan_pattern(prefix), SCAN_COUNT)):
        key = k.decode() if isinstance(k, bytes) else str(k)
        hit = thread_hash(prefix, key)
        if hit is not None:
            hashes.append((key, hit[1]))
    for start in range(0, len(hashes), HSCAN_BATCH):
        pending = {key: (kind, 0) for key, kind in hashes[start : start + HSCAN_BATCH]}
        while pending:
            names = list(pending)
            replies = yield Pipeline(
                [["HSCAN", key, pending[key][1], "COUNT", SCAN_COUNT] for key in names]
            )
            for key, (next_cursor, fields) in zip(names, replies):
                kind = pending[key][0]
                values = fields.values() if isinstance(fields, dict) else fields[1::2]
                _refs_of_hash_values(kind, key, values, found)
                if int(next_cursor) == 0:
                    del pending[key]
                else:
                    pending[key] = (kind, next_cursor)


def _mongo_plan(collection: str, query: dict[str, Any], fields: list[tuple[str, str]],
                found: set[str], chunks: str) -> Plan:
    """Add the references of the matching documents (``fields``: (type, data) names);
    chunked values are reassembled from the ``chunks`` collection first."""
    projection = {name: 1 for pair in fields for name in pair}
    projection.update({"thread_id": 1, "chunked": 1})
    last: Any = None
    while True:
        q = query if last is None else {"$and": [query, {"_id": {"$gt": last}}]}
        page = yield Find(collection, q, projection, sort=[("_id", 1)], limit=SCAN_COUNT)
        docs = yield from load_plan(chunks, page)
        for doc in docs:
            for type_field, data_field in fields:
                if doc.get(type_field) == EXTREF_TYPE:
                    found |= refs_in(EXTREF_TYPE, bytes(doc[data_field]))
        if len(docs) < SCAN_COUNT:
            return
        last = docs[-1]["_id"]


def referenced_keys_plan(ctx: Any) -> Plan:
    """The sans-I/O plan behind :func:`referenced_blob_keys` (drive it with a saver's
    ``run``/``arun``); returns the set of referenced blob keys."""
    found: set[str] = set()
    yield from _redis_plan(ctx.config.key_prefix, found)
    cols = ctx.collections
    yield from _mongo_plan(
        cols.checkpoints,
        {"$or": [{"type": EXTREF_TYPE}, {"metadata_type": EXTREF_TYPE}]},
        [("type", "checkpoint"), ("metadata_type", "metadata")], found, cols.chunks)
    yield from _mongo_plan(cols.blobs, {"type": EXTREF_TYPE}, [("type", "data")], found,
                           cols.chunks)
    yield from _mongo_plan(cols.writes, {"type": EXTREF_TYPE}, [("type", "data")], found,
                           cols.chunks)
    yield from _mongo_plan(cols.items, {"type": EXTREF_TYPE}, [("type", "data")], found,
                           cols.chunks)
    return found


def referenced_blob_keys(saver: SaverRuntime) -> set[str]:
    """Every blob key referenced by what ``saver`` stores in Redis and MongoDB: checkpoints,
    metadata, channel values and pending writes of every thread (see the module docs).

    Reads only the small envelopes, never a blob. Raises ``ExternalRefError`` for a corrupt
    envelope (so a collection stops instead of deleting what it could not read),
    ``TierUnavailableError`` if a server is down. Works on a Redis Cluster (``SCAN`` on
    every primary).
    """
    return set(saver.run(referenced_keys_plan(saver.context)))


async def areferenced_blob_keys(saver: SaverRuntime) -> set[str]:
    """Async :func:`referenced_blob_keys`."""
    return set(await saver.arun(referenced_keys_plan(saver.context)))


def _store_of(saver: SaverRuntime, store: BlobStore | None) -> BlobStore:
    if store is not None:
        return store
    found = getattr(saver.serde, "store", None)
    if found is None:
        raise ValueError(
            "the saver's serializer has no blob store (it is not an ExternalRefSerializer); "
            "pass the store to collect"
        )
    return found  # type: ignore[no-any-return]


def collect_saver_garbage(
    saver: SaverRuntime,
    store: BlobStore | None = None,
    grace_period_s: float = 3600,
    now: datetime | float | None = None,
    *,
    dry_run: bool = False,
    also_referenced: Collection[str] = (),
    key_pattern: re.Pattern[str] | None = DEFAULT_KEY_PATTERN,
) -> GcReport:
    """Delete the blobs of ``store`` that ``saver`` no longer references and that are older
    than ``grace_period_s`` seconds; safe while other processes keep writing (see the module
    docs for why, and for stores shared with other savers).

    Args:
        saver: the saver whose Redis and MongoDB are scanned for references.
        store: the blob store to clean (default: ``saver.serde.store``).
        grace_period_s: unreferenced blobs modified less than this many seconds before
            ``now`` are kept; must exceed the store's ``touch_after_s`` plus the longest
            ``put``.
        now: the current time (aware datetime, naive = UTC, or epoch seconds); default the
            clock. Inject it in tests.
        dry_run: report what would be deleted, delete nothing.
        also_referenced: more keys to keep (references held by other savers of the store).
        key_pattern: only keys matching it are considered (default: keys the serializer
            writes; other objects in the store are never touched).

    Returns a :class:`~langgraph_durable.serde.GcReport` (``referenced`` = keys found).
    """
    target = _store_of(saver, store)
    referenced = referenced_blob_keys(saver) | set(also_referenced)
    return collect_garbage(target, referenced, grace_period_s, now, dry_run=dry_run,
                           key_pattern=key_pattern)


async def acollect_saver_garbage(
    saver: SaverRuntime,
    store: BlobStore | None = None,
    grace_period_s: float = 3600,
    now: datetime | float | None = None,
    *,
    dry_run: bool = False,
    also_referenced: Collection[str] = (),
    key_pattern: re.Pattern[str] | None = DEFAULT_KEY_PATTERN,
) -> GcReport:
    """Async :func:`collect_saver_garbage` (the store is listed in a worker thread)."""
    target = _store_of(saver, store)
    referenced = await areferenced_blob_keys(saver) | set(also_referenced)
    return await acollect_garbage(target, referenced, grace_period_s, now, dry_run=dry_run,
                                  key_pattern=key_pattern)


# --------------------------------------------------------------------------- footprint


@dataclass
class StorageFootprint:
    """Bytes a saver (and its blob store) hold, as measured by :func:`storage_footprint`."""

    redis_bytes: int = 0
    """Sum of ``MEMORY USAGE <key> SAMPLES 0`` over the saver's keys (its threads' keys and
    tombstones, its outbox streams, dead letters, thread registries, the key prefix's
    binding and the flushers' heartbeats): what Redis allocates for them, overheads
    included."""
    redis_keys: int = 0
    mongo_bytes: int = 0
    """Sum of the BSON sizes of the saver's documents (``dbStats``' ``dataSize`` for them)."""
    mongo_docs: dict[str, int] = field(default_factory=dict)
    """Documents per collection kind (``checkpoints``, ``blobs``, ``writes``, ``chunks``:
    pieces of values over ``durable.chunks.THRESHOLD_BYTES``)."""
    blob_bytes: int = 0
    """Sum of the object sizes in the blob store (every key, ours or not)."""
    blobs: list[tuple[str, int]] = field(default_factory=list)
    """``(key, size)`` of every object in the blob store, sorted by key."""

    @property
    def blob_count(self) -> int:
        """How many objects the blob store holds."""
        return len(self.blobs)

    def summary(self) -> str:
        """One line: bytes and counts per tier."""
        docs = sum(self.mongo_docs.values())
        return (f"Redis {self.redis_bytes:,} B in {self.redis_keys} keys | MongoDB "
                f"{self.mongo_bytes:,} B in {docs} documents | blob store "
                f"{self.blob_bytes:,} B in {self.blob_count} objects")


def footprint_plan(ctx: Any) -> Plan:
    """Sans-I/O plan measuring Redis and MongoDB (see :func:`storage_footprint`); returns
    ``(redis_bytes, redis_keys, mongo_bytes, {kind: documents})``."""
    prefix = ctx.config.key_prefix
    # every outbox partition, the dead letters, every partition's thread registry, the
    # binding of the prefix and the flushers' heartbeats
    streams = {*ctx.outboxes, dead_letter_key(ctx), *ctx.registries, binding_key(prefix),
               heartbeats_key(prefix)}
    keys: list[str] = []
    for k in (yield Scan(scan_pattern(prefix), SCAN_COUNT)):  # every primary of a cluster
        key = k.decode() if isinstance(k, bytes) else str(k)
        thread = thread_keys_of(prefix, key)
        # a thread's keys and its tombstones (``gone``: every new thread has one, marking
        # that no tier holds a tombstone of it)
        if key in streams or (thread is not None and (key in thread.all
                                                      or key == thread.gone)):
            keys.append(key)
    redis_bytes = 0
    for start in range(0, len(keys), SCAN_COUNT):
        sizes = yield Pipeline([["MEMORY", "USAGE", k, "SAMPLES", "0"]
                                for k in keys[start : start + SCAN_COUNT]])
        redis_bytes += sum(int(n or 0) for n in sizes)
    mongo_bytes = 0
    docs: dict[str, int] = {}
    cols = ctx.collections
    for kind in ("checkpoints", "blobs", "writes", "items", "chunks"):
        rows = yield Aggregate(getattr(cols, kind), [{"$group": {
            "_id": None, "n": {"$sum": 1}, "b": {"$sum": {"$bsonSize": "$$ROOT"}}}}])
        docs[kind] = int(rows[0]["n"]) if rows else 0
        mongo_bytes += int(rows[0]["b"]) if rows else 0
    return redis_bytes, len(keys), mongo_bytes, docs




def storage_footprint(saver: SaverRuntime, store: BlobStore | None = None) -> StorageFootprint:
    """Bytes held by ``saver`` in Redis (``MEMORY USAGE`` of its keys), in MongoDB (BSON size
    of its documents) and in the blob store (object sizes; default ``saver.serde.store``,
    none if the serializer has no store). For reports and tests; it reads every key's size
    and groups every collection, so do not call it on a hot path."""
    redis_bytes, redis_keys, mongo_bytes, docs = saver.run(footprint_plan(saver.context))
    out = StorageFootprint(redis_bytes, redis_keys, mongo_bytes, docs)
    target = store if store is not None else getattr(saver.serde, "store", None)
    if target is not None:
        out.blobs = sorted((i.key, i.size) for i in target.list_keys())
        out.blob_bytes = sum(size for _, size in out.blobs)
    return out
