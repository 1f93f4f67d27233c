"""Schema versions of stored records and the migrations between them.

Every Redis envelope starts with its format version and every MongoDB document carries
``v`` (``records.SCHEMA_VERSION`` when written). Reading a record of an older version
upgrades it in memory through a chain of small steps, one per version, registered in
``ENVELOPE_STEPS`` (Redis envelopes, by kind ``cp``/``w``/``bl``) and ``DOCUMENT_STEPS``
(MongoDB documents, by collection kind). A record of a newer version than this package
knows raises ``SchemaVersionError`` and is never rewritten.

``migrate_plan`` rewrites old MongoDB documents in bulk (``langgraph-durable migrate``):
in ``_id`` order, batch by batch, saving its cursor in the ``meta`` collection after each
batch so an interrupted run resumes where it stopped; rewriting is idempotent (a
document is replaced only if it still has the version that was read). ``setup()``
records the deployed version there too (``record_version_plan``).

A document whose large fields live in the chunks collection carries ``v =
records.CHUNKED_VERSION`` (2): the current format with descriptors in those fields, which
every read reassembles (``durable/chunks.py``) before decoding. Packages from before
chunking know only version 1 and refuse such a document with ``SchemaVersionError``
(never misreading a descriptor as the value); the documents without chunks stay version
1 and readable by them. ``migrate`` leaves chunked documents as they are.

Version 0 is the pre-release format, kept so the chain is exercised: checkpoint documents
held the checkpoint under ``checkpoint_bytes`` and the metadata inline (a plain document,
not serialized); writes had no ``task_path``/``seq``. In Redis, a v0 checkpoint envelope
was ``[0, parent, type, bytes, metadata]`` and a v0 write ``[0, task, idx, channel, type,
bytes]``.
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import ormsgpack
from bson import Binary
from pymongo import ReplaceOne, ReturnDocument

from .drivers import Mongo, Plan
from .errors import ConfigurationError, CorruptRecordError, SchemaVersionError
from .records import CHUNKED_VERSION, SCHEMA_VERSION, md_query_of

if TYPE_CHECKING:
    from .context import Context

log = logging.getLogger("langgraph_durable.migrations")

SCHEMA_DOC_ID = "schema"
"""``_id`` of the ``meta`` document recording the deployed schema version."""

KINDS = ("checkpoints", "blobs", "writes")
"""Collection kinds that hold versioned documents."""


# --------------------------------------------------------------------------- steps v0 -> v1


def _inline_metadata(md: Any) -> tuple[str, bytes]:
    """v0 metadata was stored inline; v1 stores it serialized. ``("msgpack", ...)`` is
    what ``JsonPlusSerializer`` (and so ``EncryptedSerializer``) reads for a plain dict."""
    return "msgpack", ormsgpack.packb(dict(md or {}))


def _run_id(md: Mapping[str, Any] | None) -> str | None:
    rid = (md or {}).get("run_id")
    return None if rid is None else str(rid)


def _checkpoint_doc_0(doc: dict[str, Any]) -> dict[str, Any]:
    md = doc.pop("metadata", None) or {}
    doc["checkpoint"] = doc.pop("checkpoint_bytes")
    mt, mb = _inline_metadata(md)
    doc["metadata_type"], doc["metadata"] = mt, Binary(mb)
    doc["run_id"] = doc.get("run_id") or _run_id(md)
    doc["md"] = [{"k": k, "v": v} for k, v in md_query_of(md)]
    doc["v"] = 1
    return doc


def _write_doc_0(doc: dict[str, Any]) -> dict[str, Any]:
    doc.setdefault("task_path", "")
    doc.setdefault("seq", 0)
    doc["v"] = 1
    return doc


def _bump_doc(doc: dict[str, Any]) -> dict[str, Any]:
    doc["v"] = doc.get("v", 0) + 1
    return doc


def _cp_envelope_0(v: list[Any]) -> list[Any]:
    _, parent, ct, cb, md = v
    mt, mb = _inline_metadata(md)
    return [1, parent, ct, cb, mt, mb, _run_id(md), [list(kv) for kv in md_query_of(md or {})]]


def _w_envelope_0(v: list[Any]) -> list[Any]:
    _, task_id, idx, channel, t, b = v
    return [1, task_id, idx, channel, t, b, "", 0]


def _bump_envelope(v: list[Any]) -> list[Any]:
    return [v[0] + 1, *v[1:]]


DOCUMENT_STEPS: dict[str, dict[int, Callable[[dict[str, Any]], dict[str, Any]]]] = {
    "checkpoints": {0: _checkpoint_doc_0},
    "blobs": {0: _bump_doc},
    "writes": {0: _write_doc_0},
}
"""Collection kind -> {version n: function turning a version-n document into n+1}."""

ENVELOPE_STEPS: dict[str, dict[int, Callable[[list[Any]], list[Any]]]] = {
    "cp": {0: _cp_envelope_0},
    "w": {0: _w_envelope_0},
    "bl": {0: _bump_envelope},
}
"""Redis envelope kind -> {version n: function turning a version-n envelope into n+1}."""


def upgrade_document(kind: str, doc: Mapping[str, Any]) -> dict[str, Any]:
    """``doc`` (a ``kind`` document: checkpoints, blobs or writes) in the current format,
    upgraded step by step; a copy, the argument is not changed. A document without ``v``
    is version 1. Raises ``SchemaVersionError`` for a newer version and
    ``CorruptRecordError`` when a step cannot read it."""
    out = dict(doc)
    v = out.get("v", 1)
    if v > SCHEMA_VERSION:
        raise SchemaVersionError(
            f"MongoDB document {doc.get('_id')!r} has schema version {v}, newer than "
            f"{SCHEMA_VERSION} understood by this langgraph_durable; upgrade the package")
    while v < SCHEMA_VERSION:
        step = DOCUMENT_STEPS[kind].get(v)
        if step is None:
            raise SchemaVersionError(f"no migration of {kind} documents from version {v} "
                                     f"(document {doc.get('_id')!r})")
        try:
            out = step(out)
        except (KeyError, TypeError, ValueError) as exc:
            raise CorruptRecordError(f"{kind} document {doc.get('_id')!r} of version {v} "
                                     f"cannot be upgraded: {type(exc).__name__}: {exc}") from exc
        v = out["v"]
    return out


def upgrade_envelope(kind: str, value: list[Any], where: str) -> list[Any]:
    """A decoded Redis envelope of an older version, upgraded to the current one.
    Raises ``CorruptRecordError`` (naming ``where``) when a step cannot read it."""
    v = value[0]
    while v < SCHEMA_VERSION:
        step = ENVELOPE_STEPS[kind].get(v)
        if step is None:
            raise SchemaVersionError(f"no migration of record at {where} from version {v}")
        try:
            value = step(value)
        except (TypeError, ValueError) as exc:
            raise CorruptRecordError(f"record at {where} of version {v} cannot be upgraded: "
                                     f"{type(exc).__name__}: {exc}") from exc
        v = value[0]
    return value


# --------------------------------------------------------------------------- deployed version


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


def record_version_plan(ctx: Context) -> Plan:
    """Record in ``meta`` that this package (schema ``SCHEMA_VERSION``) is deployed; the
    stored ``v`` only ever grows. Logs a warning when a newer version was deployed
    before (its records will raise ``SchemaVersionError`` here). The first saver to set
    the collections up records its ``key_prefix`` as their owner; a saver with another
    key prefix raises ``ConfigurationError``. Returns the document."""
    doc = yield Mongo(ctx.collections.meta, "find_one_and_update", (
        {"_id": SCHEMA_DOC_ID},
        {"$max": {"v": SCHEMA_VERSION},
         "$setOnInsert": {"created_at": _now(), "key_prefix": ctx.config.key_prefix},
         "$set": {f"seen.{SCHEMA_VERSION}": _now()}},
    ), {"upsert": True, "return_document": ReturnDocument.AFTER})
    prefix = ctx.config.key_prefix
    if doc is not None and "key_prefix" not in doc:  # set up before owners were recorded
        yield Mongo(ctx.collections.meta, "update_one", (
            {"_id": SCHEMA_DOC_ID, "key_prefix": {"$exists": False}},
            {"$set": {"key_prefix": prefix}}))
        doc = yield Mongo(ctx.collections.meta, "find_one", ({"_id": SCHEMA_DOC_ID},))
    owner = (doc or {}).get("key_prefix", prefix)
    if owner != prefix:
        raise ConfigurationError(
            f"MongoDB database {ctx.config.database!r} (collection_prefix "
            f"{ctx.config.collection_prefix!r}) holds the threads of key_prefix {owner!r}, "
            f"not {prefix!r}: savers with different key prefixes must not share collections "
            "(their thread ids would mix, and deletes, prune --all and gc of one would act "
            "on the other's threads). Give this saver its own database or "
            "collection_prefix, or use key_prefix=" + repr(owner))
    if doc and doc.get("v", SCHEMA_VERSION) > SCHEMA_VERSION:
        log.warning("database %s was set up by schema version %s; this langgraph_durable "
                    "writes version %s and cannot read newer records", ctx.config.database,
                    doc["v"], SCHEMA_VERSION)
    return doc


def deployed_version_plan(ctx: Context) -> Plan:
    """The deployed schema version recorded by ``setup()`` (None if never set up)."""
    doc = yield Mongo(ctx.collections.meta, "find_one", ({"_id": SCHEMA_DOC_ID},))
    return None if doc is None else doc.get("v")


# --------------------------------------------------------------------------- bulk migration


def old_query() -> dict[str, Any]:
    """MongoDB filter of documents older than ``SCHEMA_VERSION`` (no ``v`` means 1)."""
    q: dict[str, Any] = {"v": {"$lt": SCHEMA_VERSION}}
    return {"$or": [q, {"v": {"$exists": False}}]} if SCHEMA_VERSION > 1 else q


def _newer_query() -> dict[str, Any]:
    """MongoDB filter of documents this package cannot read: a version above
    ``SCHEMA_VERSION`` other than ``CHUNKED_VERSION`` (``SCHEMA_VERSION`` plus chunked
    fields, which reads reassemble; see ``durable/chunks.py``)."""
    return {"v": {"$gt": SCHEMA_VERSION, "$ne": CHUNKED_VERSION}}


def census_plan(ctx: Context) -> Plan:
    """Per collection kind: ``{"old": n, "newer": n, "newer_id": an _id or None}``."""
    cols = ctx.collections
    out: dict[str, dict[str, Any]] = {}
    for kind in KINDS:
        name = getattr(cols, kind)
        old = yield Mongo(name, "count_documents", (old_query(),))
        newer = yield Mongo(name, "count_documents", (_newer_query(),))
        first = (yield Mongo(name, "find_one", (_newer_query(),),
                             {"projection": {"_id": 1, "v": 1}})) if newer else None
        out[kind] = {"old": old, "newer": newer, "newer_id": first and first["_id"],
                     "newer_v": first and first.get("v")}
    return out


def _cursor_id(kind: str) -> str:
    return f"migration:{kind}"


def migrate_plan(ctx: Context, *, batch_size: int = 500,
                 on_batch: Callable[[str, int], None] | None = None,
                 max_batches: int | None = None) -> Plan:
    """Rewrite every document older than ``SCHEMA_VERSION`` in the current format.

    Checks first that no document is newer (``SchemaVersionError``, nothing written).
    Then per collection, in ``_id`` order from the saved cursor, ``batch_size`` documents
    a round: upgrade, replace each only if its ``v`` is unchanged (idempotent, safe beside
    running flushers), save the cursor. ``on_batch(kind, n)`` is called after each batch
    of ``n`` documents; ``max_batches`` stops early (the cursor stays for the next run).
    Returns ``{kind: documents rewritten}``.
    """
    census = yield from census_plan(ctx)
    for kind, c in census.items():
        if c["newer"]:
            raise SchemaVersionError(
                f"{c['newer']} {kind} documents (e.g. {c['newer_id']!r}) have schema version "
                f"{c['newer_v']}, newer than {SCHEMA_VERSION} understood by this "
                "langgraph_durable; upgrade the package. Nothing was rewritten.")
    cols = ctx.collections
    done: dict[str, int] = {k: 0 for k in KINDS}
    batches = 0
    for kind in KINDS:
        name = getattr(cols, kind)
        saved = yield Mongo(cols.meta, "find_one", ({"_id": _cursor_id(kind)},))
        after = saved.get("after") if saved and saved.get("target") == SCHEMA_VERSION else None
        while True:
            if max_batches is not None and batches >= max_batches:
                return done
            q = old_query()
            if after is not None:
                q = {"$and": [q, {"_id": {"$gt": after}}]}
            docs = yield Mongo(name, "find", (q,), {"sort": [("_id", 1)], "limit": batch_size})
            if not docs:
                yield Mongo(cols.meta, "delete_one", ({"_id": _cursor_id(kind)},))
                break
            reqs = [ReplaceOne({"_id": d["_id"], "v": d.get("v")}, upgrade_document(kind, d))
                    for d in docs]
            result = yield Mongo(name, "bulk_write", (reqs,), {"ordered": False})
            after = docs[-1]["_id"]
            yield Mongo(cols.meta, "update_one", (
                {"_id": _cursor_id(kind)},
                {"$set": {"after": after, "target": SCHEMA_VERSION, "at": _now()}},
            ), {"upsert": True})
            done[kind] += result.modified_count
            batches += 1
            if on_batch is not None:
                on_batch(kind, len(docs))
    return done
