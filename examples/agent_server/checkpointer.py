"""The checkpointer of the Agent Server example (``langgraph.json``: ``"checkpointer":
{"path": "./checkpointer.py:make_saver"}``).

The Agent Server calls ``make_saver()`` and enters what it returns with ``async with``:
once at start-up (left at shutdown) and, with ``BG_JOB_ISOLATED_LOOPS=true``, once more
in each run thread (never left). ``SharedSaver`` hands all of them one ``DurableSaver``
per process (one flusher thread, one set of clients per event loop), closed, its outbox
drained to MongoDB, when the start-up entry leaves. ``env_saver()`` is that process's
``SharedSaver``, the same one ``store.py`` uses: the store runs on this saver.

Read from the environment (``DurableSaver.from_conn_string``):

- ``REDIS_URL`` (``redis://``, ``rediss://``, ``redis+sentinel://``, ``redis+cluster://``)
  and ``MONGODB_URL``, both required (a ``ConfigurationError`` names what is missing);
- ``LGD_KEY_PREFIX`` and ``LGD_DATABASE``, optional (defaults ``lgd`` and the database of
  ``MONGODB_URL``, else ``langgraph_durable``), and any other ``LGD_<OPTION>``.

No ``await saver.setup()`` is needed: entering the saver sets it up.
"""

from __future__ import annotations

from langgraph_durable import SharedSaverEntry, env_saver


def make_saver() -> SharedSaverEntry:
    """An async context manager yielding this process's ``DurableSaver`` (opened by the
    first entry, closed when that entry leaves)."""
    return env_saver()()
