"""One flush round as a sans-I/O plan (``flush_batch_plan``): take outbox entries (own
pending ones, those of dead flushers, idle ones claimed, new ones), copy what they name
from Redis to MongoDB (inserts, upserts for documents already there), take back what a
delete overtook, acknowledge; and what the next round takes besides new entries
(``RoundChoice``). ``flusher.Flusher`` runs rounds in a loop.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import redis.exceptions
from bson.errors import InvalidDocument
from pymongo.errors import DocumentTooLarge

from ..core.ops import BulkWriteFailed, Pipeline, Plan
from ..core.outbox_entry import OutboxEntry
from ..core.records import SEP, CheckpointRecord, WriteRecord, unpack_blob
from ..core.store_records import STORE_KIND
from ..durable import chunks as C
from ..durable import documents as D
from ..errors import CorruptRecordError
from ..plans.context import Context
from ..plans.effects import FX_KIND, flush_effects_plan
from ..plans.fence import fence_plan, insert_else_upsert, stream_ms
from ..plans.store import flush_store_plan
from .group import dead_letter_key, ensure_group_plan, upkeep_plan
from .heartbeat import reap_plan
from .streams import Parsed, Taken, ack_plan, claim_plan, dead_letter_plan, read_plan

log = logging.getLogger("langgraph_durable.flusher")


@dataclass
class BatchStats:
    """What one flush round did: entries taken (of which ``reaped`` from dead flushers),
    documents written, seconds of put->MongoDB lag, record bytes written, entries
    dead-lettered, outbox length after the round."""

    entries: int = 0
    documents: int = 0
    max_lag_s: float = 0.0
    lags_s: list[float] = field(default_factory=list)
    bytes_written: int = 0
    dead: int = 0
    outbox_length: int | None = None
    reaped: int = 0

    def add(self, copied: Copied) -> None:
        """Count what one ``_copy`` wrote."""
        self.documents += copied.documents
        self.bytes_written += copied.bytes_written


class Copied(NamedTuple):
    """What ``_copy`` wrote to MongoDB: documents and record bytes."""

    documents: int
    bytes_written: int


POISON = (CorruptRecordError, InvalidDocument, DocumentTooLarge, ValueError, KeyError,
          TypeError, UnicodeDecodeError, BulkWriteFailed)
"""Errors no retry can fix: the entry goes to the dead-letter stream instead of blocking."""


_TRANSIENT_CODES = {6, 7, 89, 91, 189, 262, 9001, 10107, 11600, 11602, 13435, 13436}
"""MongoDB error codes of a server or network in trouble (retry), not of a bad document."""


def _transient(exc: Exception) -> bool:
    """True for a bulk write that failed for reasons a retry can fix (write concern,
    shutdown, step-down); False for a document MongoDB will never take (e.g. too large)."""
    if not isinstance(exc, BulkWriteFailed):
        return False
    return bool(exc.write_concern_errors) or not exc.write_errors or any(
        e.code in _TRANSIENT_CODES for e in exc.write_errors)


def _parse(taken: list[Taken]
           ) -> tuple[list[Parsed], list[tuple[str, bytes, bytes, Exception]]]:
    out: list[Parsed] = []
    bad: list[tuple[str, bytes, bytes, Exception]] = []
    for stream, (eid, fields) in taken:
        try:
            entry = OutboxEntry.of(fields)
            out.append((eid, entry.thread_id, entry))
        except Exception as exc:
            bad.append((stream, eid, fields.get(b"t", b""), exc))
    return out, bad


def flush_batch_plan(ctx: Context, consumer: str, *, block_ms: int, claim: bool,
                     own: bool = True, dead: Sequence[str] = ()) -> Plan[BatchStats]:
    """One flush round: take up to ``flush_batch_size`` entries (own pending first when
    ``own``; then those the ``dead`` consumers hold, flushers whose heartbeat lapsed
    (``heartbeat.reap_plan``); then, when ``claim``, the group's upkeep
    (``group.upkeep_plan``) and claimed idle ones; then new ones, blocking up to
    ``block_ms``), write them to MongoDB, acknowledge. Returns ``BatchStats``. ``own``
    False skips the read of this consumer's pending entries: right only when its last
    round acknowledged all it took."""
    n = ctx.config.flush_batch_size
    try:
        return (yield from _round(ctx, consumer, n, block_ms=block_ms, claim=claim, own=own,
                                  dead=dead))
    except redis.exceptions.ResponseError as exc:
        if "NOGROUP" not in str(exc) and "no longer exists" not in str(exc):
            raise
        # the stream was removed (FLUSHDB, a Redis replaced): make it again
        yield from ensure_group_plan(ctx)
        return BatchStats()


class RoundChoice:
    """What a flusher's next round takes besides new entries (``flush_batch_plan``'s
    ``claim`` and ``own``: ``next()``), from what its last rounds did: its own pending entries at
    start and after a failed round (it may have taken entries it did not acknowledge),
    not after a clean one (which acknowledged all it took); the group's upkeep and idle
    entries claimed from other consumers every ``claim_idle_s / 2`` seconds
    (``ctx.clock``)."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.own = True
        self._last_claim = 0.0

    def next(self) -> tuple[bool, bool]:
        """``(claim, own)`` for the next round's ``flush_batch_plan``."""
        now = self.ctx.clock.monotonic()
        claim = now - self._last_claim >= self.ctx.config.claim_idle_s / 2
        if claim:
            self._last_claim = now
        return claim, self.own

    def succeeded(self) -> None:
        """The round returned: none of its entries is pending on this consumer."""
        self.own = False

    def failed(self) -> None:
        """The round failed: it may have left entries pending on this consumer."""
        self.own = True


def _round(ctx: Context, consumer: str, n: int, *, block_ms: int,
           claim: bool, own: bool, dead: Sequence[str]) -> Plan[BatchStats]:
    # stream replies come normalised: a list of (entry id, {field: value}) per stream
    taken = (yield from read_plan(ctx, consumer, n, "0")) if own else []
    reaped = 0
    if not taken and dead:
        taken = yield from reap_plan(ctx, consumer, dead, n)
        reaped = len(taken)
    if not taken and claim:
        yield from upkeep_plan(ctx)
        taken = yield from claim_plan(ctx, consumer, n)
    if not taken:
        taken = yield from read_plan(ctx, consumer, n, ">", block_ms=block_ms)
    parsed, bad = _parse(taken)
    stats = BatchStats(entries=len(parsed) + len(bad), reaped=reaped)
    if not parsed and not bad:
        return stats
    try:
        for group in (yield from _by_bytes(ctx, parsed)):
            stats.add((yield from _copy(ctx, group)))
    except POISON as exc:
        if _transient(exc):
            raise
        # one entry cannot be written: find it, set it aside, write the others (groups
        # written before are written again, which changes nothing, and counted once)
        stats.documents = stats.bytes_written = 0
        kept = []
        for entry in parsed:
            try:
                stats.add((yield from _copy(ctx, [entry])))
                kept.append(entry)
            except POISON as exc:
                if _transient(exc):
                    raise
                bad.append((ctx.outbox_of(entry[1]), entry[0], entry[1].encode(), exc))
        parsed = kept
    stats.dead = len(bad)
    if bad:
        log.error("%d outbox entries could not be written to MongoDB; moved to %s",
                  len(bad), dead_letter_key(ctx))
        yield from dead_letter_plan(ctx, bad)
    if not parsed:
        return stats
    ids = [eid for eid, _, _ in parsed]
    # A delete may have run between this round's read of the records and its write (a
    # stalled round whose entries another consumer flushed; an entry added after the
    # delete began waiting for the outbox): take back what its tombstones name. Deletes
    # write tombstones before they delete in MongoDB, so this check, after the write, sees
    # every delete that could have been overtaken; before the acknowledgement, so a crash
    # in between leaves the entry to be written and checked again.
    yield from fence_plan(ctx, parsed)
    _, stats.outbox_length = yield from ack_plan(ctx, parsed)
    now_ms = ctx.clock.time_ns() / 1e6
    stats.lags_s = [(now_ms - int(eid.split(b"-")[0])) / 1000 for eid in ids]
    stats.max_lag_s = max(stats.lags_s)
    return stats


ROUND_BYTES = 64 * 1024 * 1024
"""Most record bytes one flush round reads from Redis and writes to MongoDB at a time: a
round's entries are copied in groups up to this size (an entry bigger than it alone), so
``flush_batch_size`` entries of values up to ``max_value_bytes`` never sit in memory at
once."""


def _by_bytes(ctx: Context, parsed: list[Parsed]) -> Plan[list[list[Parsed]]]:
    """``parsed`` cut into groups of at most ``ROUND_BYTES`` record bytes: the sizes the
    entries carry (``plans.write._payload``), else ``HSTRLEN`` of what each entry names
    (one pipeline; entries of older versions); nothing asked for a single entry."""
    if len(parsed) < 2:
        return [parsed]
    sized = [e.size for _, _, e in parsed]
    if all(n is not None for n in sized):
        return _groups(parsed, [n or 0 for n in sized])
    cmds: list[list[Any]] = []
    counts = []
    for _, tid, e in parsed:
        k = ctx.keys(tid)
        if e.kind == "cp":
            cmds += [["HSTRLEN", k.cp, e.member], *(["HSTRLEN", k.bl, f] for f in e.names)]
        else:
            cmds += [["HSTRLEN", k.w, f] for f in e.names]
        cmds += [["HSTRLEN", k.it, d] for d in e.digests]
        counts.append(len(cmds))
    sizes = yield Pipeline(cmds)
    starts = [0, *counts[:-1]]
    return _groups(parsed, [sum(int(n) for n in sizes[a:b]) for a, b in zip(starts, counts)])


def _groups(parsed: list[Parsed], sizes: list[int]) -> list[list[Parsed]]:
    """``parsed`` in order, cut where the next entry's ``sizes`` would take a group past
    ``ROUND_BYTES`` (an entry bigger than it alone)."""
    groups: list[list[Parsed]] = [[]]
    held = 0
    for entry, size in zip(parsed, sizes):
        if groups[-1] and held + size > ROUND_BYTES:
            groups.append([])
            held = 0
        groups[-1].append(entry)
        held += size
    return groups


def _copy(ctx: Context, parsed: list[Parsed]) -> Plan[Copied]:
    """Read the named records from Redis (one pipeline) and write them to MongoDB
    (inserts; the upserts for documents already there: ``insert_else_upsert``); returns
    the documents and record bytes written. Entries of the effect journal go to
    ``plans.effects.flush_effects_plan``, the memory store's to
    ``plans.store.flush_store_plan``."""
    for kind, flush in ((FX_KIND, flush_effects_plan), (STORE_KIND, flush_store_plan)):
        own = [p for p in parsed if p[2].kind == kind]
        if own:
            parsed = [p for p in parsed if p[2].kind != kind]
            written = yield from flush(ctx, own)
            rest = (yield from _copy(ctx, parsed)) if parsed else Copied(0, 0)
            return Copied(written + rest.documents, rest.bytes_written)
    want: dict[str, dict[str, set[Any]]] = defaultdict(lambda: defaultdict(set))
    put_ms: dict[tuple[str, Any], int] = {}  # (thread, member, field or digest) -> time
    for eid, tid, entry in parsed:
        at = stream_ms(eid)
        kind, m, fields, digests = entry.kind, entry.member, entry.names, entry.digests
        for name in (*((m, *fields) if kind == "cp" else fields), *digests):
            put_ms[(tid, name)] = max(put_ms.get((tid, name), 0), at)
        want[tid]["it"].update(digests)
        if kind == "cp":
            want[tid]["cp"].add(m)
            want[tid]["bl"].update(fields)
        else:
            want[tid]["w"].update(fields)
    cmds: list[list[Any]] = []
    plan: list[tuple[str, str, list[str]]] = []
    for tid, kinds in want.items():
        k = ctx.keys(tid)
        for kind, key in (("cp", k.cp), ("cv", k.cv), ("bl", k.bl), ("w", k.w),
                          ("it", k.it)):
            names = sorted(kinds["cp" if kind == "cv" else kind])
            if names:
                cmds.append(["HMGET", key, *names])
                plan.append((tid, kind, names))
    replies = yield Pipeline(cmds)
    got: dict[tuple[str, str], dict[str, Any]] = {}
    for (tid, kind, names), values in zip(plan, replies):
        got[(tid, kind)] = dict(zip(names, values))
    cps: list[dict[str, Any]] = []
    blobs: list[dict[str, Any]] = []
    writes: list[dict[str, Any]] = []
    chunks: list[dict[str, Any]] = []
    items: list[dict[str, Any]] = []
    big = C.THRESHOLD_BYTES  # a value's bytes never outgrow the record holding them: only
    nbytes = 0  # a record bigger than a chunk can make a document that needs chunks

    def add(kind: str, doc: dict[str, Any], raw: bytes, out: list[dict[str, Any]]) -> None:
        if len(raw) > big:
            doc, more = C.split(kind, doc)
            chunks.extend(more)
        out.append(doc)

    for tid in want:
        for d, raw in got.get((tid, "it"), {}).items():
            if raw is not None and isinstance(d, bytes):  # None: deleted since
                add("items", D.item_doc(tid, d, raw, put_ms=put_ms[(tid, d)]), raw, items)
                nbytes += len(raw)
        recs, cvs = got.get((tid, "cp"), {}), got.get((tid, "cv"), {})
        for m, raw in recs.items():
            if raw is None or cvs.get(m) is None:
                continue  # deleted since: nothing to write, nothing to resurrect
            ns, cid = m.split(SEP)
            rec = CheckpointRecord.unpack(ns, cid, raw, cvs[m])
            add("checkpoints", D.checkpoint_doc(tid, rec, put_ms=put_ms[(tid, m)]), raw, cps)
            nbytes += len(rec.checkpoint[1]) + len(rec.metadata[1])
        for f, raw in got.get((tid, "bl"), {}).items():
            if raw is not None:
                value = unpack_blob(raw, f"redis blob {f!r} of thread {tid!r}")
                add("blobs", D.blob_doc(tid, f, value, put_ms=put_ms[(tid, f)]), raw, blobs)
                nbytes += len(value[1]) if value else 0
        for f, raw in got.get((tid, "w"), {}).items():
            if raw is not None:
                ns, cid, _task, _idx = f.split(SEP)
                w = WriteRecord.unpack(raw, f"redis write {f!r} of thread {tid!r}")
                add("writes", D.write_doc(tid, ns, cid, w, put_ms=put_ms[(tid, f)]), raw,
                    writes)
                nbytes += len(w.value[1])
    del got, replies  # the values now live in the documents: hold them once
    cols = ctx.collections
    # chunks before the documents that refer to them; items before the blobs and writes
    # that name them; blobs and writes before the checkpoints that refer to them
    yield from C.write_plan(cols.chunks, chunks)
    yield from insert_else_upsert(cols.items, items, D.upsert_item)
    yield from insert_else_upsert(cols.blobs, blobs, D.upsert)
    yield from insert_else_upsert(cols.writes, writes, D.upsert_write, ignore_newer=True)
    yield from insert_else_upsert(cols.checkpoints, cps, D.upsert)
    return Copied(len(cps) + len(blobs) + len(writes) + len(items), nbytes)
