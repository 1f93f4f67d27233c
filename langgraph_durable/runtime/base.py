"""The saver's runtime: its clients (``clients.ClientSet``), the running of plans
(``run``/``arun``), the in-process flusher's lifecycle, set-up, flush, close and stats.
``DurableSaver`` adds LangGraph's contract on top (``saver.py``)."""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import functools
import logging
import shlex
import threading
from collections.abc import Collection, Coroutine, Generator
from typing import Any, TypeVar

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.serde.base import SerializerProtocol, maybe_add_typed_methods
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from typing_extensions import Self

from ..config import DurableConfig
from ..core.items import items_for
from ..core.ops import Pipeline, Plan
from ..errors import (
    ConfigurationError,
    EventLoopNotRunningError,
    FlushTimeoutError,
    SaverClosedError,
    SyncCallInEventLoopError,
    TierUnavailableError,
)
from ..io import clients as C
from ..io.drivers import Clients, run_async, run_sync
from ..metrics import Metrics, stats_dict
from ..outbox.flusher import Flusher
from ..outbox.process import FlusherProcess
from ..plans import admin
from ..plans.context import Context, partitions_for
from ..settings import (
    check_mongo_url,
    database_of_url,
    hide_password,
    saver_config,
    server_settings,
    with_database,
)
from .deferred import DeferredSetup
from .startup import SetupGate, mongo_setup_plan, start_plan

log = logging.getLogger("langgraph_durable.saver")

T = TypeVar("T")


class SaverRuntime(BaseCheckpointSaver[str]):
    """Clients, plan running and background machinery of a ``DurableSaver`` (see there for
    the arguments)."""

    config: DurableConfig
    """The validated configuration this saver runs with."""

    def __init__(
        self,
        redis: Any = None,
        mongo: Any = None,
        *,
        async_redis: Any = None,
        async_mongo: Any = None,
        serde: SerializerProtocol | None = None,
        config: DurableConfig | None = None,
        meter_provider: Any = None,
        **options: Any,
    ) -> None:
        super().__init__(serde=serde)
        cfg = saver_config(config, options)
        if redis is not None and C.is_async_redis(redis):
            redis, async_redis = None, redis
        if mongo is not None and C.is_async_mongo(mongo):
            mongo, async_mongo = None, mongo
        if (redis is None) != (mongo is None) or (async_redis is None) != (async_mongo is None):
            raise ValueError("DurableSaver needs a Redis and a MongoDB client of the same "
                             "kind (both sync, both asyncio, or both pairs)")
        if redis is None and async_redis is None:
            raise ValueError("DurableSaver needs Redis and MongoDB clients (or use from_urls)")
        for client in (mongo, async_mongo):
            if client is not None:
                cfg = with_database(cfg, C.named_database(client), "MongoDB client given")
        sync = C.make_clients(redis, C.database_of(mongo, cfg)) if redis is not None else None
        asyncio_clients = (C.make_clients(async_redis, C.database_of(async_mongo, cfg))
                           if async_redis is not None else None)
        self._start(cfg, C.GivenClients(sync, asyncio_clients),
                    C.is_cluster(redis if redis is not None else async_redis), meter_provider)

    def _start(self, config: DurableConfig, clients: C.ClientSet, cluster: bool,
               meter_provider: Any) -> None:
        if config.flusher == "process" and not isinstance(clients, C.UrlClients):
            raise ConfigurationError(
                f"flusher='process' (key prefix {config.key_prefix!r}) starts a flusher "
                "process that connects with the saver's server URLs, and a saver made from "
                "clients has none: use DurableSaver.from_urls(...) or from_conn_string(...), "
                "or flusher='auto' (a thread) or 'off' (standalone workers)")
        self.config = config
        self._ctx = Context(config, cluster=cluster, partitions=partitions_for(config, cluster),
                            **_serde_fields(config, self.serde))
        self._clients = clients
        self._shared = _Shared(Metrics(self._ctx.outbox, config.collection_prefix,
                                       meter_provider=meter_provider))
        observe = self._shared.metrics.observe_op
        for found in (clients.sync, getattr(clients, "async_", None)):
            if found is not None:
                found.observer = observe
        if isinstance(clients, C.UrlClients):
            clients.observer = observe

    @property
    def serde(self) -> SerializerProtocol:
        """The serializer of every value stored and read: the one given, else LangGraph's
        default ``JsonPlusSerializer``. Assigning it (a strict allowlist, an
        ``EncryptedSerializer``...) takes effect for every later call, as with LangGraph's
        savers: the context is rebuilt with what follows the serializer (queryable
        metadata unless ``queryable_metadata`` is set; item digests, keyed when encrypting;
        a fresh item cache, so nothing the old serializer decoded or encoded is reused).
        ``with_allowlist`` copies made before keep theirs. Stored data stays as stored:
        the new serializer must read it (an ``EncryptedSerializer`` reads plain values, not
        the reverse). Assign it between calls. Raises ``ConfigurationError`` for a value
        without ``dumps_typed``/``loads_typed`` (or LangGraph's older ``dumps``/``loads``)."""
        found: SerializerProtocol | None = self.__dict__.get("_serde")
        return BaseCheckpointSaver.serde if found is None else found

    @serde.setter
    def serde(self, value: SerializerProtocol) -> None:
        if not any(all(callable(getattr(value, n, None)) for n in pair)
                   for pair in (("dumps_typed", "loads_typed"), ("dumps", "loads"))):
            raise ConfigurationError(
                f"DurableSaver.serde must be a LangGraph serializer (with dumps_typed and "
                f"loads_typed), not {type(value).__module__}.{type(value).__qualname__}"
                + (f" (key prefix {self.config.key_prefix!r})" if hasattr(self, "config")
                   else ""))
        value = maybe_add_typed_methods(value)
        self.__dict__["_serde"] = value
        ctx: Context | None = self.__dict__.get("_ctx")
        if ctx is not None:
            self._ctx = dataclasses.replace(ctx, **_serde_fields(self.config, value))

    # ------------------------------------------------------------------ construction

    @classmethod
    def from_urls(
        cls, redis_url: str, mongo_url: str, *, serde: SerializerProtocol | None = None,
        config: DurableConfig | None = None, meter_provider: Any = None, **options: Any,
    ) -> Self:
        """A saver with its own clients for ``redis_url`` and ``mongo_url``: sync clients
        now, asyncio clients made on first async use in each event loop. Use it as a
        context manager (``with`` or ``async with``): entering runs ``setup()``, leaving it
        drains the outbox to MongoDB and closes the clients. Used without ``with`` (as
        ``InMemorySaver()`` is), it sets itself up on its first call the same way, and
        ``close()`` drains and closes.

        The configuration is ``config`` or the keyword ``options`` over ``LGD_*``
        environment variables (``langgraph_durable.settings``); the database is the one in
        ``mongo_url`` (``mongodb://h:p/myappdb``) unless ``database`` is given. Raises
        ``ConfigurationError`` for ``config`` together with ``options``, for an unknown
        or invalid option (naming it, with the closest option name), for a ``mongo_url``
        that is no MongoDB URL and for a ``database`` that differs from the URL's."""
        cfg = with_database(saver_config(config, options),
                            database_of_url(check_mongo_url(mongo_url)),
                            f"MongoDB URL {hide_password(mongo_url)!r}")
        clients = C.UrlClients(redis_url, mongo_url, cfg)
        saver = cls.__new__(cls)
        BaseCheckpointSaver.__init__(saver, serde=serde)
        saver._start(cfg, clients, clients.cluster, meter_provider)
        return saver

    @classmethod
    def from_conn_string(
        cls, redis_url: str | None = None, mongo_url: str | None = None, *,
        serde: SerializerProtocol | None = None, config: DurableConfig | None = None,
        meter_provider: Any = None, **options: Any,
    ) -> Self:
        """The ``from_conn_string`` of LangGraph's savers (``PostgresSaver``,
        ``RedisSaver``, ``MongoDBSaver``), for both APIs in one: use it as
        ``with DurableSaver.from_conn_string(redis_url, mongo_url) as saver:`` or
        ``async with ...``. URLs left out come from ``REDIS_URL`` / ``MONGODB_URL``;
        otherwise the same as ``from_urls`` (entering runs ``setup()``, leaving drains the
        outbox and closes the clients). Raises ``ConfigurationError`` when a URL is given
        neither way."""
        env = server_settings()
        redis_url = redis_url or env.redis_url
        mongo_url = mongo_url or env.mongodb_url
        if not redis_url or not mongo_url:
            raise ConfigurationError(
                "DurableSaver.from_conn_string needs a Redis URL and a MongoDB URL: pass "
                "them or set REDIS_URL and MONGODB_URL (missing: "
                + ", ".join(n for n, u in (("redis_url", redis_url), ("mongo_url", mongo_url))
                            if not u) + ")")
        return cls.from_urls(redis_url, mongo_url, serde=serde, config=config,
                             meter_provider=meter_provider, **options)

    def with_allowlist(self, extra_allowlist: Collection[tuple[str, ...]]) -> Self:
        """LangGraph's ``with_allowlist``: a shallow copy whose serializer also accepts the
        msgpack types of ``extra_allowlist``. The copy shares this saver's clients, flusher,
        metrics, heads and item store (its serialization cache and decoded copies: LangGraph
        makes such copies for graphs and subgraphs, which must not start cold), and is
        closed together with it. (Assigning ``serde`` instead starts a new item store.)"""
        clone = super().with_allowlist(extra_allowlist)
        assert isinstance(clone, type(self))
        if clone is not self:
            clone._ctx = dataclasses.replace(self._ctx, serde=clone.serde)
        return clone

    @property
    def context(self) -> Context:
        """What plans run by this saver need (configuration, serializer, key and collection
        names): build a plan with it and pass the plan to ``run``/``arun``."""
        return self._ctx

    @property
    def sync_clients(self) -> Clients:
        """The blocking clients this saver runs sync calls on: ``.redis`` (a ``redis.Redis``
        or ``RedisCluster``) and ``.db`` (the configured MongoDB database, with the saver's
        write concern), for tools (the CLI) and tests that read the servers directly.
        Raises ``ConfigurationError`` when the saver was given asyncio clients only."""
        if self._clients.sync is None:
            raise ConfigurationError("this DurableSaver was given asyncio clients only; it "
                                     "has no sync clients")
        return self._clients.sync

    # ------------------------------------------------------------------ running plans

    @property
    def is_closed(self) -> bool:
        """True once ``close()``/``aclose()`` began: every later call raises
        ``SaverClosedError``."""
        return self._shared.closed

    def _check_open(self) -> None:
        if self._shared.closed:
            raise SaverClosedError("this DurableSaver is closed; create a new one")

    def run(self, plan: Generator[Any, Any, T]) -> T:
        """Run ``plan`` (a sans-I/O generator of ``langgraph_durable.plans``, built with
        ``context``) to completion and return its value: on the sync clients in this thread,
        or, with asyncio clients only, on the event loop that owns them (this thread waits).
        A saver never entered (``with``) nor set up (``setup()``) sets itself up first,
        once, exactly as entering does (see ``__enter__``).

        Raises what the plan raises (``TierUnavailableError`` when a server does not answer),
        what setting up raises (``ConfigurationError`` for a key prefix bound to another
        database, ``TierUnavailableError`` when Redis does not answer; the next call tries
        again), ``SaverClosedError`` after ``close()``, ``SyncCallInEventLoopError`` when
        called with asyncio clients only from inside their event loop, and
        ``EventLoopNotRunningError`` when, with asyncio clients only, no running event loop
        owns them."""
        self._check_open()
        sync = self._clients.sync
        if sync is None:
            return self._on_loop(self.arun(plan), plan)
        if not self._shared.gate.ready:  # the hot path pays this test only
            try:
                self._gate.once(self._set_up)
            except BaseException:
                plan.close()
                raise
        self._ensure_flusher_thread()
        result: T = run_sync(plan, sync)
        return result

    async def arun(self, plan: Generator[Any, Any, T]) -> T:
        """Async ``run``: on the asyncio clients of the running event loop, or, with sync
        clients only, on those in a worker thread; sets a saver up first as ``run`` does.
        Raises what the plan and the set-up raise and ``SaverClosedError`` after
        ``close()``."""
        self._check_open()
        clients = self._clients.for_running_loop()
        if not self._shared.gate.ready:
            try:
                await self._aready()
            except BaseException:
                plan.close()
                raise
        result: T
        if clients is None:
            sync = self._clients.sync
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
            loop = self._clients.loop_for_sync_call()
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
        sync = self._clients.sync
        if sync is None:
            return self._on_loop(self._arun_plain(plan), plan)
        result: T = run_sync(plan, sync)
        return result

    async def _arun_plain(self, plan: Generator[Any, Any, T]) -> T:
        """Async ``_run_plain``."""
        self._check_open()
        clients = self._clients.for_running_loop()
        if clients is None:
            sync = self._clients.sync
            assert sync is not None
            result: T = await asyncio.to_thread(run_sync, plan, sync)
            return result
        return await run_async(plan, clients)

    def _ensure_flusher_thread(self) -> None:
        sh, sync = self._shared, self._clients.sync
        if self.config.flusher == "off" or sh.flusher is not None or sync is None:
            return
        with sh.lock:
            if sh.flusher is None and self.config.flusher == "process":
                assert isinstance(self._clients, C.UrlClients)
                p = FlusherProcess(*self._clients.urls, self.config)
                p.start()
                sh.flusher = p
            elif sh.flusher is None:
                f = Flusher(self._ctx, metrics=sh.metrics)
                f.start_thread(sync)
                sh.flusher = f

    async def _aensure_flusher(self, clients: Clients) -> None:
        sh = self._shared
        if self.config.flusher == "off" or sh.flusher is not None:
            return
        if self._clients.sync is not None:
            await asyncio.to_thread(self._ensure_flusher_thread)
            return
        f = Flusher(self._ctx, metrics=sh.metrics)
        sh.flusher = f
        await f.start_task(clients)

    # ------------------------------------------------------------------ lifecycle

    def _set_up(self, strict: bool = False) -> None:
        """The set-up with sync clients (held by ``SetupGate.once``): a MongoDB that does
        not answer is set up in the background unless ``strict``."""
        missed = self._run_plain(start_plan(self._ctx, strict=strict))
        if missed is not None:
            self._mongo_setup_failed(missed, None)

    async def _aset_up(self, clients: Clients, strict: bool = False) -> None:
        """The set-up with asyncio clients only (held by ``SetupGate.aonce``)."""
        missed = await run_async(start_plan(self._ctx, strict=strict), clients)
        if missed is not None:
            self._mongo_setup_failed(missed, clients)

    async def _aready(self) -> None:
        """Set up unless done, from async code: in a worker thread with sync clients (so a
        sync call waiting in the event loop's thread never blocks the set-up), else on the
        running loop's asyncio clients."""
        if self._gate.ready:
            return
        if self._clients.sync is not None:
            await asyncio.to_thread(self._gate.once, self._set_up)
            return
        clients = self._clients.for_running_loop()
        assert clients is not None
        await self._gate.aonce(lambda: self._aset_up(clients))

    @property
    def _gate(self) -> SetupGate:
        return self._shared.gate

    def _mongo_setup_failed(self, exc: TierUnavailableError, clients: Clients | None) -> None:
        """Entering while MongoDB is down: go on from Redis and set MongoDB up later."""
        log.warning("MongoDB did not answer while the saver started (%s); starting anyway: "
                    "Redis serves the threads it holds and the outbox keeps every write "
                    "until MongoDB answers; the indexes and the schema version are set up "
                    "in the background as soon as it does", exc)
        if self._shared.deferred is not None:
            self._shared.deferred.stop()
        deferred = self._shared.deferred = DeferredSetup(
            functools.partial(mongo_setup_plan, self._ctx), on_refused=self._set_up_refused)
        if self._clients.sync is not None:
            deferred.start_thread(self._clients.sync)
        else:
            assert clients is not None
            deferred.start_task(clients)

    def _set_up_refused(self, exc: Exception) -> None:
        """The MongoDB set-up deferred at start was refused (another key prefix owns the
        collections): the in-process flusher stops (nothing more of this saver reaches
        them; the outbox keeps it) and the next call sets up again, raising the error to
        its caller."""
        if self._shared.flusher is not None:
            self._shared.flusher.request_stop()
        self._shared.gate.ready = False

    def flush(self, timeout_s: float = 30.0) -> None:
        """Wait until everything written so far (by any process) is in MongoDB.
        Raises ``FlushTimeoutError`` after ``timeout_s`` seconds."""
        if self._shared.flusher is not None:
            self._shared.flusher.wake()
        self.run(admin.flush_wait_plan(self._ctx, timeout_s))

    async def aflush(self, timeout_s: float = 30.0) -> None:
        """Async ``flush``."""
        if self._shared.flusher is not None:
            self._shared.flusher.wake()
        await self.arun(admin.flush_wait_plan(self._ctx, timeout_s))

    def close(self, drain_timeout_s: float | None = None) -> None:
        """Drain the outbox (up to ``drain_timeout_s`` seconds, default the configured
        ``close_drain_timeout_s``; what is left stays in Redis for the next flusher, never
        lost: a warning is logged), stop the flusher, close the clients this saver created.
        Later calls raise ``SaverClosedError``."""
        sh = self._shared
        if sh.closed:
            return
        try:
            if sh.flusher is not None and sh.flusher.running:
                self.flush(self._drain_s(drain_timeout_s))
            elif self.config.flusher == "off":
                n = self._run_plain(_xlen_plan(self._ctx))
                if n:
                    log.info("closing with %d entries in the outbox %s for the flushers; %s",
                             n, self._ctx.outbox, self._drain_hint())
        except (FlushTimeoutError, TierUnavailableError) as exc:
            self._log_close_failure(exc)
        finally:
            sh.closed = True
            if sh.deferred is not None:
                sh.deferred.stop()
            if sh.flusher is not None:
                sh.flusher.stop()
            self._clients.close()

    def _drain_hint(self) -> str:
        """What drains a leftover outbox, for the log line of ``close``."""
        c = self.config
        where = self._clients.describe()
        return ("they stay in Redis, and the next saver (flusher='auto') or flusher worker "
                f"with key_prefix={c.key_prefix!r} on this Redis drains them; to drain them "
                f"now run: langgraph-durable --key-prefix {shlex.quote(c.key_prefix)} "
                f"--database {shlex.quote(c.database)} flush  (with REDIS_URL and "
                f"MONGODB_URL set to this saver's servers{where})")

    def _drain_s(self, given: float | None) -> float:
        return self.config.close_drain_timeout_s if given is None else given

    def _log_close_failure(self, exc: Exception) -> None:
        if isinstance(exc, FlushTimeoutError):
            log.warning("closing with entries still in the outbox: %s; %s", exc,
                        self._drain_hint())
        else:  # nothing is known about the outbox: say so, not that entries are left
            log.warning("closing without checking the outbox: %s; anything this process "
                        "wrote and MongoDB lacks stays in Redis for the next flusher (%s)",
                        exc, self._drain_hint())

    async def aclose(self, drain_timeout_s: float | None = None) -> None:
        """Async ``close``; also closes the asyncio clients made for this event loop."""
        sh = self._shared
        if sh.closed:
            return
        try:
            if sh.flusher is not None and sh.flusher.running:
                await self.aflush(self._drain_s(drain_timeout_s))
            elif self.config.flusher == "off":
                n = await self._arun_plain(_xlen_plan(self._ctx))
                if n:
                    log.info("closing with %d entries in the outbox %s for the flushers; %s",
                             n, self._ctx.outbox, self._drain_hint())
        except (FlushTimeoutError, TierUnavailableError) as exc:
            self._log_close_failure(exc)
        finally:
            sh.closed = True
            if sh.deferred is not None:
                sh.deferred.stop()
            if sh.flusher is not None:
                await sh.flusher.astop()
            await self._clients.aclose()

    def stats(self) -> dict[str, Any]:
        """The numbers of ``langgraph_durable.metrics`` as a plain dict: reads by tier
        (``hot``/``durable``/``miss``), puts, writes, bytes written per tier, flush counts
        and lags (seconds), per-operation round-trip times (seconds), and the in-process
        flusher's rounds, entries (``reaped``: of them, taken from flushers whose
        heartbeat lapsed), errors, lag (seconds) and the outbox length it saw after its
        last round (``outbox_length_seen``).

        ``outbox_length`` is read from Redis now (one ``XLEN``, at most ``socket_timeout_s``
        seconds): the entries waiting for MongoDB at this moment, whoever flushes them.
        It is None when Redis does not answer, after ``close()``, and for a saver with
        asyncio clients only when called from inside their event loop (use ``astats()``
        there) or when no running event loop owns them."""
        live: int | None = None
        if not self._shared.closed:
            try:
                live = self._run_plain(_xlen_plan(self._ctx))
            except (TierUnavailableError, SyncCallInEventLoopError, EventLoopNotRunningError):
                live = None
        return self._stats(live)

    async def astats(self) -> dict[str, Any]:
        """Async ``stats`` (``outbox_length`` read with the asyncio clients)."""
        live: int | None = None
        if not self._shared.closed:
            try:
                live = await self._arun_plain(_xlen_plan(self._ctx))
            except TierUnavailableError:
                live = None
        return self._stats(live)

    def _stats(self, live: int | None) -> dict[str, Any]:
        return stats_dict(self._shared.metrics, self._shared.flusher, live)


def _serde_fields(config: DurableConfig, serde: Any) -> dict[str, Any]:
    """The ``Context`` fields that depend on the serializer: ``serde``; ``queryable``
    (``config.queryable_metadata``, else False for an encrypting serializer:
    ``EncryptedSerializer`` or one saying ``encrypted``); ``items``, a new item store
    (digests keyed for an encrypting serializer, an empty cache)."""
    queryable = config.queryable_metadata
    if queryable is None:
        queryable = not (isinstance(serde, EncryptedSerializer)
                         or getattr(serde, "encrypted", False))
    return {"serde": serde, "queryable": queryable,
            "items": items_for(serde, enabled=config.list_items,
                               cache_bytes=config.item_cache_bytes,
                               digest_key=config.item_digest_key)}


def _xlen_plan(ctx: Context) -> Plan[int]:
    sizes = yield Pipeline([["XLEN", s] for s in ctx.outboxes])
    return sum(int(n) for n in sizes)


class _Shared:
    """State shared by a saver and the shallow copies ``with_allowlist`` makes of it."""

    def __init__(self, metrics: Metrics) -> None:
        self.lock = threading.Lock()
        self.flusher: Flusher | FlusherProcess | None = None
        self.deferred: DeferredSetup | None = None
        self.gate = SetupGate()
        self.closed = False
        self.metrics = metrics
        # per thread / asyncio task: what one caller's get_tuple met is not another's
        self.read_tier: contextvars.ContextVar[str | None] = contextvars.ContextVar(
            f"langgraph_durable_read_tier_{id(self)}", default=None)
