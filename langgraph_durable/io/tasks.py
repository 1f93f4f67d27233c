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
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

__all__ = ["cancellable"]


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
