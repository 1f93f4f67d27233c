"""Garbage collection of external objects (``extref``) for a :class:`DurableSaver`.

(Here "blob" means an *external object*, an object of the external
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
:func:`~langgraph_durable.serde.refs_in` (envelopes only; no blob is read), in every kind
of record that can hold one: ``admin/referrers.py`` ``REFERRERS`` (checkpoints and their
metadata, channel values, pending writes, items and the effect journal of ``once()``):

1. **Redis first**: the referrers' hashes (``cp``, ``bl``, ``w``, ``it``, ``fx``) of every
   thread under the saver's ``key_prefix``, found with ``SCAN MATCH {<prefix>:*`` (the
   prefix glob-escaped; the ``{`` of the hash tag is a literal in Redis patterns) and read
   with ``HSCAN``;
2. **then MongoDB**: the documents of the referrers' collections (``checkpoints``,
   ``blobs``, ``writes``, ``items``, ``effects``) that may hold a reference (type
   ``"extref"``; a journal entry in state ``done``), in pages ordered by ``_id`` (a value
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

from ..core.ops import Aggregate, Find, Pipeline, Plan, Scan
from ..durable.chunks import load_plan
from ..durable.documents import after_id
from ..durable.footprint_queries import collection_size
from ..hot.keys import prefix_pattern, thread_keys_of
from ..plans.context import Context
from ..serde.external import refs_in
from ..serde.gc import DEFAULT_KEY_PATTERN, GcReport, acollect_garbage, collect_garbage
from .referrers import (
    MARKER,
    REFERRERS,
    Referrer,
    collections_of_threads,
    prefix_keys,
    redis_referrer,
)

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


def scan_pattern(prefix: str) -> str:
    """``SCAN MATCH`` pattern of every key of every thread of ``prefix`` (glob-escaped);
    ``hot.keys.prefix_pattern``, kept under this name for its users."""
    return prefix_pattern(prefix)


def thread_hash(prefix: str, key: str) -> tuple[str, str] | None:
    """``(thread_id, suffix)`` if ``key`` is the hash of a thread of ``prefix`` holding
    serialized values (a suffix of ``referrers.REFERRERS``: ``"cp"``, ``"bl"``, ``"w"``,
    ``"it"``, ``"fx"``), exactly as :class:`~langgraph_durable.hot.keys.ThreadKeys` names
    it, else ``None``."""
    hit = redis_referrer(prefix, key)
    return (hit[0], hit[1].suffix) if hit is not None else None


def _refs_of_hash_entries(ref: Referrer, key: str, entries: Iterable[tuple[Any, Any]],
                          found: set[str]) -> None:
    for name, raw in entries:
        if not raw or MARKER not in raw:  # an extref value always holds its type name
            continue
        f = name if isinstance(name, bytes) else str(name).encode()
        for type_, data in ref.of_hash(f, bytes(raw), f"redis key {key!r} field {f!r}"):
            found |= refs_in(type_, data)


def _redis_plan(prefix: str, found: set[str]) -> Plan:
    """Add the references held in the thread hashes of ``prefix`` (every kind of
    ``referrers.REFERRERS``) to ``found`` (``SCAN`` on every primary of a cluster, then
    ``HSCAN`` of each hash, pipelined)."""
    hashes: list[tuple[str, Referrer]] = []
    for k in (yield Scan(scan_pattern(prefix), SCAN_COUNT)):
        key = k.decode() if isinstance(k, bytes) else str(k)
        hit = redis_referrer(prefix, key)
        if hit is not None:
            hashes.append((key, hit[1]))
    for start in range(0, len(hashes), HSCAN_BATCH):
        pending = {key: (ref, 0) for key, ref in hashes[start : start + HSCAN_BATCH]}
        while pending:
            names = list(pending)
            replies = yield Pipeline(
                [["HSCAN", key, pending[key][1], "COUNT", SCAN_COUNT] for key in names]
            )
            for key, (next_cursor, fields) in zip(names, replies):
                ref = pending[key][0]
                entries = (fields.items() if isinstance(fields, dict)
                           else zip(fields[0::2], fields[1::2]))
                _refs_of_hash_entries(ref, key, entries, found)
                if int(next_cursor) == 0:
                    del pending[key]
                else:
                    pending[key] = (ref, next_cursor)


def _mongo_plan(collection: str, ref: Referrer, found: set[str], chunks: str) -> Plan:
    """Add the references of the documents of ``collection`` that may hold one (the
    referrer's ``query``), in pages ordered by ``_id``; chunked values are reassembled
    from the ``chunks`` collection first."""
    projection = {name: 1 for name in ref.projection}
    projection.update({"thread_id": 1, "chunked": 1})
    query = dict(ref.query)
    last: Any = None
    while True:
        q = query if last is None else after_id(query, last)
        page = yield Find(collection, q, projection, sort=[("_id", 1)], limit=SCAN_COUNT)
        docs = yield from load_plan(chunks, page)
        for doc in docs:
            for type_, data in ref.of_document(doc):
                found |= refs_in(type_, data)
        if len(docs) < SCAN_COUNT:
            return
        last = docs[-1]["_id"]


def referenced_keys_plan(ctx: Any) -> Plan:
    """The sans-I/O plan behind :func:`referenced_blob_keys` (drive it with a saver's
    ``run``/``arun``); returns the set of referenced blob keys."""
    found: set[str] = set()
    yield from _redis_plan(ctx.config.key_prefix, found)
    cols = ctx.collections
    for ref in REFERRERS:
        yield from _mongo_plan(getattr(cols, ref.collection), ref, found, cols.chunks)
    return found


def referenced_blob_keys(saver: SaverRuntime) -> set[str]:
    """Every blob key referenced by what ``saver`` stores in Redis and MongoDB: checkpoints,
    metadata, channel values, pending writes, items and effect journal entries of every
    thread (every kind of ``referrers.REFERRERS``; see the module docs).

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
    """Sum of ``MEMORY USAGE <key> SAMPLES 0`` over the saver's keys (its threads' keys,
    tombstones and effect journals, its outbox streams, dead letters, thread registries,
    the key prefix's binding and the flushers' heartbeats): what Redis allocates for them,
    overheads included."""
    redis_keys: int = 0
    mongo_bytes: int = 0
    """Sum of the BSON sizes of the saver's documents (``dbStats``' ``dataSize`` for them)."""
    mongo_docs: dict[str, int] = field(default_factory=dict)
    """Documents per collection kind (``checkpoints``, ``blobs``, ``writes``, ``items``,
    ``effects``: every collection of ``referrers.REFERRERS``, and ``chunks``: pieces of
    values over ``durable.chunks.THRESHOLD_BYTES``)."""
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
    streams = {key for keys in prefix_keys(ctx).values() for key in keys}
    keys: list[str] = []
    for k in (yield Scan(scan_pattern(prefix), SCAN_COUNT)):  # every primary of a cluster
        key = k.decode() if isinstance(k, bytes) else str(k)
        thread = thread_keys_of(prefix, key)
        # a thread's keys, its tombstones (``gone``: every new thread has one, marking
        # that no tier holds a tombstone of it) and its effect journal (``fx``)
        if key in streams or (thread is not None and (key in thread.all
                                                      or key in (thread.gone, thread.fx))):
            keys.append(key)
    redis_bytes = 0
    for start in range(0, len(keys), SCAN_COUNT):
        sizes = yield Pipeline([["MEMORY", "USAGE", k, "SAMPLES", "0"]
                                for k in keys[start : start + SCAN_COUNT]])
        redis_bytes += sum(int(n or 0) for n in sizes)
    mongo_bytes = 0
    docs: dict[str, int] = {}
    cols = ctx.collections
    for kind in collections_of_threads():  # the referrers' collections and the chunks
        rows = yield Aggregate(getattr(cols, kind), collection_size())
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
