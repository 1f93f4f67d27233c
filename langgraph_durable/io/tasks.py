"""Background tasks that end when their event loop cancels them.

``asyncio.run`` (and every runner closing a loop) cancels the tasks still running and
waits for them. A background loop (the in-process flusher, its heartbeat, the deferred
set-up) that keeps running after that cancel keeps ``asyncio.run`` from returning, and
that happens when a library under it swallows the cancel: on Python < 3.12
``asyncio.wait_for`` returns the inner result when the inner task finished in the same
loop turn as the cancel (CPython gh-86296), and PyMongo's asynchronous sends and redis-py's
writes with a socket timeout go through it. ``cancellable`` runs one step of such a loop
in a task of its own and waits for it with ``asyncio.wait``, which never swallows a cancel:
a cancel of the caller always raises ``CancelledError`` in the caller.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

__all__ = ["Periodic", "cancellable"]


async def cancellable(step: Coroutine[Any, Any, T], timeout_s: float | None = None
                      ) -> T | None:
    """``await step`` in a task of its own, so that cancelling the caller raises
    ``asyncio.CancelledError`` in the caller whatever ``step`` does with it (``step``'s
    task is cancelled then too, and not waited for). Returns ``step``'s result, or None
    when ``timeout_s`` seconds passed first (``step`` is cancelled then). Raises what
    ``step`` raises."""
    inner = asyncio.ensure_future(step)
    try:
        done, _ = await asyncio.wait({inner}, timeout=timeout_s)
    except BaseException:  # cancelled: the caller ends, whether or not ``step`` would
        _abandon(inner)
        raise
    if not done:
        _abandon(inner)
        return None
    return inner.result()


def _abandon(task: asyncio.Future[Any]) -> None:
    """Cancel ``task`` and retrieve its outcome once done (nobody awaits it any more: an
    error it ends with is not logged as "never retrieved")."""
    task.cancel()
    task.add_done_callback(lambda t: None if t.cancelled() else t.exception())


class Periodic:
    """Something done every ``period_s`` seconds, after a first wait, in a daemon thread
    (``start_thread``: ``tick`` with blocking clients) or an asyncio task of the running
    loop (``start_task``: ``atick`` with asyncio clients, each run through ``cancellable``
    so a cancel always ends the task) until ``stop()``/``astop()``. Subclasses set
    ``period_s`` and ``name`` (the thread's name) and define ``tick``/``atick``, which
    handle their own errors (an error escaping ``tick`` ends the thread). The flusher's
    heartbeat and its retention sweeper are ones."""

    period_s: float
    name: str

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._task: asyncio.Task[None] | None = None

    def tick(self, clients: Any) -> None:
        """One turn with blocking ``clients``."""
        raise NotImplementedError

    async def atick(self, clients: Any) -> None:
        """One turn with asyncio ``clients``."""
        raise NotImplementedError

    def start_thread(self, clients: Any) -> None:
        """``tick`` every ``period_s`` in a daemon thread until ``stop()``."""
        def loop() -> None:
            while not self._stop.wait(self.period_s):
                self.tick(clients)

        self._thread = threading.Thread(target=loop, daemon=True, name=self.name)
        self._thread.start()

    def start_task(self, clients: Any) -> None:
        """``atick`` every ``period_s`` as an asyncio task of the running loop until
        ``astop()``."""
        async def loop() -> None:
            while True:  # a cancel ends it even if a client swallows it (above)
                await asyncio.sleep(self.period_s)
                await cancellable(self.atick(clients))

        self._task = asyncio.get_running_loop().create_task(loop())

    def stop(self, timeout_s: float = 5.0) -> None:
        """End the thread (waits up to ``timeout_s`` seconds for a turn under way)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)

    async def astop(self) -> None:
        """End the task (cancelled, then awaited; its errors are not raised)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task
