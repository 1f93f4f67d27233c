"""The outbox's streams as the flusher sees them: reading, claiming and acknowledging
entries across every partition (``hot/keys.py``: one stream per partition,
each in the slot of its threads).

With one partition each step is one command, as before partitions existed (a blocking
``XREADGROUP`` waits for new entries). With several, each step is one pipeline of one
command per stream (a cluster pipeline sends each to its node), and after a round that
found nothing the flusher waits ``flush_interval_s`` before the next (``Flusher._steps``:
a wait ``stop()`` and ``wake()`` end at once). Acknowledging is one ``ACK_SETTLE`` script
per partition, each atomic in its slot.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Set as AbstractSet
from typing import Any

from ..core.ops import GatedRead, Op, Parallel, Pipeline, Plan, ReadGate, StreamEntry
from ..core.outbox_entry import COUNTED_FIELD, OutboxEntry
from ..hot.keys import CONSUMER_GROUP
from ..hot.scripts import ack_settle_op
from ..plans.context import Context

Parsed = tuple[bytes, str, OutboxEntry]
"""An outbox entry read: ``(entry id, thread_id, the entry)``."""
Taken = tuple[str, StreamEntry]
"""An entry with the stream it was read from."""


def _share(ctx: Context, n: int) -> int:
    """Entries asked of each stream for a round of ``n``."""
    return max(1, -(-n // len(ctx.outboxes)))


def read_plan(ctx: Context, consumer: str, n: int, start: str, *,
              block_ms: int = 0, gate: ReadGate | None = None) -> Plan[list[Taken]]:
    """``XREADGROUP`` from every stream: ``start`` ``"0"`` = this consumer's pending
    entries, ``">"`` = new ones (with one stream, Redis waits up to ``block_ms`` when
    there are none, a wait ``gate`` can end: ``GatedRead``; with several, nothing waits
    here: the flusher waits between rounds, a wait its ``stop()`` and ``wake()`` end)."""
    streams = ctx.outboxes
    head = ["XREADGROUP", "GROUP", CONSUMER_GROUP, consumer, "COUNT", _share(ctx, n)]
    if len(streams) == 1:
        block = ["BLOCK", block_ms] if block_ms > 0 and start == ">" else []
        command = head + block + ["STREAMS", streams[0], start]
        (entries,) = yield GatedRead([command], gate=gate) if block else Pipeline([command])
        return [(streams[0], e) for e in entries]
    replies = yield Pipeline([head + ["STREAMS", s, start] for s in streams])
    return [(s, e) for s, entries in zip(streams, replies) for e in entries]


def claim_plan(ctx: Context, consumer: str, n: int) -> Plan[list[Taken]]:
    """``XAUTOCLAIM`` of entries idle over ``claim_idle_s`` in every stream."""
    idle_ms = int(ctx.config.claim_idle_s * 1000)
    streams = ctx.outboxes
    replies = yield Pipeline([["XAUTOCLAIM", s, CONSUMER_GROUP, consumer, idle_ms, "0-0",
                               "COUNT", _share(ctx, n)] for s in streams])
    return [(s, e) for s, entries in zip(streams, replies) for e in entries]


def counted(taken: list[Taken]) -> set[tuple[str, bytes]]:
    """``(stream, entry id)`` of the entries of ``taken`` whose counts were lowered before
    (field ``COUNTED_FIELD`` ``1``: a replayed ``settle`` dead letter, ``outbox.dead``)."""
    return {(s, eid) for s, (eid, fields) in taken if fields.get(COUNTED_FIELD) == b"1"}


def held(taken: list[Taken]) -> tuple[dict[str, dict[bytes, Any]], set[tuple[str, bytes]]]:
    """What a round keeps of its read until it acknowledges: each entry's fields by stream
    and entry id (dicts of text and bytes, which Python's garbage collector does not
    track, where ``taken`` holds two tuples an entry) and ``counted(taken)``."""
    raw: dict[str, dict[bytes, Any]] = {}
    for stream, (eid, fields) in taken:
        raw.setdefault(stream, {})[eid] = fields
    return raw, counted(taken)


def ack_plan(ctx: Context, parsed: list[Parsed], done: AbstractSet[tuple[str, bytes]] = frozenset()
             ) -> Plan[tuple[list[bool], int, dict[str, tuple[str, bool]]]]:
    """Acknowledge and delete the written entries, lower their threads' ``dirty`` counts
    (not for the entries ``done`` names, ``(stream, entry id)``: counted before, see
    ``counted``), give settled threads their TTL (``hot_ttl_s``) and trim their hot window
    (``hot_max_checkpoints``): one atomic ``ACK_SETTLE`` per partition (run together).
    Returns ``(acked, outbox length, unsettled)``: one flag per entry of ``parsed``, False
    when another consumer had acknowledged it first; thread -> (error, lowered) for each
    thread whose settle failed (a damaged key; its entries are acknowledged all the
    same), ``lowered`` True when its counts were lowered before the failure."""
    cfg = ctx.config
    per_stream: dict[str, dict[str, list[tuple[bytes, str, bool]]]] = defaultdict(
        lambda: defaultdict(list))
    for eid, tid, entry in parsed:
        stream = ctx.outbox_of(tid)
        per_stream[stream][tid].append((eid, entry.member, (stream, eid) in done))
    ops: list[Op[Any]] = [
        ack_settle_op(stream, CONSUMER_GROUP, cfg.hot_ttl_s, cfg.hot_max_checkpoints,
                      [(ctx.keys(tid).all, entries) for tid, entries in threads.items()])
        for stream, threads in per_stream.items()]
    replies = (yield Parallel(ops)) if len(ops) > 1 else [(yield ops[0])]
    by_id: dict[bytes, bool] = {}
    length = 0
    unsettled: dict[str, tuple[str, bool]] = {}
    for threads, reply in zip(per_stream.values(), replies):
        ids = [eid for entries in threads.values() for eid, _, _ in entries]
        by_id.update(zip(ids, reply.acked))
        length += reply.outbox_length
        names = list(threads)
        unsettled.update({names[i]: (f"settle failed: {e}", i in reply.counted)
                          for i, e in reply.unsettled.items()})
    if len(ctx.outboxes) > 1:  # the others' lengths too
        sizes = yield Pipeline([["XLEN", s] for s in ctx.outboxes])
        length = sum(int(x) for x in sizes)
    return [by_id[eid] for eid, _, _ in parsed], length, unsettled
