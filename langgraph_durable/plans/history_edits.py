"""Plans that change stored history: flush-wait, delete_thread, delete_for_runs, prune
(``copy_thread``: ``thread_copy.py``).

No resurrection: each first waits until every outbox entry written before it has reached
MongoDB (``flush_wait_plan``), so no late flush can write back what it removes. After that
wait MongoDB holds every checkpoint, so it is the index these plans query; the same
removals are then applied to Redis. Each leaves a tombstone per checkpoint it removes, in
Redis and then in MongoDB (``tombstones.record_plan``), before it deletes from MongoDB.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Sequence

from ..core.ops import (
    BulkWrite,
    DeleteDoc,
    DeleteMany,
    Doc,
    Find,
    Op,
    Parallel,
    Pipeline,
    Plan,
    Sleep,
    ask,
)
from ..core.outbox_entry import DeadLetter
from ..core.records import member
from ..durable import checkpoint_queries as Q
from ..durable import documents as D
from ..durable import inline as I
from ..durable.summary_docs import summary_of
from ..errors import CorruptRecordError, DeadLetteredError, FlushTimeoutError
from ..hot.keys import TOMBSTONE_TTL_S, dead_letter_key
from ..hot.registry_scripts import forget_op
from ..hot.scripts import collect_items_op, delete_parts_op, delete_thread_op, release_op
from . import summary_upkeep as summaries
from .context import Context
from .effect_journal import delete_thread_effects_plan, remove_effects_plan
from .fence import insert_else_upsert
from .prune_choice import PruneChoice, choice_plan, unreferenced_items
from .thread_registry import forget_plan
from .tombstones import record_plan

log = logging.getLogger("langgraph_durable.saver")


def flush_wait_plan(ctx: Context, timeout_s: float) -> Plan[int]:
    """Wait until every outbox entry present now (in every partition) has been written to
    MongoDB or set aside as a dead letter.

    Works across processes: flushers delete an entry from the stream after MongoDB
    acknowledged it, so "nothing at or below the newest id seen now" means done.
    Raises ``FlushTimeoutError`` after ``timeout_s`` seconds (``ctx.clock``), naming what
    is left. Returns 0 when the outbox was empty, else 1.
    """
    return 1 if (yield from _wait_plan(ctx, timeout_s)) else 0


def _wait_plan(ctx: Context, timeout_s: float) -> Plan[dict[str, str]]:
    """``flush_wait_plan``; returns the newest entry id of each stream at the start
    (``{stream: id}``, only the streams that held entries): what it waited for."""
    streams = ctx.outboxes
    lasts = yield Pipeline([["XREVRANGE", s, "+", "-", "COUNT", 1] for s in streams])
    marks = {s: last[0][0] for s, last in zip(streams, lasts) if last}
    waited = {s: _text(m) for s, m in marks.items()}
    if not marks:
        return waited
    deadline = ctx.clock.monotonic() + timeout_s
    pause = 0.002
    while True:
        lefts = yield Pipeline([["XRANGE", s, "-", m, "COUNT", 1] for s, m in marks.items()])
        marks = {s: m for (s, m), left in zip(marks.items(), lefts) if left}
        if not marks:
            return waited
        if ctx.clock.monotonic() >= deadline:
            sizes = yield Pipeline([["XLEN", s] for s in streams])
            raise FlushTimeoutError(
                f"outbox {ctx.outbox!r} still holds {sum(int(n) for n in sizes)} entries "
                f"after {timeout_s} s (is a flusher running and MongoDB reachable?)"
            )
        yield Sleep(pause)
        pause = min(pause * 2, 0.05)


def _text(v: bytes | str) -> str:
    return v.decode() if isinstance(v, bytes) else v


CLOCK_SKEW_MS = 1000
"""How far apart the clocks of this process and the Redis servers (of a Redis Cluster's
nodes, too) may be for ``flush_plan``: its marks are this process's clock, entry ids
Redis's; it reports dead letters of entries up to this much older than its mark."""


def flush_plan(ctx: Context, timeout_s: float, since_ms: int) -> Plan[int]:
    """``flush()``: wait until every outbox entry present now has left the outbox
    (``flush_wait_plan``), then check that none was dead-lettered.

    Raises ``DeadLetteredError`` naming every dead letter still in the dead-letter stream
    that was set aside since this flush began and holds an entry it waited for (in the
    outbox at its start, however old), or whose original entry was written (its id's
    time: Redis's clock, ms) at or after ``since_ms``: those earlier flushes of the
    caller reported and nobody replayed or dropped since. Both times are this process's
    clock (``ctx.clock``), taken ``CLOCK_SKEW_MS`` earlier. The caller passes as
    ``since_ms`` what its last flush that returned gave (at first: when the caller was
    made), so a dead letter of an entry older than its last green flush, or than itself,
    fails only the flush it was set aside in.
    ``FlushTimeoutError`` as ``flush_wait_plan``; ``CorruptRecordError`` naming the
    dead-letter stream when it holds another type. Returns when this flush began (ms): the
    next ``since_ms``."""
    start_ms = int(ctx.clock.time_ns() // 1_000_000)
    waited = yield from _wait_plan(ctx, timeout_s)
    key = dead_letter_key(ctx.config.key_prefix)
    low, now_low = since_ms - CLOCK_SKEW_MS, start_ms - CLOCK_SKEW_MS
    # a dead letter is added after its entry: its id is no older (one more skew: the
    # dead-letter stream may live on another node than the entry's outbox partition)
    first = max(0, min(low, now_low) - CLOCK_SKEW_MS)
    (entries,) = yield Pipeline([["XRANGE", key, first, "+"]], raise_on_error=False)
    if isinstance(entries, Exception):
        if not str(entries).startswith("WRONGTYPE"):
            raise entries
        raise CorruptRecordError(
            f"the dead-letter stream {key!r} holds another type than a stream: flushers "
            "cannot set entries aside and flush() cannot check them; rename or delete it")
    dead = [d for d in (DeadLetter.of(i, f) for i, f in entries)
            if _entry_ms(d.entry_id) >= low or (
                _entry_ms(d.id) >= now_low and d.stream in waited
                and _id(d.entry_id) <= _id(waited[d.stream]))]
    if dead:
        raise DeadLetteredError([(d.thread_id, d.entry_id, d.error) for d in dead], key)
    return start_ms


def _entry_ms(entry_id: str) -> int:
    head = entry_id.split("-")[0]
    return int(head) if head.isdigit() else 0


def _id(entry_id: str) -> tuple[int, int]:
    """A stream entry id ``<ms>-<seq>`` as a pair that orders as Redis orders ids."""
    ms, _, seq = entry_id.partition("-")
    return (int(ms) if ms.isdigit() else 0, int(seq) if seq.isdigit() else 0)


def delete_thread_plan(ctx: Context, thread_id: str) -> Plan[None]:
    """Remove every checkpoint, blob and write of ``thread_id`` from both tiers, then the
    thread from its registry (``plans/thread_registry.py``)."""
    yield from flush_wait_plan(ctx, ctx.config.delete_flush_timeout_s)
    cols = ctx.collections
    q = {"thread_id": thread_id}
    keys = ctx.keys(thread_id)
    held = yield from ask(Find(cols.checkpoints, q,
                               {"_id": 0, "checkpoint_ns": 1, "checkpoint_id": 1}))
    # Redis first (with tombstones), then MongoDB: a stalled flusher that writes an older
    # copy after the MongoDB delete finds the tombstone and takes its copy out again, and a
    # late write naming a deleted checkpoint is refused
    durable = [member(d["checkpoint_ns"], d["checkpoint_id"]) for d in held]
    deleted = yield from ask(delete_thread_op(
        [*keys.all, keys.gone, ctx.outbox_of(thread_id)], TOMBSTONE_TTL_S, durable))
    at_ms = deleted.deleted_at_ms
    # the tombstones in MongoDB too, before anything leaves it: asked when Redis cannot
    # answer (it lost its data, its tombstones expired); '*' (the whole thread, as in
    # Redis) lets a flush round fence its blobs and items too (plans/fence.py)
    yield from record_plan(ctx, thread_id, [*durable, *deleted.held, "*"], at_ms)
    # gone for every reader before MongoDB loses anything: the registry says 'd' (a
    # complete registry then answers "no such thread" without reading MongoDB), so a
    # delete killed from here on leaves no partly deleted thread to read; a put since
    # made keys again and keeps it registered (REGISTRY_FORGET)
    yield from ask(forget_op(keys.all, ctx.registry_of(thread_id), thread_id))
    # not what a new run on the thread stored since (flushed while this delete ran)
    before = D.stored_before(thread_id, int(at_ms))
    yield Parallel([
        DeleteMany(cols.checkpoints, before),
        DeleteMany(cols.blobs, before),
        DeleteMany(cols.writes, before),
        DeleteMany(cols.items, before),
        DeleteMany(cols.threads, summary_of(thread_id)),  # its summary (set again below
        # when a new run put and flushed since)
    ])
    # chunks after the documents that refer to them (never a document without its
    # chunks), but a new run's: a chunk's put_ms is at least its owners' (durable/chunks.py)
    yield DeleteMany(cols.chunks, before)
    # a new run put (and perhaps flushed, its summary deleted above) since the tombstones:
    # its summary from its latest checkpoint; none left, the summary stays deleted
    yield from summaries.refresh_quietly_plan(ctx, [thread_id])
    yield from delete_thread_effects_plan(ctx, thread_id, int(at_ms))  # its effect journal
    # both tiers hold nothing of it now: out of the thread registry (unless a put since)
    yield from forget_plan(ctx, thread_id)


def _delete_ids(collection: str, ids: Sequence[str], before_ms: int | None = None
                ) -> BulkWrite:
    """One unordered bulk write of ``DeleteDoc`` by ``_id``: each a point lookup on the
    ``_id`` index, all in one round trip (a ``delete_many`` with ``$in`` of thousands of
    ids took seconds on a MongoDB-wire server that scans per value); with ``before_ms``
    only the documents no write stored after it (``put_ms``)."""
    return BulkWrite(collection, [DeleteDoc(Q.id_stored_before(i, before_ms)) for i in ids])


def _remove(ctx: Context, thread_id: str, by_ns: dict[str, list[str]],
            blob_fields: Sequence[str], write_ids: Sequence[str] | None = None,
            spill: Sequence[Doc] = ()) -> Plan[None]:
    """Delete the listed checkpoints (with their writes) and blobs of one thread, both
    tiers: one Redis script, then one bulk delete per collection (run in parallel).
    ``write_ids``: ``_id``s of the listed checkpoints' writes when the caller has them
    (else they are read first, in one query); ``spill``: blobs documents of values inside
    the listed checkpoints' documents that other checkpoints name (``inline.spill_docs``),
    written before anything is deleted."""
    cols = ctx.collections
    members = [member(ns, c) for ns, cids in by_ns.items() for c in cids]
    if not members and not blob_fields:
        return
    if spill:  # small values (never chunked): out of the documents about to go
        yield from insert_else_upsert(cols.blobs, list(spill), D.upsert)
    if write_ids is None and members:
        wdocs = yield from ask(Find(cols.writes, {"thread_id": thread_id},
                                    {"checkpoint_ns": 1, "checkpoint_id": 1}))
        dropped = {(ns, c) for ns, cids in by_ns.items() for c in cids}
        write_ids = [d["_id"] for d in wdocs
                     if (d["checkpoint_ns"], d["checkpoint_id"]) in dropped]
    ops: list[Op[object]] = []
    if members:
        ops.append(_delete_ids(cols.checkpoints, [
            D.doc_id(thread_id, ns, c) for ns, cids in by_ns.items() for c in cids]))
    if write_ids:
        ops.append(_delete_ids(cols.writes, write_ids))
    if blob_fields:
        ops.append(_delete_ids(cols.blobs, D.blob_ids(thread_id, blob_fields)))
    keys = ctx.keys(thread_id)
    at_ms = yield from ask(delete_parts_op(
        [*keys.all, keys.gone, ctx.outbox_of(thread_id)], TOMBSTONE_TTL_S, members,
        blob_fields))
    yield from record_plan(ctx, thread_id, members, at_ms)  # before MongoDB's deletes
    yield from remove_effects_plan(ctx, thread_id, members)  # of tasks run from them
    yield Parallel(ops)
    # their chunks after the documents that refer to them (rarely any: few queries)
    chunk_ops: list[Op[object]] = [
        DeleteMany(cols.chunks, Q.chunks_of_checkpoints(thread_id, ns, cids))
        for ns, cids in by_ns.items() if cids]
    if blob_fields:
        chunk_ops.append(DeleteMany(cols.chunks, Q.chunks_of_owners(
            thread_id, D.blob_ids(thread_id, blob_fields))))
    yield Parallel(chunk_ops)


def delete_for_runs_plan(ctx: Context, run_ids: Sequence[str]) -> Plan[None]:
    """Remove the checkpoints (and their writes) whose metadata ``run_id`` is listed.
    A thread whose found documents are damaged (``CorruptRecordError``) is left as it
    was, the other threads' checkpoints are removed, and then one ``CorruptRecordError``
    names each such thread (``.damaged``: their errors)."""
    if not run_ids:
        return
    yield from flush_wait_plan(ctx, ctx.config.delete_flush_timeout_s)
    docs = yield from ask(Find(ctx.collections.checkpoints, Q.checkpoints_of_runs(run_ids),
                               {"thread_id": 1, "checkpoint_ns": 1, "checkpoint_id": 1,
                                "vals": 1, "put_ms": 1}))
    by_thread: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    spill: dict[str, list[Doc]] = defaultdict(list)
    damaged: dict[str, CorruptRecordError] = {}
    for d in docs:
        tid = d["thread_id"]
        by_thread[tid][d["checkpoint_ns"]].append(d["checkpoint_id"])
        if tid in damaged:
            continue
        try:  # their values stay, as blobs documents (other runs' checkpoints may name them)
            spill[tid] += I.spill_docs(tid, d)
        except CorruptRecordError as exc:
            damaged[tid] = exc
    done = [tid for tid in by_thread if tid not in damaged]
    for tid in done:
        yield from _remove(ctx, tid, by_thread[tid], [], spill=spill[tid])
    yield from summaries.refresh_quietly_plan(ctx, done)
    _raise_damaged("delete_for_runs", list(damaged.values()))


def _raise_damaged(what: str, damaged: list[CorruptRecordError]) -> None:
    """One ``CorruptRecordError`` naming each thread ``what`` left for its damaged
    records (``.damaged``), when there is any; a lone one keeps its attributes."""
    if not damaged:
        return
    for exc in damaged:
        log.warning("%s left thread %r as it was: %s", what, exc.thread_id, exc)
    lone: dict[str, str | None] = {}
    if len(damaged) == 1:
        e = damaged[0]
        lone = {"tier": e.tier, "thread_id": e.thread_id, "key": e.key,
                "checkpoint_ns": e.checkpoint_ns, "checkpoint_id": e.checkpoint_id}
    raise CorruptRecordError.gathered(
        f"{what} did every other thread but left {len(damaged)} thread(s) with damaged "
        "records as they were", damaged, **lone)


STRATEGIES = ("keep_latest", "delete")
"""``prune`` strategies (LangGraph's names)."""


def check_prune(strategy: str, keep_last: int | None, older_than_s: float | None) -> None:
    """Raise ``ValueError`` (before anything is read or removed) for an unknown strategy, a
    ``keep_last`` below 1 or with ``delete``, or a negative or non-finite ``older_than_s``."""
    if strategy not in STRATEGIES:
        raise ValueError(f"prune strategy must be 'keep_latest' or 'delete', got {strategy!r}")
    if keep_last is not None:
        if isinstance(keep_last, bool) or not isinstance(keep_last, int) or keep_last < 1:
            raise ValueError(f"prune keep_last must be an int >= 1, got {keep_last!r}")
        if strategy == "delete":
            raise ValueError("prune keep_last applies to strategy 'keep_latest', not 'delete'")
    if older_than_s is not None and not (0 <= older_than_s < float("inf")):
        raise ValueError(f"prune older_than_s must be seconds >= 0, got {older_than_s!r}")


def prune_plan(ctx: Context, thread_ids: Sequence[str], strategy: str, *,
               keep_last: int | None = None, older_than_s: float | None = None) -> Plan[None]:
    """Retention of ``thread_ids`` in both tiers, after the outbox drained.

    ``keep_latest``: per namespace keep the newest ``keep_last`` checkpoints (default 1)
    and, with ``older_than_s``, also every checkpoint made less than ``older_than_s``
    seconds ago (its time is read from its uuid6 ``checkpoint_id``; a custom id counts as
    new); then, for DeltaChannel, every ancestor of a kept checkpoint back to a stored
    value of each of its delta channels. The rest is dropped with its writes, and so are
    the blobs no kept checkpoint refers to. ``delete``: remove the threads entirely; with
    ``older_than_s`` only those whose newest checkpoint is older than that.

    Each thread costs one read round (checkpoints without their values, blob and write
    identities), one Redis script and one bulk delete per collection, whatever its size.
    A thread whose records are damaged (``CorruptRecordError``, met in its read round,
    before anything of it is removed) is left as it was and the others are pruned; then
    one ``CorruptRecordError`` names each such thread (``.damaged``: their errors).
    """
    check_prune(strategy, keep_last, older_than_s)
    if not thread_ids:
        return
    cutoff = None if older_than_s is None else ctx.clock.time_ns() / 1e9 - older_than_s
    (clock,) = yield Pipeline([["TIME"]])  # items stored after this are never collected
    start_ms = int(clock[0]) * 1000 + int(clock[1]) // 1000
    yield from flush_wait_plan(ctx, ctx.config.delete_flush_timeout_s)
    damaged: list[CorruptRecordError] = []
    for tid in thread_ids:
        try:
            chosen = yield from choice_plan(ctx, tid, strategy, keep_last, cutoff)
        except CorruptRecordError as exc:  # this thread's records only: the others go on
            damaged.append(exc)
            continue
        if chosen is None:
            continue
        if strategy == "delete":
            yield from delete_thread_plan(ctx, tid)
            continue
        yield from _remove(ctx, tid, chosen.checkpoints, chosen.blob_fields,
                           chosen.write_ids, spill=chosen.spill)
        yield from _collect_items_plan(ctx, tid, start_ms)
    _raise_damaged("prune", damaged)


def prune_preview_plan(ctx: Context, thread_ids: Sequence[str], strategy: str, *,
                       keep_last: int | None = None, older_than_s: float | None = None
                       ) -> Plan[dict[str, PruneChoice | None]]:
    """What ``prune_plan`` with the same arguments would remove, per thread (None: a
    thread ``delete`` keeps), read from MongoDB and changing nothing: no flush first, so
    checkpoints still only in the outbox are not counted (they are newer than what
    MongoDB holds: a prune run after they reach it keeps them among the newest and may
    drop more of the older ones). Raises ``ValueError`` for arguments ``prune_plan``
    refuses."""
    check_prune(strategy, keep_last, older_than_s)
    cutoff = None if older_than_s is None else ctx.clock.time_ns() / 1e9 - older_than_s
    out: dict[str, PruneChoice | None] = {}
    for tid in thread_ids:
        out[tid] = yield from choice_plan(ctx, tid, strategy, keep_last, cutoff,
                                                 preview=True)
    return out


def _collect_items_plan(ctx: Context, thread_id: str, start_ms: int) -> Plan[None]:
    """Remove the items of ``thread_id`` that no stored blob or write names any more, in
    both tiers. Runs after the prune removed (and tombstoned) its checkpoints and after the
    outbox drained again, reading what is stored *now*: a put that ran during the prune
    either built on a kept checkpoint (whose values name the items it shares) or was
    refused (its parent was removed); the items it brought were stored after ``start_ms``
    and are never collected. A put may also name an item it did not send (Redis held it):
    then MongoDB's copy does not say so, so Redis removes them only if the thread was not
    written since its writes count was read, before the outbox drained
    (``collect_items_op``; else they stay, for the next prune), and MongoDB only those no
    write stored after ``start_ms``, with their chunks."""
    keys = ctx.keys(thread_id)
    (seen,) = yield Pipeline([["HMGET", keys.meta, "born", "writes"]])
    yield from flush_wait_plan(ctx, ctx.config.delete_flush_timeout_s)
    cols = ctx.collections
    bdocs, wdocs, idocs, cdocs = yield Parallel([
        Find(cols.blobs, Q.manifests_of(thread_id), {"refs": 1}),
        Find(cols.writes, Q.manifests_of(thread_id), {"refs": 1}),
        Find(cols.items, {"thread_id": thread_id}, {"d": 1, "refs": 1, "put_ms": 1}),
        Find(cols.checkpoints, Q.inline_manifests_of(thread_id), {"vals.refs": 1}),
    ])
    inline = [{"refs": I.inline_refs(d)} for d in cdocs]  # manifests inside checkpoints
    gone = unreferenced_items([*bdocs, *wdocs, *inline], idocs, start_ms)
    if not gone:
        return
    seen_text = ":".join(v.decode() if isinstance(v, bytes) else str(v or "") for v in seen)
    if (yield from ask(collect_items_op(keys.meta, keys.it, seen_text, gone))) < 0:
        log.info("prune of thread %r: written while its items were collected; %d unnamed "
                 "items kept for the next prune", thread_id, len(gone))
        return
    ids = [D.doc_id(thread_id, d.hex()) for d in gone]
    yield _delete_ids(cols.items, ids, start_ms)
    # their chunks after them; a chunk's put_ms is at least its item's (durable/chunks.py)
    yield DeleteMany(cols.chunks, Q.chunks_stored_before(thread_id, start_ms, owners=ids))


def release_plan(ctx: Context, thread_id: str) -> Plan[None]:
    """Drop the hot keys of ``thread_id`` once all of it is in MongoDB, so reads go there
    (after ``copy_thread`` or an import wrote history Redis lacks, which the hot keys would
    shadow). A put that lands meanwhile is flushed first, never dropped: the script refuses
    while the thread has unflushed entries, and this plan waits for the outbox and tries
    again, up to ``delete_flush_timeout_s`` (``ctx.clock``; then ``FlushTimeoutError``)."""
    keys = ctx.keys(thread_id)
    deadline = ctx.clock.monotonic() + ctx.config.delete_flush_timeout_s
    while True:
        left = yield from ask(release_op(keys.all, TOMBSTONE_TTL_S))
        if not left:
            return
        if ctx.clock.monotonic() >= deadline:
            raise FlushTimeoutError(
                f"thread {thread_id!r} still has {left} outbox entries not in MongoDB after "
                f"{ctx.config.delete_flush_timeout_s} s; its hot keys were kept")
        yield from flush_wait_plan(ctx, max(0.0, deadline - ctx.clock.monotonic()))
