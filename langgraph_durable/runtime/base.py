"""The saver's runtime: its clients (``clients.ClientSet``), the running of plans
(``run``/``arun``), set-up (on first use, on entering, or asked for), the in-process
flusher's lifecycle, flush, close (``runtime/closing.py``) and stats. It knows nothing of
LangGraph: a ``DurableSaver`` holds one (``saver.runtime``), turns LangGraph's calls into
plans and runs them here; the saver's ``with_allowlist`` copies share it."""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
import threading
from collections.abc import Awaitable, Coroutine, Generator
from typing import Any, TypeVar

from ..config import DurableConfig
from ..errors import (
    ConfigurationError,
    EventLoopNotRunningError,
    SaverClosedError,
    SyncCallInEventLoopError,
    TierUnavailableError,
)
from ..io import clients as C
from ..io.drivers import Clients, run_async, run_sync
from ..io.mongo_calls import BSON_DOCS
from ..metrics import Metrics, stats_dict
from ..outbox.flusher import Flusher
from ..outbox.process import FlusherProcess
from ..plans import history_edits
from ..plans.context import NO_SERIALIZER, Context, partitions_for
from ..settings import with_database
from .closing import RuntimeClosing, outbox_length_plan
from .deferred import DeferredSetup
from .startup import SetupGate, check_plan, mongo_setup_plan, start_plan

log = logging.getLogger("langgraph_durable.saver")

T = TypeVar("T")


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


class SaverRuntime(RuntimeClosing):
    """What a ``DurableSaver`` runs on: its configuration, clients and ``context`` (for
    the plans of set-up, flush and the flusher: no serializer), the set-up gate, the
    in-process flusher, the deferred MongoDB set-up and the metrics. Built with
    ``from_clients`` or ``from_urls`` (or from a ``clients.ClientSet``); needs no LangGraph.

    Raises ``ConfigurationError`` for ``flusher="process"`` with given clients (the
    process needs URLs) and for fewer than 2 outbox partitions on a Redis Cluster."""

    def __init__(self, config: DurableConfig, clients: C.ClientSet, *, cluster: bool,
                 meter_provider: Any = None) -> None:
        if config.flusher == "process" and not isinstance(clients, C.UrlClients):
            raise ConfigurationError(
                f"flusher='process' (key prefix {config.key_prefix!r}) starts a flusher "
                "process that connects with the saver's server URLs, and a saver made from "
                "clients has none: use DurableSaver.from_urls(...) or from_conn_string(...), "
                "or flusher='auto' (a thread) or 'off' (standalone workers)")
        self.config = config
        """The validated configuration."""
        self.context = Context(config, serde=NO_SERIALIZER, queryable=True, cluster=cluster,
                               partitions=partitions_for(config, cluster), docs=BSON_DOCS)
        """The context of the runtime's own plans (set-up, flush waits, the flusher's
        rounds): names, partitions, clock and ``heads``, no serializer; a saver's context
        is this one with its serializer's fields (``dataclasses.replace``)."""
        self.clients = clients
        """The ``clients.ClientSet`` plans run on."""
        self.owner = "DurableSaver"
        """What ``SaverClosedError`` calls the object whose runtime this is."""
        self.metrics = Metrics(self.context.outbox, config.collection_prefix,
                               meter_provider=meter_provider)
        """The ``metrics.Metrics`` of every call and round (``stats()``)."""
        self.lock = threading.Lock()
        self.flusher: Flusher | FlusherProcess | None = None
        """The in-process flusher (thread, task or process) once started, else None."""
        self.deferred: DeferredSetup | None = None
        """The MongoDB set-up retried in the background (entered while MongoDB was down)."""
        self.gate = SetupGate()
        self.closed = False
        """True once ``close()``/``aclose()`` began."""
        self.flushed_since_ms = self.context.clock.time_ns() // 1_000_000
        """Where ``flush()`` starts looking for dead letters (``history_edits.flush_plan``): the
        start of its last flush that returned, at first the runtime's creation (ms)."""
        # per thread / asyncio task: what one caller's get_tuple met is not another's
        self.read_tier: contextvars.ContextVar[str | None] = contextvars.ContextVar(
            f"langgraph_durable_read_tier_{id(self)}", default=None)
        observe = self.metrics.observe_op
        for found in (clients.sync, getattr(clients, "async_", None)):
            if found is not None:
                found.observer = observe
        if isinstance(clients, C.UrlClients):
            clients.observer = observe

    @classmethod
    def from_clients(cls, redis: Any = None, mongo: Any = None, *, async_redis: Any = None,
                     async_mongo: Any = None, config: DurableConfig,
                     meter_provider: Any = None) -> SaverRuntime:
        """A runtime on given clients (see ``DurableSaver``): a sync and/or an asyncio pair
        (an asyncio client passed as ``redis``/``mongo`` counts as such). Raises
        ``ValueError`` for clients missing or of mixed kinds, ``ConfigurationError`` for a
        MongoDB database of another name than ``config.database``, for a Redis client
        whose pool of one connection refuses a second caller (``clients.refuses_when_busy``)
        with the in-process flusher, and for a Redis Cluster client with one connection
        per node (``clients.one_connection_per_node``)."""
        if redis is not None and C.is_async_redis(redis):
            redis, async_redis = None, redis
        if mongo is not None and C.is_async_mongo(mongo):
            mongo, async_mongo = None, mongo
        if (redis is None) != (mongo is None) or (async_redis is None) != (async_mongo is None):
            raise ValueError("DurableSaver needs a Redis and a MongoDB client of the same "
                             "kind (both sync, both asyncio, or both pairs)")
        if redis is None and async_redis is None:
            raise ValueError("DurableSaver needs Redis and MongoDB clients (or use from_urls)")
        for client in (redis, async_redis):
            if client is not None and C.one_connection_per_node(client):
                raise ConfigurationError(
                    "the Redis Cluster client given has one connection per node "
                    "(max_connections=1): its pipelines ask a node for keys on a second "
                    "connection, so the saver's calls fail (\"Too many connections\"); "
                    "give it max_connections >= 2")
        if config.flusher == "auto":  # the flusher's client: the sync one when given
            shared = redis if redis is not None else async_redis
            if C.refuses_when_busy(shared):
                raise ConfigurationError(
                    "the Redis client given has a connection pool of one connection "
                    "that refuses a second caller instead of waiting (redis-py's "
                    "ConnectionPool with max_connections=1): the in-process flusher "
                    "(flusher='auto') shares it with the application's calls, which "
                    "would fail at random. Give the client max_connections >= 2 or a "
                    "BlockingConnectionPool (it waits for the connection), or use "
                    "flusher='off' with flushers run elsewhere")
        cfg = config
        for client in (mongo, async_mongo):
            if client is not None:
                cfg = with_database(cfg, C.named_database(client), "MongoDB client given")
        sync = C.make_clients(redis, C.database_of(mongo, cfg)) if redis is not None else None
        asyncio_clients = (C.make_clients(async_redis, C.database_of(async_mongo, cfg))
                           if async_redis is not None else None)
        return cls(cfg, C.GivenClients(sync, asyncio_clients),
                   cluster=C.is_cluster(redis if redis is not None else async_redis),
                   meter_provider=meter_provider)

    @classmethod
    def from_urls(cls, redis_url: str, mongo_url: str, *, config: DurableConfig,
                  meter_provider: Any = None) -> SaverRuntime:
        """A runtime with its own clients (``clients.UrlClients``: sync ones now, asyncio
        ones per event loop), closed by ``close``/``aclose``; ``config.database`` must be
        the one of ``mongo_url`` (``DurableSaver.from_urls`` checks it)."""
        clients = C.UrlClients(redis_url, mongo_url, config)
        return cls(config, clients, cluster=clients.cluster, meter_provider=meter_provider)

    @property
    def sync_clients(self) -> Clients:
        """The blocking clients (see ``DurableSaver.sync_clients``); raises
        ``ConfigurationError`` when there are asyncio clients only."""
        if self.clients.sync is None:
            raise ConfigurationError("this DurableSaver was given asyncio clients only; it "
                                     "has no sync clients")
        return self.clients.sync

    # ------------------------------------------------------------------ running plans

    def _check_open(self) -> None:
        if self.closed:
            raise SaverClosedError(f"this {self.owner} is closed; create a new one")

    def run(self, plan: Generator[Any, Any, T]) -> T:
        """Run ``plan`` to completion on this runtime's clients and return its value
        (see ``DurableSaver.run``: the set-up on first use, the flusher start, the errors)."""
        self._check_open()
        sync = self.clients.sync
        if sync is None:
            return self._on_loop(self.arun(plan), plan)
        if not self.gate.ready:  # the hot path pays this test only
            try:
                self.gate.once(self._set_up)
            except BaseException:
                plan.close()
                raise
        self._ensure_flusher_thread()
        result: T = run_sync(plan, sync)
        return result

    async def arun(self, plan: Generator[Any, Any, T]) -> T:
        """Async ``run`` (see ``DurableSaver.arun``)."""
        self._check_open()
        clients = self.clients.for_running_loop()
        if not self.gate.ready:
            try:
                await self._aready()
            except BaseException:
                plan.close()
                raise
        result: T
        if clients is None:
            sync = self.clients.sync
            assert sync is not None
            self._ensure_flusher_thread()
            result = await asyncio.to_thread(run_sync, plan, sync)
            return result
        await self._aensure_flusher(clients)
        return await run_async(plan, clients)

    def _on_loop(self, coro: Coroutine[Any, Any, T], plan: Generator[Any, Any, Any] | None = None
                 ) -> T:
        """Run ``coro`` on the event loop owning the asyncio clients (a saver without sync
        clients) and wait; ``plan`` is closed if that cannot be done."""
        try:
            loop = self.clients.loop_for_sync_call()
        except BaseException:
            coro.close()
            if plan is not None:
                plan.close()
            raise
        return asyncio.run_coroutine_threadsafe(coro, loop).result()

    def _run_plain(self, plan: Generator[Any, Any, T]) -> T:
        """``run`` without setting up or starting the flusher (set-up itself, checks, the
        outbox length of ``close``/``stats``)."""
        self._check_open()
        sync = self.clients.sync
        if sync is None:
            return self._on_loop(self._arun_plain(plan), plan)
        result: T = run_sync(plan, sync)
        return result

    async def _arun_plain(self, plan: Generator[Any, Any, T]) -> T:
        """Async ``_run_plain``."""
        self._check_open()
        clients = self.clients.for_running_loop()
        if clients is None:
            sync = self.clients.sync
            assert sync is not None
            result: T = await asyncio.to_thread(run_sync, plan, sync)
            return result
        return await run_async(plan, clients)

    def _ensure_flusher_thread(self) -> None:
        sync = self.clients.sync
        if self.config.flusher == "off" or self.flusher is not None or sync is None:
            return
        with self.lock:
            if self.flusher is None and self.config.flusher == "process":
                assert isinstance(self.clients, C.UrlClients)
                p = FlusherProcess(*self.clients.urls, self.config)
                p.start()
                self.flusher = p
            elif self.flusher is None:
                f = Flusher(self.context, metrics=self.metrics)
                f.start_thread(sync)
                self.flusher = f

    async def _aensure_flusher(self, clients: Clients) -> None:
        if self.config.flusher == "off" or self.flusher is not None:
            return
        if self.clients.sync is not None:
            await asyncio.to_thread(self._ensure_flusher_thread)
            return
        f = Flusher(self.context, metrics=self.metrics)
        self.flusher = f
        await f.start_task(clients)

    # ------------------------------------------------------------------ lifecycle

    def _set_up(self, strict: bool = False) -> None:
        """The set-up with sync clients (held by ``SetupGate.once``): a MongoDB that does
        not answer is set up in the background unless ``strict``."""
        missed = self._run_plain(start_plan(self.context, strict=strict))
        if missed is not None:
            self._mongo_setup_failed(missed, None)

    async def _aset_up(self, clients: Clients, strict: bool = False) -> None:
        """The set-up with asyncio clients only (held by ``SetupGate.aonce``)."""
        missed = await run_async(start_plan(self.context, strict=strict), clients)
        if missed is not None:
            self._mongo_setup_failed(missed, clients)

    async def _aready(self) -> None:
        """Set up unless done, from async code: in a worker thread with sync clients (so a
        sync call waiting in the event loop's thread never blocks the set-up), else on the
        running loop's asyncio clients."""
        if self.gate.ready:
            return
        if self.clients.sync is not None:
            await asyncio.to_thread(self.gate.once, self._set_up)
            return
        clients = self.clients.for_running_loop()
        assert clients is not None
        await self.gate.aonce(lambda: self._aset_up(clients))

    @property
    def _gate(self) -> SetupGate:
        return self.gate

    def _mongo_setup_failed(self, exc: TierUnavailableError, clients: Clients | None) -> None:
        """Entering while MongoDB is down: go on from Redis and set MongoDB up later."""
        log.warning("MongoDB did not answer while the saver started (%s); starting anyway: "
                    "Redis serves the threads it holds and the outbox keeps every write "
                    "until MongoDB answers; the indexes and the schema version are set up "
                    "in the background as soon as it does", exc)
        if self.deferred is not None:
            self.deferred.stop()
        deferred = self.deferred = DeferredSetup(
            functools.partial(mongo_setup_plan, self.context), on_refused=self._set_up_refused)
        if self.clients.sync is not None:
            deferred.start_thread(self.clients.sync)
        else:
            assert clients is not None
            deferred.start_task(clients)

    def _set_up_refused(self, exc: Exception) -> None:
        """The MongoDB set-up deferred at start was refused (another key prefix owns the
        collections): the in-process flusher stops (nothing more of this saver reaches
        them; the outbox keeps it) and the next call sets up again, raising the error to
        its caller."""
        if self.flusher is not None:
            self.flusher.request_stop()
        self.gate.ready = False

    def setup(self) -> Awaitable[None]:
        """``DurableSaver.setup``: set up now outside a running event loop (returns
        ``SET_UP``), else start the set-up and return a future of it."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._setup_now()
            return SET_UP
        if self.clients.sync is not None:
            return loop.run_in_executor(None, self._setup_now)
        return loop.create_task(self.asetup())

    def _setup_now(self) -> None:
        """``setup()`` outside a running event loop (or in a worker thread of ``asetup``)."""
        self._check_open()
        if self.clients.sync is None:
            self._on_loop(self.asetup())
            return
        self.gate.once(lambda: self._set_up(strict=True), again=True)
        self._ensure_flusher_thread()

    async def asetup(self) -> None:
        """Async ``setup``."""
        self._check_open()
        if self.clients.sync is not None:
            await asyncio.to_thread(self._setup_now)
            return
        clients = self.clients.for_running_loop()
        assert clients is not None
        await self.gate.aonce(lambda: self._aset_up(clients, strict=True), again=True)
        await self._aensure_flusher(clients)

    def check_deployment(self) -> None:
        """``DurableSaver.check_deployment``: check the binding and owner, writing nothing,
        and count the runtime as set up."""
        self._run_plain(check_plan(self.context))
        self.gate.ready = True

    async def acheck_deployment(self) -> None:
        """Async ``check_deployment``."""
        await self._arun_plain(check_plan(self.context))
        self.gate.ready = True

    def start(self) -> None:
        """What entering a saver does (``DurableSaver.__enter__``): set up unless done
        (MongoDB down is retried in the background) and start the flusher; on an error
        the runtime is closed (nothing drained) and the error raised."""
        try:
            self._check_open()
            if self.clients.sync is None:
                self._on_loop(self._astart())
            else:
                self.gate.once(self._set_up)
                self._ensure_flusher_thread()
        except BaseException:
            self.close(drain_timeout_s=0)  # no saver reaches the caller: stop what started
            raise

    async def astart(self) -> None:
        """Async ``start`` (also closes the runtime on an error)."""
        try:
            self._check_open()
            await self._astart()
        except BaseException:
            await self.aclose(drain_timeout_s=0)
            raise

    async def _astart(self) -> None:
        await self._aready()
        clients = self.clients.for_running_loop()
        if clients is None:
            await asyncio.to_thread(self._ensure_flusher_thread)
        else:
            await self._aensure_flusher(clients)

    def flush(self, timeout_s: float = 30.0) -> None:
        """``DurableSaver.flush``: wake the flusher, wait until the outbox drained
        (``FlushTimeoutError`` after ``timeout_s`` seconds), then until the in-process
        flusher counted the round that drained it (``Flusher.settle``: ``stats()`` right
        after includes it)."""
        deadline = self.context.clock.monotonic() + timeout_s
        if self.flusher is not None:
            self.flusher.wake()
        self.flushed_since_ms = self.run(history_edits.flush_plan(self.context, timeout_s,
                                                          self.flushed_since_ms))
        if isinstance(self.flusher, Flusher):  # within what is left of timeout_s
            self.flusher.settle(max(0.0, deadline - self.context.clock.monotonic()))

    async def aflush(self, timeout_s: float = 30.0) -> None:
        """Async ``flush``."""
        deadline = self.context.clock.monotonic() + timeout_s
        if self.flusher is not None:
            self.flusher.wake()
        self.flushed_since_ms = await self.arun(history_edits.flush_plan(
            self.context, timeout_s, self.flushed_since_ms))
        if isinstance(self.flusher, Flusher) and self.flusher.holding:
            # waited for in a thread: the flusher may be a task of this event loop
            await asyncio.to_thread(self.flusher.settle,
                                    max(0.0, deadline - self.context.clock.monotonic()))

    def stats(self) -> dict[str, Any]:
        """``DurableSaver.stats``: ``metrics.stats_dict`` with ``outbox_length`` read now
        (None when it cannot be read)."""
        live: int | None = None
        if not self.closed:
            try:
                live = self._run_plain(outbox_length_plan(self.context))
            except (TierUnavailableError, SyncCallInEventLoopError, EventLoopNotRunningError):
                live = None
        return self._stats(live)

    async def astats(self) -> dict[str, Any]:
        """Async ``stats`` (``outbox_length`` read with the asyncio clients)."""
        live: int | None = None
        if not self.closed:
            try:
                live = await self._arun_plain(outbox_length_plan(self.context))
            except TierUnavailableError:
                live = None
        return self._stats(live)

    def _stats(self, live: int | None) -> dict[str, Any]:
        return stats_dict(self.metrics, self.flusher, live)
