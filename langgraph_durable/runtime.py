"""The saver's runtime: its clients (``clients.ClientSet``), the running of plans
(``run``/``arun``), the in-process flusher's lifecycle, set-up, flush, close and stats.
``DurableSaver`` adds LangGraph's contract on top (``saver.py``)."""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import logging
import shlex
import threading
from collections.abc import Collection, Generator
from typing import Any, TypeVar

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from typing_extensions import Self

from . import clients as C
from .config import DurableConfig
from .context import Context, partitions_for
from .deferred import DeferredSetup
from .drivers import Clients, LoadScripts, Mongo, Parallel, Pipeline, Plan, run_async, run_sync
from .durable.documents import INDEXES
from .errors import (
    ConfigurationError,
    EventLoopNotRunningError,
    FlushTimeoutError,
    SaverClosedError,
    SyncCallInEventLoopError,
    TierUnavailableError,
)
from .hot.scripts import SCRIPTS
from .items import items_for
from .metrics import Metrics
from .migrations import record_version_plan
from .outbox.flusher import Flusher
from .outbox.group import ensure_group_plan
from .plans import admin, tombstones
from .settings import database_of_url, resolve_config, server_settings, with_database

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
        cfg = resolve_config(config, options)
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
        self.config = config
        queryable = config.queryable_metadata
        if queryable is None:
            queryable = not (isinstance(self.serde, EncryptedSerializer)
                             or getattr(self.serde, "encrypted", False))
        self._ctx = Context(config, self.serde, queryable, cluster=cluster,
                            partitions=partitions_for(config, cluster),
                            items=items_for(self.serde, enabled=config.list_items,
                                            cache_bytes=config.item_cache_bytes,
                                            digest_key=config.item_digest_key))
        self._clients = clients
        self._shared = _Shared(Metrics(self._ctx.outbox, config.collection_prefix,
                                       meter_provider=meter_provider))
        observe = self._shared.metrics.observe_op
        for found in (clients.sync, getattr(clients, "async_", None)):
            if found is not None:
                found.observer = observe
        if isinstance(clients, C.UrlClients):
            clients.observer = observe

    # ------------------------------------------------------------------ construction

    @classmethod
    def from_urls(
        cls, redis_url: str, mongo_url: str, *, serde: SerializerProtocol | None = None,
        config: DurableConfig | None = None, meter_provider: Any = None, **options: Any,
    ) -> Self:
        """A saver with its own clients for ``redis_url`` and ``mongo_url``: sync clients
        now, asyncio clients made on first async use in each event loop. Use it as a
        context manager (``with`` or ``async with``): entering runs ``setup()``, leaving it
        drains the outbox to MongoDB and closes the clients.

        The configuration is ``config`` or the keyword ``options`` over ``LGD_*``
        environment variables (``langgraph_durable.settings``); the database is the one in
        ``mongo_url`` (``mongodb://h:p/myappdb``) unless ``database`` is given. Raises
        ``ConfigurationError`` for ``config`` together with ``options`` and for a
        ``database`` that differs from the URL's."""
        cfg = with_database(resolve_config(config, options), database_of_url(mongo_url),
                            f"MongoDB URL {mongo_url!r}")
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
        metrics and heads, and is closed together with it."""
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

    def _check_open(self) -> None:
        if self._shared.closed:
            raise SaverClosedError("this DurableSaver is closed; create a new one")

    def run(self, plan: Generator[Any, Any, T]) -> T:
        """Run ``plan`` (a sans-I/O generator of ``langgraph_durable.plans``, built with
        ``context``) to completion and return its value: on the sync clients in this thread,
        or, with asyncio clients only, on the event loop that owns them (this thread waits).

        Raises what the plan raises (``TierUnavailableError`` when a server does not answer),
        ``SaverClosedError`` after ``close()``, ``SyncCallInEventLoopError`` when called with
        asyncio clients only from inside their event loop, and ``EventLoopNotRunningError``
        when, with asyncio clients only, no running event loop owns them."""
        self._check_open()
        sync = self._clients.sync
        if sync is not None:
            self._ensure_flusher_thread()
            result: T = run_sync(plan, sync)
            return result
        try:
            loop = self._clients.loop_for_sync_call()
        except BaseException:
            plan.close()
            raise
        return asyncio.run_coroutine_threadsafe(self.arun(plan), loop).result()

    async def arun(self, plan: Generator[Any, Any, T]) -> T:
        """Async ``run``: on the asyncio clients of the running event loop, or, with sync
        clients only, on those in a worker thread. Raises what the plan raises and
        ``SaverClosedError`` after ``close()``."""
        self._check_open()
        clients = self._clients.for_running_loop()
        result: T
        if clients is None:
            sync = self._clients.sync
            assert sync is not None
            self._ensure_flusher_thread()
            result = await asyncio.to_thread(run_sync, plan, sync)
            return result
        await self._aensure_flusher(clients)
        return await run_async(plan, clients)

    def _ensure_flusher_thread(self) -> None:
        sh, sync = self._shared, self._clients.sync
        if self.config.flusher == "off" or sh.flusher is not None or sync is None:
            return
        with sh.lock:
            if sh.flusher is None:
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

    def setup(self) -> None:
        """Create the MongoDB indexes and the outbox consumer group (idempotent)."""
        self.run(self._setup_plan())

    async def asetup(self) -> None:
        """Async ``setup``."""
        await self.arun(self._setup_plan())

    def _setup_plan(self) -> Plan:
        yield from self._mongo_setup_plan()
        yield from self._redis_setup_plan()

    def _mongo_setup_plan(self) -> Plan:
        cols = self._ctx.collections
        yield Parallel([Mongo(getattr(cols, kind), "create_indexes", (models,))
                        for kind, models in INDEXES.items() if kind != "tombstones"])
        yield from tombstones.setup_indexes_plan(self._ctx)  # with the configured TTL
        yield from record_version_plan(self._ctx)

    def _redis_setup_plan(self) -> Plan:
        # load the Lua scripts now so the first put is already one round trip
        yield LoadScripts(list(SCRIPTS.values()))
        yield from ensure_group_plan(self._ctx)

    def _mongo_setup_failed(self, exc: TierUnavailableError, clients: Clients | None) -> None:
        """Entering while MongoDB is down: go on from Redis and set MongoDB up later."""
        log.warning("MongoDB did not answer while the saver started (%s); starting anyway: "
                    "Redis serves the threads it holds and the outbox keeps every write "
                    "until MongoDB answers; the indexes and the schema version are set up "
                    "in the background as soon as it does", exc)
        deferred = self._shared.deferred = DeferredSetup(self._mongo_setup_plan)
        if self._clients.sync is not None:
            deferred.start_thread(self._clients.sync)
        else:
            assert clients is not None
            deferred.start_task(clients)

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
                n = self.run(_xlen_plan(self._ctx))
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
                n = await self.arun(_xlen_plan(self._ctx))
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

    def __enter__(self) -> Self:
        """``setup()``, except that MongoDB not answering does not stop the saver: its
        part of the set-up is retried in the background (a warning is logged). Raises
        ``TierUnavailableError`` when Redis does not answer."""
        try:
            self.run(self._redis_setup_plan())
            try:
                self.run(self._mongo_setup_plan())
            except TierUnavailableError as exc:
                self._mongo_setup_failed(exc, None)
        except BaseException:
            self.close(drain_timeout_s=0)  # no saver reaches the caller: stop what started
            raise
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        """Async ``__enter__``."""
        try:
            await self.arun(self._redis_setup_plan())
            try:
                await self.arun(self._mongo_setup_plan())
            except TierUnavailableError as exc:
                self._mongo_setup_failed(exc, self._clients.for_running_loop())
        except BaseException:
            await self.aclose(drain_timeout_s=0)
            raise
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    def stats(self) -> dict[str, Any]:
        """The numbers of ``langgraph_durable.metrics`` as a plain dict: reads by tier
        (``hot``/``durable``/``miss``), puts, writes, bytes written per tier, flush counts
        and lags (seconds), per-operation round-trip times (seconds), and the in-process
        flusher's rounds, entries, errors, lag (seconds) and the outbox length it saw
        after its last round (``outbox_length_seen``).

        ``outbox_length`` is read from Redis now (one ``XLEN``, at most ``socket_timeout_s``
        seconds): the entries waiting for MongoDB at this moment, whoever flushes them.
        It is None when Redis does not answer, after ``close()``, and for a saver with
        asyncio clients only when called from inside their event loop (use ``astats()``
        there) or when no running event loop owns them."""
        live: int | None = None
        if not self._shared.closed:
            try:
                live = self.run(_xlen_plan(self._ctx))
            except (TierUnavailableError, SyncCallInEventLoopError, EventLoopNotRunningError):
                live = None
        return self._stats(live)

    async def astats(self) -> dict[str, Any]:
        """Async ``stats`` (``outbox_length`` read with the asyncio clients)."""
        live: int | None = None
        if not self._shared.closed:
            try:
                live = await self.arun(_xlen_plan(self._ctx))
            except TierUnavailableError:
                live = None
        return self._stats(live)

    def _stats(self, live: int | None) -> dict[str, Any]:
        sh = self._shared
        f = sh.flusher
        lags = sorted(f.lags_s) if f else []
        snapshot = sh.metrics.snapshot()
        seen = snapshot.pop("outbox_length")
        return {
            **snapshot,
            "outbox_length": live,
            "flusher": None if f is None else {
                "consumer": f.consumer, "rounds": f.rounds, "entries": f.entries,
                "errors": f.errors, "last_error": f.last_error,
                "lag_p50_s": lags[len(lags) // 2] if lags else None,
                "lag_max_s": lags[-1] if lags else None,
                "outbox_length_seen": seen,
            },
        }


def _xlen_plan(ctx: Context) -> Plan[int]:
    sizes = yield Pipeline([["XLEN", s] for s in ctx.outboxes])
    return sum(int(n) for n in sizes)


class _Shared:
    """State shared by a saver and the shallow copies ``with_allowlist`` makes of it."""

    def __init__(self, metrics: Metrics) -> None:
        self.lock = threading.Lock()
        self.flusher: Flusher | None = None
        self.deferred: DeferredSetup | None = None
        self.closed = False
        self.metrics = metrics
        # per thread / asyncio task: what one caller's get_tuple met is not another's
        self.read_tier: contextvars.ContextVar[str | None] = contextvars.ContextVar(
            f"langgraph_durable_read_tier_{id(self)}", default=None)
