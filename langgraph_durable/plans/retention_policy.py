"""Retention by policy (``DurableConfig.ttl``), each step once as a sans-I/O plan: the
flusher records threads' activity (``activity_plan``, from the outbox entries a round
copies: no cost on ``put``), operators pin threads and set TTLs, and a bounded sweep
deletes or prunes the threads whose expiry passed (``sweep_plan``), one sweeper at a time
across processes. The documents and queries are ``durable/retention_docs.py``'s.

What a sweep never takes: a pinned thread; a thread whose newest root checkpoint has an
unanswered interrupt (an ``__interrupt__`` pending write and no ``__resume__``), with
strategy ``delete`` (it is *held*: kept, without expiry, until its next activity, the
answer, arms its TTL again; ``keep_latest`` prunes it, keeping the newest checkpoint and
its pending writes, all a resume needs); a thread with activity since the sweep read its
expiry (the expiry moved). Deletes and prunes are ``delete_thread_plan`` and
``prune_plan``: both tiers, tombstones, DeltaChannel ancestors, after the outbox drained.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..core.ops import BulkWrite, CommandFailed, Find, FindOne, FindOneAndUpdate, Plan, ask
from ..durable import retention_docs as R
from ..errors import CorruptRecordError
from .context import Context
from .fence import stream_ms
from .history_edits import delete_thread_plan, flush_wait_plan, prune_plan
from .read import get_tuple_plan

INTERRUPT = "__interrupt__"
"""LangGraph's pending-write channel of an interrupt (``langgraph._internal._constants``)."""
RESUME = "__resume__"
"""LangGraph's pending-write channel of an interrupt's answer (``Command(resume=...)``)."""

DUPLICATE_KEY = 11000
"""MongoDB's duplicate-key error code: the lease's upsert met a lease it may not take."""

log = logging.getLogger("langgraph_durable.retention")


def entry_activity(ctx: Context, entries: Sequence[tuple[bytes, str, Any]]
                   ) -> dict[str, R.Activity]:
    """The activity of each thread among a round's ``entries`` (``(entry id, thread_id,
    OutboxEntry)``; checkpoints and pending writes only: ``cp``/``w``), or nothing when
    neither the saver's ``ttl`` nor any entry names a TTL."""
    policy = ctx.config.ttl
    seen: dict[str, R.Activity] = {}
    for eid, tid, entry in entries:
        if entry.kind not in ("cp", "w") or (policy is None and entry.ttl_min is None):
            continue
        at, old = stream_ms(eid), seen.get(tid)
        seen[tid] = R.Activity(at, entry.ttl_min) if old is None else old.seen(
            at, entry.ttl_min)
    return seen


def activity_plan(ctx: Context, entries: Sequence[tuple[bytes, str, Any]]) -> Plan[int]:
    """Record the activity of a flush round's ``entries`` in the retention collection:
    one query for the TTLs of their threads' own, one unordered bulk write of ``$max``
    upserts (a replayed entry changes nothing). A thread's own TTL that a damaged
    retention document holds (not a number of minutes ``R.usable_ttl`` takes) is logged,
    naming the thread, and counts as none: it never fails the round, which would stop the
    flush of every thread. Returns the threads recorded (0: no policy and no TTL named,
    nothing read or written)."""
    seen = entry_activity(ctx, entries)
    if not seen:
        return 0
    cols = ctx.collections
    own = {d["_id"]: d.get("ttl") for d in (yield from ask(Find(
        cols.retention, R.own_ttls_of(seen),
        {"ttl": 1})))}
    for tid, ttl in own.items():
        if ttl is not None and not R.usable_ttl(ttl):
            log.warning("retention document of thread %r is damaged: its 'ttl' holds %s, "
                        "not minutes; the policy's default_ttl applies", tid,
                        type(ttl).__name__)
    default = ctx.config.ttl.default_ttl if ctx.config.ttl is not None else None
    yield BulkWrite(cols.retention, [R.activity_update(t, a, own.get(t), default)
                                     for t, a in sorted(seen.items())])
    return len(seen)


def set_ttl_plan(ctx: Context, thread_id: str, minutes: float) -> Plan[None]:
    """The thread's TTL set to ``minutes`` and its expiry to now + ``minutes`` (0: due
    at the next sweep), whatever it was."""
    now_ms = ctx.clock.time_ns() // 1_000_000
    yield BulkWrite(ctx.collections.retention, [R.ttl_update(thread_id, minutes, now_ms)])


def pin_plan(ctx: Context, thread_id: str, pinned: bool) -> Plan[None]:
    """Pin (``pinned``) or unpin the thread: a pinned thread is never swept."""
    yield BulkWrite(ctx.collections.retention, [R.pin_update(thread_id, pinned)])


def facts_plan(ctx: Context, thread_id: str) -> Plan[dict[str, Any] | None]:
    """The thread's retention document (``durable/retention_docs.py``), None when it has none."""
    return (yield from ask(FindOne(ctx.collections.retention, {"_id": thread_id})))


def upcoming_plan(ctx: Context, limit: int) -> Plan[list[dict[str, Any]]]:
    """The ``limit`` unpinned threads with an expiry, soonest first (index ``exp``)."""
    return (yield from ask(Find(ctx.collections.retention, R.UPCOMING_QUERY, None,
                                sort=[("exp", 1)], limit=limit)))


def lease_plan(ctx: Context) -> Plan[dict[str, Any] | None]:
    """The sweep's lease document (owner, until, next_at, last), None before any sweep."""
    return (yield from ask(FindOne(ctx.collections.meta, {"_id": R.LEASE_ID})))


@dataclass
class SweepReport:
    """What one sweep did (or, ``dry_run``, would do): thread ids ``deleted``,
    ``pruned`` (``keep_latest``), ``held`` (an unanswered interrupt), ``gone`` (no reader
    found a checkpoint: deleted again, which finishes a delete a killed sweep began),
    ``moved`` (activity since it was found due: left); ``failed``: thread id -> the
    ``CorruptRecordError`` text of a thread whose records are damaged (left as it is, the
    sweep goes on with the others; the next sweep tries it again); ``skipped``: why
    nothing was swept (another sweeper holds the lease, the interval has not passed, no
    policy), else ``""``; ``stopped``: the lease was lost mid-sweep (the rest is left to
    the next sweep)."""

    strategy: str
    dry_run: bool = False
    deleted: list[str] = field(default_factory=list)
    pruned: list[str] = field(default_factory=list)
    held: list[str] = field(default_factory=list)
    gone: list[str] = field(default_factory=list)
    moved: list[str] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)
    skipped: str = ""
    stopped: bool = False

    def summary(self) -> dict[str, Any]:
        """Counts, as stored in the lease's ``last`` and shown by the CLI."""
        return {"strategy": self.strategy, "deleted": len(self.deleted),
                "pruned": len(self.pruned), "held": len(self.held), "gone": len(self.gone),
                "moved": len(self.moved), "failed": len(self.failed),
                "stopped": self.stopped}


def _take_lease(ctx: Context, owner: str, now_ms: int, lease_ms: int,
                scheduled: bool) -> Plan[bool]:
    flt, update = R.lease_acquire(owner, now_ms, lease_ms, scheduled)
    try:
        got = yield from ask(FindOneAndUpdate(ctx.collections.meta, flt, update, upsert=True))
    except CommandFailed as exc:
        if exc.code == DUPLICATE_KEY:
            return False  # the lease document exists and is someone else's (or not due)
        raise
    return got is not None and got.get("owner") == owner


def _renew(ctx: Context, owner: str, lease_ms: int) -> Plan[bool]:
    now_ms = ctx.clock.time_ns() // 1_000_000
    flt, update = R.lease_renew(owner, now_ms, lease_ms)
    return (yield from ask(FindOneAndUpdate(ctx.collections.meta, flt, update))) is not None


def unanswered_interrupt(writes: Sequence[Any]) -> bool:
    """True when pending ``writes`` (``WriteRecord``s of one checkpoint) hold an
    ``__interrupt__`` and no ``__resume__``: the thread waits for an answer."""
    channels = {w.channel for w in writes}
    return INTERRUPT in channels and RESUME not in channels


def sweep_plan(ctx: Context, owner: str, *, now_ms: int | None = None,
               limit: int | None = None, dry_run: bool = False, scheduled: bool = False,
               lease_s: float | None = None) -> Plan[SweepReport]:
    """One sweep of the threads due at ``now_ms`` (default ``ctx.clock``; the lease and
    the interval always go by ``ctx.clock``), at most
    ``limit`` (default the policy's ``sweep_limit``), soonest expiry first.

    Takes the lease for ``lease_s`` seconds (default the policy's; ``owner``: this
    sweeper's name; ``scheduled``: only once the policy's interval passed since the last
    sweep) or returns at once with ``skipped`` set; waits
    for the outbox to drain (activity not flushed yet counts), reads the due threads'
    expiries again, and acts on each (renewing the lease first: a lost lease stops the
    sweep): ``delete`` -> ``delete_thread_plan``, ``keep_latest`` -> ``prune_plan``,
    except what the module's docstring keeps. Before acting on a thread it waits for the
    outbox again and reads that thread's expiry once more: a thread written since the
    sweep began (activity moved its expiry) is left (``moved``), not deleted with the
    work it just stored. A thread whose records are damaged (``CorruptRecordError``) is
    left and named in ``failed``; the sweep goes on. ``dry_run``: no lease, no wait, nothing
    changed; the report says what would be done. Raises ``FlushTimeoutError`` when the
    outbox does not drain within ``delete_flush_timeout_s`` (nothing swept)."""
    policy = ctx.config.ttl
    strategy = policy.strategy if policy is not None else "delete"
    report = SweepReport(strategy, dry_run)
    if policy is None:
        report.skipped = "no retention policy (the ttl option is not set)"
        return report
    clock_ms = ctx.clock.time_ns() // 1_000_000  # the lease's time: never a given now_ms
    now_ms = clock_ms if now_ms is None else now_ms
    limit = policy.sweep_limit if limit is None else limit
    lease_ms = int((policy.lease_s if lease_s is None else lease_s) * 1000)
    if not dry_run:
        if not (yield from _take_lease(ctx, owner, clock_ms, lease_ms, scheduled)):
            report.skipped = ("the interval has not passed, or another sweeper holds the "
                              "lease")
            return report
    try:
        yield from _sweep_due(ctx, owner, now_ms, limit, lease_ms, report)
    except Exception:
        if not dry_run:  # the lease back at once, the next look tries again (a killed
            yield from _release(ctx, owner, clock_ms, report)  # sweeper's lapses)
        raise
    if not dry_run:
        interval_ms = int(policy.sweep_interval_minutes * R.MINUTE_MS)
        yield from _release(ctx, owner, clock_ms + interval_ms, report)
    return report


def _release(ctx: Context, owner: str, next_at: int, report: SweepReport) -> Plan[None]:
    """Give the lease back; no scheduled sweep before ``next_at`` (ms)."""
    yield BulkWrite(ctx.collections.meta, [R.lease_release(owner, next_at, report.summary())])


def _sweep_due(ctx: Context, owner: str, now_ms: int, limit: int, lease_ms: int,
               report: SweepReport) -> Plan[None]:
    """The body of ``sweep_plan``: find the due threads, drain, read them again, act."""
    cols = ctx.collections
    dry_run = report.dry_run
    due = yield from ask(Find(cols.retention, R.due_query(now_ms), None,
                              sort=[("exp", 1)], limit=limit))
    if due and not dry_run:
        yield from flush_wait_plan(ctx, ctx.config.delete_flush_timeout_s)
        again = yield from ask(Find(cols.retention, R.retention_of(R.thread_ids(due))))
        now_docs = {d["_id"]: d for d in again}
        for d in due:
            fresh = now_docs.get(d["_id"])
            if fresh is None or fresh.get("exp") != d["exp"] or fresh.get("pinned"):
                report.moved.append(str(d["_id"]))
        due = [now_docs[d["_id"]] for d in due if str(d["_id"]) not in report.moved]
    for doc in due:
        if not dry_run and not (yield from _renew(ctx, owner, lease_ms)):
            report.stopped = True
            return
        try:
            yield from _sweep_one(ctx, doc, report.strategy, report, dry_run)
        except CorruptRecordError as exc:  # this thread's records only: the others go on
            log.warning("retention sweep left thread %r: %s", str(doc["_id"]), exc)
            report.failed[str(doc["_id"])] = str(exc)[:500]


def _sweep_one(ctx: Context, doc: dict[str, Any], strategy: str, report: SweepReport,
               dry_run: bool) -> Plan[None]:
    """Act on one due thread (its retention document ``doc``) and record what was done:
    first (not ``dry_run``) the outbox drained and the thread's expiry read again, so
    a put made since the sweep began leaves it (``moved``)."""
    tid = str(doc["_id"])
    cols = ctx.collections
    if not dry_run:
        yield from flush_wait_plan(ctx, ctx.config.delete_flush_timeout_s)
        fresh = yield from ask(FindOne(cols.retention, {"_id": doc["_id"]}))
        if fresh is None or fresh.get("exp") != doc["exp"] or fresh.get("pinned"):
            report.moved.append(tid)
            return
    page = yield from get_tuple_plan(ctx, tid, "", None)
    if not page.rows:
        # no reader finds a root checkpoint: deleted (maybe by a sweep killed before it
        # was done: delete_thread again removes what MongoDB may still hold), or never
        # more than pending writes
        report.gone.append(tid)
        if not dry_run:
            yield from delete_thread_plan(ctx, tid)
            yield BulkWrite(cols.retention, [R.gone_delete(doc)])
        return
    if strategy == "delete" and unanswered_interrupt(page.rows[0][1]):
        report.held.append(tid)
        if not dry_run:
            yield BulkWrite(cols.retention, [R.done_update(doc, R.HELD_INTERRUPT)])
        return
    if strategy == "delete":
        report.deleted.append(tid)
        if not dry_run:
            yield from delete_thread_plan(ctx, tid)
            yield BulkWrite(cols.retention, [R.gone_delete(doc)])
        return
    report.pruned.append(tid)
    if not dry_run:
        yield from prune_plan(ctx, [tid], "keep_latest")
        yield BulkWrite(cols.retention, [R.done_update(doc, R.HELD_PRUNED)])
