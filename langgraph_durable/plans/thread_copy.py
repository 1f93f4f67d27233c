"""``copy_thread``'s plan: every checkpoint, blob, write and item of a thread copied to
another, which keeps its other checkpoints (the order of its reads and writes is in
``copy_thread_plan``). It waits for the outbox as the plans of ``history_edits.py`` do."""

from __future__ import annotations

from collections.abc import Sequence

from ..core.ops import BulkWrite, Doc, DocView, Find, Op, Parallel, Pipeline, Plan, ask
from ..core.records import blob_field, member
from ..durable import checkpoint_queries as Q
from ..durable import chunks as C
from ..durable import documents as D
from ..durable import inline as I
from ..durable import item_docs as IT
from ..durable import write_groups as G
from . import summary_upkeep as summaries
from .context import Context
from .effect_journal import copy_effects_plan
from .history_edits import _delete_ids, flush_wait_plan, release_plan
from .thread_registry import register_plan


def copy_thread_plan(ctx: Context, source: str, target: str) -> Plan[None]:
    """Copy every checkpoint, blob and write (the whole parent chain) to ``target``,
    registered in its thread registry before MongoDB holds it. A copied checkpoint's
    pending writes on ``target`` are exactly the source's: ``target``'s writes documents
    of it (its own, since an earlier copy) are deleted once the copies are stored (two
    threads' ``seq``s, each its own clock readings, do not compare). A delete of the
    source (``delete_thread``, ``delete_for_runs``, ``prune``) racing the reads: what its
    tombstones cover is not copied, as if it ran before the copy."""
    yield from flush_wait_plan(ctx, ctx.config.delete_flush_timeout_s)
    cols = ctx.collections
    q = {"thread_id": source}
    # read against the flusher's write order (chunks, items, blobs, writes, checkpoints):
    # what a checkpoint read here refers to was stored before it, so the later reads
    # find it, whatever puts to the source land meanwhile
    cps, held = yield Parallel([
        Find(cols.checkpoints, q),
        Find(cols.writes, {"thread_id": target},
             {"checkpoint_ns": 1, "checkpoint_id": 1, "chunked": 1}),
    ])
    if not cps:
        return
    ours = {_checkpoint_of(d) for d in cps}
    held = [d for d in held if _checkpoint_of(d) in ours]  # the target's, of those
    chunked = [d["_id"] for d in held if d.get("chunked")]
    blobs, writes, had = yield Parallel([  # only the read checkpoints' writes are kept
        Find(cols.blobs, q), Find(cols.writes, q),
        Find(cols.chunks, Q.chunks_of_owners(target, chunked), {"_id": 1, "owner": 1})])
    writes = [w for w in writes if _checkpoint_of(w) in ours]
    items = [p for d in (yield from ask(Find(cols.items, q))) for p in IT.split_hosted(d)]
    chunks = yield from ask(Find(cols.chunks, q))
    # a delete of the source that ran between these reads (its MongoDB tombstones are
    # stored before it deletes anything): what it deletes is not copied, as if it ran first
    stones = yield from ask(Find(cols.tombstones, D.tombstones_of_threads([source]),
                                 {"_id": 0, "f": 1, "at_ms": 1}))
    if stones:
        read = cps
        cps, blobs, writes, items = _not_deleted(stones, cps, blobs, writes, items)
        if not cps:
            return
        kept = {id(d) for d in cps}
        blobs += _spilled(source, [d for d in read if id(d) not in kept], cps, blobs)
        ours = {_checkpoint_of(d) for d in cps}  # the target's writes of those not
        held = [d for d in held if _checkpoint_of(d) in ours]  # copied stay, chunks too
        had = [c for c in had if c.get("owner") in {d["_id"] for d in held}]
    (clock,) = yield Pipeline([["TIME"]])  # Redis time: these records are stored now
    now_ms = int(clock[0]) * 1000 + int(clock[1]) // 1000
    for kind, docs in (("checkpoints", cps), ("blobs", blobs), ("writes", writes),
                       ("items", items)):
        for d in docs:  # a damaged document raises CorruptRecordError: nothing copied
            if not C.has_chunks(d):
                G.check_document(d, kind)  # (writes of either form)
    yield from register_plan(ctx, target)  # before MongoDB holds it (plans/thread_registry.py)
    for d in (*cps, *blobs, *writes, *items):
        d["put_ms"] = now_ms
    ops: list[Op[object]] = []
    renamed: dict[str, Doc] = {}  # source _id -> target document, of those with chunks
    for d in items:  # items first: the blobs and writes name them
        old_id = d["_id"]
        (digest,) = D.identity_of(d, "items", ["d"])
        d["_id"] = D.doc_id(target, bytes(digest).hex())
        d["thread_id"] = target
        if C.has_chunks(d):
            renamed[old_id] = d
    for name, docs, kind, ident in (
        (cols.checkpoints, cps, "checkpoints", ("checkpoint_ns", "checkpoint_id")),
        (cols.blobs, blobs, "blobs", ("checkpoint_ns", "channel", "version")),
        (cols.writes, writes, "writes", ("checkpoint_ns", "checkpoint_id", "task_id", "idx")),
    ):
        if not docs:
            continue
        for d in docs:
            old_id = d["_id"]
            d["_id"] = D.doc_id(target, *G.identity_of(d, kind, ident))  # damaged: raises
            d["thread_id"] = target
            if C.has_chunks(d):
                renamed[old_id] = d
        # stored now, over an earlier copy's documents too: a delete of the target
        # that began before keeps them, with the chunks they name (chunks.moved)
        ops.append(BulkWrite(name, [D.upsert(d, copied=True) for d in docs]))
    # the chunks first, under the target's ids; then the items the others name
    moved = C.moved(chunks, renamed)
    yield from C.write_plan(cols.chunks, moved)
    if items:
        yield BulkWrite(cols.items, [IT.upsert_item(d) for d in items])
    yield Parallel(ops)
    stored = {c["_id"] for c in moved}
    yield from _drop_replaced_writes(ctx, writes, held,
                                     [c["_id"] for c in had if c["_id"] not in stored])
    yield from copy_effects_plan(ctx, source, target, now_ms)  # the effect journal too
    yield from release_plan(ctx, target)
    yield from summaries.refresh_quietly_plan(ctx, [target])  # the target's summary


def _not_deleted(stones: Sequence[DocView], cps: list[Doc], blobs: list[Doc],
                 writes: list[Doc], items: list[Doc]
                 ) -> tuple[list[Doc], list[Doc], list[Doc], list[Doc]]:
    """``cps``, ``blobs``, ``writes`` and ``items`` without the documents a delete whose
    tombstones are ``stones`` removes: those stored at or before it (``put_ms``, none
    counting as before), of the whole thread (``*``) or of a deleted checkpoint (its
    member), as ``documents.stored_before`` and ``tombstones.check_deleted_plan`` judge."""
    gone: dict[str, int] = {}
    for d in stones:
        gone[str(d["f"])] = max(gone.get(str(d["f"]), 0), int(d["at_ms"]))
    whole = gone.get("*", 0)

    def kept(doc: Doc, at: int) -> bool:
        return int(doc.get("put_ms") or 0) > at if at else True

    def of_checkpoint(doc: Doc) -> bool:
        ns, cid = _checkpoint_of(doc)
        return kept(doc, max(whole, gone.get(member(str(ns), str(cid)), 0)))

    return ([d for d in cps if of_checkpoint(d)], [d for d in blobs if kept(d, whole)],
            [d for d in writes if of_checkpoint(d)], [d for d in items if kept(d, whole)])


def _spilled(source: str, left_out: Sequence[Doc], kept: Sequence[Doc],
             blobs: Sequence[Doc]) -> list[Doc]:
    """The values held inside the checkpoint documents ``left_out`` (deleted from the
    source while the copy read it) that the ``kept`` checkpoints name, as blobs documents,
    but those among ``blobs``: the delete stored them so (``inline.spill_docs``) before
    removing anything, perhaps after the copy read the source's blobs."""
    named = {blob_field(str(d.get("checkpoint_ns")), ch, v) for d in kept
             for ch, v in d.get("blob_fields") or ()}
    have = {b["_id"] for b in blobs}
    return [b for d in left_out for b in I.spill_docs(source, d, named)
            if b["_id"] not in have]


def _checkpoint_of(doc: DocView) -> tuple[object, object]:
    """``(checkpoint_ns, checkpoint_id)`` of a checkpoints or writes document."""
    return doc.get("checkpoint_ns"), doc.get("checkpoint_id")


def _drop_replaced_writes(ctx: Context, copied: Sequence[Doc], held: Sequence[Doc],
                          old_chunks: Sequence[str]) -> Plan[None]:
    """Delete the writes documents ``held`` (the target's of the copied checkpoints,
    read before the copy) that the copies ``copied`` did not overwrite, and
    ``old_chunks`` (``_id``s of their chunks read before the copy that it did not store,
    e.g. of a chunked write it overwrote). What a run on the target stored meanwhile was
    not read: it stays."""
    kept = {d["_id"] for d in copied}
    stale = [d["_id"] for d in held if d["_id"] not in kept]
    if stale:
        yield _delete_ids(ctx.collections.writes, stale)
    if old_chunks:
        yield _delete_ids(ctx.collections.chunks, old_chunks)
