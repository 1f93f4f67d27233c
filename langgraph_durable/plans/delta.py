"""``get_delta_channel_history`` from storage: walk the parent chain only as far as each
channel's nearest stored value (its seed), mirroring ``InMemorySaver``.

While the chain is in Redis one Lua script walks it (one round trip for up to
``REDIS_STEPS`` ancestors). Where it leaves Redis, the walk continues in MongoDB a batch of
``MONGO_BATCH`` ancestors per round (checkpoints, then their writes and seed blobs).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langgraph.checkpoint.base import DeltaChannelHistory

from ..context import Context
from ..drivers import Mongo, Parallel, Plan, Script
from ..durable import chunks as C
from ..durable import documents as D
from ..records import SEP, Typed, WriteRecord, member, split_field, unpack_blob
from .read import merge_writes, writes_of

REDIS_STEPS = 512
MONGO_BATCH = 64


class _Walk:
    """Accumulates writes and seeds along the chain, newest ancestor first."""

    def __init__(self, ctx: Context, channels: Sequence[str]) -> None:
        self.serde = ctx.serde
        self.channels = list(channels)
        self.open = set(channels)
        self.collected: dict[str, list[Any]] = {ch: [] for ch in channels}
        self.seeds: dict[str, Any] = {}

    def visit(self, writes: dict[tuple[str, int], WriteRecord],
              seeds: dict[str, Typed]) -> None:
        """One ancestor: its writes for still-open channels, then close seeded channels."""
        for w in sorted(writes.values(), key=WriteRecord.sort_key, reverse=True):
            if w.channel in self.open:
                self.collected[w.channel].append(
                    (w.task_id, w.channel, self.serde.loads_typed(w.value)))
        for ch, typed in seeds.items():
            if ch in self.open:
                self.seeds[ch] = self.serde.loads_typed(typed)
                self.open.discard(ch)

    def result(self) -> dict[str, DeltaChannelHistory]:
        out: dict[str, DeltaChannelHistory] = {}
        for ch in self.channels:
            entry: DeltaChannelHistory = {"writes": list(reversed(self.collected[ch]))}
            if ch in self.seeds:
                entry["seed"] = self.seeds[ch]
            out[ch] = entry
        return out


def delta_history_plan(ctx: Context, thread_id: str, ns: str, checkpoint_id: str | None,
                       channels: Sequence[str]) -> Plan:
    """Per-channel ``{"writes": [...], "seed": value}`` along the parent chain of the
    checkpoint (latest of the namespace when ``checkpoint_id`` is None)."""
    walk = _Walk(ctx, channels)
    if checkpoint_id is None:
        from .read import page_plan

        page = yield from page_plan(ctx, thread_id, ns, count=1, hot_first=True)
        if not page.tuples:
            return walk.result()
        checkpoint_id = page.tuples[0].config["configurable"]["checkpoint_id"]
    keys = ctx.keys(thread_id)
    cursor: str | None = checkpoint_id
    in_redis, skip_cursor = True, True  # the target itself is not part of the chain
    while cursor and walk.open:
        if in_redis:
            status, rows, nxt = yield Script(
                "chain", keys.all, [ns, cursor, REDIS_STEPS, *sorted(walk.open)])
            nxt = nxt.decode() if isinstance(nxt, bytes) else nxt
            for _cid, _cv, wv, seeds, missing in rows:
                found = {split_field(seeds[i])[1]: unpack_blob(seeds[i + 1], "chain")
                         for i in range(0, len(seeds), 2)}
                if missing:
                    docs = yield Mongo(ctx.collections.blobs, "find", (
                        {"_id": {"$in": D.blob_ids(thread_id, [f.decode() for f in missing])}},))
                    docs = yield from C.load_plan(ctx.collections.chunks, docs)
                    for d in docs:
                        f, v = D.blob_value_of(d)
                        if v is not None:
                            found[split_field(f)[1]] = v
                walk.visit(writes_of(wv, f"redis thread {thread_id!r}"),
                           {ch: v for ch, v in found.items() if v is not None})
            if status == 0:
                break
            if status == 4:  # the target is not in Redis: start from its MongoDB record
                in_redis, cursor, skip_cursor = False, nxt, True
            elif status == 1:
                in_redis, cursor, skip_cursor = False, nxt, False
            else:  # 2 (a blob was looked up) or 3 (step limit): go on from that ancestor
                cursor, skip_cursor = nxt, True
            continue
        cursor = yield from _mongo_segment(ctx, thread_id, ns, cursor, skip_cursor, walk)
        skip_cursor = False
    return walk.result()


def _mongo_segment(ctx: Context, thread_id: str, ns: str, cursor: str, skip_cursor: bool,
                   walk: _Walk) -> Plan:
    """Walk up to ``MONGO_BATCH`` ancestors from ``cursor`` in MongoDB; return the next id
    to visit (None at the root or when every channel has its seed)."""
    cols = ctx.collections
    docs = yield Mongo(cols.checkpoints, "find", (
        {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": {"$lte": cursor}},),
        {"projection": {"checkpoint_id": 1, "parent_checkpoint_id": 1, "blob_fields": 1},
         "sort": [("checkpoint_id", -1)], "limit": MONGO_BATCH + 1})
    by_id = {d["checkpoint_id"]: d for d in docs}
    chain: list[dict] = []
    cur: str | None = by_id[cursor].get("parent_checkpoint_id") if (
        skip_cursor and cursor in by_id) else (None if skip_cursor else cursor)
    while cur is not None and cur in by_id:
        chain.append(by_id[cur])
        cur = by_id[cur].get("parent_checkpoint_id")
    if not chain:
        return None
    cids = [d["checkpoint_id"] for d in chain]
    fields = sorted({f"{ns}{SEP}{ch}{SEP}{ver}" for d in chain for ch, ver in d["blob_fields"]
                     if ch in walk.open})
    wdocs, bdocs, parts = yield Parallel([
        Mongo(cols.writes, "find", ({"thread_id": thread_id, "checkpoint_ns": ns,
                                     "checkpoint_id": {"$in": cids}},)),
        Mongo(cols.blobs, "find", ({"_id": {"$in": D.blob_ids(thread_id, fields)}},)),
        Script("parts", ctx.keys(thread_id).all,
               [len(cids), *(member(ns, c) for c in cids), *fields]),
    ])
    loaded = yield from C.load_plan(cols.chunks, wdocs + bdocs)  # one query for both
    wdocs, bdocs = loaded[:len(wdocs)], loaded[len(wdocs):]
    writes: dict[str, dict[tuple[str, int], WriteRecord]] = {c: {} for c in cids}
    for d in wdocs:
        w = D.write_of(d)
        writes[d["checkpoint_id"]][(w.task_id, w.idx)] = w
    for c, raw in zip(cids, parts[0]):
        merge_writes(writes[c], writes_of(raw, f"redis thread {thread_id!r}"))
    blobs: dict[str, Typed | None] = {}
    for d in bdocs:
        f, v = D.blob_value_of(d)
        blobs[f] = v
    for f, raw in zip(fields, parts[1]):
        if raw is not None:
            blobs[f] = unpack_blob(raw, f"redis blob {f!r}")
    for d in chain:
        if not walk.open:
            return None
        seeds = {}
        for ch, ver in d["blob_fields"]:
            typed = blobs.get(f"{ns}{SEP}{ch}{SEP}{ver}")
            if ch in walk.open and typed is not None:
                seeds[ch] = typed
        walk.visit(writes[d["checkpoint_id"]], seeds)
    return cur
