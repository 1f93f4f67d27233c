"""Plans that change stored history: flush-wait, delete_thread, delete_for_runs, prune, copy.

No resurrection: each first waits until every outbox entry written before it has reached
MongoDB (``flush_wait_plan``), so no late flush can write back what it removes. After that
wait MongoDB holds every checkpoint, so it is the index these plans query; the same
removals are then applied to Redis.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from ..context import Context
from ..drivers import Mongo, Parallel, Pipeline, Plan, Script, Sleep
from ..durable import chunks as C
from ..durable import documents as D
from ..errors import FlushTimeoutError
from ..hot.keys import TOMBSTONE_TTL_S
from ..records import blob_field, member


def flush_wait_plan(ctx: Context, timeout_s: float) -> Plan:
    """Wait until every outbox entry present now has been written to MongoDB.

    Works across processes: flushers delete an entry from the stream after MongoDB
    acknowledged it, so "nothing at or below the newest id seen now" means done.
    Raises ``FlushTimeoutError`` after ``timeout_s`` seconds, naming what is left.
    """
    (last,) = yield Pipeline([["XREVRANGE", ctx.outbox, "+", "-", "COUNT", 1]])
    if not last:
        return 0
    mark = last[0][0]
    deadline = time.monotonic() + timeout_s
    pause = 0.002
    while True:
        (left,) = yield Pipeline([["XRANGE", ctx.outbox, "-", mark, "COUNT", 1]])
        if not left:
            return 1
        if time.monotonic() >= deadline:
            (n,) = yield Pipeline([["XLEN", ctx.outbox]])
            raise FlushTimeoutError(
                f"outbox {ctx.outbox!r} still holds {n} entries after {timeout_s} s "
                "(is a flusher running and MongoDB reachable?)"
            )
        yield Sleep(pause)
        pause = min(pause * 2, 0.05)


def delete_thread_plan(ctx: Context, thread_id: str) -> Plan:
    """Remove every checkpoint, blob and write of ``thread_id`` from both tiers."""
    yield from flush_wait_plan(ctx, ctx.config.delete_flush_timeout_s)
    cols = ctx.collections
    q = {"thread_id": thread_id}
    keys = ctx.keys(thread_id)
    # Redis first (with a tombstone), then MongoDB: a stalled flusher that writes an older
    # copy after the MongoDB delete finds the tombstone and takes its copy out again
    yield Script("delete_thread", [*keys.all, keys.gone], [TOMBSTONE_TTL_S])
    yield Parallel([
        Mongo(cols.checkpoints, "delete_many", (q,)),
        Mongo(cols.blobs, "delete_many", (q,)),
        Mongo(cols.writes, "delete_many", (q,)),
    ])
    # chunks after the documents that refer to them (never a document without its chunks)
    yield Mongo(cols.chunks, "delete_many", (q,))


def _remove(ctx: Context, thread_id: str, by_ns: dict[str, list[str]],
            blob_fields: Sequence[str]) -> Plan:
    """Delete the listed checkpoints (with their writes) and blobs of one thread, both tiers."""
    cols = ctx.collections
    ops: list[Any] = []
    chunk_ops: list[Any] = []
    members = []
    for ns, cids in by_ns.items():
        if not cids:
            continue
        members += [member(ns, c) for c in cids]
        ops.append(Mongo(cols.checkpoints, "delete_many", ({"_id": {"$in": [
            D.doc_id(thread_id, ns, c) for c in cids]}},)))
        in_cps = {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": {"$in": cids}}
        ops.append(Mongo(cols.writes, "delete_many", (in_cps,)))
        chunk_ops.append(Mongo(cols.chunks, "delete_many", (in_cps,)))  # checkpoints', writes'
    if blob_fields:
        ids = D.blob_ids(thread_id, blob_fields)
        ops.append(Mongo(cols.blobs, "delete_many", ({"_id": {"$in": ids}},)))
        chunk_ops.append(Mongo(cols.chunks, "delete_many", (
            {"thread_id": thread_id, "owner": {"$in": ids}},)))
    if not ops:
        return
    keys = ctx.keys(thread_id)
    yield Script("delete_parts", [*keys.all, keys.gone],
                 [TOMBSTONE_TTL_S, len(members), *members, *blob_fields])
    yield Parallel(ops)
    yield Parallel(chunk_ops)  # after the documents that refer to them


def delete_for_runs_plan(ctx: Context, run_ids: Sequence[str]) -> Plan:
    """Remove the checkpoints (and their writes) whose metadata ``run_id`` is listed."""
    if not run_ids:
        return
    yield from flush_wait_plan(ctx, ctx.config.delete_flush_timeout_s)
    docs = yield Mongo(ctx.collections.checkpoints, "find",
                       ({"run_id": {"$in": [str(r) for r in run_ids]}},),
                       {"projection": {"thread_id": 1, "checkpoint_ns": 1, "checkpoint_id": 1}})
    by_thread: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for d in docs:
        by_thread[d["thread_id"]][d["checkpoint_ns"]].append(d["checkpoint_id"])
    for tid, by_ns in by_thread.items():
        yield from _remove(ctx, tid, by_ns, [])


def prune_plan(ctx: Context, thread_ids: Sequence[str], strategy: str) -> Plan:
    """``keep_latest``: keep the newest checkpoint of each namespace, plus (DeltaChannel)
    every ancestor back to the nearest one holding a stored value for each delta channel,
    with their writes; drop the rest and the blobs no kept checkpoint refers to.
    ``delete``: remove all checkpoints of the threads."""
    if strategy not in ("keep_latest", "delete"):
        raise ValueError(f"prune strategy must be 'keep_latest' or 'delete', got {strategy!r}")
    if not thread_ids:
        return
    yield from flush_wait_plan(ctx, ctx.config.delete_flush_timeout_s)
    cols = ctx.collections
    for tid in thread_ids:
        if strategy == "delete":
            yield from delete_thread_plan(ctx, tid)
            continue
        docs, bdocs = yield Parallel([
            Mongo(cols.checkpoints, "find", ({"thread_id": tid},),
                  {"projection": {"checkpoint": 0}}),
            Mongo(cols.blobs, "find", ({"thread_id": tid},), {"projection": {"data": 0}}),
        ])
        non_empty = {blob_field(b["checkpoint_ns"], b["channel"], b["version"])
                     for b in bdocs if b["type"] != "empty"}
        all_blobs = {blob_field(b["checkpoint_ns"], b["channel"], b["version"]) for b in bdocs}
        by_ns: dict[str, dict[str, Any]] = defaultdict(dict)
        for d in docs:
            by_ns[d["checkpoint_ns"]][d["checkpoint_id"]] = d
        # the metadata of each namespace's latest checkpoint says which channels are deltas
        latest = [cps[max(cps)] for cps in by_ns.values()]
        for d in (yield from C.load_plan(cols.chunks, latest)):
            by_ns[d["checkpoint_ns"]][d["checkpoint_id"]] = d
        drop: dict[str, list[str]] = {}
        keep_blobs: set[str] = set()
        for ns, cps in by_ns.items():
            keep = _keep_chain(ctx, ns, cps, non_empty)
            drop[ns] = [c for c in cps if c not in keep]
            for c in keep:
                keep_blobs |= {blob_field(ns, ch, v) for ch, v in cps[c]["blob_fields"]}
        yield from _remove(ctx, tid, drop, sorted(all_blobs - keep_blobs))


def _keep_chain(ctx: Context, ns: str, cps: dict[str, Any], non_empty: set[str]) -> set[str]:
    latest = max(cps)
    md = ctx.serde.loads_typed((cps[latest]["metadata_type"], bytes(cps[latest]["metadata"])))
    delta = set((md or {}).get("counters_since_delta_snapshot") or {})
    keep = {latest}
    cur: str | None = latest
    while delta and cur in cps:
        keep.add(cur)
        fields = {ch: blob_field(ns, ch, v) for ch, v in cps[cur]["blob_fields"]}
        delta -= {ch for ch in delta if fields.get(ch) in non_empty}
        cur = cps[cur].get("parent_checkpoint_id")
    return keep


def copy_thread_plan(ctx: Context, source: str, target: str) -> Plan:
    """Copy every checkpoint, blob and write (the whole parent chain) to ``target``."""
    yield from flush_wait_plan(ctx, ctx.config.delete_flush_timeout_s)
    cols = ctx.collections
    q = {"thread_id": source}
    cps, blobs, writes, chunks = yield Parallel([
        Mongo(cols.checkpoints, "find", (q,)),
        Mongo(cols.blobs, "find", (q,)),
        Mongo(cols.writes, "find", (q,)),
        Mongo(cols.chunks, "find", (q,)),
    ])
    if not cps:
        return
    ops = []
    renamed: dict[str, dict] = {}  # source _id -> target document, of those with chunks
    for name, docs, ident in (
        (cols.checkpoints, cps, ("checkpoint_ns", "checkpoint_id")),
        (cols.blobs, blobs, ("checkpoint_ns", "channel", "version")),
        (cols.writes, writes, ("checkpoint_ns", "checkpoint_id", "task_id", "idx")),
    ):
        if not docs:
            continue
        for d in docs:
            old_id = d["_id"]
            d["thread_id"] = target
            d["_id"] = D.doc_id(target, *(d[k] for k in ident))
            if C.has_chunks(d):
                renamed[old_id] = d
        ops.append(Mongo(name, "bulk_write", ([D.upsert(d) for d in docs],), {"ordered": False}))
    # the chunks first, under the target's ids
    yield from C.write_plan(cols.chunks, C.moved(chunks, renamed))
    yield Parallel(ops)
    yield from release_plan(ctx, target)


def release_plan(ctx: Context, thread_id: str) -> Plan:
    """Drop the hot keys of ``thread_id`` once all of it is in MongoDB, so reads go there
    (after ``copy_thread`` or an import wrote history Redis lacks, which the hot keys would
    shadow). A put that lands meanwhile is flushed first, never dropped: the script refuses
    while the thread has unflushed entries, and this plan waits for the outbox and tries
    again, up to ``delete_flush_timeout_s`` (then ``FlushTimeoutError``)."""
    keys = ctx.keys(thread_id)
    deadline = time.monotonic() + ctx.config.delete_flush_timeout_s
    while True:
        left = yield Script("release", keys.all, [TOMBSTONE_TTL_S])
        if not left:
            return
        if time.monotonic() >= deadline:
            raise FlushTimeoutError(
                f"thread {thread_id!r} still has {left} outbox entries not in MongoDB after "
                f"{ctx.config.delete_flush_timeout_s} s; its hot keys were kept")
        yield from flush_wait_plan(ctx, max(0.0, deadline - time.monotonic()))
