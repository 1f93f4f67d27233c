"""``get_delta_channel_history`` from storage: walk the parent chain only as far as each
channel's nearest stored value (its seed), mirroring ``InMemorySaver``.

While the chain is in Redis one Lua script walks it (one round trip for up to
``REDIS_STEPS`` ancestors). Where it leaves Redis, the walk continues in MongoDB a batch of
``MONGO_BATCH`` ancestors per round (checkpoints, then their writes and seed blobs).
The plan returns the serialized values it found (``DeltaRecords``); ``decode`` turns
them into LangGraph's ``DeltaChannelHistory`` after the plan.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from langgraph.checkpoint.base import DeltaChannelHistory
from langgraph.checkpoint.serde.base import SerializerProtocol

from ..core.ops import Find, Parallel, Plan, ask
from ..core.records import SEP, Typed, WriteRecord, load_value, member, split_field, unpack_blob
from ..durable import checkpoint_queries as Q
from ..durable import chunks as C
from ..durable import documents as D
from ..durable import inline as I
from ..durable import write_groups as G
from ..hot.scripts import ChainStatus, chain_op, parts_op
from .context import Context
from .damage import hot_checked, missing_values
from .read import (
    RecordPage,
    Writes,
    items_of,
    merge_writes,
    page_plan,
    resolve_items_plan,
    writes_of,
)

REDIS_STEPS = 512
MONGO_BATCH = 64


def _text(v: bytes | str) -> str:
    return v.decode() if isinstance(v, bytes) else v


class DeltaRecords:
    """Writes and seeds along the chain, newest ancestor first, still serialized."""

    def __init__(self, channels: Sequence[str]) -> None:
        self.channels = list(channels)
        self.open = set(channels)
        self.collected: dict[str, list[tuple[str, str, Typed]]] = {ch: [] for ch in channels}
        self.seeds: dict[str, Typed] = {}
        self.items: dict[bytes, Typed] = {}

    def visit(self, writes: Writes, seeds: dict[str, Typed]) -> None:
        """One ancestor: its writes for still-open channels, then close seeded channels."""
        for w in sorted(writes.values(), key=WriteRecord.sort_key, reverse=True):
            if w.channel in self.open:
                self.collected[w.channel].append((w.task_id, w.channel, w.value))
        for ch, typed in seeds.items():
            if ch in self.open:
                self.seeds[ch] = typed
                self.open.discard(ch)

    def values(self) -> list[Typed]:
        """Every serialized value collected (writes and seeds)."""
        return [v for ch in self.channels for _, _, v in self.collected[ch]] + list(
            self.seeds.values())

    def decode(self, serde: SerializerProtocol) -> dict[str, DeltaChannelHistory]:
        """Per channel ``{"writes": [(task_id, channel, value), ...], "seed": value}``,
        oldest write first, decoded with ``serde`` (may download: blocking)."""
        out: dict[str, DeltaChannelHistory] = {}
        for ch in self.channels:
            where = f"delta history of channel {ch!r}"
            entry: DeltaChannelHistory = {"writes": [
                (t, c, load_value(serde, v, self.items, where))
                for t, c, v in reversed(self.collected[ch])]}
            if ch in self.seeds:
                entry["seed"] = load_value(serde, self.seeds[ch], self.items, where)
            out[ch] = entry
        return out


def delta_history_plan(ctx: Context, thread_id: str, ns: str, checkpoint_id: str | None,
                       channels: Sequence[str]) -> Plan[DeltaRecords]:
    """Per-channel writes and seed along the parent chain of the checkpoint (latest of the
    namespace when ``checkpoint_id`` is None), serialized: ``DeltaRecords.decode`` them.
    Damaged records raise ``CorruptRecordError`` naming the thread and the key or
    document (as ``read.page_plan``); an ancestor naming a channel version neither tier
    holds, ``MissingValueError``."""
    return (yield from hot_checked(ctx, thread_id, _history(
        ctx, thread_id, ns, checkpoint_id, channels)))


class VersionedRecords(NamedTuple):
    """``versioned_history_plan``'s answer: the history (``records``) and, when asked
    for, the target checkpoint as read (``target``, a ``read.RecordPage`` of at most one
    row: its metadata holds the stored state version), else None."""

    records: DeltaRecords
    target: RecordPage | None


def versioned_history_plan(ctx: Context, thread_id: str, ns: str, checkpoint_id: str | None,
                           channels: Sequence[str], *, with_target: bool
                           ) -> Plan[VersionedRecords]:
    """``delta_history_plan``, and with ``with_target`` (a state version runs) the
    target checkpoint read first (one more round trip: ``read.page_plan`` of one
    checkpoint), whose metadata tells the state version of the history."""
    target = None
    if with_target:
        target = yield from page_plan(ctx, thread_id, ns, exact=checkpoint_id, count=1,
                                      hot_first=True)
        if checkpoint_id is None and target.rows:
            checkpoint_id = target.rows[0][0].checkpoint_id
    records = yield from delta_history_plan(ctx, thread_id, ns, checkpoint_id, channels)
    return VersionedRecords(records, target)


def _history(ctx: Context, thread_id: str, ns: str, checkpoint_id: str | None,
             channels: Sequence[str]) -> Plan[DeltaRecords]:
    walk = DeltaRecords(channels)
    if checkpoint_id is None:
        page = yield from page_plan(ctx, thread_id, ns, count=1, hot_first=True)
        if not page.rows:
            return walk
        checkpoint_id = page.rows[0][0].checkpoint_id
    keys = ctx.keys(thread_id)
    cursor: str | None = checkpoint_id
    in_redis, skip_cursor = True, True  # the target itself is not part of the chain
    while cursor and walk.open:
        if in_redis:
            chain_reply = yield from ask(chain_op(
                keys.all, ns, cursor, REDIS_STEPS, sorted(walk.open)))
            items_of(thread_id, chain_reply.item_digests, chain_reply.item_values, walk.items)
            status, nxt = chain_reply.status, chain_reply.next
            for row in chain_reply.rows:
                found = {split_field(f)[1]: unpack_blob(v, "chain") for f, v in row.seeds}
                if row.missing:
                    got = yield from _values_plan(ctx, thread_id,
                                                  [f.decode() for f in row.missing])
                    lost = [(_text(row.checkpoint_id), f.decode()) for f in row.missing
                            if f.decode() not in got]
                    if lost:
                        raise missing_values(thread_id, lost)
                    for f, v in got.items():
                        if v is not None:
                            found[split_field(f)[1]] = v
                walk.visit(writes_of(row.write_values, f"redis thread {thread_id!r}"),
                           {ch: v for ch, v in found.items() if v is not None})
            if status is ChainStatus.DONE:
                break
            if status is ChainStatus.TARGET_NOT_IN_REDIS:  # start from its MongoDB record
                in_redis, cursor, skip_cursor = False, nxt, True
            elif status is ChainStatus.LEFT_REDIS:
                in_redis, cursor, skip_cursor = False, nxt, False
            else:  # BLOB_MISSING (looked up above) or STEP_LIMIT: go on from that ancestor
                cursor, skip_cursor = nxt, True
            continue
        cursor = yield from _mongo_segment(ctx, thread_id, ns, cursor, skip_cursor, walk)
        skip_cursor = False
    yield from resolve_items_plan(ctx, thread_id, walk.values(), walk.items)
    return walk


def _values_plan(ctx: Context, thread_id: str, fields: list[str]
                 ) -> Plan[dict[str, Typed | None]]:
    """The stored values of the Redis blob ``fields`` that MongoDB holds (in blobs
    documents or inside checkpoint documents: ``inline.values_op``), by field."""
    docs = yield from ask(I.values_op(ctx.collections, thread_id, fields))
    bdocs, got = I.split_values(docs)
    for d in (yield from C.load_plan(ctx.collections.chunks, bdocs)):
        f, v = D.blob_value_of(d)
        got[f] = v
    return got


def _mongo_segment(ctx: Context, thread_id: str, ns: str, cursor: str, skip_cursor: bool,
                   walk: DeltaRecords) -> Plan[str | None]:
    """Walk up to ``MONGO_BATCH`` ancestors from ``cursor`` in MongoDB; return the next id
    to visit (None at the root or when every channel has its seed)."""
    cols = ctx.collections
    docs = yield from ask(Find(
        cols.checkpoints,
        Q.checkpoints_up_to(thread_id, ns, cursor),
        projection={"checkpoint_id": 1, "parent_checkpoint_id": 1, "blob_fields": 1},
        sort=[("checkpoint_id", -1)], limit=MONGO_BATCH + 1))
    by_id = {link[0]: link for link in map(D.chain_link_of, docs)}
    chain: list[tuple[str, str | None, list[tuple[str, str]]]] = []
    cur: str | None = by_id[cursor][1] if (
        skip_cursor and cursor in by_id) else (None if skip_cursor else cursor)
    while cur is not None and cur in by_id:
        chain.append(by_id[cur])
        cur = by_id[cur][1]
    if not chain:
        return None
    cids = [c for c, _, _ in chain]
    fields = sorted({f"{ns}{SEP}{ch}{SEP}{ver}" for _, _, bf in chain for ch, ver in bf
                     if ch in walk.open})
    wdocs, vdocs, parts = yield Parallel([
        Find(cols.writes, Q.writes_of(thread_id, ns, cids)),
        I.values_op(cols, thread_id, fields) if fields else Find(cols.blobs, D.ids_in([])),
        parts_op(ctx.keys(thread_id).all, [member(ns, c) for c in cids], fields),
    ])
    bdocs, blobs = I.split_values(vdocs)
    loaded = yield from C.load_plan(cols.chunks, wdocs + bdocs)  # one query for both
    wdocs, bdocs = loaded[:len(wdocs)], loaded[len(wdocs):]
    writes: dict[str, Writes] = G.pending_by_checkpoint(wdocs, cids)
    for c, raw in zip(cids, parts.write_values):
        merge_writes(writes[c], writes_of(raw, f"redis thread {thread_id!r}"))
    items_of(thread_id, parts.item_digests, parts.item_values, walk.items)
    for d in bdocs:
        f, v = D.blob_value_of(d)
        blobs[f] = v
    for f, raw in zip(fields, parts.blob_values):
        if raw is not None:
            blobs[f] = unpack_blob(raw, f"redis blob {f!r}")
    for c, _, bf in chain:
        if not walk.open:
            return None
        seeds = {}
        for ch, ver in bf:
            f = f"{ns}{SEP}{ch}{SEP}{ver}"
            if ch in walk.open and f not in blobs:  # an empty value is None, not absent
                raise missing_values(thread_id, [(c, f)])
            typed = blobs.get(f)
            if ch in walk.open and typed is not None:
                seeds[ch] = typed
        walk.visit(writes[c], seeds)
    return cur
