"""The lifecycle of a saver: ``setup()``, ``check_deployment()`` and the context managers
(entering sets the saver up, leaving closes it). The set-up itself runs once per saver
(``startup.SetupGate``), also from the first call of a saver used without ``with``
(``SaverRuntime.run``)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Generator
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from typing import Any

from typing_extensions import Self

from .base import SaverRuntime
from .startup import check_plan


class _SetUp:
    """What ``setup()`` returns outside an event loop: the set-up is done; awaiting this
    returns None at once."""

    def __await__(self) -> Generator[Any, None, None]:
        return None
        yield  # a generator: ``await`` takes it

    def __repr__(self) -> str:
        return "<DurableSaver set up>"


SET_UP: Awaitable[None] = _SetUp()
"""The done awaitable ``setup()`` returns when it set the saver up before returning."""


class SaverLifecycle(SaverRuntime, AbstractContextManager, AbstractAsyncContextManager):
    """Set-up, checks and the context managers of a ``DurableSaver`` (see there)."""

    def setup(self) -> Awaitable[None]:
        """Set the saver up (idempotent): check that its key prefix is not bound to another
        MongoDB database or collection_prefix (``plans/binding.py``), load the Lua scripts,
        create the outbox consumer groups, the MongoDB indexes and the ``meta`` record
        (schema version; the collections' owning key prefix, checked), then bind the key
        prefix to this database and collection_prefix in Redis. Raises
        ``ConfigurationError`` for a binding or owner of another saver (nothing written),
        ``TierUnavailableError`` when Redis or MongoDB does not answer. Entering the saver
        (``with``) or its first call does the same, except that MongoDB may be down then.

        Called outside a running event loop it sets up before returning (and returns
        ``SET_UP``, an awaitable that is already done, so that the one line ``await
        saver.setup()`` type-checks everywhere). Called inside one (``await
        saver.setup()``, the pattern of LangGraph's Agent Server docs and of its async
        savers), it never blocks that loop: it starts the set-up and returns an asyncio
        future of it, so awaiting it waits for the set-up and raises its errors. With sync
        clients the set-up starts at once in a worker thread (the loop's default
        executor; a sync call of the saver made meanwhile waits for it, then finds the
        saver set up); with asyncio clients only, as a task of the loop (``asetup()``),
        run when the loop gets control. Not awaited, the set-up still runs (an error is
        then logged by asyncio, and the saver's next call sets up again and raises it)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._setup_now()
            return SET_UP
        if self._clients.sync is not None:
            return loop.run_in_executor(None, self._setup_now)
        return loop.create_task(self.asetup())

    def _setup_now(self) -> None:
        """``setup()`` outside a running event loop (or in a worker thread of ``asetup``)."""
        self._check_open()
        if self._clients.sync is None:
            self._on_loop(self.asetup())
            return
        self._gate.once(lambda: self._set_up(strict=True), again=True)
        self._ensure_flusher_thread()

    async def asetup(self) -> None:
        """Async ``setup``."""
        self._check_open()
        if self._clients.sync is not None:
            await asyncio.to_thread(self._setup_now)
            return
        clients = self._clients.for_running_loop()
        assert clients is not None
        await self._gate.aonce(lambda: self._aset_up(clients, strict=True), again=True)
        await self._aensure_flusher(clients)

    def check_deployment(self) -> None:
        """Check, writing nothing, what ``setup()`` checks: that this saver's key prefix is
        not bound to another database or collection_prefix (Redis) and that its collections
        do not belong to another key prefix (MongoDB's ``meta``; skipped when MongoDB does
        not answer). Raises ``ConfigurationError`` naming both sides, and
        ``TierUnavailableError`` when Redis does not answer. The saver then no longer sets
        itself up on its first call: for tools that only read (the CLI's ``threads``,
        ``show``, ...), so that reading writes nothing; a saver that writes should be set
        up (``with``, ``setup()`` or its first call) instead."""
        self._run_plain(check_plan(self._ctx))
        self._gate.ready = True

    async def acheck_deployment(self) -> None:
        """Async ``check_deployment``."""
        await self._arun_plain(check_plan(self._ctx))
        self._gate.ready = True

    def __enter__(self) -> Self:
        """``setup()`` (unless the saver set itself up already), except that MongoDB not
        answering does not stop the saver: its part of the set-up is retried in the
        background (a warning is logged); then the flusher starts (``flusher="auto"``).
        Raises ``TierUnavailableError`` when Redis does not answer and
        ``ConfigurationError`` for a key prefix bound to another database or
        collection_prefix, or collections owned by another key prefix (then the saver is
        closed)."""
        try:
            self._check_open()
            if self._clients.sync is None:
                self._on_loop(self._astart())
            else:
                self._gate.once(self._set_up)
                self._ensure_flusher_thread()
        except BaseException:
            self.close(drain_timeout_s=0)  # no saver reaches the caller: stop what started
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    async def _astart(self) -> None:
        await self._aready()
        clients = self._clients.for_running_loop()
        if clients is None:
            await asyncio.to_thread(self._ensure_flusher_thread)
        else:
            await self._aensure_flusher(clients)

    async def __aenter__(self) -> Self:
        """Async ``__enter__``."""
        try:
            self._check_open()
            await self._astart()
        except BaseException:
            await self.aclose(drain_timeout_s=0)
            raise
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()
