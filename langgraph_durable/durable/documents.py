"""MongoDB document shapes (sans-I/O): deterministic ``_id``s, upserts, queries, indexes.

Three collections: checkpoints (no channel values), blobs (one per thread, ns, channel,
version) and writes (one per thread, ns, checkpoint, task, idx), plus chunks holding the
pieces of values too large for one document (``chunks.py``). Every ``_id`` is a
length-prefixed join of the identity, so any thread_id is safe; ``thread_id`` leads
every index (it is the shard key on a sharded cluster).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from bson import Binary
from pymongo import ASCENDING, DESCENDING, IndexModel, ReplaceOne, UpdateOne

from ..errors import CorruptRecordError, SchemaVersionError
from ..records import (
    MD_QUERY_MAX_CHARS,
    SCHEMA_VERSION,
    CheckpointRecord,
    Typed,
    WriteRecord,
    blob_field,
    split_field,
)


def doc_id(*parts: Any) -> str:
    """Deterministic ``_id``: ``len:part|len:part|...`` (unique for any part contents)."""
    return "|".join(f"{len(str(p))}:{p}" for p in parts)


@dataclass(frozen=True)
class Collections:
    """Names of the three collections for a ``collection_prefix``, of ``meta`` (the
    deployed schema version and migration cursors) and of ``chunks`` (pieces of values
    over ``chunks.THRESHOLD_BYTES``)."""

    checkpoints: str
    blobs: str
    writes: str
    meta: str = "meta"
    chunks: str = "chunks"

    @classmethod
    def with_prefix(cls, prefix: str) -> Collections:
        return cls(f"{prefix}checkpoints", f"{prefix}blobs", f"{prefix}writes",
                   f"{prefix}meta", f"{prefix}chunks")


INDEXES: dict[str, list[IndexModel]] = {
    "checkpoints": [
        IndexModel(
            [("thread_id", ASCENDING), ("checkpoint_ns", ASCENDING),
             ("checkpoint_id", DESCENDING)],
            name="thread_ns_checkpoint",
        ),
        IndexModel([("run_id", ASCENDING)], name="run_id", sparse=True),
    ],
    "blobs": [IndexModel([("thread_id", ASCENDING), ("checkpoint_ns", ASCENDING)],
                         name="thread_ns")],
    "writes": [
        IndexModel(
            [("thread_id", ASCENDING), ("checkpoint_ns", ASCENDING),
             ("checkpoint_id", ASCENDING)],
            name="thread_ns_checkpoint",
        )
    ],
    "chunks": [
        IndexModel(
            [("thread_id", ASCENDING), ("checkpoint_ns", ASCENDING),
             ("checkpoint_id", ASCENDING), ("owner", ASCENDING)],
            name="thread_ns_checkpoint_owner",
        )
    ],
}
"""Indexes ``setup()`` creates (idempotently), by collection kind."""


# ------------------------------------------------------------------------ to documents


def checkpoint_doc(thread_id: str, rec: CheckpointRecord) -> dict:
    """The checkpoints-collection document of ``rec`` (``md`` holds the queryable scalar
    metadata the saver chose to expose at ``put`` time; empty when encrypted)."""
    return {
        "_id": doc_id(thread_id, rec.ns, rec.checkpoint_id),
        "v": SCHEMA_VERSION,
        "thread_id": thread_id,
        "checkpoint_ns": rec.ns,
        "checkpoint_id": rec.checkpoint_id,
        "parent_checkpoint_id": rec.parent_id,
        "run_id": rec.run_id,
        "type": rec.checkpoint[0],
        "checkpoint": Binary(rec.checkpoint[1]),
        "metadata_type": rec.metadata[0],
        "metadata": Binary(rec.metadata[1]),
        "md": [{"k": k, "v": v} for k, v in rec.md_query],
        "blob_fields": [split_field(f)[1:] for f in rec.blob_fields],
    }


def blob_doc(thread_id: str, field: str, value: Typed | None) -> dict:
    """The blobs-collection document for a Redis blob field (``None`` = empty)."""
    ns, channel, version = split_field(field)
    return {
        "_id": doc_id(thread_id, ns, channel, version),
        "v": SCHEMA_VERSION,
        "thread_id": thread_id,
        "checkpoint_ns": ns,
        "channel": channel,
        "version": version,
        "type": value[0] if value else "empty",
        "data": Binary(value[1] if value else b""),
    }


def write_doc(thread_id: str, ns: str, checkpoint_id: str, w: WriteRecord) -> dict:
    """The writes-collection document of one pending write."""
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
        "type": w.value[0],
        "data": Binary(w.value[1]),
        "seq": w.seq,
    }


def upsert(doc: dict) -> ReplaceOne:
    """Idempotent upsert of an immutable document (checkpoint or blob)."""
    return ReplaceOne({"_id": doc["_id"]}, doc, upsert=True)


def upsert_write(doc: dict) -> UpdateOne | ReplaceOne:
    """Upsert of a write: insert-once for ordinary channels; for special channels
    (negative idx) replace only an older ``seq``. A newer stored value makes the upsert
    fail with a duplicate key error (code 11000), which the flusher ignores."""
    if doc["idx"] >= 0:
        return UpdateOne({"_id": doc["_id"]}, {"$setOnInsert": doc}, upsert=True)
    return ReplaceOne({"_id": doc["_id"], "seq": {"$lt": doc["seq"]}}, doc, upsert=True)


# ------------------------------------------------------------------------ from documents


def _check(doc: Mapping[str, Any], kind: str) -> Mapping[str, Any]:
    """``doc`` in the current format: an older one upgraded through
    ``migrations.DOCUMENT_STEPS`` (in memory), a newer one refused."""
    v = doc.get("v", 1)
    if doc.get("chunked"):
        raise CorruptRecordError(
            f"MongoDB document {doc.get('_id')!r} (thread {doc.get('thread_id')!r}) has "
            f"chunked fields {doc['chunked']!r} that were not reassembled before decoding "
            "(a read path misses chunks.load_plan)")
    if v > SCHEMA_VERSION:
        raise SchemaVersionError(
            f"MongoDB document {doc.get('_id')!r} has schema version {v}, newer than "
            f"{SCHEMA_VERSION} understood by this langgraph_durable; upgrade the package"
        )
    if v < SCHEMA_VERSION:
        from ..migrations import upgrade_document

        return upgrade_document(kind, doc)
    return doc


def record_of(doc: Mapping[str, Any]) -> CheckpointRecord:
    """The ``CheckpointRecord`` stored in a checkpoints document."""
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


def blob_value_of(doc: Mapping[str, Any]) -> tuple[str, Typed | None]:
    """``(redis blob field, typed value or None for empty)`` of a blobs document."""
    doc = _check(doc, "blobs")
    field = blob_field(doc["checkpoint_ns"], doc["channel"], doc["version"])
    if doc["type"] == "empty":
        return field, None
    return field, (doc["type"], bytes(doc["data"]))


def write_of(doc: Mapping[str, Any]) -> WriteRecord:
    """The ``WriteRecord`` stored in a writes document."""
    doc = _check(doc, "writes")
    return WriteRecord(
        doc["task_id"], int(doc["idx"]), doc["channel"], (doc["type"], bytes(doc["data"])),
        doc.get("task_path", ""), int(doc.get("seq", 0)),
    )


def blob_ids(thread_id: str, fields: Iterable[str]) -> list[str]:
    """``_id``s of the blobs documents for Redis blob fields."""
    return [doc_id(thread_id, *split_field(f)) for f in fields]


def metadata_query(filter: Mapping[str, Any] | None, queryable: bool) -> dict:
    """Server-side narrowing for ``list(filter=...)``: only scalar values, matched as data
    (``{k, v}`` pairs), so a key like ``"$where"`` or ``"a.b"`` is never a query operator
    or a path. Exact equality is always re-checked after decoding. Documents of an older
    schema version (without ``md`` perhaps) always pass, to be checked after decoding."""
    if not filter or not queryable:
        return {}
    clauses = []
    for k, v in filter.items():
        if isinstance(v, str) and len(v) > MD_QUERY_MAX_CHARS:
            continue  # not in the md copy (see records.md_query_of): matched after decoding
        if v is None or isinstance(v, (str, bool, float)) or (
            isinstance(v, int) and -(2**63) <= v < 2**63
        ):
            clauses.append({"md": {"$elemMatch": {"k": str(k), "v": v}}})
    return {"$or": [{"$and": clauses}, {"v": {"$lt": SCHEMA_VERSION}}]} if clauses else {}
