"""The retention sweeper beside a flusher's loop (``DurableConfig.ttl``): every flusher
(the in-process thread or task, the supervised process, each ``langgraph-durable flusher``
or ``python -m langgraph_durable.outbox.worker``) runs one, and the lease of
``plans/retention.py`` lets one sweep run at a time across processes, once per
``sweep_interval_minutes``. It is a thread (or task) of its
own, not a step of the flush loop: a sweep waits for the outbox to drain, which needs the
flush loop running.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading

from ..io.drivers import Clients, run_async, run_sync
from ..io.tasks import cancellable
from ..metrics import safe_error
from ..plans.context import Context
from ..plans.retention import SweepReport, sweep_plan

log = logging.getLogger("langgraph_durable.retention")

POLL_MAX_S = 30.0
"""Longest pause, in seconds, between two looks at whether a sweep is due."""


class Sweeper:
    """Runs ``sweep_plan(scheduled=True)`` every ``poll_s`` seconds (the policy's
    interval, at most ``POLL_MAX_S``) in a daemon thread (``start_thread``) or an asyncio
    task (``start_task``) until stopped; a look that is not due, or finds another sweeper
    holding the lease, costs one MongoDB command. A failed sweep is logged and tried again
    at the next look. ``owner``: the name in the lease (the flusher's consumer name);
    ``last``: the last sweep's report (None before one ran)."""

    def __init__(self, ctx: Context, owner: str) -> None:
        policy = ctx.config.ttl
        assert policy is not None, "a Sweeper needs DurableConfig.ttl"
        self.ctx = ctx
        self.owner = owner
        self.poll_s = min(policy.sweep_interval_minutes * 60, POLL_MAX_S)
        self.last: SweepReport | None = None
        self.sweeps = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._task: asyncio.Task[None] | None = None

    def _done(self, report: SweepReport) -> None:
        if report.skipped:
            return
        self.last = report
        self.sweeps += 1
        if report.deleted or report.pruned or report.held or report.failed or report.stopped:
            log.info("retention sweep by %s: %s", self.owner, report.summary())

    def start_thread(self, clients: Clients) -> None:
        """Sweep in a daemon thread until ``stop()``."""
        def loop() -> None:
            while not self._stop.wait(self.poll_s):
                try:
                    self._done(run_sync(sweep_plan(self.ctx, self.owner, scheduled=True),
                                        clients))
                except Exception as exc:  # the next look tries again
                    log.warning("retention sweep failed: %s", safe_error(exc))

        self._thread = threading.Thread(target=loop, daemon=True,
                                        name=f"langgraph-durable-sweeper-{self.owner}")
        self._thread.start()

    def start_task(self, clients: Clients) -> None:
        """Sweep as an asyncio task of the running loop until ``astop()``."""
        async def loop() -> None:
            while True:
                await asyncio.sleep(self.poll_s)
                try:
                    report = await cancellable(run_async(
                        sweep_plan(self.ctx, self.owner, scheduled=True), clients))
                    if report is not None:
                        self._done(report)
                except Exception as exc:  # asyncio.CancelledError is none: it ends the task
                    log.warning("retention sweep failed: %s", safe_error(exc))

        self._task = asyncio.get_running_loop().create_task(loop())

    def stop(self, timeout_s: float = 5.0) -> None:
        """End the thread (waits up to ``timeout_s`` seconds for a sweep under way; one
        still running then ends at its next thread, its lease lapsing)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)

    async def astop(self) -> None:
        """End the task."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
