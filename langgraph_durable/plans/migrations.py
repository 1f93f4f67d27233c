"""Bulk migration of stored MongoDB documents and the deployed schema version.

The format versions and the in-memory upgrade of one record live in ``schema.py``
(``SCHEMA_VERSION``, ``DOCUMENT_STEPS``, ``ENVELOPE_STEPS``, ``upgrade_document``,
``upgrade_envelope``); reads use them there, so the dependency runs one way:
``migrations`` -> ``schema`` <- ``records``/``documents``.

``migrate_plan`` rewrites old MongoDB documents in bulk (``langgraph-durable migrate``):
in ``_id`` order, batch by batch, saving its cursor in the ``meta`` collection after each
batch so an interrupted run resumes where it stopped; rewriting is idempotent (a
document is replaced only if it still has the version that was read). ``setup()``
records the deployed version there too (``record_version_plan``).

A document whose large fields live in the chunks collection carries ``v =
schema.CHUNKED_VERSION`` (2): the current format with descriptors in those fields, which
every read reassembles (``durable/chunks.py``) before decoding. Packages from before
chunking know only version 1 and refuse such a document with ``SchemaVersionError``
(never misreading a descriptor as the value); the documents without chunks stay version
1 and readable by them. ``migrate`` leaves chunked documents as they are, and documents
holding a manifest (``schema.ITEMS_VERSION``) or inline channel values
(``schema.INLINE_VERSION``, ``durable/inline.py``) too. Converting whole-list values to
manifests is the second pass of ``migrate``: ``item_migration.py``. Channel values in
blobs documents written before inline values stay there: every read finds a value in
either place (a checkpoint inherits values from older checkpoints, so reads must look in
both anyway), and moving them would rewrite every checkpoint document of every thread for
no read that gets faster (docs/storage.md).
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, TypedDict

from ..core.ops import (
    BulkWrite,
    CommandFailed,
    Doc,
    Find,
    FindOne,
    FindOneAndUpdate,
    Mongo,
    Plan,
    ReplaceDoc,
)
from ..core.schema import DOCUMENT_STEPS as DOCUMENT_STEPS  # re-exported for compatibility
from ..core.schema import ENVELOPE_STEPS as ENVELOPE_STEPS
from ..core.schema import NEWEST_DOCUMENT_VERSION, SCHEMA_VERSION, upgrade_document
from ..core.schema import upgrade_envelope as upgrade_envelope
from ..durable import documents as D
from ..durable import meta_docs as Meta
from ..durable.meta_docs import SCHEMA_DOC_ID as SCHEMA_DOC_ID  # (inspection/health.py)
from ..errors import ConfigurationError, CorruptRecordError, SchemaVersionError

if TYPE_CHECKING:
    from .context import Context

log = logging.getLogger("langgraph_durable.plans.migrations")

KINDS = ("checkpoints", "blobs", "writes")
"""Collection kinds that hold versioned documents."""


# --------------------------------------------------------------------------- deployed version


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


def record_version_plan(ctx: Context) -> Plan[Doc | None]:
    """Record in ``meta`` that this package (schema ``SCHEMA_VERSION``) is deployed; the
    stored ``v`` only ever grows. Logs a warning when a newer version was deployed
    before (its records will raise ``SchemaVersionError`` here). The first saver to set
    the collections up records its ``key_prefix`` as their owner; a saver with another
    key prefix raises ``ConfigurationError``. Returns the document (None only when another
    process removed it between this plan's two reads)."""
    doc: Doc | None = yield FindOneAndUpdate(
        ctx.collections.meta, {"_id": SCHEMA_DOC_ID},
        Meta.version_seen(ctx.config.key_prefix, _now()), upsert=True)
    prefix = ctx.config.key_prefix
    if doc is not None and "key_prefix" not in doc:  # set up before owners were recorded
        yield Mongo(ctx.collections.meta, "update_one", (
            Meta.without_owner(), Meta.owner_set(prefix)))
        doc = yield FindOne(ctx.collections.meta, {"_id": SCHEMA_DOC_ID})
    owner = (doc or {}).get("key_prefix", prefix)
    if owner != prefix:
        raise owner_error(ctx, owner)
    if doc and doc.get("v", SCHEMA_VERSION) > SCHEMA_VERSION:
        log.warning("database %s was set up by schema version %s; this langgraph_durable "
                    "writes version %s and cannot read newer records", ctx.config.database,
                    doc["v"], SCHEMA_VERSION)
    return doc


def owner_error(ctx: Context, owner: str) -> ConfigurationError:
    """The ``ConfigurationError`` for a saver of ``ctx`` on collections that ``meta``
    records as holding the threads of key prefix ``owner``."""
    prefix = ctx.config.key_prefix
    return ConfigurationError(
        f"MongoDB database {ctx.config.database!r} (collection_prefix "
        f"{ctx.config.collection_prefix!r}) holds the threads of key_prefix {owner!r}, "
        f"not {prefix!r}: savers with different key prefixes must not share collections "
        "(their thread ids would mix, and deletes, prune --all and gc of one would act "
        "on the other's threads). Give this saver its own database or "
        "collection_prefix, or use key_prefix=" + repr(owner))


def check_owner_plan(ctx: Context) -> Plan[str | None]:
    """Read (nothing written) the key prefix that ``meta`` records as the owner of
    ``ctx``'s collections; raises ``ConfigurationError`` (``owner_error``) when it is
    another. Returns the owner, or None when the collections were never set up."""
    doc = yield FindOne(ctx.collections.meta, {"_id": SCHEMA_DOC_ID})
    owner = (doc or {}).get("key_prefix")
    if owner is not None and owner != ctx.config.key_prefix:
        raise owner_error(ctx, owner)
    return owner


def deployed_version_plan(ctx: Context) -> Plan[int | None]:
    """The deployed schema version recorded by ``setup()`` (None if never set up)."""
    doc = yield FindOne(ctx.collections.meta, {"_id": SCHEMA_DOC_ID})
    return None if doc is None else doc.get("v")


# --------------------------------------------------------------------------- bulk migration


class KindCensus(TypedDict):
    """What ``census_plan`` counts in one collection kind: documents ``old``er than
    ``SCHEMA_VERSION`` and ``newer`` than this package reads, and for a newer one an
    example's ``_id`` (``newer_id``) and version (``newer_v``); both None without one."""

    old: int
    newer: int
    newer_id: object
    newer_v: object


def census_plan(ctx: Context) -> Plan[dict[str, KindCensus]]:
    """Per collection kind (``KINDS``): its ``KindCensus``."""
    cols = ctx.collections
    out: dict[str, KindCensus] = {}
    for kind in KINDS:
        name = getattr(cols, kind)
        old = yield Mongo(name, "count_documents", (Meta.old_query(),))
        newer = yield Mongo(name, "count_documents", (Meta.newer_query(),))
        first = (yield FindOne(name, Meta.newer_query(), {"_id": 1, "v": 1})) if newer else None
        out[kind] = {"old": old, "newer": newer, "newer_id": first and first["_id"],
                     "newer_v": first and first.get("v")}
    return out


def _cursor_id(kind: str) -> str:
    return f"migration:{kind}"


def _done(done: dict[str, int], damaged: list[CorruptRecordError]) -> dict[str, int]:
    """``done``, or the ``CorruptRecordError`` naming the ``damaged`` documents left."""
    if not damaged:
        return done
    counts = ", ".join(f"{k} {n}" for k, n in done.items())
    raise CorruptRecordError.gathered(
        f"migrate rewrote every other document ({counts}) but left {len(damaged)} damaged "
        "document(s) as they were", damaged, tier="durable")


def migrate_plan(ctx: Context, *, batch_size: int = 500,
                 on_batch: Callable[[str, int], None] | None = None,
                 max_batches: int | None = None) -> Plan[dict[str, int]]:
    """Rewrite every document older than ``SCHEMA_VERSION`` in the current format.

    Checks first that no document is newer (``SchemaVersionError``, nothing written).
    Then per collection, in ``_id`` order from the saved cursor, ``batch_size`` documents
    a round: upgrade, replace each only if its ``v`` is unchanged (idempotent, safe beside
    running flushers), save the cursor. ``on_batch(kind, n)`` is called after each batch
    of ``n`` documents; ``max_batches`` stops early (the cursor stays for the next run).
    Returns ``{kind: documents rewritten}``. A document that cannot be upgraded
    (``CorruptRecordError``: damaged) is left as it is and the others are rewritten; then
    one ``CorruptRecordError`` names each such document (``.damaged``) with the counts
    (a later run finds them again among the older documents).
    """
    census = yield from census_plan(ctx)
    for kind, c in census.items():
        if c["newer"]:
            raise SchemaVersionError(
                f"{c['newer']} {kind} documents (e.g. {c['newer_id']!r}) have schema version "
                f"{c['newer_v']}, newer than {NEWEST_DOCUMENT_VERSION} understood by this "
                "langgraph_durable; upgrade the package. Nothing was rewritten.")
    cols = ctx.collections
    done: dict[str, int] = {k: 0 for k in KINDS}
    damaged: list[CorruptRecordError] = []
    batches = 0
    for kind in KINDS:
        name = getattr(cols, kind)
        saved = yield FindOne(cols.meta, {"_id": _cursor_id(kind)})
        after = saved.get("after") if saved and saved.get("target") == SCHEMA_VERSION else None
        while True:
            if max_batches is not None and batches >= max_batches:
                return _done(done, damaged)
            q = Meta.old_query()
            if after is not None:
                q = D.after_id(q, after)
            docs = yield Find(name, q, sort=[("_id", 1)], limit=batch_size)
            if not docs:
                yield Mongo(cols.meta, "delete_one", ({"_id": _cursor_id(kind)},))
                break
            reqs = []
            for d in docs:
                try:
                    reqs.append(ReplaceDoc({"_id": d["_id"], "v": d.get("v")},
                                           upgrade_document(kind, d)))
                except SchemaVersionError:
                    raise
                except CorruptRecordError as exc:  # left as it is; the others go on
                    damaged.append(exc)
            if reqs:
                result = yield BulkWrite(name, reqs)
                done[kind] += result.modified
            after = docs[-1]["_id"]
            yield Mongo(cols.meta, "update_one", (
                {"_id": _cursor_id(kind)}, Meta.cursor_saved(after, _now(), SCHEMA_VERSION),
            ), {"upsert": True})
            batches += 1
            if on_batch is not None:
                on_batch(kind, len(docs))
    return _done(done, damaged)


def retired_indexes_plan(ctx: Context, *, dry_run: bool = False
                         ) -> Plan[tuple[list[str], list[str]]]:
    """Drop the indexes of ``documents.RETIRED_INDEXES`` that exist (``dry_run``: only
    find them). Returns ``(dropped, kept)``: ``collection.index`` names, and for each
    index MongoDB refused to drop (e.g. the index of a range shard key) its name and the
    server's reason; those stay, and the other drops go on. Another process dropping one
    at the same time is not an error."""
    dropped: list[str] = []
    kept: list[str] = []
    for key, names in D.RETIRED_INDEXES.items():
        coll = getattr(ctx.collections, key)
        have = {ix["name"] for ix in (yield Mongo(coll, "list_indexes"))}
        for name in names:
            if name not in have:
                continue
            if not dry_run:
                try:
                    yield Mongo(coll, "drop_index", (name,))
                except CommandFailed as exc:
                    if exc.code != 27:  # 27 IndexNotFound: dropped by another process now
                        kept.append(f"{coll}.{name}: {exc}")
                        continue
            dropped.append(f"{coll}.{name}")
    return dropped, kept
