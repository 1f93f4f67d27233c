"""The retention sweeper beside a flusher's loop (``DurableConfig.ttl``): every flusher
(the in-process thread or task, the supervised process, each ``langgraph-durable flusher``
or ``python -m langgraph_durable.outbox.worker``) runs one, and the lease of
``plans/retention_policy.py`` lets one sweep run at a time across processes, once per
``sweep_interval_minutes``. It is a thread (or task) of its
own, not a step of the flush loop: a sweep waits for the outbox to drain, which needs the
flush loop running.
"""

from __future__ import annotations

import logging

from ..io.drivers import Clients, run_async, run_sync
from ..io.tasks import Periodic
from ..metrics import safe_error
from ..plans.context import Context
from ..plans.retention_policy import SweepReport, sweep_plan

log = logging.getLogger("langgraph_durable.retention")

POLL_MAX_S = 30.0
"""Longest pause, in seconds, between two looks at whether a sweep is due."""


class Sweeper(Periodic):
    """Runs ``sweep_plan(scheduled=True)`` every ``period_s`` seconds (the policy's
    interval, at most ``POLL_MAX_S``) in a daemon thread (``start_thread``) or an asyncio
    task (``start_task``) until stopped (``io.tasks.Periodic``); a look that is not due,
    or finds another sweeper holding the lease, costs one MongoDB command. A failed sweep
    is logged and tried again at the next look. ``owner``: the name in the lease (the
    flusher's consumer name); ``last``: the last sweep's report (None before one ran)."""

    def __init__(self, ctx: Context, owner: str) -> None:
        policy = ctx.config.ttl
        assert policy is not None, "a Sweeper needs DurableConfig.ttl"
        super().__init__()
        self.ctx = ctx
        self.owner = owner
        self.name = f"langgraph-durable-sweeper-{owner}"
        self.period_s = min(policy.sweep_interval_minutes * 60, POLL_MAX_S)
        self.last: SweepReport | None = None
        self.sweeps = 0

    def _done(self, report: SweepReport) -> None:
        if report.skipped:
            return
        self.last = report
        self.sweeps += 1
        if report.deleted or report.pruned or report.held or report.failed or report.stopped:
            log.info("retention sweep by %s: %s", self.owner, report.summary())

    def tick(self, clients: Clients) -> None:
        """One look with blocking ``clients``: a sweep if one is due (errors logged)."""
        try:
            self._done(run_sync(sweep_plan(self.ctx, self.owner, scheduled=True), clients))
        except Exception as exc:  # the next look tries again
            log.warning("retention sweep failed: %s", safe_error(exc))

    async def atick(self, clients: Clients) -> None:
        """Async ``tick``."""
        try:
            self._done(await run_async(sweep_plan(self.ctx, self.owner, scheduled=True),
                                       clients))
        except Exception as exc:  # asyncio.CancelledError is none: it ends the task
            log.warning("retention sweep failed: %s", safe_error(exc))
