"""The long-term memory store of the Agent Server example (``langgraph.json``:
``"store": {"path": "./store.py:make_store"}``).

The Agent Server calls ``make_store()`` and enters what it returns with ``async with``,
like the checkpointer: once at start-up, after the checkpointer (left at shutdown, before
it), and, with ``BG_JOB_ISOLATED_LOOPS=true``, once in each run thread. Each entry is an
entry of the process's shared saver (``env_saver()``, the one ``checkpointer.py`` opens)
and yields a ``DurableStore`` on it: memories go through the saver's outbox and flusher
to MongoDB, read back from Redis and MongoDB. Graphs reach it with
``langgraph.config.get_store()`` (or ``runtime.store``).
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager

from langgraph_durable import DurableStore, env_saver


def make_store() -> AbstractAsyncContextManager[DurableStore]:
    """An async context manager yielding a ``DurableStore`` on this process's saver."""
    return env_saver().store()
