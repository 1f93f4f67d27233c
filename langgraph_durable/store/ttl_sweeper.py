"""The memory store's TTL sweeper thread (as ``PostgresStore``'s): one sweep every so
many minutes until stopped; a failed sweep is logged and the next one tries again."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

log = logging.getLogger("langgraph_durable.store")


class TtlSweeper:
    """Runs ``sweep()`` (deletes expired items, returns how many) in a daemon thread named
    ``langgraph-durable-store-sweep`` every ``minutes`` minutes between ``start`` and
    ``stop``."""

    def __init__(self, sweep: Callable[[], int]) -> None:
        self._sweep = sweep
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    def start(self, minutes: float) -> None:
        """Start the thread: a sweep every ``minutes`` minutes (the first after one
        interval); does nothing when it runs already."""
        if self._thread is not None:
            return
        self._stop.clear()

        def loop() -> None:
            while not self._stop.wait(minutes * 60):
                try:
                    self._sweep()
                except Exception as exc:  # the next sweep tries again
                    log.warning("TTL sweep of the memory store failed: %s", exc)

        self._thread = threading.Thread(target=loop, name="langgraph-durable-store-sweep",
                                        daemon=True)
        self._thread.start()

    def stop(self, timeout: float | None = 5) -> bool:
        """Stop the thread; True once it stopped (within ``timeout`` seconds), and when
        none ran."""
        thread = self._thread
        if thread is None:
            return True
        self._stop.set()
        thread.join(timeout=timeout)
        self._thread = None
        return not thread.is_alive()
