"""One ``DurableSaver`` per process for servers that enter their checkpointer once per
event-loop thread.

LangGraph's Agent Server enters the context manager of ``"checkpointer": {"path": ...}``
once per thread that asks for the checkpointer (a ``threading.local``): once in its main
thread at start-up, and, with ``BG_JOB_ISOLATED_LOOPS=true``, once more in each run thread
(each with an event loop of its own), whose entries it never leaves. A factory that opens
a new saver on every entry then holds one saver per run thread for the life of the
process: each with its own flusher thread, its own Redis and MongoDB clients, never
drained, never closed.

``SharedSaver`` opens one saver for all of them: the first entry opens it (set-up, the
in-process flusher), every entry made while it is open gets the same saver, and the
saver is closed (the outbox drained, the flusher stopped, the clients closed) when the
entry that opened it leaves. In the Agent Server that is its own start-up entry, which it
leaves at shutdown after the run queue stopped. A saver made by ``from_urls`` or
``from_conn_string`` serves every event loop: sync clients and one flusher thread for
the process, asyncio clients made per event loop on first use there.

In ``checkpointer.py`` (the Agent Server calls ``make_saver`` for each entry)::

    from langgraph_durable import DurableSaver
    from langgraph_durable.shared import SharedSaver

    make_saver = SharedSaver(DurableSaver.from_conn_string)
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import AsyncIterator, Callable
from types import TracebackType
from typing import Any

from .saver import DurableSaver
from .store import DurableStore


class _Opened:
    """One saver opened by a ``SharedSaver``, with the entry that opened it and the future
    that other entries wait on until its set-up is done (its error if it failed)."""

    def __init__(self, saver: DurableSaver, owner: SharedSaverEntry) -> None:
        self.saver = saver
        self.owner = owner
        self.ready: concurrent.futures.Future[None] = concurrent.futures.Future()


class SharedSaver:
    """A factory of context managers that all yield one process-wide ``DurableSaver``.

    ``open`` makes a new saver (not entered), e.g. ``DurableSaver.from_conn_string`` (the
    URLs from ``REDIS_URL``/``MONGODB_URL``, options from ``LGD_*``) or
    ``lambda: DurableSaver.from_urls(redis_url, mongo_url, key_prefix="app")``. It must
    return a saver that serves every event loop: ``from_urls``/``from_conn_string`` do
    (asyncio clients made per loop); a saver given asyncio clients only serves the loop
    that owns them and must not be shared across loops.

    Calling the ``SharedSaver`` returns a ``SharedSaverEntry``, to be used once with
    ``async with`` or ``with``. Entering it opens the saver when none is open (``open()``,
    then the saver's own ``async with``/``with``: set-up, flusher; its errors are raised,
    ``ConfigurationError``, ``TierUnavailableError``, and no saver stays open), else waits
    until the open saver's set-up is done (raising its error if it failed) and yields the
    same saver. Leaving the entry that opened it closes the saver (drains the outbox, stops
    the flusher, closes the clients); leaving any other entry does nothing. A later entry
    opens a new saver."""

    def __init__(self, open: Callable[[], DurableSaver]) -> None:
        self._open = open
        self._lock = threading.Lock()
        self._current: _Opened | None = None
        self.opened = 0
        """How many savers this factory has opened so far."""

    def __call__(self) -> SharedSaverEntry:
        """A new entry (a context manager for ``async with`` or ``with``)."""
        return SharedSaverEntry(self)

    @property
    def saver(self) -> DurableSaver | None:
        """The saver open now, None when none is."""
        current = self._current
        return None if current is None else current.saver

    def store(self, **kwargs: Any) -> contextlib.AbstractAsyncContextManager[DurableStore]:
        """An async context manager yielding ``saver.store(**kwargs)`` of the shared saver
        (a ``DurableStore`` on its clients, outbox and flusher; ``index``, ``ttl``, ...
        as ``DurableSaver.store``): entering it is an entry of this factory (it opens the
        saver if none is open, raising what that raises), leaving it leaves that entry.
        For the Agent Server's ``"store": {"path": ...}`` beside the checkpointer."""
        return _store_entry(self, kwargs)

    def _take(self, entry: SharedSaverEntry) -> tuple[_Opened, bool]:
        """The open saver, or a new one opened by ``entry``; True when ``entry`` opened
        it (and must enter it, then set ``ready``)."""
        with self._lock:
            current = self._current
            if current is not None and not current.saver.is_closed:
                return current, False
            current = self._current = _Opened(self._open(), entry)
            self.opened += 1
            return current, True

    def _release(self, opened: _Opened) -> None:
        """Forget ``opened``: the next entry opens a new saver."""
        with self._lock:
            if self._current is opened:
                self._current = None


@contextlib.asynccontextmanager
async def _store_entry(shared: SharedSaver, kwargs: dict[str, Any]
                       ) -> AsyncIterator[DurableStore]:
    async with shared() as saver:
        store = saver.store(**kwargs)
        try:
            yield store
        finally:
            await store.aclose()  # the sweeper, if any; the saver stays with its owner


_ENV_LOCK = threading.Lock()
_ENV: SharedSaver | None = None


def env_saver() -> SharedSaver:
    """The process's ``SharedSaver(DurableSaver.from_conn_string)`` (``REDIS_URL``,
    ``MONGODB_URL``, ``LGD_*``), made on the first call; every later call returns the same
    one. The Agent Server loads ``checkpointer.py`` and ``store.py`` as separate modules
    (a file named twice in ``langgraph.json`` is run twice): both take this one so that
    the checkpointer and the store share one saver (one flusher, one set of clients)."""
    global _ENV
    with _ENV_LOCK:
        if _ENV is None:
            _ENV = SharedSaver(DurableSaver.from_conn_string)
        return _ENV


class SharedSaverEntry:
    """One use of a ``SharedSaver`` (see there): ``async with`` or ``with``, once."""

    def __init__(self, shared: SharedSaver) -> None:
        self._shared = shared
        self._opened: _Opened | None = None

    def _begin(self) -> tuple[_Opened, bool]:
        if self._opened is not None:
            raise RuntimeError("a SharedSaverEntry is entered once; call the SharedSaver "
                               "again for another entry")
        opened, owner = self._shared._take(self)
        self._opened = opened
        return opened, owner

    def _failed(self, opened: _Opened, exc: BaseException) -> None:
        self._shared._release(opened)
        opened.ready.set_exception(exc)

    async def __aenter__(self) -> DurableSaver:
        """The shared saver, opened (set up, flusher started) by this entry if none is
        open; raises what the saver's ``async with`` raises."""
        opened, owner = self._begin()
        if not owner:
            await asyncio.wrap_future(opened.ready)
            return opened.saver
        try:
            await opened.saver.__aenter__()
        except BaseException as exc:
            self._failed(opened, exc)
            raise
        opened.ready.set_result(None)
        return opened.saver

    async def __aexit__(self, exc_type: type[BaseException] | None,
                        exc: BaseException | None, tb: TracebackType | None) -> None:
        """Close the saver if this entry opened it (``aclose``: drain, stop, close)."""
        opened = self._opened
        if opened is not None and opened.owner is self:
            self._shared._release(opened)
            await opened.saver.__aexit__(exc_type, exc, tb)

    def __enter__(self) -> DurableSaver:
        """Sync ``__aenter__`` (the saver's ``with``; other entries wait in this thread)."""
        opened, owner = self._begin()
        if not owner:
            opened.ready.result()
            return opened.saver
        try:
            opened.saver.__enter__()
        except BaseException as exc:
            self._failed(opened, exc)
            raise
        opened.ready.set_result(None)
        return opened.saver

    def __exit__(self, exc_type: type[BaseException] | None,
                 exc: BaseException | None, tb: TracebackType | None) -> None:
        """Sync ``__aexit__``."""
        opened = self._opened
        if opened is not None and opened.owner is self:
            self._shared._release(opened)
            opened.saver.__exit__(exc_type, exc, tb)
