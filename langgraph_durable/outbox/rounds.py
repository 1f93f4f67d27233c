"""One flush round as a sans-I/O plan (``flush_batch_plan``): take outbox entries (own
pending ones, those of dead flushers, idle ones claimed, new ones), copy what they name
from Redis to MongoDB (inserts, upserts for documents already there; each entry kind by
its copy plan: ``KINDS``), take back what a delete overtook, acknowledge; and what the
next round takes besides new entries (``RoundChoice``). An entry whose own data fails a
step (``triage.py``: parse, copy, write, fence, settle) is set aside as a dead letter
(``dead.py``) and the round finishes for the others; an error of a tier fails the round,
which ``flusher.Flusher`` retries.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import redis.exceptions

from ..core.ops import Pipeline, Plan, ReadGate
from ..core.outbox_entry import COUNTED_FIELD, OutboxEntry
from ..core.records import SEP, CheckpointRecord, Typed, WriteRecord, unpack_blob
from ..core.store_records import STORE_KIND
from ..durable import chunks as C
from ..durable import documents as D
from ..durable import inline as I
from ..durable import item_docs as IT
from ..durable import write_groups as G
from ..plans import summary_upkeep as summaries
from ..plans.context import Context
from ..plans.effect_journal import FX_KIND, flush_effects_plan
from ..plans.fence import fence_plan, insert_else_upsert, stream_ms
from ..plans.retention_policy import activity_plan
from ..plans.store_items import flush_store_plan
from .dead import Aside, dead_letter_plan
from .group import dead_letter_key, ensure_group_plan, upkeep_plan
from .heartbeat import reap_plan
from .round_summaries import summary_facts_plan
from .streams import Parsed, Taken, ack_plan, claim_plan, held, read_plan
from .triage import check_journal, check_records, check_store, of_entry, raise_tier_errors, step_of

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
    """What a copy plan wrote to MongoDB: documents and record bytes; ``aside``: entries
    it set aside (a damaged key of their thread), not written."""

    documents: int
    bytes_written: int
    aside: tuple[Failed, ...] = ()


Failed = tuple[Parsed, str, Exception | str]
"""An entry a step of the round could not take: ``(entry, step, error)``."""


class EntryKind(NamedTuple):
    """How a round takes one kind of outbox entry: ``check`` raises ``ValueError`` for
    an entry of a shape it cannot copy (set aside at parse); ``copy`` writes a group of
    such entries to MongoDB (kinds with the same ``copy`` are copied together)."""

    check: Callable[[OutboxEntry], None]
    copy: Callable[[Context, list[Parsed]], Plan[Copied]]


def _parse(ctx: Context, taken: list[Taken]) -> tuple[list[Parsed], list[Aside]]:
    """The entries a round can copy, and those it sets aside at once: fields that are
    no entry, an entry in another partition's stream than its thread's, a kind this
    release does not know (written by a newer one), a shape its kind cannot copy."""
    out: list[Parsed] = []
    bad: list[Aside] = []
    partitioned = ctx.partitions > 1
    for stream, (eid, fields) in taken:
        try:
            entry = OutboxEntry.of(fields)
            if partitioned and ctx.outbox_of(entry.thread_id) != stream:
                raise ValueError(f"outbox entry of thread {entry.thread_id!r} is in stream "
                                 f"{stream!r}, not its partition's "
                                 f"{ctx.outbox_of(entry.thread_id)!r}")
            kind = KINDS.get(entry.kind) if isinstance(entry.kind, str) else None
            if kind is None:
                raise ValueError(f"outbox entry of thread {entry.thread_id!r} has kind "
                                 f"{entry.kind!r}, unknown to this release (written by a "
                                 f"newer one?)")
            kind.check(entry)
            out.append((eid, entry.thread_id, entry))
        except Exception as exc:
            bad.append(Aside(stream, eid, fields, "parse", exc))
    return out, bad


def flush_batch_plan(ctx: Context, consumer: str, *, block_ms: int, claim: bool,
                     own: bool = True, dead: Sequence[str] = (),
                     taking: Callable[[], None] | None = None,
                     gate: ReadGate | None = None) -> Plan[BatchStats]:
    """One flush round: take up to ``flush_batch_size`` entries (own pending first when
    ``own``; then those the ``dead`` consumers hold, flushers whose heartbeat lapsed
    (``heartbeat.reap_plan``); then, when ``claim``, the group's upkeep
    (``group.upkeep_plan``) and claimed idle ones; then new ones, blocking up to
    ``block_ms``), write them to MongoDB, acknowledge. Returns ``BatchStats``. ``own``
    False skips the read of this consumer's pending entries: right only when its last
    round acknowledged all it took. ``taking()`` is called once the round has taken
    entries, before any of them is written or acknowledged (``Flusher.settle``); ``gate``
    lets another thread end the read that blocks (``streams.read_plan``)."""
    n = ctx.config.flush_batch_size
    try:
        return (yield from _round(ctx, consumer, n, block_ms=block_ms, claim=claim, own=own,
                                  dead=dead, taking=taking, gate=gate))
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


def _round(ctx: Context, consumer: str, n: int, *, block_ms: int, claim: bool, own: bool,
           dead: Sequence[str], taking: Callable[[], None] | None,
           gate: ReadGate | None) -> Plan[BatchStats]:
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
        taken = yield from read_plan(ctx, consumer, n, ">", block_ms=block_ms, gate=gate)
    parsed, aside = _parse(ctx, taken)
    stats = BatchStats(entries=len(parsed) + len(aside), reaped=reaped)
    if not parsed and not aside:
        return stats
    if taking is not None:
        taking()
    raw, done = held(taken)
    del taken  # two tuples an entry: not held through the round's writes
    failed: list[Failed] = []
    try:
        for group in (yield from _by_bytes(ctx, parsed)):
            copied = yield from _copy(ctx, group)
            stats.add(copied)
            failed += copied.aside
    except Exception as exc:
        if not of_entry(exc):
            raise
        # one entry cannot be written: find it, set it aside, write the others (groups
        # written before are written again, which changes nothing, and counted once)
        stats.documents = stats.bytes_written = 0
        failed = []
        for entry in parsed:
            try:
                copied = yield from _copy(ctx, [entry])
                stats.add(copied)
                failed += copied.aside
            except Exception as exc:
                if not of_entry(exc):
                    raise
                failed.append((entry, step_of(exc), exc))
    parsed = _without(parsed, failed)
    if parsed:
        # A delete may have run between this round's read of the records and its write
        # (a stalled round whose entries another consumer flushed; an entry added after
        # the delete began waiting for the outbox): take back what its tombstones name.
        # Deletes write tombstones before they delete in MongoDB, so this check, after the
        # write, sees every delete that could have been overtaken; before the
        # acknowledgement, so a crash in between leaves the entry to be written and
        # checked again. An entry it cannot check is set aside, not acknowledged.
        unfenced = yield from fence_plan(ctx, parsed)
        failed += [(p, "fence", e) for p, e in unfenced]
        parsed = _without(parsed, failed)
    if parsed:
        # threads' activity (retention_policy.py) before the ack: a crash redoes it ($max)
        yield from activity_plan(ctx, parsed)
    aside += [Aside(ctx.outbox_of(p[1]), p[0], raw[ctx.outbox_of(p[1])][p[0]], step, e)
              for p, step, e in failed]
    if parsed:
        _, stats.outbox_length, unsettled = yield from ack_plan(ctx, parsed, done)
        # acknowledged (their records are in MongoDB), but their thread's Redis state
        # could not be settled: a damaged key the operator must see. The dead letter
        # says whether the counts were lowered (COUNTED_FIELD), so a replay never lowers
        # them twice (a replayed entry lowered before stays so)
        for p in parsed:
            if p[1] in unsettled:
                stream = ctx.outbox_of(p[1])
                fields, (error, lowered) = raw[stream][p[0]], unsettled[p[1]]
                was = fields.get(COUNTED_FIELD) == b"1"
                aside.append(Aside(stream, p[0], {**fields, COUNTED_FIELD: b"1" if (
                    lowered or was) else b"0"}, "settle", error))
        now_ms = ctx.clock.time_ns() / 1e6
        stats.lags_s = [(now_ms - int(eid.split(b"-")[0])) / 1000 for eid, _, _ in parsed]
        stats.max_lag_s = max(stats.lags_s)
    if aside:
        log.error("%d outbox entries could not be flushed (%s); moved to %s", len(aside),
                  ", ".join(sorted({f"{a.step}: {_short(a.error)}" for a in aside}))[:500],
                  dead_letter_key(ctx))
        stats.dead = len((yield from dead_letter_plan(ctx, aside)))
    return stats


def _short(error: Exception | str) -> str:
    return error.split(":")[0] if isinstance(error, str) else type(error).__name__


def _without(parsed: list[Parsed], failed: list[Failed]) -> list[Parsed]:
    """``parsed`` less the entries of ``failed``."""
    if not failed:
        return parsed
    out = {(p[0], p[1]) for p, _, _ in failed}
    return [p for p in parsed if (p[0], p[1]) not in out]


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
    sizes = yield Pipeline(cmds, raise_on_error=False)  # a damaged key: copy finds it
    starts = [0, *counts[:-1]]
    return _groups(parsed, [sum(int(n) for n in sizes[a:b] if isinstance(n, int))
                            for a, b in zip(starts, counts)])


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
    """Write what ``parsed`` names to MongoDB: the entries of each copy plan of ``KINDS``
    together (records: ``_copy_records``; the effect journal's:
    ``plans.effect_journal.flush_effects_plan``; the memory store's:
    ``plans.store_items.flush_store_plan``). Returns the documents and record bytes written
    and the entries set aside."""
    by_copy: dict[Callable[[Context, list[Parsed]], Plan[Copied]], list[Parsed]] = {}
    for p in parsed:
        by_copy.setdefault(KINDS[p[2].kind].copy, []).append(p)
    documents = nbytes = 0
    aside: list[Failed] = []
    for copy, entries in by_copy.items():
        done = yield from copy(ctx, entries)
        documents += done.documents
        nbytes += done.bytes_written
        aside += done.aside
    return Copied(documents, nbytes, tuple(aside))


def _copy_journal(ctx: Context, parsed: list[Parsed]) -> Plan[Copied]:
    """The effect journal's entries (``plans.effect_journal.flush_effects_plan``)."""
    return Copied((yield from flush_effects_plan(ctx, parsed)), 0)


def _copy_store(ctx: Context, parsed: list[Parsed]) -> Plan[Copied]:
    """The memory store's entries (``plans.store_items.flush_store_plan``)."""
    return Copied((yield from flush_store_plan(ctx, parsed)), 0)


def _copy_records(ctx: Context, parsed: list[Parsed]) -> Plan[Copied]:
    """Read the records ``cp`` and ``w`` entries name from Redis (one pipeline) and write
    them to MongoDB (inserts; the upserts for documents already there:
    ``insert_else_upsert``); returns the documents and record bytes written. A key of a
    thread that holds another type (``WRONGTYPE``) sets aside the thread's entries that
    need it; the others are written."""
    want: dict[str, dict[str, set[Any]]] = defaultdict(lambda: defaultdict(set))
    # thread -> member, field or digest -> time: a dict per thread, no tuple per name
    put_ms: dict[str, dict[Any, int]] = defaultdict(dict)
    introduced: dict[tuple[str, str], set[str]] = {}  # (thread, member) -> its new values
    for eid, tid, entry in parsed:
        at = stream_ms(eid)
        kind, m, fields, digests = entry.kind, entry.member, entry.names, entry.digests
        times = put_ms[tid]
        for name in (*((m, *fields) if kind == "cp" else fields), *digests):
            times[name] = max(times.get(name, 0), at)
        want[tid]["it"].update(digests)
        if kind == "cp":
            want[tid]["cp"].add(m)
            want[tid]["bl"].update(fields)
            introduced.setdefault((tid, m), set()).update(fields)
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
    replies = yield Pipeline(cmds, raise_on_error=False)
    raise_tier_errors(replies)
    got: dict[tuple[str, str], dict[str, Any]] = {}
    broken: dict[tuple[str, str], Exception] = {}  # (thread, key kind) -> its WRONGTYPE
    for (tid, kind, names), values in zip(plan, replies):
        if isinstance(values, Exception):
            broken[(tid, kind)] = values
        else:
            got[(tid, kind)] = dict(zip(names, values))
    if broken:
        aside, kept = _broken(parsed, broken)
        if kept:
            done = yield from _copy_records(ctx, kept)
            return done._replace(aside=aside + done.aside)
        return Copied(0, 0, aside)
    cps: list[dict[str, Any]] = []
    blobs: list[dict[str, Any]] = []
    writes: list[dict[str, Any]] = []
    chunks: list[dict[str, Any]] = []
    items: list[dict[str, Any]] = []
    lone: list[dict[str, Any]] = []  # nodes whose last items were stored before
    big = C.THRESHOLD_BYTES  # a value's bytes never outgrow the record holding them: only
    nbytes = 0  # a record bigger than a chunk can make a document that needs chunks

    def add(kind: str, doc: dict[str, Any], raw: bytes, out: list[dict[str, Any]]) -> None:
        if len(raw) > big:
            doc, more = C.split(kind, doc)
            chunks.extend(more)
        out.append(ctx.docs.encode(doc))  # held encoded until the bulk writes

    summary: dict[str, tuple[CheckpointRecord | None, list[tuple[str, WriteRecord]]]] = {}
    for tid in want:
        newest: CheckpointRecord | None = None  # of the root namespace: its summary's
        root_writes: list[tuple[str, WriteRecord]] = []
        times = put_ms[tid]
        for doc, raw in IT.round_docs(tid, got.get((tid, "it"), {}), times, lone):
            add("items", doc, raw, items)
            nbytes += len(raw)
        vals: dict[str, Typed | None] = {}
        for f, raw in got.get((tid, "bl"), {}).items():
            if raw is not None:
                value = vals[f] = unpack_blob(raw, f"redis blob {f!r} of thread {tid!r}")
                nbytes += len(value[1]) if value else 0
        recs, cvs = got.get((tid, "cp"), {}), got.get((tid, "cv"), {})
        for m, raw in recs.items():
            if raw is None or cvs.get(m) is None:
                continue  # deleted since: nothing to write, nothing to resurrect
            ns, cid = m.split(SEP)
            rec = CheckpointRecord.unpack(ns, cid, raw, cvs[m])
            if not ns and (newest is None or cid > newest.checkpoint_id):
                newest = rec
            # the values it introduced: the small ones inside its document (inline.py)
            own = [(f, vals.pop(f)) for f in sorted(introduced[(tid, m)]) if f in vals]
            doc, big_ones = I.checkpoint_docs(tid, rec, own, put_ms=times[m])
            add("checkpoints", doc, raw, cps)
            for b in big_ones:
                add("blobs", b, b["data"], blobs)
            nbytes += len(rec.checkpoint[1]) + len(rec.metadata[1])
        for f, value in vals.items():  # its checkpoint was deleted since: as it was
            add("blobs", D.blob_doc(tid, f, value, put_ms=times[f]),
                value[1] if value else b"", blobs)
        by_cp: dict[tuple[str, str], list[tuple[WriteRecord, int]]] = defaultdict(list)
        for f, raw in got.get((tid, "w"), {}).items():
            if raw is not None:
                ns, cid, _task, _idx = f.split(SEP)
                w = WriteRecord.unpack(raw, f"redis write {f!r} of thread {tid!r}")
                by_cp[(ns, cid)].append((w, times[f]))
                if not ns:
                    root_writes.append((cid, w))
                nbytes += len(w.value[1])
        for (ns, cid), timed in by_cp.items():  # one document per put_writes call
            wdocs, more = C.split_all("writes", G.write_docs(
                tid, ns, cid, [w for w, _ in timed], times=[t for _, t in timed]))
            writes += [ctx.docs.encode(d) for d in wdocs]
            chunks += more
        if newest is not None or root_writes:
            summary[tid] = (newest, root_writes)
    facts = yield from summary_facts_plan(ctx, summary, got)
    del got, replies, summary  # the values now live in the documents: hold them once
    cols = ctx.collections
    # chunks before the documents that refer to them; items before the blobs and writes
    # that name them; blobs and writes before the checkpoints that refer to them
    yield from C.write_plan(cols.chunks, chunks)
    dec = ctx.docs.decode  # a document already stored is upserted as a dict
    yield from insert_else_upsert(cols.items, items, lambda d: IT.upsert_stored(d, lone),
                                  decode=dec)
    yield from IT.lone_nodes_plan(cols.items, lone)  # inside items stored before
    yield from insert_else_upsert(cols.blobs, blobs, D.upsert, decode=dec)
    yield from insert_else_upsert(cols.writes, writes, G.upsert_any, ignore_newer=True, decode=dec)
    yield from insert_else_upsert(cols.checkpoints, cps, I.upsert_checkpoint, decode=dec)
    if facts:  # after the records: a summary never names a checkpoint MongoDB lacks
        yield from summaries.upkeep_plan(ctx, facts)
    return Copied(len(cps) + len(blobs) + len(writes) + len(items), nbytes)


def _broken(parsed: list[Parsed], broken: dict[tuple[str, str], Exception]
            ) -> tuple[tuple[Failed, ...], list[Parsed]]:
    """Split ``parsed`` into the entries that need a key of ``broken`` (``(thread, key
    kind)`` -> its error: ``cp``, ``cv``, ``bl``, ``it`` for a checkpoint's entry; ``w``,
    ``it`` for writes') and the others."""
    aside: list[Failed] = []
    kept: list[Parsed] = []
    for p in parsed:
        tid, entry = p[1], p[2]
        needs = ("cp", "cv", "bl", "it") if entry.kind == "cp" else ("w", "it")
        exc = next((broken[(tid, k)] for k in needs if (tid, k) in broken), None)
        if exc is None:
            kept.append(p)
        else:
            aside.append((p, "copy", exc))
    return tuple(aside), kept


KINDS: dict[str, EntryKind] = {
    "cp": EntryKind(check_records, _copy_records),
    "w": EntryKind(check_records, _copy_records),
    FX_KIND: EntryKind(check_journal, _copy_journal),
    STORE_KIND: EntryKind(check_store, _copy_store),
}
"""The outbox entry kinds this release copies, by ``OutboxEntry.kind``: an entry of a
kind not here is set aside at parse (a newer release wrote it). A new kind adds its
check and copy plan here."""
