"""Plans for reads: Redis first, MongoDB for what Redis no longer holds; merged by checkpoint_id.

A checkpoint found in Redis is answered from Redis (its pending writes live with it);
channel blobs Redis lacks come from MongoDB. A checkpoint only MongoDB holds gets its
writes from MongoDB merged with any Redis has (written after its hot keys expired).

The plans return records (``RecordPage``); ``finish_page`` decodes them into
``CheckpointTuple``s after the plan, where the serializer may download (the async saver
runs it in a worker thread), so the plans themselves never block.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from langgraph.checkpoint.base import CheckpointTuple

from ..core.items import MANIFEST_TYPE, node_children, parse_stored, split_digests
from ..core.ops import Aggregate, Doc, Find, Op, OpReply, Parallel, Pipeline, Plan, Query, ask
from ..core.records import (
    SEP,
    CheckpointRecord,
    Typed,
    WriteRecord,
    assemble,
    member,
    metadata_matches,
    unpack_blob,
)
from ..durable import checkpoint_queries as Q
from ..durable import chunks as C
from ..durable import documents as D
from ..durable import inline as I
from ..durable import item_docs as IT
from ..durable import write_groups as G
from ..errors import CorruptRecordError, MissingValueError
from ..hot.keys import EPOCH_FIELD
from ..hot.registry_scripts import epoch_complete
from ..hot.scripts import PageReply, PartsReply, page_op, parts_op
from .context import Context, Learned
from .damage import about, damaged_keys_plan, hot_checked, missing_values

Row = tuple[CheckpointRecord, dict[tuple[str, int], WriteRecord]]
Writes = dict[tuple[str, int], WriteRecord]


class Page(NamedTuple):
    """One page of ``list``: tuples newest first, the cursor for the next page (``None``
    at the end), how many checkpoints each tier served, and what the read learned
    (``Learned``: the head read as the latest, the items read from Redis; for
    ``Context.learn``)."""

    tuples: list[CheckpointTuple]
    cursor: str | None
    hot: int
    durable: int
    learned: Learned | None = None


@dataclass(frozen=True)
class RecordPage:
    """What ``page_plan`` read, not yet decoded: ``rows`` (record and pending writes of
    each checkpoint, newest first), the blob values they refer to, the metadata ``filter``
    still to apply, the next cursor and how many rows each tier served. ``head`` is
    ``(thread_id, ns)`` when the page answers "the latest" (``get_tuple_plan``)."""

    thread_id: str
    rows: list[tuple[CheckpointRecord, list[WriteRecord]]]
    blobs: dict[str, Typed | None] = field(default_factory=dict)
    filter: Mapping[str, object] | None = None
    cursor: str | None = None
    hot: int = 0
    durable: int = 0
    head: tuple[str, str] | None = None
    items: dict[bytes, Typed] = field(default_factory=dict)
    hot_items: list[bytes] = field(default_factory=list)


def finish_page(ctx: Context, raw: RecordPage) -> Page:
    """Decode a ``RecordPage`` with ``ctx.serde`` (may download: blocking) into a
    ``Page`` and apply its metadata filter. The page's ``learned`` names the head it read
    as the latest (the run that read it builds on it) and the items read from Redis as
    held there (the next put need not send them), for the caller to apply
    (``Context.learn``)."""
    out = []
    for rec, writes in raw.rows:
        tup = assemble(ctx.serde, raw.thread_id, rec, raw.blobs, writes, raw.items,
                       ctx.items, raw.head is not None)
        if metadata_matches(tup.metadata, raw.filter):
            out.append(tup)
    head = ((raw.head[1], raw.rows[0][0].checkpoint_id)
            if raw.head is not None and raw.rows else None)
    learned = Learned(raw.thread_id, head, raw.hot_items) if head or raw.hot_items else None
    return Page(out, raw.cursor, raw.hot, raw.durable, learned)


def writes_of(raw: Sequence[bytes | None], where: str) -> dict[tuple[str, int], WriteRecord]:
    """Decode Redis write envelopes (``None`` = gone) into ``{(task_id, idx): record}``;
    ``where`` names the source in ``CorruptRecordError``."""
    out: Writes = {}
    for v in raw or []:
        if v:
            w = WriteRecord.unpack(v, where)
            out[(w.task_id, w.idx)] = w
    return out


def merge_writes(durable: dict[tuple[str, int], WriteRecord],
                 hot: dict[tuple[str, int], WriteRecord]) -> None:
    """Add Redis's writes of a checkpoint only MongoDB holds to MongoDB's, with the rules
    both tiers apply on their own (``put_writes_plan``, ``documents.upsert_write``): an
    ordinary write (idx >= 0) is insert-once, so MongoDB's first value stays even if a
    retried task wrote again after the hot keys expired; a special channel's write
    (idx < 0) keeps the newer ``seq``."""
    for key, w in hot.items():
        have = durable.get(key)
        if have is None or (w.idx < 0 and w.seq > have.seq):
            durable[key] = w  # (MongoDB's documents among themselves: write_groups.keep)


def items_of(thread_id: str, names: Sequence[bytes], values: Sequence[bytes | None],
             into: dict[bytes, Typed]) -> list[bytes]:
    """Parse the items and nodes a script replied (digests and stored values, ``None`` =
    Redis lacks it) into ``into``; returns the digests found."""
    found = []
    for d, v in zip(names, values):
        if v:
            where = f"redis item {d.hex()} of thread {thread_id!r}"
            into[d] = parse_stored(v, functools.partial(unpack_blob, where=where))
            found.append(d)
    return found


def manifest_refs(values: Sequence[Typed | None]) -> set[bytes]:
    """The digests the manifests among ``values`` name."""
    out: set[bytes] = set()
    for v in values:
        if v is not None and v[0] == MANIFEST_TYPE:
            out.update(split_digests(v[1]))
    return out


def missing_items(values: Sequence[Typed | None], items: Mapping[bytes, Typed]) -> list[bytes]:
    """Digests of items and nodes the manifests among ``values`` need that ``items``
    lacks (a node's items included once the node is there)."""
    refs = manifest_refs(values)
    refs |= node_children(items, refs)
    return sorted(d for d in refs if d not in items)


def joined_items(docs: Sequence[Doc]) -> tuple[list[Doc], list[Doc]]:
    """``(docs without the joined items, the joined item documents)`` of an aggregate
    using ``Q.item_lookup``."""
    plain: list[Doc] = []
    items: list[Doc] = []
    for d in docs:
        found = d.pop("found", None) or []
        for it in found:
            items += it.pop("sub", None) or []
            items.append(it)
        plain.append(d)
    return plain, items


def items_plan(ctx: Context, thread_id: str, digests: Sequence[bytes],
               into: dict[bytes, Typed]) -> Plan[None]:
    """Read items and nodes (and the items of those nodes) from MongoDB into ``into``
    (one aggregate; chunked items reassembled)."""
    if not digests:
        return None
    items = ctx.collections.items
    docs = yield from ask(Aggregate(items, Q.items_pipeline(items, thread_id, digests)))
    flat: list[Doc] = []
    for d in docs:
        flat += d.pop("sub", None) or []
        flat.append(d)
    yield from add_item_docs(ctx, flat, into)
    return None


def add_item_docs(ctx: Context, docs: list[Doc], into: dict[bytes, Typed]) -> Plan[None]:
    """Reassemble chunked item documents and parse them into ``into``."""
    for d in (yield from C.load_plan(ctx.collections.chunks, docs)):
        into.update(IT.entries(d))  # an item, a node, or an item and the node it holds
    return None


def resolve_items_plan(ctx: Context, thread_id: str, values: Sequence[Typed | None],
                       into: dict[bytes, Typed]) -> Plan[None]:
    """Read from MongoDB whatever items the manifests among ``values`` need that ``into``
    lacks (none: no round trip)."""
    for _ in range(2):  # the nodes, then the items of nodes found only now
        need = missing_items(values, into)
        if not need:
            return None
        yield from items_plan(ctx, thread_id, need, into)
    return None


def _decode_page(thread_id: str, reply: PageReply
                 ) -> tuple[list[Row], dict[str, Typed | None], dict[bytes, Typed], list[bytes]]:
    blobs: dict[str, Typed | None] = {}
    try:
        for f, v in zip(reply.blob_fields, reply.blob_values):
            if v is not None:
                key = f.decode()
                blobs[key] = unpack_blob(v, f"redis blob {key!r} of thread {thread_id!r}")
        rows: list[Row] = []
        for row in reply.rows:
            if not row.record:
                continue
            ns, _, cid = row.member.decode().partition(SEP)
            where = f"redis thread {thread_id!r}"
            try:
                rec = CheckpointRecord.unpack(ns, cid, row.record, row.index, thread_id)
                rows.append((rec, writes_of(row.write_values, where)))
            except CorruptRecordError as exc:
                about(exc, checkpoint_ns=ns, checkpoint_id=cid)
                raise
        items: dict[bytes, Typed] = {}
        found = items_of(thread_id, reply.item_digests, reply.item_values, items)
    except CorruptRecordError as exc:
        about(exc, tier="hot", thread_id=thread_id)
        raise
    return rows, blobs, items, found


def _lex(ns: str, before: str | None, exact: str | None) -> tuple[str, str]:
    if exact:
        m = "[" + member(ns, exact)
        return m, m
    hi = "(" + member(ns, before) if before else "(" + ns + "\x01"
    return hi, "[" + ns + SEP


def page_plan(
    ctx: Context,
    thread_id: str,
    ns: str,
    *,
    before: str | None = None,
    exact: str | None = None,
    count: int = 1,
    filter: Mapping[str, object] | None = None,
    hot_first: bool = False,
    head: tuple[str, str] | None = None,
) -> Plan[RecordPage]:
    """Up to ``count`` checkpoints of ``(thread_id, ns)``, newest first, below ``before``
    (or exactly ``exact``), merged from both tiers. Returns a ``RecordPage`` (decode it
    with ``finish_page``); its ``cursor`` is for the next page (``None`` when nothing is
    left).

    With ``hot_first`` MongoDB is asked only when Redis holds fewer than ``count``
    matches: right for the latest or one exact checkpoint, since the newest checkpoints
    are always written to Redis first. MongoDB is not asked at all when Redis holds the
    whole thread (its meta ``complete`` flag, set by the put of a new thread's first input
    checkpoint, and gone with the hot keys when they expire or are deleted), nor when
    Redis holds nothing of it and its partition's complete thread registry lacks it (no
    tier holds it: ``plans/thread_registry.py``). ``head`` becomes the page's ``RecordPage.head``
    (``(thread_id, ns)`` when the page answers "the latest": ``get_tuple_plan``).

    Damaged records raise ``CorruptRecordError`` naming the thread and the key or
    document: a record that cannot be decoded, a Redis key of the wrong type (the script's
    ``WRONGTYPE``; ``damaged_keys_plan`` finds the key), a MongoDB document lacking a field
    (``documents.record_of``...). A checkpoint naming a channel version whose value
    neither tier holds raises ``MissingValueError`` (a subclass), after one more read (a
    delete or prune running meanwhile may have removed the checkpoint with its values,
    which the second read then no longer finds)."""
    def once() -> Plan[RecordPage]:
        return hot_checked(ctx, thread_id, _page(
            ctx, thread_id, ns, before=before, exact=exact, count=count, filter=filter,
            hot_first=hot_first, head=head))

    try:
        return (yield from once())
    except MissingValueError:
        return (yield from once())


def _page(ctx: Context, thread_id: str, ns: str, *, before: str | None, exact: str | None,
          count: int, filter: Mapping[str, object] | None, hot_first: bool,
          head: tuple[str, str] | None) -> Plan[RecordPage]:
    keys = ctx.keys(thread_id)
    cols = ctx.collections
    hi, lo = _lex(ns, before, exact)
    q: Query = Q.checkpoints_page(thread_id, ns, exact=exact, before=before,
                                  metadata=D.metadata_query(filter, ctx.queryable))
    cached = ctx.items.cached(thread_id)  # items this process can rebuild: not read again
    reply = yield from ask(page_op(keys.all, hi, lo, count, cached,
                                   (ctx.registry_of(thread_id), thread_id)))
    rows, blobs, items, hot_items = _decode_page(thread_id, reply)
    items.update(cached)
    hot_ids = {r.checkpoint_id for r, _ in rows}
    docs: list[Doc] = []
    # Redis holds the whole thread (started in Redis, nothing expired since): MongoDB has
    # nothing more, so it is not asked (a subgraph's first read works while it is down)
    # meta complete 2 (the hot window trimmed a thread that started in Redis): Redis holds
    # every namespace's newest checkpoints, so "the latest" of a namespace Redis lacks is
    # none (a subgraph's first step works while MongoDB is down), but older ones and exact
    # ids may be in MongoDB only
    # meta complete 3: no checkpoint of the thread in Redis, and the complete thread
    # registry lacks it: no tier holds any (a new thread starts while MongoDB is down)
    complete = reply.complete in (1, 3)
    newest = reply.complete in (1, 2) and hot_first and not exact
    if not (complete or newest or (hot_first and len(rows) >= count)):
        # only what Redis did not answer: the top `count` of the union is in the two answers
        if hot_ids and not exact:
            q = Q.excluding(q, hot_ids)
        docs = yield from ask(Find(cols.checkpoints, q, sort=[("checkpoint_id", -1)],
                                   limit=count))
        docs = yield from C.load_plan(cols.chunks, docs)
    cold = [r for r in map(D.record_of, docs) if r.checkpoint_id not in hot_ids]
    merged: list[tuple[CheckpointRecord, bool]] = sorted(
        [(r, True) for r, _ in rows] + [(r, False) for r in cold],
        key=lambda x: x[0].checkpoint_id, reverse=True,
    )[:count]
    if not merged:
        return RecordPage(thread_id, [], filter=filter, head=head, hot_items=hot_items)
    hot_writes = {r.checkpoint_id: w for r, w in rows}
    cold_recs = [r for r, hot in merged if not hot]
    # one checkpoint: its manifests' items are joined in the same round ($lookup); for a
    # page they are read once each afterwards (the versions of a list share most items)
    join = [Q.item_lookup(cols.items, thread_id)] if len(merged) == 1 else []
    if not join:  # the values the page's cold checkpoints hold themselves (inline.py)
        kept = {r.checkpoint_id for r in cold_recs}
        for d in docs:
            if d["checkpoint_id"] in kept:
                blobs.update((f, v) for f, v in I.inline_values(d).items() if f not in blobs)
    need_blobs = sorted({f for r, _ in merged for f in r.blob_fields if f not in blobs})
    ops: list[Op[object]] = []
    if need_blobs:  # in blobs documents or inside the checkpoint documents of the thread
        ops.append(I.values_op(cols, thread_id, need_blobs, join))
    if cold_recs:
        cids = [r.checkpoint_id for r in cold_recs]
        ops.append(Aggregate(cols.writes, Q.writes_pipeline(thread_id, ns, cids, join)))
        ops.append(parts_op(keys.all, [member(ns, c) for c in cids]))
    results: list[OpReply] = (yield Parallel(ops)) if ops else []
    vdocs, bitems = joined_items(results.pop(0) if need_blobs else [])
    bdocs, inline = I.split_values(vdocs)
    blobs.update(inline)
    wdocs, witems = joined_items(results.pop(0) if cold_recs else [])
    loaded = yield from C.load_plan(cols.chunks, bdocs + wdocs)  # one query for both
    bdocs, wdocs = loaded[:len(bdocs)], loaded[len(bdocs):]
    yield from add_item_docs(ctx, bitems + witems, items)
    for d in bdocs:
        f, v = D.blob_value_of(d)
        blobs[f] = v
    lost = [(r.checkpoint_id, f) for r, _ in merged for f in r.blob_fields if f not in blobs]
    if lost:
        raise missing_values(thread_id, lost)
    if cold_recs:
        parts: PartsReply = results[0]  # PARTS' reply, the last of the round
        hot_items += items_of(thread_id, parts.item_digests, parts.item_values, items)
        by_cp = G.pending_by_checkpoint(wdocs, [r.checkpoint_id for r in cold_recs])
        for r, raw in zip(cold_recs, parts.write_values):
            merge_writes(by_cp[r.checkpoint_id], writes_of(raw, f"redis thread {thread_id!r}"))
        hot_writes.update(by_cp)
    found = [(r, list(hot_writes[r.checkpoint_id].values())) for r, _ in merged]
    values = [blobs.get(f) for r, _ in merged for f in r.blob_fields]
    values += [w.value for _, ws in found for w in ws]
    yield from resolve_items_plan(ctx, thread_id, values, items)
    cursor = merged[-1][0].checkpoint_id if len(merged) == count else None
    return RecordPage(thread_id, found, blobs, filter, cursor,
                      len(merged) - len(cold_recs), len(cold_recs), head, items=items,
                      hot_items=hot_items)


def get_tuple_plan(ctx: Context, thread_id: str, ns: str,
                   checkpoint_id: str | None) -> Plan[RecordPage]:
    """``get_tuple``: the checkpoint ``checkpoint_id``, or the latest of ``(thread, ns)``.
    Returns a ``RecordPage`` of at most one row (its ``hot``/``durable`` say which tier);
    for the latest, ``finish_page`` records it as the head this run builds on."""
    return (yield from page_plan(ctx, thread_id, ns, exact=checkpoint_id, count=1,
                                 hot_first=True,
                                 head=(thread_id, ns) if checkpoint_id is None else None))


def namespaces_plan(ctx: Context, thread_id: str) -> Plan[list[str]]:
    """The thread's checkpoint namespaces in first-written order (InMemorySaver's order).
    MongoDB is not asked when Redis holds the whole thread (meta ``complete``, as in
    ``page_plan``) or the complete thread registry says no tier holds it, so listing such
    a thread works while MongoDB is down."""
    keys = ctx.keys(thread_id)
    reg = ctx.registry_of(thread_id)
    replies = yield Pipeline([
        ["HGETALL", keys.ns], ["HGET", keys.meta, "complete"], ["EXISTS", keys.idx],
        ["HGET", reg, EPOCH_FIELD], ["HGET", reg, thread_id]], raise_on_error=False)
    for r in replies:
        if isinstance(r, Exception):  # a key of the wrong type is named, else r raised
            yield from damaged_keys_plan(ctx, thread_id)
            raise r
    hot, complete, exists, epoch, known = replies
    # in no tier: a complete registry never saw it, or saw it deleted ('d')
    absent = not exists and known not in (b"1", "1") and epoch_complete(epoch)
    cold: list[Doc] = []
    # (the ns hash is never trimmed)
    if not (complete in (b"1", "1", b"2", "2") and exists) and not absent:
        cold = yield from ask(Aggregate(ctx.collections.checkpoints,
                                        Q.first_per_namespace(thread_id)))
    first: dict[str, str] = {}
    for k, m in hot.items():  # HGETALL (a dict): ns -> the member first put
        ns, cid = k.decode(), m.decode().split(SEP)[-1]
        first[ns] = min(first.get(ns, cid), cid)
    for d in cold:
        if not isinstance(d["_id"], str) or not isinstance(d["first"], str):
            raise CorruptRecordError(
                f"MongoDB checkpoints documents of thread {thread_id!r} are damaged: a "
                f"checkpoint_ns of {d['_id']!r} with checkpoint_ids from {d['first']!r} "
                "(both must be strings)", tier="durable", thread_id=thread_id)
        first[d["_id"]] = min(first.get(d["_id"], d["first"]), d["first"])
    return sorted(first, key=lambda n: (first[n], n))


def threads_plan(ctx: Context) -> Plan[tuple[list[str], list[CorruptRecordError]]]:
    """Every thread in MongoDB, in order of its first checkpoint (call after a flush),
    and a ``CorruptRecordError`` for each group of checkpoints documents whose
    ``thread_id`` is missing or not a string (no thread's read finds them)."""
    docs = yield from ask(Aggregate(ctx.collections.checkpoints, Q.first_per_thread()))
    good = [d for d in docs if isinstance(d["_id"], str)]
    bad = [CorruptRecordError(
        f"MongoDB checkpoints documents with thread_id {d['_id']!r} (not a string; the "
        "field is missing when None) belong to no thread: repair or delete them",
        tier="durable") for d in docs if not isinstance(d["_id"], str)]
    return ([d["_id"] for d in sorted(good, key=lambda d: (str(d["first"]), d["_id"]))],
            bad)
