"""The dashboard's runs: a bounded background executor for the graph runs its actions
start (answer an interrupt, retry, run a fork), with each run's state for the pages and
the audit log. Framework-free; thread-safe."""

from __future__ import annotations

import concurrent.futures
import itertools
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from ..errors import DurableSaverError


class QueueFullError(DurableSaverError):
    """A run was refused: as many runs as the dashboard allows are running or waiting."""


class ThreadBusyError(DurableSaverError, ValueError):
    """A run was refused: the dashboard already runs (or queued) one of this thread."""


KEPT = 200
"""Finished runs remembered for the pages (the audit log keeps them all)."""


class Runs:
    """Runs on ``workers`` threads, at most ``max_queued`` more waiting: ``submit``
    refuses with ``QueueFullError`` beyond that, and ``ThreadBusyError`` for a thread
    that has a run queued or running here (two runs of one thread would race).

    A run's record: ``id``, ``thread_id``, ``action``, ``state`` (``queued``,
    ``running``, ``done``, ``failed``, ``cancelled``), ``queued_at``/``started``/
    ``ended`` (epoch seconds), ``result``, ``error``. A queued run can be cancelled
    (``cancel``); a started one cannot be stopped (Python cannot stop a thread, and the
    run ends at a checkpoint of its own making only)."""

    def __init__(self, workers: int = 2, max_queued: int = 8) -> None:
        if workers < 1 or max_queued < 0:
            raise ValueError("workers must be >= 1 and max_queued >= 0")
        self.workers, self.max_queued = workers, max_queued
        self._pool = concurrent.futures.ThreadPoolExecutor(workers,
                                                           thread_name_prefix="lgd-run")
        self._lock = threading.Lock()
        self._runs: OrderedDict[str, dict[str, Any]] = OrderedDict()
        self._futures: dict[str, concurrent.futures.Future[Any]] = {}
        self._ids = itertools.count(1)

    def active(self) -> int:
        """Runs queued or running."""
        with self._lock:
            return len(self._futures)

    def submit(self, thread_id: str, action: str, fn: Callable[[], dict[str, Any]],
               on_end: Callable[[dict[str, Any]], None] | None = None,
               meta: dict[str, Any] | None = None) -> dict[str, Any]:
        """Queue ``fn`` (the run; returns its result) and return the run's record (a
        copy; ``meta`` kept in it, as ``meta``). ``on_end(record)`` is called in the
        worker after the run (not for a run cancelled while queued). Raises
        ``QueueFullError`` or ``ThreadBusyError``."""
        with self._lock:
            busy = [r for r in self._runs.values() if r["thread_id"] == thread_id
                    and r["state"] in ("queued", "running")]
            if busy:
                raise ThreadBusyError(f"thread {thread_id!r} already has a run {busy[0]['state']} "
                                      "here: wait for it to end")
            if len(self._futures) >= self.workers + self.max_queued:
                raise QueueFullError(
                    f"{len(self._futures)} runs are running or queued, as many as this "
                    f"dashboard allows ({self.workers} running, {self.max_queued} waiting): "
                    "try again when one has ended")
            run_id = str(next(self._ids))
            run: dict[str, Any] = {"id": run_id, "thread_id": thread_id, "action": action,
                                   "state": "queued", "queued_at": time.time(),
                                   "started": None, "ended": None, "result": None,
                                   "error": None, "meta": dict(meta or {})}
            self._runs[run_id] = run
            while len(self._runs) > KEPT:
                oldest = next(iter(self._runs))
                if self._runs[oldest]["state"] in ("queued", "running"):
                    break
                self._runs.pop(oldest)
            self._futures[run_id] = self._pool.submit(self._work, run, fn, on_end)
            return dict(run)

    def _work(self, run: dict[str, Any], fn: Callable[[], dict[str, Any]],
              on_end: Callable[[dict[str, Any]], None] | None) -> None:
        with self._lock:
            if run["state"] != "queued":
                return
            run.update(state="running", started=time.time())
        try:
            result = fn()
        except BaseException as exc:  # recorded: the run failed
            with self._lock:
                run.update(state="failed", error=f"{type(exc).__name__}: {exc}",
                           ended=time.time())
        else:
            with self._lock:
                run.update(state="done", result=result, ended=time.time())
        finally:
            with self._lock:
                self._futures.pop(run["id"], None)
        if on_end is not None:
            on_end(dict(run))

    def cancel(self, run_id: str) -> dict[str, Any] | None:
        """Cancel a queued run (None when there is none of this id still queued: a
        started run is not stopped). Returns its record, ``state`` ``cancelled``."""
        with self._lock:
            run = self._runs.get(run_id)
            future = self._futures.get(run_id)
            if run is None or future is None or run["state"] != "queued" \
                    or not future.cancel():
                return None
            run.update(state="cancelled", ended=time.time())
            self._futures.pop(run_id, None)
            return dict(run)

    def of_thread(self, thread_id: str) -> list[dict[str, Any]]:
        """This dashboard's runs of ``thread_id``, newest first (copies)."""
        with self._lock:
            return [dict(r) for r in reversed(self._runs.values())
                    if r["thread_id"] == thread_id]

    def wait(self, timeout_s: float | None = None) -> None:
        """Wait until no run is queued or running (at most ``timeout_s`` seconds)."""
        with self._lock:
            futures = list(self._futures.values())
        concurrent.futures.wait(futures, timeout=timeout_s)

    def shutdown(self) -> None:
        """Cancel the queued runs and stop taking new ones; running ones finish."""
        self._pool.shutdown(wait=False, cancel_futures=True)
