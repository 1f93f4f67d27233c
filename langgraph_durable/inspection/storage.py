"""Direct reads of both tiers for the CLI: which threads exist, their sizes and latest
checkpoint, outbox and memory figures. Read only; writes go through the saver."""

from __future__ import annotations

import dataclasses
import time
from collections import defaultdict
from typing import Any

import redis.exceptions
from pymongo.errors import OperationFailure

from ..admin.referrers import collections_of_threads
from ..core.records import SEP, CheckpointRecord
from ..durable.chunks import load_plan
from ..durable.documents import Collections, record_of
from ..durable.footprint_queries import size_per_thread
from ..hot.keys import CONSUMER_GROUP, heartbeats_key, prefix_pattern, thread_keys_of
from ..io.drivers import Clients, run_sync
from ..outbox.flusher import dead_letter_key
from ..plans.context import Context
from .versions import version_of


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def thread_exists(ctx: Context, clients: Clients, thread_id: str) -> bool:
    """True when either tier holds a checkpoint of ``thread_id``."""
    if clients.redis.zcard(ctx.keys(thread_id).idx):
        return True
    return clients.db[ctx.collections.checkpoints].find_one(
        {"thread_id": thread_id}, {"_id": 1}) is not None


def loaded(db: Any, cols: Collections, docs: list[dict]) -> list[dict]:
    """``docs`` with their chunked fields reassembled (``chunks.load_plan``) from ``db``."""
    return run_sync(load_plan(cols.chunks, docs), Clients(None, db, {}))  # type: ignore[no-any-return]


def thread_durable_bytes(ctx: Context, db: Any, thread_ids: list[str] | None = None
                         ) -> dict[str, dict[str, int]]:
    """Per thread (all, or only ``thread_ids``): its MongoDB checkpoint count and the BSON
    size of all its documents (every collection of ``admin/referrers.py``: checkpoints,
    blobs, writes, items, effects; and chunks), bytes."""
    cols = ctx.collections
    out: dict[str, dict[str, int]] = {}
    for name in (getattr(cols, kind) for kind in collections_of_threads()):
        for d in db[name].aggregate(size_per_thread(thread_ids)):
            row = out.setdefault(d["_id"], {"checkpoints": 0, "bytes": 0})
            row["bytes"] += int(d["bytes"])
            if name == cols.checkpoints:
                row["checkpoints"] = int(d["n"])
    return out


def latest_record(ctx: Context, clients: Clients, thread_id: str,
                  hot_members: list[str]) -> CheckpointRecord | None:
    """The newest checkpoint record of the thread's root namespace (any namespace if it has
    no root checkpoint), from Redis when it holds it, else MongoDB; channel values are not
    read."""
    col = clients.db[ctx.collections.checkpoints]
    for ns_filter in ("", None):
        hot = [m for m in hot_members if ns_filter is None or m.split(SEP)[0] == ns_filter]
        q: dict[str, Any] = {"thread_id": thread_id}
        if ns_filter is not None:
            q["checkpoint_ns"] = ns_filter
        doc = col.find_one(q, sort=[("checkpoint_id", -1)])
        best_hot = max(hot, key=lambda m: m.split(SEP)[1], default=None)
        if best_hot and (doc is None or best_hot.split(SEP)[1] >= doc["checkpoint_id"]):
            keys = ctx.keys(thread_id)
            raw, cv = clients.redis.hget(keys.cp, best_hot), clients.redis.hget(keys.cv, best_hot)
            if raw and cv:
                ns, cid = best_hot.split(SEP)
                return CheckpointRecord.unpack(ns, cid, raw, cv)
        if doc is not None:
            return record_of(loaded(clients.db, ctx.collections, [doc])[0])
    return None


def thread_hot_bytes(ctx: Context, r: Any, thread_ids: list[str]) -> dict[str, int]:
    """Per thread: Redis ``MEMORY USAGE`` of its keys (its effect journal too) summed
    (bytes), in one pipeline."""
    pipe = r.pipeline(transaction=False)
    counts = []
    for tid in thread_ids:
        keys = [*ctx.keys(tid).all, ctx.keys(tid).fx]
        counts.append(len(keys))
        for k in keys:
            pipe.memory_usage(k)
    sizes = iter(pipe.execute())
    return {tid: sum(int(next(sizes) or 0) for _ in range(n))
            for tid, n in zip(thread_ids, counts)}


def all_threads(saver: Any, page_size: int = 20_000) -> list[Any]:
    """Every thread of ``saver.list_threads``, in ``thread_id`` order. Each page costs a
    SCAN of the key prefix and an aggregation over every checkpoint, so pages are large
    (``page_size``): 10,000 threads are one page, not twenty."""
    out, cursor = [], None
    while True:
        page = saver.list_threads(limit=page_size, cursor=cursor)
        out += page.threads
        if page.next_cursor is None:
            return out
        cursor = page.next_cursor


def thread_rows(saver: Any, clients: Clients, serde: Any) -> list[dict[str, Any]]:
    """One row per thread in either tier (``DurableSaver.list_threads``): ``thread_id``,
    ``checkpoints`` (both tiers, each once), ``last_activity`` (UTC, from the newest
    checkpoint id), ``step``/``source``/``metadata``/``updated``/``state_version`` (None:
    unversioned; ``versions.version_of``) of the latest root checkpoint, ``hot_bytes``
    (Redis MEMORY USAGE of its keys) and ``durable_bytes``
    (BSON size of its documents). Newest update first."""
    ctx, r, db = saver.context, clients.redis, clients.db
    durable = thread_durable_bytes(ctx, db)
    rows = []
    for info in all_threads(saver):
        tid = info.thread_id
        keys = ctx.keys(tid)
        members = [_text(m) for m in r.zrange(keys.idx, 0, -1)] if info.in_redis else []
        hot_bytes = thread_hot_bytes(ctx, r, [tid])[tid]
        rec = latest_record(ctx, clients, tid, members)
        md: dict[str, Any] = {}
        ts = None
        if rec is not None:
            md = serde.loads_typed(rec.metadata) or {}
            ts = (serde.loads_typed(rec.checkpoint) or {}).get("ts")
        rows.append({
            "thread_id": tid, "checkpoints": info.checkpoints, "step": md.get("step"),
            "source": md.get("source"), "updated": ts,
            "last_activity": info.last_activity.isoformat() if info.last_activity else None,
            "latest": rec.checkpoint_id if rec else None, "metadata": md,
            "state_version": version_of(md),
            "hot_bytes": hot_bytes, "durable_bytes": durable.get(tid, {}).get("bytes", 0),
        })
    rows.sort(key=lambda row: str(row["updated"] or row["last_activity"] or ""), reverse=True)
    return rows


# --------------------------------------------------------------------------- status


def outbox_status(ctx: Context, r: Any) -> dict[str, Any]:
    """Outbox length, pending entries per consumer (XPENDING, with XINFO idle times and
    its heartbeat: ``"alive"``, ``"lapsed"`` (dead: live flushers claim what it holds), or
    None for a consumer that never beat), oldest unflushed entry's age (seconds) and the
    dead-letter count; summed over the outbox partitions (``stream`` names them all).
    A dead-letter stream of another type gives ``dead_letters`` None and
    ``dead_letter_error`` saying so (the other figures are still read)."""
    dead_key = dead_letter_key(ctx)
    dead_n, dead_error = None, None
    try:
        dead_n = int(r.xlen(dead_key))
    except redis.exceptions.ResponseError as exc:
        if not str(exc).startswith("WRONGTYPE"):
            raise
        dead_error = (f"the dead-letter stream {dead_key} holds another type than a "
                      "stream: flushers cannot set entries aside; rename or delete it")
    out: dict[str, Any] = {"stream": ctx.outbox,
                           "length": sum(int(r.xlen(s)) for s in ctx.outboxes),
                           "pending": 0, "consumers": [], "oldest_age_s": None,
                           "dead_letters": dead_n, "dead_letter_stream": dead_key,
                           "dead_letter_error": dead_error}
    per: dict[str, int] = defaultdict(int)
    idle: dict[str, int] = {}
    oldest_ms: list[int] = []
    for stream in ctx.outboxes:
        try:
            summary = r.xpending(stream, CONSUMER_GROUP)
            out["pending"] += int(summary["pending"])
            for c in r.xinfo_consumers(stream, CONSUMER_GROUP):
                name = _text(c["name"])
                idle[name] = min(idle.get(name, 1 << 62), int(c.get("idle", 0)))
            for c in summary.get("consumers") or []:
                per[_text(c["name"])] += int(c["pending"])
        except redis.exceptions.ResponseError:
            pass  # no stream or no group yet: nothing pending
        oldest = r.xrange(stream, "-", "+", count=1)
        if oldest:
            oldest_ms.append(int(_text(oldest[0][0]).split("-")[0]))
    beats = heartbeats(ctx, r)
    out["consumers"] = [{"name": n, "pending": per.get(n, 0), "idle_s": idle[n] / 1000,
                         "heartbeat": beats.get(n)} for n in sorted(idle)]
    if oldest_ms:
        out["oldest_age_s"] = max(0.0, time.time() - min(oldest_ms) / 1000)
    return out


def heartbeats(ctx: Context, r: Any) -> dict[str, str]:
    """Each member of the heartbeat registry (``outbox/heartbeat.py``): ``"alive"`` or
    ``"lapsed"``, by the clock of the Redis server holding it."""
    key = heartbeats_key(ctx.config.key_prefix)
    now_s, now_us = r.eval("return redis.call('TIME')", 1, key)  # the registry's server
    now_ms = int(now_s) * 1000 + int(now_us) // 1000
    return {_text(m): "alive" if float(score) >= now_ms else "lapsed"
            for m, score in r.zrange(key, 0, -1, withscores=True)}


def hot_memory(ctx: Context, r: Any) -> dict[str, Any]:
    """Redis memory of this key prefix (sum of MEMORY USAGE, bytes), its key and thread
    counts, and the server's ``used_memory`` (bytes)."""
    prefix = ctx.config.key_prefix
    total = keys = threads = 0
    batch: list[Any] = []

    def measure() -> int:
        pipe = r.pipeline(transaction=False)
        for k in batch:
            pipe.memory_usage(k)
        return sum(int(x or 0) for x in pipe.execute())

    for k in r.scan_iter(match=prefix_pattern(prefix), count=1000):
        keys += 1
        thread = thread_keys_of(prefix, _text(k))
        threads += thread is not None and thread.idx == _text(k)
        batch.append(k)
        if len(batch) >= 500:
            total += measure()
            batch = []
    if batch:
        total += measure()
    info = r.info("memory")
    return {"bytes": total, "keys": keys, "threads": threads,
            "server_used_memory": int(info.get("used_memory", 0)),
            "maxmemory_policy": _text(info.get("maxmemory_policy", "?"))}


def durable_sizes(ctx: Context, db: Any) -> dict[str, Any]:
    """Per collection of the deployment (every field of ``Collections``: checkpoints,
    blobs, writes, meta, chunks, items, tombstones, effects, store, audit, threads), keyed by kind:
    documents, data size, storage size and index size (bytes); ``"total"`` sums them (a figure
    None when collStats was refused for some collection)."""
    cols = ctx.collections
    out: dict[str, Any] = {}
    for kind in (f.name for f in dataclasses.fields(cols)):
        name = getattr(cols, kind)
        try:
            s = db.command("collStats", name)
            out[kind] = {"collection": name, "documents": int(s.get("count", 0)),
                         "size": int(s.get("size", 0)),
                         "storage_size": int(s.get("storageSize", 0)),
                         "index_size": int(s.get("totalIndexSize", 0))}
        except OperationFailure:  # collStats refused (permissions, serverless): count only
            out[kind] = {"collection": name,
                         "documents": db[name].estimated_document_count(),
                         "size": None, "storage_size": None, "index_size": None}
    rows = list(out.values())
    out["total"] = {"collection": "total", "documents": sum(r["documents"] for r in rows),
                    **{f: None if any(r[f] is None for r in rows) else sum(r[f] for r in rows)
                       for f in ("size", "storage_size", "index_size")}}
    return out
