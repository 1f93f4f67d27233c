"""Converting stored whole-list values to manifests of items (``langgraph-durable migrate``).

Documents written before the item store (``core/items.py``), or by a saver with
``list_items=False``, hold a list value whole (``type`` e.g. ``"msgpack"``, ``v`` 1 or
``CHUNKED_VERSION``). They stay readable as they are; ``convert_lists_plan`` rewrites
them so they take the space the item store gives: it goes through the blobs and then the
writes collection in ``_id`` order, ``batch_size`` documents a round, decodes each value
with the saver's serializer (chunked documents reassembled first, ``chunks.load_plan``)
and, when the value is a plain non-empty ``list`` (exactly what ``plans/write.py``
``value_typed`` stores as a manifest; nothing when ``ctx.items.enabled`` is False),
splits it with ``value_typed`` itself, so the digests are the ones the saver writes and
the items dedupe with them. Per round it stores the items and nodes first (chunks, then
insert-once ``documents.upsert_item``), then replaces each converted document with its
manifest form (``documents.blob_doc``/``write_doc``, same ``put_ms``; a write keeps its
``seq``), only if its ``type``, ``v`` (and a write's ``seq``) are still those that were
read: a document rewritten or deleted meanwhile is left alone. After each round the
cursor (the last ``_id``) is saved in the ``meta`` collection
(``migration:lists:<kind>``), so an interrupted run resumes there; a finished pass
removes it. Running it again converts nothing (idempotent).

Redis is not touched: hot copies may still hold whole lists, which read as before.
Decoding runs inside the plan (CPU work, and blob-store reads with an external-reference
serializer), so drive it with ``run_sync`` from a tool, not on a serving event loop.
The chunks of a converted chunked document stay until its thread is deleted.
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from ..core.items import MANIFEST_TYPE, packed
from ..core.ops import BulkWrite, BulkWriteFailed, Find, FindOne, Mongo, Plan, ReplaceDoc, ask
from ..core.records import Typed, pack_blob
from ..durable import chunks as C
from ..durable import documents as D
from ..durable import item_docs as IT
from ..durable import meta_docs as Meta
from ..durable import write_groups as G
from ..errors import CorruptRecordError, TierUnavailableError
from ..serde.extref_errors import BlobStoreError

if TYPE_CHECKING:
    from ..plans.context import Context

log = logging.getLogger("langgraph_durable.plans.migrations")

LIST_KINDS = ("blobs", "writes")
"""Collection kinds whose documents hold channel or pending-write values."""

NEVER_LISTS = (MANIFEST_TYPE, "empty", "null", "bytes", "bytearray")
"""Stored value types that cannot hold a list (not read by the conversion)."""


@dataclass
class ListsConverted:
    """What ``convert_lists_plan`` did: ``examined`` documents read (by kind),
    ``converted`` whole lists replaced by manifests (by kind; with ``dry_run``, those it
    would replace), ``items`` item and node documents upserted, ``finished`` False when
    ``max_batches`` stopped it (the cursor stays for the next run)."""

    examined: dict[str, int] = field(default_factory=lambda: dict.fromkeys(LIST_KINDS, 0))
    converted: dict[str, int] = field(default_factory=lambda: dict.fromkeys(LIST_KINDS, 0))
    items: int = 0
    finished: bool = True


def cursor_id(kind: str) -> str:
    """``_id`` of the ``meta`` document holding the conversion's cursor for ``kind``."""
    return f"migration:lists:{kind}"


def candidates_query(after: Any = None) -> dict[str, Any]:
    """MongoDB filter of the documents the conversion reads: every value type that may
    hold a list (``NEVER_LISTS`` excluded), ``_id`` above ``after``."""
    q: dict[str, Any] = {"type": {"$nin": list(NEVER_LISTS)}}
    if after is not None:
        q["_id"] = {"$gt": after}
    return q


def _saved_cursor(ctx: Context, kind: str) -> Plan[Any]:
    saved = yield from ask(FindOne(ctx.collections.meta, {"_id": cursor_id(kind)}))
    return saved.get("after") if saved else None


def remaining_plan(ctx: Context) -> Plan[int]:
    """How many documents the conversion has still to read (from the saved cursors)."""
    n = 0
    for kind in LIST_KINDS:
        after = yield from _saved_cursor(ctx, kind)
        n += yield Mongo(getattr(ctx.collections, kind), "count_documents",
                         (candidates_query(after),))
    return n


def manifest_of(ctx: Context, kind: str, doc: Mapping[str, Any]
                ) -> tuple[dict[str, Any], dict[bytes, bytes]] | None:
    """``(manifest form of doc, its items and nodes as stored)`` for a blobs or writes
    document (reassembled, any version this package reads) whose value is a plain
    non-empty list; None for any other value. Raises what decoding raises
    (``CorruptRecordError``, ``SchemaVersionError``, the serializer's errors) and
    ``SerializationError`` for an item that cannot be serialized."""
    from ..plans.write import value_typed  # plans import the context; keep this module light

    tid = doc["thread_id"]
    at: dict[str, Any] = {"put_ms": doc.get("put_ms") or 0}
    if kind == "writes" and G.is_group(doc):  # one put_writes call: each of its writes
        return _group_manifests(ctx, doc, at["put_ms"])
    typed: Typed | None
    if kind == "blobs":
        fld, typed = D.blob_value_of(doc)
        what = f"channel {doc['channel']!r} (ns {doc['checkpoint_ns']!r})"
    else:
        rec = D.write_of(doc)
        typed = rec.value
        what = f"write to channel {rec.channel!r} by task {rec.task_id!r}"
    if typed is None or typed[0] in NEVER_LISTS or not ctx.items.enabled:
        return None
    value = ctx.serde.loads_typed(typed)
    if type(value) is not list or not value:
        return None
    parts: dict[bytes, Any] = {}
    manifest = value_typed(ctx, value, parts, thread_id=tid, what=what)
    if manifest[0] != MANIFEST_TYPE:
        return None
    if kind == "blobs":
        new = D.blob_doc(tid, fld, manifest, **at)
    else:
        new = D.write_doc(tid, doc["checkpoint_ns"], doc["checkpoint_id"],
                          replace(rec, value=manifest), **at)
    return new, packed(parts, pack_blob)


def _group_manifests(ctx: Context, doc: Mapping[str, Any], put_ms: int
                     ) -> tuple[dict[str, Any], dict[bytes, bytes]] | None:
    """``manifest_of`` of a writes document of one call (``durable/write_groups.py``):
    the document with each plain non-empty list among its writes a manifest; None when
    none is."""
    recs = G.records_of(doc)
    stored: dict[bytes, bytes] = {}
    out = []
    changed = False
    for rec in recs:
        got = manifest_of(ctx, "writes", D.write_doc(
            doc["thread_id"], doc["checkpoint_ns"], doc["checkpoint_id"], rec, put_ms=put_ms))
        if got is None:
            out.append(rec)
            continue
        new, parts = got
        stored.update(parts)
        out.append(D.write_of(new))
        changed = True
    if not changed:
        return None
    return G.group_doc(doc["thread_id"], doc["checkpoint_ns"], doc["checkpoint_id"], out,
                       put_ms=put_ms), stored


def _unchanged(kind: str, doc: Mapping[str, Any]) -> dict[str, Any]:
    """Filter matching ``doc`` only while it holds the value that was read (a missing
    field matches ``None``)."""
    q = {"_id": doc["_id"], "type": doc.get("type"), "v": doc.get("v")}
    if kind == "writes":
        q["seq"] = doc.get("seq")
    return q


def _store_items(ctx: Context, found: dict[str, dict[bytes, tuple[bytes, int]]]) -> Plan[int]:
    """Upsert the items and nodes ``found`` (thread -> digest -> (stored, put_ms)), their
    chunks first. Insert-once: a duplicate key (a flusher storing the same item at the
    same moment) is the same content and is ignored. Returns the documents upserted."""
    docs = [IT.item_doc(tid, d, stored, put_ms=ms)
            for tid, parts in found.items() for d, (stored, ms) in parts.items()]
    if not docs:
        return 0
    docs, chunks = C.split_all("items", docs)
    yield from C.write_plan(ctx.collections.chunks, chunks)
    try:
        yield BulkWrite(ctx.collections.items, [IT.upsert_item(d) for d in docs])
    except BulkWriteFailed as exc:
        if not exc.only_duplicates():
            raise
    return len(docs)


def convert_lists_plan(ctx: Context, *, batch_size: int = 200,
                       on_batch: Callable[[str, int], None] | None = None,
                       max_batches: int | None = None,
                       dry_run: bool = False) -> Plan[ListsConverted]:
    """Replace every stored whole-list value by its manifest (see the module docstring).

    ``batch_size``: documents read per round; ``on_batch(kind, n)`` is called after each
    round of ``n`` documents; ``max_batches`` stops after that many rounds (the cursor
    stays for the next run); ``dry_run`` writes nothing (no items, documents or cursor)
    and counts what would be converted. A document it cannot decode or split raises
    ``CorruptRecordError`` naming it (``TierUnavailableError`` and ``BlobStoreError``
    as raised); the rounds before it are stored and the cursor points past them.
    Returns a ``ListsConverted``."""
    cols = ctx.collections
    out = ListsConverted()
    rounds = 0
    for kind in LIST_KINDS:
        name = getattr(cols, kind)
        after = yield from _saved_cursor(ctx, kind)
        while True:
            if max_batches is not None and rounds >= max_batches:
                out.finished = False
                return out
            docs = yield from ask(Find(name, candidates_query(after), sort=[("_id", 1)],
                                       limit=batch_size))
            if not docs:
                if not dry_run:
                    yield Mongo(cols.meta, "delete_one", ({"_id": cursor_id(kind)},))
                break
            whole = yield from C.load_plan(cols.chunks, docs)
            found: dict[str, dict[bytes, tuple[bytes, int]]] = {}
            reqs: list[ReplaceDoc] = []
            for raw, doc in zip(docs, whole):
                try:
                    got = manifest_of(ctx, kind, doc)
                except (TierUnavailableError, BlobStoreError):
                    raise  # a server or store did not answer: retry later
                except Exception as exc:
                    raise CorruptRecordError(
                        f"cannot convert the value of MongoDB {kind} document "
                        f"{raw['_id']!r} (thread {raw.get('thread_id')!r}): "
                        f"{type(exc).__name__}: {exc}; it and the documents after it "
                        "were left as they are") from exc
                if got is None:
                    continue
                new, parts = got
                mine = found.setdefault(new["thread_id"], {})
                for d, stored in parts.items():
                    ms = max(new["put_ms"], mine[d][1]) if d in mine else new["put_ms"]
                    mine[d] = (stored, ms)
                reqs.append(ReplaceDoc(_unchanged(kind, raw), new))
            out.examined[kind] += len(docs)
            after = docs[-1]["_id"]
            if dry_run:
                out.converted[kind] += len(reqs)
            else:
                out.items += yield from _store_items(ctx, found)  # before what names them
                if reqs:
                    result = yield BulkWrite(name, reqs)
                    out.converted[kind] += result.modified
                yield Mongo(cols.meta, "update_one", (
                    {"_id": cursor_id(kind)},
                    Meta.cursor_saved(after, datetime.datetime.now(datetime.timezone.utc)),
                ), {"upsert": True})
            rounds += 1
            if on_batch is not None:
                on_batch(kind, len(docs))
    if out.items or any(out.converted.values()):
        log.info("converted %s whole-list values to manifests (%s item documents)",
                 sum(out.converted.values()), out.items)
    return out
