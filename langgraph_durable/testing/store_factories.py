"""Store factories for LangGraph's store suites (``--store-factory module:callable``).

- :func:`inmemory` ``(mode)``: LangGraph's ``InMemoryStore``, the reference the harness is
  proven on (hot mode only; it has no TTL, so the TTL tests are deselected with that
  reason);
- :func:`durable` ``(mode)``: ``DurableStore.from_urls(REDIS_URL, MONGODB_URL, index=...,
  ttl=..., key_prefix=..., database=...)`` with a fresh key prefix and database per store
  (``unique_options``), removed when the store closes (``drop_namespace``). Cold mode
  empties the hot tier before every batch that reads: ``flush()``/``aflush()`` (everything
  written so far is in MongoDB), then every Redis key of the store's key prefix is deleted
  (``{<prefix>:...`` by ``drop_key_prefix``, and ``<prefix>:...``, the vector index's
  hashes), so the read is answered by MongoDB alone.

Both return a :class:`~langgraph_durable.testing.store_suite_plugin.StoreFactory`.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import os
import threading
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import Any

from langgraph.store.base import BaseStore, Op, Result
from langgraph.store.memory import InMemoryStore

from ..config import DurableConfig
from ..io.redis_urls import redis_client_from_url
from . import drop_key_prefix, drop_namespace, unique_options

__all__ = ["DurableStoreFactory", "InMemoryStoreFactory", "durable", "durable_store_class"]
__all__ += ["ThreadSafeInMemoryStore", "durable_redis_index", "inmemory"]


_LABELS = "InMemoryStore.batch/abatch take ops as given: no namespace label check"
_LIST_PREFIX = "InMemoryStore matches a namespace prefix given as a list against no tuple"
INMEMORY_DIFFERENCES: tuple[tuple[str, str, str], ...] = (
    ("sqlite", "tests/test_store.py::test_batch_rejects_invalid_namespace_labels*", _LABELS),
    ("postgres", "tests/test_store.py::test_batch_rejects_invalid_namespace_labels*", _LABELS),
    ("sqlite", "tests/test_async_store.py::test_abatch_rejects_invalid_namespace_labels*",
     _LABELS),
    ("postgres", "tests/test_async_store.py::test_abatch_rejects_invalid_namespace_labels*",
     _LABELS),
    ("sqlite", "tests/test_async_store.py::test_sync_methods_reject_invalid_namespace_labels*",
     _LABELS),
    ("postgres",
     "tests/test_async_store.py::test_sync_methods_reject_invalid_namespace_labels*", _LABELS),
    ("sqlite", "tests/test_async_store.py::test_no_running_loop*",
     "InMemoryStore's sync methods work inside the event loop (it has no async connection)"),
    ("postgres", "tests/test_async_store.py::test_no_running_loop*",
     "InMemoryStore's sync methods work inside the event loop (it has no async connection)"),
    ("sqlite", "tests/test_store.py::TestSqliteStore::test_search", _LIST_PREFIX),
    ("postgres", "tests/test_store.py::test_search", _LIST_PREFIX),
    ("postgres", "tests/test_async_store.py::test_batch_put_ops", _LIST_PREFIX),
    ("sqlite", "tests/test_store.py::test_filter_keys_with_hyphens_and_digits*",
     "InMemoryStore's filter matches top-level keys only, not a dotted path into a value"),
)
"""Where the SQLite and Postgres stores answer otherwise than ``InMemoryStore``: (suite,
node id pattern, reason). Deselected only when the store under test is InMemoryStore;
DurableStore runs them all."""


class ThreadSafeInMemoryStore(InMemoryStore):
    """``InMemoryStore`` whose sync :meth:`batch` holds a lock.

    ``InMemoryStore`` is not thread-safe: the Postgres suite's ``test_large_batches`` calls
    ``put`` and ``search`` from 10 threads at once, and a search iterating a namespace's
    dict while another thread inserts into it raises ``RuntimeError: dictionary changed
    size during iteration`` (seen in CI). The SQL stores serialise on their connection;
    this does the same, so the reference run tests the harness, not that race. ``abatch``
    is left as it is: it runs on the event loop's thread, and no suite test calls it from
    two threads.
    """

    __slots__ = ("_batch_lock",)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._batch_lock = threading.Lock()

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """``InMemoryStore.batch`` under this store's lock."""
        with self._batch_lock:
            return super().batch(ops)


class InMemoryStoreFactory:
    """``InMemoryStore`` (:class:`ThreadSafeInMemoryStore`) for the suites; it has no tiers,
    so no cold mode."""

    store_class: type[BaseStore] = ThreadSafeInMemoryStore
    missing: tuple[str, ...] = ("ttl",)
    excluded: tuple[tuple[str, str, str], ...] = INMEMORY_DIFFERENCES

    @contextlib.contextmanager
    def open(self, *, index: dict[str, Any] | None,
             ttl: dict[str, Any] | None) -> Iterator[BaseStore]:
        """A fresh ``ThreadSafeInMemoryStore(index=index)``; ``ttl`` is ignored (none
        supported)."""
        yield ThreadSafeInMemoryStore(index=index)

    @contextlib.asynccontextmanager
    async def aopen(self, *, index: dict[str, Any] | None,
                    ttl: dict[str, Any] | None) -> AsyncIterator[BaseStore]:
        """The same as :meth:`open`."""
        yield ThreadSafeInMemoryStore(index=index)

    def make_cold(self, store: BaseStore) -> None:
        """Never called: :func:`inmemory` refuses cold mode."""
        raise NotImplementedError("InMemoryStore has no hot tier to empty")

    async def amake_cold(self, store: BaseStore) -> None:
        """Never called: :func:`inmemory` refuses cold mode."""
        raise NotImplementedError("InMemoryStore has no hot tier to empty")


def inmemory(mode: str) -> InMemoryStoreFactory:
    """The ``InMemoryStore`` factory; raises ``ValueError`` for a ``mode`` but ``"hot"``."""
    if mode != "hot":
        raise ValueError(f"InMemoryStore has only the hot mode, not {mode!r}")
    return InMemoryStoreFactory()


def durable_store_class() -> type[BaseStore]:
    """``langgraph_durable.DurableStore``; raises ``ImportError`` while the package has
    none (imported when asked, so the harness loads without it)."""
    store_class: type[BaseStore] = importlib.import_module("langgraph_durable").DurableStore
    return store_class


class _ColdRounds:
    """One store's cold-mode rounds (``DurableStoreFactory.amake_cold``): the ``lock`` a
    round holds, and the round waiting to start (``next``), which new calls share."""

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.next: asyncio.Future[None] | None = None


class _Opened:
    """What cold mode keeps of one open store: its key ``prefix``, the Redis ``client``
    that empties it (made at first use: 4 ms to build, 3,000 rounds in a suite) and its
    async ``rounds``."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.client: Any = None
        self.rounds = _ColdRounds()


class DurableStoreFactory:
    """``DurableStore`` on the servers of ``redis_url`` and ``mongo_url``."""

    missing: tuple[str, ...] = ()

    def __init__(self, redis_url: str, mongo_url: str, **options: Any) -> None:
        self.redis_url, self.mongo_url, self.options = redis_url, mongo_url, options
        self.store_class = durable_store_class()
        self._open: dict[int, _Opened] = {}
        self._client_lock = threading.Lock()

    def _new(self, index: dict[str, Any] | None, ttl: dict[str, Any] | None,
             options: dict[str, Any]) -> Any:
        # close() does not wait for the outbox to drain (up to 10 s after a suite's large
        # batches): the store's key prefix and database are dropped right after it
        return self.store_class.from_urls(  # type: ignore[attr-defined]
            self.redis_url, self.mongo_url, index=index, ttl=ttl,
            **{"close_drain_timeout_s": 0.0, **options, **self.options}
        )

    @contextlib.contextmanager
    def open(self, *, index: dict[str, Any] | None,
             ttl: dict[str, Any] | None) -> Iterator[BaseStore]:
        """A store entered with ``with``, on a key prefix and database of its own."""
        options = unique_options()
        try:
            with self._new(index, ttl, options) as store:
                self._open[id(store)] = _Opened(str(options["key_prefix"]))
                try:
                    yield store
                finally:
                    self._forget(store)
        finally:
            self._drop(options)

    def _forget(self, store: BaseStore) -> None:
        opened = self._open.pop(id(store), None)
        if opened is not None and opened.client is not None:
            opened.client.close()

    def _drop(self, options: dict[str, Any]) -> None:
        prefix = str(options["key_prefix"])
        if self.options.get("vector_search") == "redis":
            import redis

            with redis.Redis.from_url(self.redis_url) as client, \
                    contextlib.suppress(redis.ResponseError):
                client.execute_command("FT.DROPINDEX", f"{prefix}:vidx", "DD")
        drop_namespace(self.redis_url, self.mongo_url, prefix, str(options["database"]))

    @contextlib.asynccontextmanager
    async def aopen(self, *, index: dict[str, Any] | None,
                    ttl: dict[str, Any] | None) -> AsyncIterator[BaseStore]:
        """A store entered with ``async with``, on a key prefix and database of its own."""
        options = unique_options()
        try:
            async with self._new(index, ttl, options) as store:
                self._open[id(store)] = _Opened(str(options["key_prefix"]))
                try:
                    yield store
                finally:
                    self._forget(store)
        finally:
            self._drop(options)

    def _drop_hot(self, store: BaseStore) -> None:
        opened = self._open[id(store)]
        prefix = opened.prefix
        with self._client_lock:  # one thread-safe client per store; a cluster's URL gives
            if opened.client is None:  # a cluster client
                opened.client = redis_client_from_url(self.redis_url, DurableConfig(),
                                                      asyncio=False)
            client = opened.client
        drop_key_prefix(client, prefix)  # the saver's layout: "{<prefix>:..."
        # and keys without a hash tag, e.g. the vector index's "<prefix>:vec:..."
        stale = list(client.scan_iter(match=f"{prefix}:*", count=1000))
        for i in range(0, len(stale), 500):
            client.delete(*stale[i:i + 500])

    def make_cold(self, store: BaseStore) -> None:
        """Flush ``store`` to MongoDB, then delete its Redis keys."""
        store.flush()  # type: ignore[attr-defined]
        self._drop_hot(store)

    async def amake_cold(self, store: BaseStore) -> None:
        """Flush ``store`` to MongoDB (``aflush``), then delete its Redis keys (with a
        blocking client, in a worker thread: the loop keeps serving the other calls of a
        burst, whose Redis and MongoDB timeouts would expire while it is blocked).

        One round at a time per store; the calls made while a round waits to start share
        it (it starts after each of them was made, so each read still follows a flush and
        an empty Redis): a burst of 30,000 gathered reads makes a few rounds, not 30,000
        concurrent flushes."""
        rounds = self._open[id(store)].rounds
        if rounds.next is not None:
            await asyncio.shield(rounds.next)
            return
        mine = rounds.next = asyncio.get_running_loop().create_future()
        try:
            async with rounds.lock:
                rounds.next = None  # a call made from now on waits for the next round
                await store.aflush()  # type: ignore[attr-defined]
                await asyncio.to_thread(self._drop_hot, store)
        except BaseException as exc:
            if rounds.next is mine:
                rounds.next = None
            if isinstance(exc, Exception):
                mine.set_exception(exc)
                mine.exception()  # retrieved: no warning when nobody shared it
            else:
                mine.cancel()
            raise
        mine.set_result(None)


def durable(mode: str) -> DurableStoreFactory:
    """The ``DurableStore`` factory on ``$REDIS_URL`` and ``$MONGODB_URL`` (the harness
    passes its session's servers); ``mode`` is ``"hot"`` or ``"cold"``. Raises
    ``KeyError`` when a URL is unset and ``ImportError`` while there is no DurableStore."""
    if mode not in ("hot", "cold"):
        raise ValueError(f"mode must be 'hot' or 'cold', not {mode!r}")
    return DurableStoreFactory(os.environ["REDIS_URL"], os.environ["MONGODB_URL"])


def durable_redis_index(mode: str) -> DurableStoreFactory:
    """:func:`durable` with ``vector_search="redis"`` on ``$REDIS_STACK_URL`` (a Redis with
    the query engine) and ``$MONGODB_URL``. Raises ``KeyError`` when a URL is unset."""
    if mode not in ("hot", "cold"):
        raise ValueError(f"mode must be 'hot' or 'cold', not {mode!r}")
    return DurableStoreFactory(os.environ["REDIS_STACK_URL"], os.environ["MONGODB_URL"],
                               vector_search="redis")
