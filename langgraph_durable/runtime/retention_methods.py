"""The retention methods of a ``DurableSaver`` (``DurableConfig.ttl``): pin and unpin a
thread, set its TTL, read its facts, list the threads due next, sweep now. Each is one
delegation to a plan of ``plans/retention_policy.py`` on the saver's runtime (sync and async
twins); the saver inherits them (``saver.py`` keeps LangGraph's contract)."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from ..core.records import check_id
from ..durable.retention_docs import ThreadRetention, check_minutes
from ..errors import CorruptRecordError
from ..plans import retention_policy as P
from ..plans.context import Context
from .base import SaverRuntime

log = logging.getLogger("langgraph_durable.retention")

MANUAL_OWNER = "manual"
"""Lease owner prefix of a sweep asked for by a call (``sweep()``, the CLI)."""


def _owner(runtime: SaverRuntime) -> str:
    return f"{MANUAL_OWNER}-{id(runtime):x}"


def _readable(docs: Iterable[Mapping[str, Any]]) -> list[ThreadRetention]:
    """``ThreadRetention`` of each retention document; a damaged one is left out and
    logged (WARNING, naming its thread and field), so one never hides the others."""
    out = []
    for d in docs:
        try:
            out.append(ThreadRetention.of(d))
        except CorruptRecordError as exc:
            log.warning("retention facts left out: %s", exc)
    return out


class RetentionMethods:
    """Retention by policy on the saver (see ``plans/retention_policy.py`` for what a sweep
    takes and keeps)."""

    _runtime: SaverRuntime
    _ctx: Context

    def pin_thread(self, thread_id: str) -> None:
        """Pin ``thread_id``: no sweep deletes or prunes it until ``unpin_thread`` (a
        thread not written yet can be pinned too). Raises ``InvalidIdentifierError``
        for a thread_id that is not storable text."""
        self._runtime.run(P.pin_plan(self._ctx, check_id("thread_id", thread_id), True))

    async def apin_thread(self, thread_id: str) -> None:
        """Async ``pin_thread``."""
        await self._runtime.arun(P.pin_plan(self._ctx, check_id("thread_id", thread_id), True))

    def unpin_thread(self, thread_id: str) -> None:
        """Unpin ``thread_id``: sweeps take it again once its expiry passed."""
        self._runtime.run(P.pin_plan(self._ctx, check_id("thread_id", thread_id), False))

    async def aunpin_thread(self, thread_id: str) -> None:
        """Async ``unpin_thread``."""
        await self._runtime.arun(P.pin_plan(self._ctx, check_id("thread_id", thread_id),
                                            False))

    def set_thread_ttl(self, thread_id: str, minutes: float) -> None:
        """Give ``thread_id`` a TTL of its own: it expires ``minutes`` from now (0: at the
        next sweep), and each later activity pushes its expiry to at least activity +
        ``minutes`` (a run naming ``lgd_ttl_minutes`` sets it again). Raises
        ``ValueError`` for minutes that are not a finite number >= 0."""
        tid = check_id("thread_id", thread_id)
        self._runtime.run(P.set_ttl_plan(self._ctx, tid, check_minutes(minutes, tid)))

    async def aset_thread_ttl(self, thread_id: str, minutes: float) -> None:
        """Async ``set_thread_ttl``."""
        tid = check_id("thread_id", thread_id)
        await self._runtime.arun(P.set_ttl_plan(self._ctx, tid, check_minutes(minutes, tid)))

    def thread_retention(self, thread_id: str) -> ThreadRetention | None:
        """``thread_id``'s retention facts (last activity, expiry, own TTL, pinned, held),
        None when none were recorded (no policy when it was written, or swept). Raises
        ``CorruptRecordError`` naming the thread and the field when its retention document
        is damaged (a field of another type)."""
        doc = self._runtime.run(P.facts_plan(self._ctx, check_id("thread_id", thread_id)))
        return None if doc is None else ThreadRetention.of(doc)

    async def athread_retention(self, thread_id: str) -> ThreadRetention | None:
        """Async ``thread_retention``."""
        doc = await self._runtime.arun(P.facts_plan(self._ctx,
                                                    check_id("thread_id", thread_id)))
        return None if doc is None else ThreadRetention.of(doc)

    def retention_due(self, limit: int = 20) -> list[ThreadRetention]:
        """The ``limit`` unpinned threads that expire soonest (passed expiries first); a
        thread whose retention document is damaged is left out and logged (WARNING, naming
        it and the field)."""
        return _readable(self._runtime.run(P.upcoming_plan(self._ctx, limit)))

    async def aretention_due(self, limit: int = 20) -> list[ThreadRetention]:
        """Async ``retention_due``."""
        return _readable(await self._runtime.arun(P.upcoming_plan(self._ctx, limit)))

    def sweep(self, *, limit: int | None = None, now: float | None = None,
              dry_run: bool = False) -> P.SweepReport:
        """Sweep now (not waiting for ``sweep_interval_minutes``): the threads whose
        expiry passed at ``now`` (seconds since the epoch, default the current time), at
        most ``limit`` (default the policy's ``sweep_limit``), deleted or pruned by the
        policy's strategy; ``dry_run`` changes nothing and reports what would be done.
        Returns a ``SweepReport`` (``skipped`` says why nothing was done: no ``ttl``
        option, another sweeper holds the lease). Raises ``FlushTimeoutError`` when the
        outbox does not drain within ``delete_flush_timeout_s``."""
        return self._runtime.run(self._sweep_plan(limit, now, dry_run))

    async def asweep(self, *, limit: int | None = None, now: float | None = None,
                     dry_run: bool = False) -> P.SweepReport:
        """Async ``sweep``."""
        return await self._runtime.arun(self._sweep_plan(limit, now, dry_run))

    def _sweep_plan(self, limit: int | None, now: float | None, dry_run: bool) -> Any:
        if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)
                                  or limit < 1):
            raise ValueError(f"sweep limit must be an int >= 1, got {limit!r}")
        now_ms = None if now is None else int(now * 1000)
        return P.sweep_plan(self._ctx, _owner(self._runtime), now_ms=now_ms, limit=limit,
                            dry_run=dry_run)
