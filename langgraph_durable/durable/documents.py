"""MongoDB document shapes (sans-I/O): deterministic ``_id``s, upserts, queries, indexes.

Three collections: checkpoints (no channel values), blobs (one per thread, ns, channel,
version) and writes (one per ``put_writes`` call, ``write_groups.py``; ``write_doc`` is
the one-per-write form of earlier releases and of calls over 8 MiB), plus items (the items and
nodes of list values, ``core/items.py``; their documents are ``item_docs.py``'s), chunks holding the
pieces of values too large for one document (``chunks.py``) and tombstones (one per
deleted checkpoint, expiring after ``tombstone_ttl_s``: ``tombstone_upserts``). A blob or
write whose value is a manifest has ``type`` ``items.MANIFEST_TYPE``, its digests as the
array ``refs`` (so ``$lookup`` joins its items) and ``v`` ``schema.ITEMS_VERSION``. Every
``_id`` is a length-prefixed join of the identity, so any thread_id is safe; ``thread_id``
leads every index (it is the shard key on a sharded cluster) but two: ``checkpoints.run_id``
and the tombstones' TTL index (``indexes``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timezone

from ..core.items import MANIFEST_TYPE, split_digests
from ..core.ops import Doc, DocView, Index, ReplaceDoc, UpdateDoc
from ..core.records import (
    CheckpointRecord,
    Typed,
    WriteRecord,
    blob_field,
    split_field,
)
from ..core.schema import (
    ITEMS_VERSION,
    SCHEMA_VERSION,
    check_document_version,
    fits_int64,
    upgrade_document,
)
from ..errors import CorruptRecordError
from .checks import chain_link_of as chain_link_of  # re-exported (the walk of delta.py)
from .checks import checked, damaged, short
from .checks import identity_of as identity_of  # re-exported (copy_thread)

TOMBSTONE_TTL_INDEX = "deleted_at_ttl"
"""Name of the tombstones' TTL index (``expireAfterSeconds`` = ``tombstone_ttl_s``)."""


def bin_data(data: bytes) -> bytes:
    """``data`` as BSON binary (subtype 0). PyMongo encodes ``bytes`` as exactly that and
    reads it back as ``bytes``, so plain bytes pass as they are; other buffers are copied
    (``bytes(data)``, as ``bson.Binary`` did). The flusher builds thousands of these a
    round."""
    return data if type(data) is bytes else bytes(data)


def doc_id(*parts: object) -> str:
    """Deterministic ``_id``: ``len:part|len:part|...`` (unique for any part contents;
    a part not a ``str`` is ``str(part)``). The flusher builds one per document it writes."""
    out = []
    for s in parts:
        if type(s) is not str:
            s = str(s)
        out.append(f"{len(s)}:{s}")
    return "|".join(out)


@dataclass(frozen=True)
class Collections:
    """Names of the three collections for a ``collection_prefix``, of ``meta`` (the
    deployed schema version and migration cursors), of ``chunks`` (pieces of values
    over ``chunks.THRESHOLD_BYTES``), of ``items`` (items and nodes of list values), of
    ``tombstones`` (the deletes' tombstones, ``tombstone_doc``), of ``effects`` (the
    effect journal, ``plans/effect_journal.py``), of ``store`` (the items of the long-term
    memory store, ``durable/store_docs.py``), of ``audit`` (the operators' actions on
    threads, ``inspection/audit.py``), of ``threads`` (one summary per thread, what the
    thread list shows: ``durable/summary_docs.py``) and of ``retention`` (threads' activity,
    expiry and pins, ``durable/retention_docs.py``)."""

    checkpoints: str
    blobs: str
    writes: str
    meta: str = "meta"
    chunks: str = "chunks"
    items: str = "items"
    tombstones: str = "tombstones"
    effects: str = "effects"
    store: str = "store"
    audit: str = "audit"
    threads: str = "threads"
    retention: str = "retention"

    @classmethod
    def with_prefix(cls, prefix: str) -> Collections:
        return cls(f"{prefix}checkpoints", f"{prefix}blobs", f"{prefix}writes",
                   f"{prefix}meta", f"{prefix}chunks", f"{prefix}items",
                   f"{prefix}tombstones", f"{prefix}effects", f"{prefix}store",
                   f"{prefix}audit", f"{prefix}threads", f"{prefix}retention")


INDEXES: dict[str, list[Index]] = {
    "checkpoints": [
        Index((("thread_id", 1), ("checkpoint_ns", 1), ("checkpoint_id", -1)),
              "thread_ns_checkpoint"),
        Index((("run_id", 1),), "run_id", sparse=True),
        # where an older checkpoint's inline value is (durable/inline.py values_op)
        Index((("thread_id", 1), ("checkpoint_ns", 1), ("vals.k", 1)), "thread_ns_vals"),
    ],
    "blobs": [Index((("thread_id", 1), ("checkpoint_ns", 1)), "thread_ns")],
    "writes": [
        Index((("thread_id", 1), ("checkpoint_ns", 1), ("checkpoint_id", 1)),
              "thread_ns_checkpoint"),
    ],
    "items": [Index((("thread_id", 1), ("d", 1)), "thread_digest")],
    "chunks": [
        Index((("thread_id", 1), ("checkpoint_ns", 1), ("checkpoint_id", 1), ("owner", 1)),
              "thread_ns_checkpoint_owner"),
    ],
    "effects": [Index((("thread_id", 1), ("member", 1)), "thread_checkpoint")],
    "store": [  # durable/store_docs.py: namespace prefixes, the TTL sweep, tombstones' expiry
        Index((("ns", 1), ("key", 1)), "ns_key"),
        Index((("ns", 1), ("cseq", 1), ("key", 1)), "ns_cseq_key"),
        Index((("exp", 1),), "exp", sparse=True),
        Index((("purge_at", 1),), "purge_at_ttl", sparse=True, expire_after_s=0),
    ],
    "audit": [Index((("thread_id", 1), ("at", -1)), "thread_at")],  # inspection/audit.py
    # durable/summary_docs.py: found by _id; u: what changed since a time (the readers'
    # census: plans/thread_list.py). No thread_id index (RETIRED_INDEXES)
    "threads": [Index((("u", 1),), "u")],
    # durable/retention_docs.py: _id is the thread_id; the sweep's due threads by expiry
    "retention": [Index((("exp", 1),), "exp", sparse=True)],
    "tombstones": [
        Index((("thread_id", 1), ("f", 1)), "thread_field"),
        Index((("deleted_at", 1),), TOMBSTONE_TTL_INDEX, expire_after_s=30 * 24 * 3600),
    ],
}
"""Indexes ``setup()`` creates (idempotently), by collection kind; the tombstones' TTL
index with the configured ``tombstone_ttl_s`` (``indexes``)."""


RETIRED_INDEXES: dict[str, tuple[str, ...]] = {"threads": ("thread_id",)}
"""Indexes earlier releases made that nothing uses, by ``Collections`` field: ``migrate``
drops them, ``setup()`` leaves them (for an earlier release's processes during a rolling
upgrade). ``threads.thread_id`` cost a summary write a quarter of its server CPU."""


def indexes(tombstone_ttl_s: int) -> dict[str, list[Index]]:
    """``INDEXES`` with the tombstones' TTL index expiring after ``tombstone_ttl_s``
    seconds. A TTL index is a single-field index (MongoDB allows no compound one): the
    one index besides ``checkpoints.run_id`` not led by ``thread_id``; the collection's
    shard-key index is ``thread_field``."""
    out = dict(INDEXES)
    out["tombstones"] = [
        m if m.name != TOMBSTONE_TTL_INDEX else
        Index((("deleted_at", 1),), TOMBSTONE_TTL_INDEX, expire_after_s=tombstone_ttl_s)
        for m in INDEXES["tombstones"]]
    return out


def tombstone_upserts(thread_id: str, members: Iterable[str],
                      at_ms: int) -> list[UpdateDoc]:
    """Upserts of the tombstones a delete at ``at_ms`` (Redis server time, ms) leaves for
    the checkpoint ``members`` (``ns NUL checkpoint_id``) of ``thread_id``: one document
    per member, ``_id`` ``doc_id(thread_id, member)``, fields ``thread_id``, ``f`` (the
    member), ``at_ms`` and ``deleted_at`` (the same time as a UTC datetime, which the TTL
    index expires). A later delete of the same member moves both forward (``$max``), so a
    replay changes nothing."""
    when = datetime.fromtimestamp(at_ms / 1000, tz=timezone.utc)
    return [UpdateDoc({"_id": doc_id(thread_id, m), "thread_id": thread_id},
                      {"$setOnInsert": {"f": m, "v": SCHEMA_VERSION},
                       "$max": {"at_ms": at_ms, "deleted_at": when}}, upsert=True)
            for m in members]


def tombstone_query(thread_id: str, member: str) -> dict[str, object]:
    """Filter of the tombstone of checkpoint ``member`` of ``thread_id`` (``_id`` and the
    shard key)."""
    return {"_id": doc_id(thread_id, member), "thread_id": thread_id}


def tombstones_of_threads(thread_ids: Sequence[str]) -> dict[str, object]:
    """Filter of every tombstone of the threads ``thread_ids``."""
    return {"thread_id": {"$in": thread_ids}}


def ids_in(ids: Sequence[object]) -> dict[str, object]:
    """Filter of the documents whose ``_id`` is one of ``ids``: ``{"_id": {"$in": ids}}``."""
    return {"_id": {"$in": ids}}


_REGEX = frozenset({"$regex", "$options"})
"""Operators that act as one (``$options`` qualifies ``$regex``): never merged across
the two sides of ``and_field``."""


def and_field(query: Mapping[str, object], field: str,
              condition: object) -> dict[str, object]:
    """``query`` and ``{field: condition}`` (both must hold), as one flat filter where it
    can be: ``field`` added beside ``query``'s fields, or its operators (``{"$nin": ...}``)
    merged into ``query``'s operators on ``field``; ``{"$and": [query, {field:
    condition}]}`` only where they would collide (a value, the same operator on both
    sides, or a regex on both). The same documents either way; SecantusDB, the test
    suite's MongoDB-wire server, scans the whole collection for a top-level ``$and`` where
    it walks an index for the flat filter (a hot ``list``'s ``$nin`` find: 50 ms against
    5 ms)."""
    current = query.get(field)
    if current is None and field not in query:
        return {**query, field: condition}
    if (isinstance(current, Mapping) and isinstance(condition, Mapping)
            and all(str(k).startswith("$") for k in [*current, *condition])
            and not set(current) & set(condition)
            and not (set(current) & _REGEX and set(condition) & _REGEX)):
        return {**query, field: {**current, **condition}}
    return {"$and": [dict(query), {field: condition}]}


def after_id(query: Mapping[str, object], after: object) -> dict[str, object]:
    """``query`` of the documents with ``_id`` above ``after`` (a scan's or a migration's
    cursor, in ``_id`` order): ``and_field(query, "_id", {"$gt": after})``."""
    return and_field(query, "_id", {"$gt": after})


# ------------------------------------------------------------------------ to documents


def checkpoint_doc(thread_id: str, rec: CheckpointRecord, *, put_ms: int = 0) -> Doc:
    """The checkpoints-collection document of ``rec`` (``md`` holds the queryable scalar
    metadata the saver chose to expose at ``put`` time; empty when encrypted). ``put_ms``:
    Redis server time (ms) when the checkpoint was stored (its outbox entry's time, or the
    time ``copy_thread``/an import wrote it), so a write naming it can tell it from a
    checkpoint a later delete removed (see ``ThreadDeletedError``), and ``delete_thread``
    removes only what was stored before it (``stored_before``); 0 = unknown."""
    return {
        "_id": doc_id(thread_id, rec.ns, rec.checkpoint_id),
        "v": SCHEMA_VERSION,
        "thread_id": thread_id,
        "checkpoint_ns": rec.ns,
        "checkpoint_id": rec.checkpoint_id,
        "parent_checkpoint_id": rec.parent_id,
        "run_id": rec.run_id,
        "type": rec.checkpoint[0],
        "checkpoint": bin_data(rec.checkpoint[1]),
        "metadata_type": rec.metadata[0],
        "metadata": bin_data(rec.metadata[1]),
        "md": [{"k": k, "v": v} for k, v in rec.md_query],
        "blob_fields": [split_field(f)[1:] for f in rec.blob_fields],
        "put_ms": put_ms,
    }


def _value_fields(value: Typed) -> Doc:
    """``type``/``data`` of a stored value; a manifest keeps its digests as ``refs``."""
    if value[0] == MANIFEST_TYPE:
        return {"v": ITEMS_VERSION, "type": MANIFEST_TYPE, "data": b"",
                "refs": split_digests(value[1])}
    return {"v": SCHEMA_VERSION, "type": value[0], "data": bin_data(value[1])}


def _value_of(doc: DocView) -> Typed:
    if doc["type"] == MANIFEST_TYPE:
        return MANIFEST_TYPE, b"".join(bytes(d) for d in doc.get("refs", []))
    return doc["type"], bytes(doc["data"])


def blob_doc(thread_id: str, field: str, value: Typed | None, *, put_ms: int = 0) -> Doc:
    """The blobs-collection document for a Redis blob field (``None`` = empty);
    ``put_ms`` as in ``checkpoint_doc``."""
    ns, channel, version = split_field(field)
    return {
        "_id": doc_id(thread_id, ns, channel, version),
        "v": SCHEMA_VERSION,
        "thread_id": thread_id,
        "checkpoint_ns": ns,
        "channel": channel,
        "version": version,
        "type": "empty",
        "data": b"",
        **(_value_fields(value) if value else {}),
        "put_ms": put_ms,
    }


def target(doc: DocView) -> dict[str, object]:
    """The filter of an upsert of ``doc``: its ``_id`` and its ``thread_id``. The ``_id``
    alone names the document (it begins with the thread id); ``thread_id`` is there for a
    sharded MongoDB, where an upsert's filter must hold the whole shard key
    (``{thread_id: "hashed"}``, docs/operations.md "Sharding"), or mongos refuses it."""
    return {"_id": doc["_id"], "thread_id": doc["thread_id"]}


def write_doc(thread_id: str, ns: str, checkpoint_id: str, w: WriteRecord, *,
              put_ms: int = 0) -> Doc:
    """The writes-collection document of one pending write; ``put_ms`` as in
    ``checkpoint_doc``."""
    return {
        "_id": doc_id(thread_id, ns, checkpoint_id, w.task_id, w.idx),
        "v": SCHEMA_VERSION,
        "thread_id": thread_id,
        "checkpoint_ns": ns,
        "checkpoint_id": checkpoint_id,
        "task_id": w.task_id,
        "idx": w.idx,
        "channel": w.channel,
        "task_path": w.task_path,
        **_value_fields(w.value),
        "seq": w.seq,
        "put_ms": put_ms,
    }


def stored_before(thread_id: str, at_ms: int) -> dict[str, object]:
    """Query of a thread's documents stored at or before ``at_ms`` (``put_ms``; documents
    without one count as before): what a delete at that time removes, and not what a new
    run stored since (flushed while the delete ran)."""
    return {"thread_id": thread_id, "put_ms": {"$not": {"$gt": at_ms}}}


def upsert(doc: Doc, *, copied: bool = False) -> ReplaceDoc | UpdateDoc:
    """Idempotent upsert of an immutable document (checkpoint or blob). ``put_ms`` is set
    on insert only: replaying its outbox entry (a later time) leaves the document as it
    was; ``copied`` (``copy_thread``, stored now, over an earlier copy too): ``$max``."""
    if "put_ms" not in doc:
        return ReplaceDoc(target(doc), doc, upsert=True)
    fields = {k: v for k, v in doc.items() if k not in ("_id", "put_ms")}
    at = {"$max" if copied else "$setOnInsert": {"put_ms": doc["put_ms"]}}
    return UpdateDoc(target(doc), {"$set": fields, **at}, upsert=True)


def upsert_write(doc: Doc) -> UpdateDoc | ReplaceDoc:
    """Upsert of a write: insert-once for ordinary channels; for special channels
    (negative idx) replace only an older ``seq``. A newer stored value makes the upsert
    fail with a duplicate key error (code 11000), which the flusher ignores."""
    if doc["idx"] >= 0:
        return UpdateDoc(target(doc), {"$setOnInsert": doc}, upsert=True)
    return ReplaceDoc({**target(doc), "seq": {"$lt": doc["seq"]}}, doc, upsert=True)


# ------------------------------------------------------------------------ from documents


def _check(doc: DocView, kind: str) -> DocView:
    """``doc`` in the current format: an older one upgraded through
    ``schema.DOCUMENT_STEPS`` (in memory), a newer one refused; then checked for the
    fields a read needs (``checks.checked``: ``CorruptRecordError`` naming the document and the
    field)."""
    if not isinstance(doc, Mapping):
        raise CorruptRecordError(f"MongoDB {kind} document is not a document: "
                                 f"{short(doc)}", tier="durable")
    v = doc.get("v", 1)
    if not isinstance(v, int) or isinstance(v, bool):
        raise damaged(doc, kind, f"field 'v' holds {type(v).__name__} {short(v)}, "
                                  "not an integer")
    if doc.get("chunked"):
        raise CorruptRecordError(
            f"MongoDB document {doc.get('_id')!r} (thread {doc.get('thread_id')!r}) has "
            f"chunked fields {doc['chunked']!r} that were not reassembled before decoding "
            "(a read path misses chunks.load_plan)")
    if v > SCHEMA_VERSION:  # the current format with a manifest or inline values
        check_document_version(v, f"MongoDB document {doc.get('_id')!r}")
        return checked(doc, kind)
    return checked(upgrade_document(kind, doc) if v < SCHEMA_VERSION else doc, kind)


def record_of(doc: DocView) -> CheckpointRecord:
    """The ``CheckpointRecord`` stored in a checkpoints document; ``CorruptRecordError``
    naming the document and the field when one it needs is missing or of the wrong type."""
    doc = _check(doc, "checkpoints")
    ns = doc["checkpoint_ns"]
    return CheckpointRecord(
        ns=ns,
        checkpoint_id=doc["checkpoint_id"],
        parent_id=doc.get("parent_checkpoint_id"),
        checkpoint=(doc["type"], bytes(doc["checkpoint"])),
        metadata=(doc["metadata_type"], bytes(doc["metadata"])),
        run_id=doc.get("run_id"),
        md_query=tuple((kv["k"], kv["v"]) for kv in doc.get("md", [])),
        blob_fields=tuple(blob_field(ns, ch, ver) for ch, ver in doc["blob_fields"]),
    )


def blob_value_of(doc: DocView) -> tuple[str, Typed | None]:
    """``(redis blob field, typed value or None for empty)`` of a blobs document;
    ``CorruptRecordError`` as ``record_of``."""
    doc = _check(doc, "blobs")
    field = blob_field(doc["checkpoint_ns"], doc["channel"], doc["version"])
    if doc["type"] == "empty":
        return field, None
    return field, _value_of(doc)


def write_of(doc: DocView) -> WriteRecord:
    """The ``WriteRecord`` stored in a writes document; ``CorruptRecordError`` as
    ``record_of``."""
    doc = _check(doc, "writes")
    return WriteRecord(
        doc["task_id"], int(doc["idx"]), doc["channel"], _value_of(doc),
        doc.get("task_path", ""), int(doc.get("seq", 0)),
    )


def check_document(doc: DocView, kind: str) -> None:
    """Raise ``CorruptRecordError`` (naming the document and the field) when the ``kind``
    document ``doc`` (not chunked) lacks a field a read needs or holds one of the wrong
    type, ``SchemaVersionError`` when it is of a newer format (``copy_thread`` checks what
    it copies without decoding it)."""
    _check(doc, kind)


def blob_ids(thread_id: str, fields: Iterable[str]) -> list[str]:
    """``_id``s of the blobs documents for Redis blob fields."""
    return [doc_id(thread_id, *split_field(f)) for f in fields]


def _python_equals(value: object) -> list[object] | None:
    """Every value MongoDB may hold in ``md`` (see ``schema.md_query_of``) that Python's
    ``==`` takes as equal to ``value``, or ``None`` when that set cannot be written down.

    Only exact ``None``, ``bool``, ``int`` and ``float``/``str`` filter values qualify (a
    subclass or another type may define its own ``__eq__``). Python equates ``True`` with
    ``1`` and ``1.0``, and ``False`` with ``0`` and ``0.0``, where MongoDB keeps booleans
    and numbers apart; MongoDB compares ``int`` and ``float`` numerically, as Python does.
    """
    if value is None or type(value) is str:
        return [value]
    if type(value) is bool:
        return [value, int(value), float(value)]
    if type(value) is int:
        if not fits_int64(value):
            return None  # md holds no such int (it is matched after decoding)
        same: list[object] = [value]
        if float(value) == value:
            same.append(float(value))
        if value in (0, 1):
            same.append(bool(value))
        return same
    if type(value) is float:
        same = [value]
        if value.is_integer() and fits_int64(value):
            same.append(int(value))
        if value in (0.0, 1.0):
            same.append(bool(value))
        return same
    return None


def metadata_query(filter: Mapping[str, object] | None, queryable: bool) -> dict[str, object]:
    """Server-side narrowing for ``list(filter=...)`` that never drops a checkpoint Python's
    equality would keep (InMemorySaver compares ``filter_value == metadata.get(key)`` on the
    decoded metadata, a missing key reading as ``None``).

    A checkpoint is dropped only when its ``md`` copy holds the filter key with a value
    that Python's ``==`` says differs (``_python_equals``); a key absent from ``md``
    (missing from the metadata, or a value ``md`` does not copy: long text, a big int, a
    container, another type; or a document written with encrypted metadata or before
    ``md`` existed) lets the checkpoint through to be checked after decoding. Keys and
    values are data in the query (``{k, v}`` pairs), so a key like ``"$where"`` or
    ``"a.b"`` is never an operator or a path."""
    if not filter or not queryable:
        return {}
    clauses = []
    for k, v in filter.items():
        same = _python_equals(v) if type(k) is str else None
        if same is not None:
            clauses.append({"md": {"$elemMatch": {"k": k, "v": {"$nin": same}}}})
    return {"$nor": clauses} if clauses else {}
