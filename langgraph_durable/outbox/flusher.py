"""The flusher: reads outbox entries with a consumer group, copies what they name from
Redis to MongoDB with unordered bulk upserts, then acknowledges and deletes them.

Delivery is at least once and every MongoDB write is an idempotent upsert on a
deterministic ``_id``, so a repeat changes nothing. Entries a dead flusher left pending
are claimed as soon as its heartbeat lapsed (``heartbeat.py``); those of a consumer
without a heartbeat, with ``XAUTOCLAIM`` after ``claim_idle_s``. The same plan runs in
a thread (sync clients), an asyncio task (async clients) or a standalone worker.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import threading
import uuid
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import ormsgpack
import redis.exceptions
from bson.errors import InvalidDocument
from pymongo.errors import BulkWriteError, DocumentTooLarge

from ..context import Context
from ..drivers import Clients, Pipeline, Plan, run_async, run_sync
from ..durable import chunks as C
from ..durable import documents as D
from ..errors import CorruptRecordError
from ..metrics import Metrics, safe_error
from ..plans.fence import insert_else_upsert, stream_ms, take_back_deleted
from ..records import SEP, CheckpointRecord, WriteRecord, unpack_blob
from .group import dead_letter_key, ensure_group_plan, upkeep_plan
from .heartbeat import Heartbeat, reap_plan, stop_plan
from .streams import Parsed, Taken, ack_plan, claim_plan, dead_letter_plan, read_plan

log = logging.getLogger("langgraph_durable.flusher")


def consumer_name() -> str:
    """A consumer name unique to this process and flusher: ``host-pid-random``."""
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


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


POISON = (CorruptRecordError, InvalidDocument, DocumentTooLarge, ValueError, KeyError,
          TypeError, UnicodeDecodeError, BulkWriteError)
"""Errors no retry can fix: the entry goes to the dead-letter stream instead of blocking."""


_TRANSIENT_CODES = {6, 7, 89, 91, 189, 262, 9001, 10107, 11600, 11602, 13435, 13436}
"""MongoDB error codes of a server or network in trouble (retry), not of a bad document."""


def _transient(exc: Exception) -> bool:
    """True for a bulk write that failed for reasons a retry can fix (write concern,
    shutdown, step-down); False for a document MongoDB will never take (e.g. too large)."""
    if not isinstance(exc, BulkWriteError):
        return False
    details = exc.details or {}
    errors = details.get("writeErrors") or []
    return bool(details.get("writeConcernErrors")) or not errors or any(
        e.get("code") in _TRANSIENT_CODES for e in errors)


def _parse(taken: list[Taken]
           ) -> tuple[list[Parsed], list[tuple[str, bytes, bytes, Exception]]]:
    out: list[Parsed] = []
    bad: list[tuple[str, bytes, bytes, Exception]] = []
    for stream, (eid, fields) in taken:
        try:
            out.append((eid, fields[b"t"].decode(), ormsgpack.unpackb(fields[b"p"])))
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
            stats.documents += yield from _copy(ctx, group, stats)
    except POISON as exc:
        if _transient(exc):
            raise
        # one entry cannot be written: find it, set it aside, write the others (groups
        # written before are written again, which changes nothing, and counted once)
        stats.documents = stats.bytes_written = 0
        kept = []
        for entry in parsed:
            try:
                stats.documents += yield from _copy(ctx, [entry], stats)
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
    yield from take_back_deleted(ctx, parsed)
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
    if all(len(p) > 4 and isinstance(p[4], int) for _, _, p in parsed):
        return _groups(parsed, [p[4] for _, _, p in parsed])
    cmds: list[list[Any]] = []
    counts = []
    for _, tid, (kind, m, fields, *more) in parsed:
        k = ctx.keys(tid)
        if kind == "cp":
            cmds += [["HSTRLEN", k.cp, m], *(["HSTRLEN", k.bl, f] for f in fields)]
        else:
            cmds += [["HSTRLEN", k.w, f] for f in fields]
        cmds += [["HSTRLEN", k.it, d] for d in (more[0] if more else ())]
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


def _copy(ctx: Context, parsed: list[Parsed], stats: BatchStats | None = None) -> Plan[int]:
    """Read the named records from Redis (one pipeline) and write them to MongoDB
    (inserts; the upserts for documents already there: ``insert_else_upsert``); adds the
    record bytes written to ``stats.bytes_written``."""
    want: dict[str, dict[str, set[Any]]] = defaultdict(lambda: defaultdict(set))
    put_ms: dict[tuple[str, Any], int] = {}  # (thread, member, field or digest) -> time
    for eid, tid, (kind, m, fields, *more) in parsed:
        at = stream_ms(eid)
        digests = more[0] if more else []
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
    if stats is not None:
        stats.bytes_written += nbytes
    return len(cps) + len(blobs) + len(writes) + len(items)


class Flusher:
    """Runs flush rounds until stopped: in a daemon thread with sync clients, or as an
    asyncio task with async clients. ``wake()`` ends a pause after failures.

    Errors (MongoDB down, Redis down) are logged and retried with backoff up to
    ``max_backoff_s`` seconds; entries stay pending meanwhile, nothing is dropped. A
    flusher whose rounds have failed for longer than ``claim_idle_s`` (it cannot reach
    MongoDB, or its write concern cannot be met) then pauses for ``2 * claim_idle_s``
    after each failure without touching the outbox, so the entries it holds go idle and a
    healthy flusher claims them (re-reading them would keep them from ever going idle);
    a lone flusher retries them after the pause.
    Its ``heartbeat`` (``heartbeat.Heartbeat``) beats beside the loop from before the
    first round until the loop ends; each round first takes what the flushers the last
    beat found dead hold (``reaped`` counts them). On stopping it leaves the group and the
    heartbeat registry (``heartbeat.stop_plan``).
    Rounds are counted in ``metrics`` (a new ``Metrics`` when not given); a backlog of
    half ``max_outbox`` or a lag over ``BACKLOG_LAG_S`` is logged as a warning.
    """

    BACKLOG_LAG_S = 30.0
    """Seconds of put->MongoDB lag past which a backlog warning is logged."""

    def __init__(self, ctx: Context, *, max_backoff_s: float = 2.0,
                 metrics: Metrics | None = None) -> None:
        self.ctx = ctx
        self.metrics = metrics or Metrics(ctx.outbox, ctx.config.collection_prefix)
        self._warned_at = 0.0
        self.consumer = consumer_name()
        self.heartbeat = Heartbeat(ctx, self.consumer)
        self.max_backoff_s = max_backoff_s
        self.rounds = 0
        self.entries = 0
        self.reaped = 0
        self.errors = 0
        self.last_error: str | None = None
        self.lags_s: list[float] = []
        self._stop = threading.Event()
        self._nudge = threading.Event()  # ends a linger (wake, stop)
        self._anudge: asyncio.Event | None = None
        self._aloop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._task: asyncio.Task[None] | None = None
        self._last_claim = 0.0
        self._own_pending = True  # read this consumer's pending entries next round
        self._failing_since: float | None = None
        self._quiet_until = 0.0
        self.left_group = False
        """True once the loop ended and removed its consumer from the group (it held no
        pending entries; otherwise they stay for another flusher to claim)."""

    # one round, shared by both loops
    def _round_plan(self) -> Plan[BatchStats]:
        now = self.ctx.clock.monotonic()
        claim = now - self._last_claim >= self.ctx.config.claim_idle_s / 2
        if claim:
            self._last_claim = now
        block_ms = max(1, int(self.ctx.config.flush_interval_s * 1000))
        return flush_batch_plan(self.ctx, self.consumer, block_ms=block_ms, claim=claim,
                                own=self._own_pending, dead=self.heartbeat.take_dead())

    def _account(self, stats: BatchStats) -> None:
        self.rounds += 1
        self.entries += stats.entries
        if stats.reaped:
            self.reaped += stats.reaped
            log.info("flusher %s took %d outbox entries from flushers whose heartbeat "
                     "lapsed", self.consumer, stats.reaped)
        self.lags_s = (self.lags_s + stats.lags_s)[-10_000:]
        self.metrics.flush_round(stats.entries, stats.documents, stats.lags_s,
                                 stats.bytes_written, stats.dead, stats.outbox_length)
        n, cap = stats.outbox_length or 0, self.ctx.config.max_outbox
        if (cap and n >= cap // 2) or stats.max_lag_s >= self.BACKLOG_LAG_S:
            now = self.ctx.clock.monotonic()
            if now - self._warned_at >= 30.0:
                self._warned_at = now
                log.warning("outbox backlog: %d entries waiting for MongoDB (max_outbox=%d), "
                            "oldest flushed entry %.1f s old", n, cap, stats.max_lag_s)

    def _failed(self, exc: Exception, backoff: float) -> float:
        self._own_pending = True  # the round may have taken entries it did not acknowledge
        self.errors += 1
        self.last_error = safe_error(exc)
        self.metrics.flush_failed()
        now = self.ctx.clock.monotonic()
        if self._failing_since is None:
            self._failing_since = now
        idle = self.ctx.config.claim_idle_s
        if now - self._failing_since >= idle:
            self._quiet_until = now + 2 * idle
            log.warning("flush rounds failing for %.0f s; pausing %.1f s so other flushers "
                        "can claim this one's pending entries: %s", now - self._failing_since,
                        2 * idle, self.last_error)
        else:
            log.warning("flush round failed (retrying in %.2f s): %s", backoff,
                        self.last_error)
        return min(backoff * 2, self.max_backoff_s)

    def wake(self) -> None:
        """End a pause after failures now (``flush()`` calls it: the caller wants the
        outbox moved, e.g. right after MongoDB came back). Safe from any thread."""
        self._quiet_until = 0.0
        self._nudge.set()
        if self._aloop is not None and self._anudge is not None:
            with contextlib.suppress(RuntimeError):  # the loop closed
                self._aloop.call_soon_threadsafe(self._anudge.set)

    def _linger_s(self, stats: BatchStats) -> float:
        """How long to wait before the next round: ``flush_linger_s`` after a round that
        took some entries but fewer than a quarter of ``flush_batch_size`` (light load:
        waiting lets the next bulk write carry more). A larger round already carried a
        good batch and goes on at once, so under load the linger adds no lag; an empty
        round already blocked waiting for entries."""
        if 0 < stats.entries < max(1, self.ctx.config.flush_batch_size // 4):
            return self.ctx.config.flush_linger_s
        return 0.0

    def _succeeded(self) -> None:
        self._failing_since = None
        # a round that returned acknowledged every entry it took: none pending on this
        # consumer, so the next round need not ask for them (a failed round sets it again)
        self._own_pending = False

    def _quiet_s(self) -> float:
        """Seconds left of the pause after a long failing streak (0 = none)."""
        return max(0.0, self._quiet_until - self.ctx.clock.monotonic())

    def _observe(self, clients: Clients) -> None:
        if clients.observer is None:  # a standalone worker's clients: time them too
            clients.observer = self.metrics.observe_op

    def start_thread(self, clients: Clients) -> None:
        """Start the flush loop in a daemon thread using blocking ``clients``."""
        self._observe(clients)
        run_sync(ensure_group_plan(self.ctx), clients)
        self.heartbeat.beat(clients)  # a member of the registry once started
        self._thread = threading.Thread(target=self._loop_sync, args=(clients,),
                                        name=f"langgraph-durable-flusher-{self.consumer}",
                                        daemon=True)
        self._thread.start()

    def run(self, clients: Clients) -> None:
        """Run the flush loop in the calling thread until ``request_stop()``."""
        self._observe(clients)
        run_sync(ensure_group_plan(self.ctx), clients)
        self.heartbeat.beat(clients)  # a member of the registry before its first read
        self._loop_sync(clients)

    def request_stop(self) -> None:
        """Ask the loop to end after its current round (safe from a signal handler)."""
        self._stop.set()

    def wait_stop(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` seconds for a stop request; True once requested."""
        return self._stop.wait(timeout_s)

    def _loop_sync(self, clients: Clients) -> None:
        self.heartbeat.start_thread(clients)
        try:
            self._rounds_sync(clients)
        finally:
            self.heartbeat.stop()
        self._leave(lambda: run_sync(stop_plan(self.ctx, self.consumer), clients))

    def _rounds_sync(self, clients: Clients) -> None:
        backoff = 0.05
        while not self._stop.is_set():
            quiet = self._quiet_s()
            if quiet > 0:
                self._stop.wait(min(quiet, 0.5))
                continue
            try:
                stats = run_sync(self._round_plan(), clients)
                self._account(stats)
                self._succeeded()
                backoff = 0.05
            except Exception as exc:
                self._stop.wait(backoff)
                backoff = self._failed(exc, backoff)
                continue
            linger = self._linger_s(stats)
            if linger:
                self._nudge.wait(linger)
                self._nudge.clear()

    async def start_task(self, clients: Clients) -> None:
        """Start the flush loop as an asyncio task on the running loop using async clients."""
        self._observe(clients)
        await run_async(ensure_group_plan(self.ctx), clients)
        await self.heartbeat.abeat(clients)  # a member of the registry once started
        self._aloop, self._anudge = asyncio.get_running_loop(), asyncio.Event()
        self._task = self._aloop.create_task(self._loop_async(clients))

    async def _loop_async(self, clients: Clients) -> None:
        self.heartbeat.start_task(clients)
        try:
            await self._rounds_async(clients)
        finally:
            await self.heartbeat.astop()
        try:
            self.left_group = await run_async(stop_plan(self.ctx, self.consumer), clients)
        except Exception as exc:
            log.info("flusher %s could not leave the consumer group: %s", self.consumer,
                     safe_error(exc))

    async def _rounds_async(self, clients: Clients) -> None:
        backoff = 0.05
        while not self._stop.is_set():
            quiet = self._quiet_s()
            if quiet > 0:
                await asyncio.sleep(min(quiet, 0.5))
                continue
            try:
                stats = await run_async(self._round_plan(), clients)
                self._account(stats)
                self._succeeded()
                backoff = 0.05
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                await asyncio.sleep(backoff)
                backoff = self._failed(exc, backoff)
                continue
            linger = self._linger_s(stats)
            if linger and self._anudge is not None:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._anudge.wait(), linger)
                self._anudge.clear()

    def _leave(self, call: Any) -> None:
        """Leave the consumer group and the registry (``heartbeat.stop_plan``) as the loop
        ends."""
        try:
            self.left_group = bool(call())
        except Exception as exc:
            log.info("flusher %s could not leave the consumer group: %s", self.consumer,
                     safe_error(exc))

    @property
    def running(self) -> bool:
        """True while the loop runs."""
        if self._thread is not None:
            return self._thread.is_alive()
        return self._task is not None and not self._task.done()

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop the loop after its current round (waits up to ``timeout_s`` seconds)."""
        self._stop.set()
        self.wake()
        if self._thread is not None:
            self._thread.join(timeout_s)
        if self._task is not None and not self._task.done():
            self._task.cancel()

    async def astop(self, timeout_s: float = 5.0) -> None:
        """Stop an asyncio-task loop after its current round and wait for it (cancelled
        after ``timeout_s`` seconds)."""
        self._stop.set()
        self.wake()
        if self._task is not None and not self._task.done():
            await asyncio.wait({self._task}, timeout=timeout_s)
            if not self._task.done():
                self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                pass
        if self._thread is not None:
            await asyncio.to_thread(self._thread.join, 5.0)
