"""MongoDB writes shared by the saver's plans and the flusher (sans-I/O plans): the
*fence* against resurrection (what was written from an outbox entry stamped no later than
a delete's tombstone is deleted from MongoDB again; docs/architecture.md's glossary), the
insert-once bulk write of pending writes, and inserts that fall back to upserts for
documents already stored."""

from __future__ import annotations

import logging
from collections.abc import Callable

from ..core.ops import (
    BulkWrite,
    BulkWriteFailed,
    DeleteMany,
    Doc,
    Find,
    InsertDoc,
    Op,
    Parallel,
    Pipeline,
    Plan,
    WriteModel,
    ask,
)
from ..core.outbox_entry import OutboxEntry
from ..core.records import SEP, split_field
from ..core.store_records import STORE_KIND
from ..durable import checkpoint_queries as Q
from ..durable import documents as D
from ..durable import summary_docs as S
from ..durable import write_groups as G
from .context import Context
from .summary_upkeep import refresh_quietly_plan

log = logging.getLogger("langgraph_durable.flusher")


def stream_ms(entry_id: bytes | str) -> int:
    """The Redis server time (ms) in an outbox stream entry id ``<ms>-<seq>``."""
    text = entry_id.decode() if isinstance(entry_id, bytes) else entry_id
    return int(text.split("-")[0])


def fence_plan(ctx: Context, entries: list[tuple[bytes, str, OutboxEntry]]
               ) -> Plan[list[tuple[tuple[bytes, str, OutboxEntry], Exception]]]:
    """The fence: no resurrection by a write to MongoDB that a delete overtook (a
    *stalled round*: a flush round that read its records before a delete and wrote them
    after it; an entry added while the delete waited for the outbox; a strict-mode put):
    for the outbox
    entries ``entries`` (``(entry id, thread_id, payload)``) whose records were just written,
    look up the deletes' tombstones (``ThreadKeys.gone``, one pipeline); what was written
    from an entry stamped no later than a tombstone is deleted from MongoDB again (every
    entry added before a delete is stamped at or before its tombstones, every later one
    after them: ``hot/lua/include/generation_entry.lua``, ``now_ms.lua``'s ``delete_ms``).
    Deletes write their
    tombstone in Redis before they delete in MongoDB, so either the delete comes after the
    write, or this lookup sees the tombstone. A thread whose Redis tombstones are not known
    complete (no ``!``: Redis lost its data or they expired, so a delete's tombstones may be
    only in MongoDB) has MongoDB's read too, in one query for all such threads of the round:
    a round that stalled across a Redis data loss is still fenced: so is a thread whose
    tombstones key cannot be read (it holds another type, or a field is no time), by
    MongoDB's alone.

    Returns the entries it could not fence, each with its error (an entry whose member or
    fields do not split as they should): the caller sets them aside instead of
    acknowledging them; the others are fenced."""
    entries = [e for e in entries if e[2].kind != STORE_KIND]  # seq-guarded: plans/store_items
    if not entries:
        return []
    threads = sorted({tid for _, tid, _ in entries})
    replies = yield Pipeline([["HGETALL", ctx.keys(t).gone] for t in threads],
                             raise_on_error=False)
    stones: dict[str, dict[str, int]] = {}
    for t, raw in zip(threads, replies):  # HGETALL: a dict (drivers.normalise)
        try:
            if isinstance(raw, Exception):
                raise raw
            stones[t] = {k.decode(): int(v) for k, v in raw.items()}
        except Exception as exc:  # a damaged key: MongoDB's tombstones decide
            log.warning("tombstones of thread %r unreadable in Redis (%s); reading "
                        "MongoDB's", t, type(exc).__name__)
            stones[t] = {}
    unsure = [t for t in threads if "!" not in stones[t]]
    if unsure:
        docs = yield from ask(Find(ctx.collections.tombstones, D.tombstones_of_threads(unsure),
                                   {"_id": 0, "thread_id": 1, "f": 1, "at_ms": 1}))
        for d in docs:
            mine = stones[str(d["thread_id"])]
            f, at_ms = str(d["f"]), int(d["at_ms"])
            mine[f] = max(mine.get(f, 0), at_ms)
    cps: list[str] = []
    blobs: list[str] = []
    writes: list[str] = []
    items: list[Op[object]] = []
    item_chunks: list[Op[object]] = []
    summarize: set[str] = set()
    failed: list[tuple[tuple[bytes, str, OutboxEntry], Exception]] = []
    for e in entries:
        try:
            _fence_one(ctx, e, stones, cps, blobs, writes, (items, item_chunks), summarize)
        except Exception as exc:  # its own shape: set aside, the others fenced
            failed.append((e, exc))
    cols = ctx.collections
    ops: list[Op[object]] = [
        DeleteMany(name, D.ids_in(ids))
        for name, ids in ((cols.checkpoints, cps), (cols.blobs, blobs), (cols.writes, writes))
           if ids] + items
    if ops:
        log.warning("a MongoDB write overtaken by a delete stored %d deleted records; "
                    "removed again", len(cps) + len(blobs) + len(writes))
        yield Parallel(ops)
        # their chunks after them (a document is never visible without its chunks)
        yield Parallel([DeleteMany(cols.chunks, Q.chunks_of_threads(threads,
                                                                    cps + blobs + writes)),
                        *item_chunks])
    if summarize:  # the summaries taken back, set again from what the threads hold now:
        # a delete_for_runs or prune leaves a latest checkpoint, a new run may follow a
        # delete_thread (none left: the refresh deletes it again)
        yield from refresh_quietly_plan(ctx, sorted(summarize))
    return failed


def _fence_one(ctx: Context, e: tuple[bytes, str, OutboxEntry],
               stones: dict[str, dict[str, int]], cps: list[str], blobs: list[str],
               writes: list[str], deletes: tuple[list[Op[object]], list[Op[object]]],
               summarize: set[str]) -> None:
    """Add to ``cps``, ``blobs``, ``writes`` (``_id``s) and ``deletes`` (deletes of other
    documents, and of their chunks, to run after them) what the entry ``e`` wrote that a
    tombstone of ``stones`` (thread -> field -> time) names, and to ``summarize`` its
    thread when the summary its round may have set is taken back; raises (adding nothing)
    for an entry whose member or fields do not split."""
    eid, tid, entry = e
    kind, m, fields, digests = entry.kind, entry.member, entry.names, entry.digests
    gone = stones.get(tid) or {}
    if not gone or kind not in ("cp", "w"):  # other kinds' copy plans fence their own
        return  # (the effect journal's: plans/effect_journal.py fences its own)
    at = stream_ms(eid)  # stamped at or before a tombstone: added before that delete
    whole = gone.get("*", 0) >= at
    m_gone = whole or gone.get(m, 0) >= at
    ns, cid = m.split(SEP)
    mine: list[Op[object]] = []
    chunks: list[Op[object]] = []
    if whole and digests:  # items are shared: only those no write stored since, and
        # their chunks so (a chunk's put_ms is at least its item's: durable/chunks.py)
        mine.append(DeleteMany(ctx.collections.items,
                               Q.items_stored_before(tid, digests, gone["*"])))
        chunks.append(DeleteMany(ctx.collections.chunks, Q.chunks_stored_before(
            tid, gone["*"], owners=[D.doc_id(tid, d.hex()) for d in digests])))
    if kind == "cp":
        if m_gone and not ns:  # the thread summary this entry's round may have set
            mine.append(DeleteMany(ctx.collections.threads, S.summary_on(tid, cid)))
            summarize.add(tid)
        cp = [D.doc_id(tid, ns, cid)] if m_gone else []
        bl = D.blob_ids(tid, [f for f in fields if whole or gone.get(f, 0) >= at])
        cps += cp
        blobs += bl
    elif m_gone:
        if not ns:  # the summary this entry's round may have made (its writes alone: no
            # checkpoint, cid None) or set back on the deleted checkpoint
            mine += [DeleteMany(ctx.collections.threads, f)
                     for f in S.summary_on_writes_of(tid, cid)]
            summarize.add(tid)  # (also one whose pw_cid is the deleted checkpoint)
        writes += [D.doc_id(tid, *split_field(f)) for f in fields]  # per-write documents
        # and the entry's call documents (durable/write_groups.py), whose _id holds the
        # call's seq: those of the deleted checkpoint's tasks stored before the delete
        tasks = sorted({split_field(f)[2] for f in fields})
        at_gone = max(gone.get("*", 0), gone.get(m, 0))
        mine.append(DeleteMany(ctx.collections.writes, G.calls_stored_before(
            tid, ns, cid, tasks, at_gone)))
        # the chunks of call documents (their _id holds the seq), with any other
        # chunks of the deleted checkpoint stored before its delete
        chunks.append(DeleteMany(ctx.collections.chunks, Q.chunks_stored_before(
            tid, at_gone, checkpoint=(ns, cid))))
    deletes[0].extend(mine)
    deletes[1].extend(chunks)


def bulk_ignoring_newer(collection: str, requests: list[WriteModel]) -> Plan[None]:
    """Unordered bulk write that ignores duplicate-key errors (a newer value is stored:
    pending writes are insert-once); other write errors raise ``BulkWriteFailed``."""
    try:
        yield BulkWrite(collection, requests)
    except BulkWriteFailed as exc:
        if not exc.only_duplicates():
            raise


def insert_else_upsert(collection: str, docs: list[Doc],
                       upsert: Callable[[Doc], WriteModel], *, ignore_newer: bool = False,
                       decode: Callable[[Doc], Doc] | None = None) -> Plan[None]:
    """Write ``docs`` with the outcome of their upserts (``upsert(doc)``) at the cost of
    inserts: one unordered bulk of ``InsertDoc``; only the documents already stored
    (duplicate key: a replayed outbox entry, another flusher's copy, a re-sent item) get
    their upsert, in a second bulk write. A server answers an insert without first
    querying for the document: SecantusDB takes 0.06-0.43 ms per inserted document
    against 0.45-1.08 ms per upsert (0-3 secondary indexes, measured).
    ``ignore_newer``: the upserts may fail with a duplicate key when a newer value is
    stored (``bulk_ignoring_newer``). ``decode``: reads a document of ``docs`` back as a
    dict for its upsert (``Context.docs.decode``, when they were encoded). Other write
    errors raise ``BulkWriteFailed``."""
    if not docs:
        return
    try:
        yield BulkWrite(collection, [InsertDoc(d) for d in docs])
        return
    except BulkWriteFailed as exc:
        if not exc.only_duplicates():
            raise
        again = [upsert(decode(docs[i]) if decode else docs[i]) for i in exc.duplicates()]
    if ignore_newer:
        yield from bulk_ignoring_newer(collection, again)
    else:
        yield BulkWrite(collection, again)
