"""The flusher: reads outbox entries with a consumer group, copies what they name from
Redis to MongoDB with unordered bulk upserts, then acknowledges and deletes them.

Delivery is at least once and every MongoDB write is an idempotent upsert on a
deterministic ``_id``, so a repeat changes nothing. Entries a dead flusher left pending
are claimed as soon as its heartbeat lapsed (``heartbeat.py``); those of a consumer
without a heartbeat, with ``XAUTOCLAIM`` after ``claim_idle_s``.

This module is the loop: rounds one after another, with backoff after a failure, a pause
after a long failing streak, a linger after a light round, stopping, written once
(``Flusher._steps``) and driven by a thread (sync clients; also a standalone worker's main
thread) or an asyncio task (async clients). What a round takes and does is ``rounds.py``
(``RoundChoice``, ``flush_batch_plan``; their names are importable from here too).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import threading
import uuid
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

from ..core.drive import Steps
from ..core.ops import Plan, ReadGate
from ..io.drivers import Clients, run_async, run_sync
from ..io.gated_read import unblock
from ..io.tasks import cancellable
from ..metrics import Metrics, safe_error
from ..plans.context import Context
from .group import dead_letter_key as dead_letter_key
from .group import ensure_group_plan
from .heartbeat import Heartbeat, stop_plan
from .rounds import ROUND_BYTES as ROUND_BYTES
from .rounds import BatchStats as BatchStats
from .rounds import RoundChoice
from .rounds import flush_batch_plan as flush_batch_plan
from .sweeper import Sweeper
from .triage import POISON as POISON

log = logging.getLogger("langgraph_durable.flusher")


@dataclass(frozen=True)
class _Wait:
    """A step of the flush loop: wait ``seconds``; a ``linger`` ends at ``wake()``, any
    other wait (backoff, pause) at a stop request (in a task: cancelling it)."""

    seconds: float
    linger: bool = False


_Step = Plan[BatchStats] | _Wait


def consumer_name() -> str:
    """A consumer name unique to this process and flusher: ``host-pid-random``."""
    return f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:8]}"


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
    With a retention policy (``DurableConfig.ttl``) its ``sweeper`` (``sweeper.Sweeper``)
    runs beside the loop too, as a thread or task of its own.
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
        self._gate = ReadGate()  # the blocking read interrupt() ends (one stream)
        self._poll = False  # read without BLOCK: the pool has no connection to spare
        self._sync_clients: Clients | None = None  # the loop's, when it runs in a thread
        self._holding = False  # a round took entries and has not ended (settle)
        self._held = threading.Condition()
        self._stop = threading.Event()
        self._nudge = threading.Event()  # ends a linger (wake, stop)
        self._anudge: asyncio.Event | None = None
        self._aloop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._task: asyncio.Task[None] | None = None
        self.choice = RoundChoice(ctx)
        """What the next round takes besides new entries (``rounds.RoundChoice``)."""
        self._failing_since: float | None = None
        self._quiet_until = 0.0
        self.sweeper = Sweeper(ctx, self.consumer) if ctx.config.ttl is not None else None
        """The retention sweeper beside the loop (``sweeper.py``), with a ``ttl`` policy."""
        self.left_group = False
        """True once the loop ended and removed its consumer from the group (it held no
        pending entries; otherwise they stay for another flusher to claim)."""

    # one round, shared by both loops
    def _round_plan(self) -> Plan[BatchStats]:
        claim, own = self.choice.next()
        block_ms = 0 if self._poll else max(1, int(self.ctx.config.flush_interval_s * 1000))
        return flush_batch_plan(self.ctx, self.consumer, block_ms=block_ms, claim=claim,
                                own=own, dead=self.heartbeat.take_dead(), taking=self._taking,
                                gate=self._gate)

    def _taking(self) -> None:
        self._holding = True

    def _round_over(self) -> None:
        if self._holding:
            with self._held:
                self._holding = False
                self._held.notify_all()

    @property
    def holding(self) -> bool:
        """True while a round that took entries has not been counted yet."""
        return self._holding

    def settle(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` seconds until the round that holds entries now (if
        any) has ended and been counted: ``flush()`` calls it once the outbox drained,
        so ``stats()`` right after counts what the flush waited for. A round that took
        nothing (an idle blocking read) is not waited for. True when none holds entries.
        Safe from any thread but the loop's own."""
        if not self._holding:
            return True
        with self._held:
            return self._held.wait_for(lambda: not self._holding, timeout_s)

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
        self.choice.failed()
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
        round already waited for entries (``BLOCK`` with one stream; with several, or a
        pool of one connection, ``_steps`` waits ``flush_interval_s`` after it)."""
        if 0 < stats.entries < max(1, self.ctx.config.flush_batch_size // 4):
            return self.ctx.config.flush_linger_s
        return 0.0

    def _succeeded(self) -> None:
        self._failing_since = None
        self.choice.succeeded()

    def _quiet_s(self) -> float:
        """Seconds left of the pause after a long failing streak (0 = none)."""
        return max(0.0, self._quiet_until - self.ctx.clock.monotonic())

    def _observe(self, clients: Clients) -> None:
        if clients.observer is None:  # a standalone worker's clients: time them too
            clients.observer = self.metrics.observe_op

    def _share(self, clients: Clients) -> None:
        """Read the outbox without ``BLOCK`` (and wait out ``flush_interval_s`` after an
        empty read, as with several streams) when ``clients``' Redis pool holds one
        connection, shared with the application's calls: a blocking read would hold it,
        and a flusher that reads again at once wins it back first (a put took 2.2 s)."""
        pool = getattr(clients.redis, "connection_pool", None)
        cap = getattr(pool, "max_connections", None)
        self._poll = isinstance(cap, int) and cap < 2

    def start_thread(self, clients: Clients) -> None:
        """Start the flush loop in a daemon thread using blocking ``clients`` (the
        saver's: ``_share``)."""
        self._share(clients)
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

    def interrupt(self) -> None:
        """End the loop's blocking read of new entries now, if it waits in one (one outbox
        stream, a loop run with blocking clients: ``io/gated_read.py``); the round then
        finds nothing and the loop goes on, or ends if a stop was requested. Safe from
        any thread but the loop's own; a no-op otherwise."""
        if self._sync_clients is not None:
            unblock(self._gate, self._sync_clients)

    def request_stop(self) -> None:
        """Ask the loop to end after its current round; a wait between rounds that
        ``wake()`` ends (an idle wait, a linger) still runs out unless woken. Safe from any
        thread, not from a signal handler (it takes a lock the interrupted code may hold:
        ``outbox/worker.py`` reaches it through a pipe)."""
        self._stop.set()

    def wait_stop(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` seconds for a stop request; True once requested."""
        return self._stop.wait(timeout_s)

    # the loop: one generator of steps (a round's plan to run, a wait), driven by a thread
    # (``_drive_sync``) or a task (``_drive_async``)
    def _steps(self) -> Generator[_Step, Any, None]:
        """The flush loop as steps: yields a round's plan (sent back its ``BatchStats``, or
        thrown its error) or a ``_Wait``, until ``request_stop()``. Backoff after a failed
        round (doubling up to ``max_backoff_s``), the pause of a long failing streak
        (``_quiet_s``) and the linger after a light round (``_linger_s``) are decided here,
        once for both drivers."""
        backoff = 0.05
        while not self._stop.is_set():
            quiet = self._quiet_s()
            if quiet > 0:
                yield _Wait(min(quiet, 0.5))
                continue
            failed: Exception | None = None
            try:
                stats = yield self._round_plan()
                self._account(stats)
                self._succeeded()
            except Exception as exc:
                failed = exc
            finally:  # counted (or failed): settle() returns, before any backoff
                self._round_over()
            if failed is not None:
                yield _Wait(backoff)
                backoff = self._failed(failed, backoff)
                continue
            backoff = 0.05
            linger = self._linger_s(stats)
            if linger:
                yield _Wait(linger, linger=True)
            elif not stats.entries and (len(self.ctx.outboxes) > 1 or self._poll):
                # several streams (or a pool of one) are read without BLOCK: wait out
                # the interval here, where stop() and wake() end the wait (a plan's
                # Sleep would not end)
                yield _Wait(self.ctx.config.flush_interval_s, linger=True)

    def _leave_plan(self) -> Plan[None]:
        """Leave the consumer group and the registry (``heartbeat.stop_plan``) as the loop
        ends; a failure is logged (the entries it holds stay for another flusher)."""
        try:
            self.left_group = bool((yield from stop_plan(self.ctx, self.consumer)))
        except Exception as exc:
            log.info("flusher %s could not leave the consumer group: %s", self.consumer,
                     safe_error(exc))

    def _loop_sync(self, clients: Clients) -> None:
        self._sync_clients = clients
        self.heartbeat.start_thread(clients)
        if self.sweeper is not None:
            self.sweeper.start_thread(clients)
        try:
            self._drive_sync(clients)
        finally:
            if self.sweeper is not None:
                self.sweeper.stop()
            self.heartbeat.stop()
        run_sync(self._leave_plan(), clients)

    def _drive_sync(self, clients: Clients) -> None:
        """Run ``_steps`` in this thread: plans with ``run_sync``; a wait ends early at
        ``request_stop()`` (a linger: at ``wake()``)."""
        steps = Steps(self._steps())
        for step in steps:
            if isinstance(step, _Wait):
                if step.linger:
                    self._nudge.wait(step.seconds)
                    self._nudge.clear()
                else:
                    self._stop.wait(step.seconds)
            else:
                try:
                    steps.send(run_sync(step, clients))
                except Exception as exc:
                    steps.throw(exc)

    async def start_task(self, clients: Clients) -> None:
        """Start the flush loop as an asyncio task on the running loop using async clients
        (the saver's: ``_share``)."""
        self._share(clients)
        self._observe(clients)
        await run_async(ensure_group_plan(self.ctx), clients)
        await self.heartbeat.abeat(clients)  # a member of the registry once started
        self._aloop, self._anudge = asyncio.get_running_loop(), asyncio.Event()
        self._task = self._aloop.create_task(self._loop_async(clients))

    async def _loop_async(self, clients: Clients) -> None:
        self.heartbeat.start_task(clients)
        if self.sweeper is not None:
            self.sweeper.start_task(clients)
        try:
            await self._drive_async(clients)
        finally:
            if self.sweeper is not None:
                await self.sweeper.astop()
            await self.heartbeat.astop()
        await run_async(self._leave_plan(), clients)

    async def _drive_async(self, clients: Clients) -> None:
        """Run ``_steps`` in this task: plans with ``run_async``; a linger ends early at
        ``wake()``; cancelling the task ends it at once (plans and lingers run through
        ``io.tasks.cancellable``: a cancel a client library swallows still ends it, so
        ``asyncio.run`` returns)."""
        steps = Steps(self._steps())
        for step in steps:
            if isinstance(step, _Wait):
                if not step.linger:
                    await asyncio.sleep(step.seconds)
                elif self._anudge is not None:
                    await cancellable(self._anudge.wait(), step.seconds)
                    self._anudge.clear()
            else:
                try:
                    steps.send(await cancellable(run_async(step, clients)))
                except Exception as exc:  # asyncio.CancelledError is none: it ends the task
                    steps.throw(exc)

    @property
    def running(self) -> bool:
        """True while the loop runs."""
        if self._thread is not None:
            return self._thread.is_alive()
        return self._task is not None and not self._task.done()

    def stop(self, timeout_s: float = 5.0) -> None:
        """Stop the loop after its current round (waits up to ``timeout_s`` seconds); a
        wait for new entries ends at once (``wake``, ``interrupt``)."""
        self._stop.set()
        self.wake()
        self.interrupt()
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
        if self._thread is not None:  # a thread's loop (this saver's sync clients)
            await asyncio.to_thread(self.stop, timeout_s)
