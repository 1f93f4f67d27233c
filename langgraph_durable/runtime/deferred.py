"""MongoDB set-up retried in the background: a saver entered while MongoDB is down still
starts (Redis serves what it holds; the outbox keeps the rest) and creates its indexes and
records its schema version once MongoDB answers."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable

from ..core.ops import Plan
from ..errors import ConfigurationError
from ..io.drivers import Clients, run_async, run_sync
from ..io.tasks import cancellable
from ..metrics import safe_error

log = logging.getLogger("langgraph_durable.saver")


class DeferredSetup:
    """Runs ``make_plan()`` (the MongoDB part of ``setup()``) until it succeeds, in a
    daemon thread (sync clients) or an asyncio task (asyncio clients), waiting ``delay_s``
    seconds after a failure (doubling up to ``max_delay_s``), and stops at a
    ``ConfigurationError`` (logged as an error: another key prefix owns the collections;
    then ``on_refused(error)`` is called).
    ``done`` is True once it succeeded; ``stop()`` ends it."""

    def __init__(self, make_plan: Callable[[], Plan], *, delay_s: float = 0.5,
                 max_delay_s: float = 5.0,
                 on_refused: Callable[[ConfigurationError], None] | None = None) -> None:
        self.make_plan = make_plan
        self.on_refused = on_refused
        self.delay_s, self.max_delay_s = delay_s, max_delay_s
        self.done = False
        self.attempts = 0
        self.last_error: str | None = None
        self._began = time.monotonic()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._task: asyncio.Task[None] | None = None

    def _failed(self, exc: Exception, delay: float) -> float:
        self.attempts += 1
        self.last_error = safe_error(exc)
        log.debug("MongoDB set-up attempt %d failed: %s", self.attempts, self.last_error)
        return min(delay * 2, self.max_delay_s)

    def _refused(self, exc: ConfigurationError) -> None:
        """MongoDB answered and refused this saver (collections owned by another key
        prefix): retrying cannot help, so it stops and says so."""
        self.attempts += 1
        self.last_error = str(exc)
        log.error("the MongoDB set-up deferred at start was refused: %s", exc)
        if self.on_refused is not None:
            self.on_refused(exc)

    def _succeeded(self) -> None:
        self.done = True
        log.warning("MongoDB answered: indexes created and schema version recorded %.1f s "
                    "after the saver started without them", time.monotonic() - self._began)

    def start_thread(self, clients: Clients) -> None:
        """Retry in a daemon thread with blocking ``clients``."""
        def loop() -> None:
            delay = self.delay_s
            while not self._stop.wait(delay):
                try:
                    run_sync(self.make_plan(), clients)
                except ConfigurationError as exc:
                    self._refused(exc)
                    return
                except Exception as exc:
                    delay = self._failed(exc, delay)
                    continue
                self._succeeded()
                return

        self._thread = threading.Thread(target=loop, name="langgraph-durable-setup",
                                        daemon=True)
        self._thread.start()

    def start_task(self, clients: Clients) -> None:
        """Retry in an asyncio task on the running loop with asyncio ``clients``."""
        async def loop() -> None:
            delay = self.delay_s
            while not self._stop.is_set():
                await asyncio.sleep(delay)
                try:  # a cancel ends it even if the client swallows it (io/tasks.py)
                    await cancellable(run_async(self.make_plan(), clients))
                except asyncio.CancelledError:
                    raise
                except ConfigurationError as exc:
                    self._refused(exc)
                    return
                except Exception as exc:
                    delay = self._failed(exc, delay)
                    continue
                self._succeeded()
                return

        self._task = asyncio.get_running_loop().create_task(loop())

    def stop(self) -> None:
        """End the retries (a running attempt finishes in the background)."""
        self._stop.set()
        if self._task is not None and not self._task.done():
            self._task.cancel()
