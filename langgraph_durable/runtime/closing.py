"""Closing a ``SaverRuntime`` (``close``, ``aclose``, mixed into it): drain the outbox
within ``close_drain_timeout_s`` when the flusher runs here, else count what is left for
the flushers; stop the flusher and the deferred set-up; close the clients made here. What
is left in the outbox is logged with how to drain it (the ``langgraph-durable flush``
command line); a tier that does not answer never keeps the runtime open."""

from __future__ import annotations

import logging
import shlex
from collections.abc import Generator
from typing import TYPE_CHECKING, Any, TypeVar

from ..config import DurableConfig
from ..core.drive import adrive, drive
from ..core.ops import Pipeline, Plan
from ..errors import (
    ConfigurationError,
    CorruptRecordError,
    DeadLetteredError,
    FlushTimeoutError,
    TierUnavailableError,
)
from ..io import clients as C
from ..outbox.flusher import Flusher
from ..outbox.process import FlusherProcess
from ..plans.context import Context
from .deferred import DeferredSetup

log = logging.getLogger("langgraph_durable.saver")

T = TypeVar("T")

_Step = tuple[str, Any]
"""A step of ``_closing``: ``("flush", seconds)`` or ``("count", outbox-length plan)``."""


def outbox_length_plan(ctx: Context) -> Plan[int]:
    """The entries in the outbox streams now (``XLEN`` of every partition, summed)."""
    sizes = yield Pipeline([["XLEN", s] for s in ctx.outboxes])
    return sum(int(n) for n in sizes)


class RuntimeClosing:
    """``close`` and ``aclose`` of ``SaverRuntime`` (its base class), on its attributes."""

    config: DurableConfig
    context: Context
    clients: C.ClientSet
    flusher: Flusher | FlusherProcess | None
    deferred: DeferredSetup | None
    closed: bool

    if TYPE_CHECKING:  # SaverRuntime's
        def flush(self, timeout_s: float = 30.0) -> None: ...
        async def aflush(self, timeout_s: float = 30.0) -> None: ...
        def _run_plain(self, plan: Generator[Any, Any, T]) -> T: ...
        async def _arun_plain(self, plan: Generator[Any, Any, T]) -> T: ...

    def close(self, drain_timeout_s: float | None = None) -> None:
        """``DurableSaver.close``: drain (up to ``drain_timeout_s``, default
        ``close_drain_timeout_s``), stop the flusher and the deferred set-up, close the
        clients made here; later calls raise ``SaverClosedError``."""
        if self.closed:
            return
        try:
            drive(self._closing(drain_timeout_s),
                  lambda step: self.flush(step[1]) if step[0] == "flush"
                  else self._run_plain(step[1]), throws=(BaseException,))
        finally:
            if self.flusher is not None:
                self.flusher.stop()
            self.clients.close()

    def _closing(self, drain_timeout_s: float | None) -> Generator[_Step, Any, None]:
        """What ``close`` and ``aclose`` do, written once: yields ``("flush", seconds)``
        (drain through the running flusher) or ``("count", plan)`` (run the outbox-length
        plan; its reply is sent back); logs what is left, or why the outbox was not
        checked, instead of raising; always marks the runtime closed and stops the
        deferred set-up. The caller then stops the flusher and closes the clients."""
        try:
            if self.flusher is not None and self.flusher.running:
                yield "flush", self._drain_s(drain_timeout_s)
            elif self.config.flusher == "off":
                n = yield "count", outbox_length_plan(self.context)
                if n:
                    log.info("closing with %d entries in the outbox %s for the flushers; %s",
                             n, self.context.outbox, self._drain_hint())
        except (FlushTimeoutError, TierUnavailableError, DeadLetteredError,
                CorruptRecordError, ConfigurationError) as exc:  # (a server refusing the
            # URL's database: the calls before raised it already)
            self._log_close_failure(exc)
        finally:
            self.closed = True
            if self.deferred is not None:
                self.deferred.stop()

    def _drain_hint(self) -> str:
        """What drains a leftover outbox, for the log line of ``close``."""
        c = self.config
        where = self.clients.describe()
        return ("they stay in Redis, and the next saver (flusher='auto') or flusher worker "
                f"with key_prefix={c.key_prefix!r} on this Redis drains them; to drain them "
                f"now run: langgraph-durable --key-prefix {shlex.quote(c.key_prefix)} "
                f"--database {shlex.quote(c.database)} flush  (with REDIS_URL and "
                f"MONGODB_URL set to this saver's servers{where})")

    def _drain_s(self, given: float | None) -> float:
        return self.config.close_drain_timeout_s if given is None else given

    def _log_close_failure(self, exc: Exception) -> None:
        if isinstance(exc, DeadLetteredError):
            log.error("closing with dead letters: %s", exc)
        elif isinstance(exc, FlushTimeoutError):
            log.warning("closing with entries still in the outbox: %s; %s", exc,
                        self._drain_hint())
        else:  # nothing is known about the outbox: say so, not that entries are left
            log.warning("closing without checking the outbox: %s; anything this process "
                        "wrote and MongoDB lacks stays in Redis for the next flusher (%s)",
                        exc, self._drain_hint())

    async def aclose(self, drain_timeout_s: float | None = None) -> None:
        """Async ``close``; also closes the asyncio clients made for this event loop."""
        if self.closed:
            return

        async def step(step: _Step) -> Any:
            if step[0] == "flush":
                return await self.aflush(step[1])
            return await self._arun_plain(step[1])

        try:
            await adrive(self._closing(drain_timeout_s), step, throws=(BaseException,))
        finally:
            if self.flusher is not None:
                await self.flusher.astop()
            await self.clients.aclose()
