"""A deadline on a whole blocking call, for clients whose own timeouts are per socket read.

botocore's ``read_timeout`` bounds each socket read, so an endpoint that answers one byte at
a time holds a request for as long as it trickles. :class:`CallBound` runs the request in a
daemon worker thread and waits for it at most the deadline; past it the caller gets an
exception and the worker is abandoned (it finishes or fails on its own). The number of
workers is bounded: a hung endpoint cannot grow threads without limit.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

__all__ = ["CallBound", "DeadlinePassed"]

T = TypeVar("T")


class DeadlinePassed(Exception):
    """The call did not end within its deadline (or no worker was free for it in time).

    Attributes:
        deadline_s: the deadline in seconds.
        stuck: True when every worker was held by a call already past its deadline, so this
            call failed at once without running.
    """

    def __init__(self, message: str, *, deadline_s: float, stuck: bool) -> None:
        super().__init__(message)
        self.deadline_s = deadline_s
        self.stuck = stuck


class CallBound:
    """Runs blocking calls in at most ``workers`` daemon threads, each with a deadline.

    Args:
        workers: the most calls running at once (at least 1). A call that finds every worker
            busy waits for one, within its own deadline; when every worker is held by a call
            already past its deadline (abandoned, e.g. on a hung endpoint), a new call raises
            :class:`DeadlinePassed` at once instead of queueing.
        name: the worker threads' name prefix.
    """

    def __init__(self, workers: int = 16, name: str = "bounded-call") -> None:
        if workers < 1:
            raise ValueError(f"CallBound: workers must be at least 1 (got {workers!r})")
        self.workers = workers
        self.name = name
        self._slots = threading.BoundedSemaphore(workers)
        self._lock = threading.Lock()
        self.abandoned = 0
        """Calls past their deadline whose worker is still running."""

    def run(self, fn: Callable[[], T], deadline_s: float) -> T:
        """``fn()`` run in a worker thread; its result, or its exception re-raised.

        ``deadline_s`` (seconds, > 0) covers the wait for a free worker and the call.
        Raises :class:`DeadlinePassed` when it passes (the call is abandoned and keeps its
        worker until it ends by itself) or, at once, when every worker is abandoned."""
        end = time.monotonic() + deadline_s
        with self._lock:
            if self.abandoned >= self.workers:
                raise DeadlinePassed(
                    f"all {self.workers} workers are held by calls past their deadline; "
                    "not run",
                    deadline_s=deadline_s, stuck=True)
        if not self._slots.acquire(timeout=deadline_s):
            raise DeadlinePassed(f"no worker of {self.workers} was free within the deadline",
                                 deadline_s=deadline_s, stuck=False)
        done = threading.Event()
        outcome: list[Any] = []
        state = {"finished": False, "abandoned": False}

        def work() -> None:
            try:
                outcome.append((True, fn()))
            except BaseException as exc:  # handed to the caller
                outcome.append((False, exc))
            finally:
                with self._lock:
                    state["finished"] = True
                    if state["abandoned"]:
                        self.abandoned -= 1
                self._slots.release()
                done.set()

        try:
            threading.Thread(target=work, name=f"{self.name}-worker", daemon=True).start()
        except BaseException:
            self._slots.release()
            raise
        if not done.wait(max(0.0, end - time.monotonic())):
            with self._lock:
                if not state["finished"]:
                    state["abandoned"] = True
                    self.abandoned += 1
            if state["abandoned"]:
                raise DeadlinePassed("no answer within the deadline; the request was abandoned",
                                     deadline_s=deadline_s, stuck=False)
            done.wait()
        ok, value = outcome[0]
        if ok:
            return value  # type: ignore[no-any-return]
        raise value
