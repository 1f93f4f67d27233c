"""The saver's runtime: its clients (sync, asyncio per event loop), the driving of plans,
the in-process flusher's lifecycle, set-up, flush, close and stats. ``DurableSaver`` adds
LangGraph's contract on top (``saver.py``)."""

from __future__ import annotations

import asyncio
import logging
import threading
import weakref
from typing import Any

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from typing_extensions import Self

from . import clients as C
from .config import DurableConfig
from .context import Context
from .deferred import DeferredSetup
from .drivers import Clients, Mongo, Parallel, Pipeline, Plan, run_async, run_sync
from .durable.documents import INDEXES
from .errors import (
    FlushTimeoutError,
    SaverClosedError,
    SyncCallInEventLoopError,
    TierUnavailableError,
)
from .hot.scripts import SCRIPTS
from .metrics import Metrics
from .outbox.flusher import Flusher
from .plans import admin
from .settings import database_of_url, resolve_config, server_settings, with_database

log = logging.getLogger("langgraph_durable.saver")


class SaverRuntime(BaseCheckpointSaver[str]):
    """Clients, plan drivers and background machinery of a ``DurableSaver`` (see there for
    the arguments)."""
    def __init__(
        self,
        redis: Any = None,
        mongo: Any = None,
        *,
        async_redis: Any = None,
        async_mongo: Any = None,
        serde: Any = None,
        config: DurableConfig | None = None,
        meter_provider: Any = None,
        **options: Any,
    ) -> None:
        super().__init__(serde=serde)
        self.config = resolve_config(config, options)
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
                self.config = with_database(self.config, C.named_database(client),
                                            "MongoDB client given")
        queryable = self.config.queryable_metadata
        if queryable is None:
            queryable = not (isinstance(self.serde, EncryptedSerializer)
                             or getattr(self.serde, "encrypted", False))
        self._ctx = Context(self.config, self.serde, queryable,
                            cluster=C.is_cluster(redis if redis is not None else async_redis))
        self._sync: Clients | None = (
            C.make_clients(redis, C.database_of(mongo, self.config)) if redis is not None else None
        )
        self._async: Clients | None = (
            C.make_clients(async_redis, C.database_of(async_mongo, self.config))
            if async_redis is not None else None
        )
        self._loop: asyncio.AbstractEventLoop | None = None
        if self._async is not None:
            try:
                self._loop = asyncio.get_running_loop()
            except RuntimeError:
                self._loop = None
        self._urls: tuple[str, str] | None = None
        self._per_loop: weakref.WeakKeyDictionary[Any, Clients] = weakref.WeakKeyDictionary()
        self._owned: list[Any] = []
        self._shared = _Shared(Metrics(self._ctx.outbox, self.config.collection_prefix,
                                       meter_provider=meter_provider))
        for clients in (self._sync, self._async):
            if clients is not None:
                clients.observer = self._shared.metrics.observe_op

    # ------------------------------------------------------------------ construction

    @classmethod
    def from_urls(
        cls, redis_url: str, mongo_url: str, *, serde: Any = None,
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
        r = C.redis_from_url(redis_url, cfg, asyncio=False)
        m = C.mongo_from_url(mongo_url, cfg, asyncio=False)
        saver = cls(r, m, serde=serde, config=cfg, meter_provider=meter_provider)
        saver._urls = (redis_url, mongo_url)
        saver._owned += [r, m]
        return saver

    @classmethod
    def from_conn_string(
        cls, redis_url: str | None = None, mongo_url: str | None = None, *,
        serde: Any = None, config: DurableConfig | None = None, meter_provider: Any = None,
        **options: Any,
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
            from .errors import ConfigurationError

            raise ConfigurationError(
                "DurableSaver.from_conn_string needs a Redis URL and a MongoDB URL: pass "
                "them or set REDIS_URL and MONGODB_URL (missing: "
                + ", ".join(n for n, u in (("redis_url", redis_url), ("mongo_url", mongo_url))
                            if not u) + ")")
        return cls.from_urls(redis_url, mongo_url, serde=serde, config=config,
                             meter_provider=meter_provider, **options)

    @property
    def ctx(self) -> Context:
        """The configuration, serializer and names this saver's plans use."""
        return self._ctx

    @property
    def serde(self) -> Any:  # type: ignore[override]
        found = self.__dict__.get("_serde")
        return found if found is not None else BaseCheckpointSaver.serde

    @serde.setter
    def serde(self, value: Any) -> None:
        # with_allowlist() makes a shallow copy and assigns serde: keep the context in step
        self.__dict__["_serde"] = value
        if "_ctx" in self.__dict__:
            self._ctx = Context(self._ctx.config, value, self._ctx.queryable, self._ctx.cluster,
                                heads=self._ctx.heads)

    # ------------------------------------------------------------------ driving plans

    def _async_clients(self) -> Clients | None:
        if self._urls is None:
            return self._async
        loop = asyncio.get_running_loop()
        found = self._per_loop.get(loop)
        if found is None:
            r = C.redis_from_url(self._urls[0], self.config, asyncio=True)
            m = C.mongo_from_url(self._urls[1], self.config, asyncio=True)
            found = self._per_loop[loop] = C.make_clients(r, C.database_of(m, self.config))
            found.observer = self._shared.metrics.observe_op
        return found

    def _check_open(self) -> None:
        if self._shared.closed:
            raise SaverClosedError("this DurableSaver is closed; create a new one")

    def _run(self, plan: Plan) -> Any:
        self._check_open()
        if self._sync is not None:
            self._ensure_flusher_thread()
            return run_sync(plan, self._sync)
        assert self._async is not None
        loop = self._loop
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if loop is None or (running is not None and running is loop):
            plan.close()
            raise SyncCallInEventLoopError(
                "a sync DurableSaver method was called from the event loop that owns its "
                "asyncio clients; it would deadlock. Use the async method (a-prefixed)."
            )
        return asyncio.run_coroutine_threadsafe(self._arun(plan), loop).result()

    async def _arun(self, plan: Plan) -> Any:
        self._check_open()
        clients = self._async_clients()
        if clients is None:
            assert self._sync is not None
            self._ensure_flusher_thread()
            return await asyncio.to_thread(run_sync, plan, self._sync)
        if self._loop is None and self._urls is None:
            self._loop = asyncio.get_running_loop()
        await self._aensure_flusher(clients)
        return await run_async(plan, clients)

    def _ensure_flusher_thread(self) -> None:
        sh = self._shared
        if self.config.flusher == "off" or sh.flusher is not None or self._sync is None:
            return
        with sh.lock:
            if sh.flusher is None:
                f = Flusher(self._ctx, metrics=sh.metrics)
                f.start_thread(self._sync)
                sh.flusher = f

    async def _aensure_flusher(self, clients: Clients) -> None:
        sh = self._shared
        if self.config.flusher == "off" or sh.flusher is not None:
            return
        if self._sync is not None:
            await asyncio.to_thread(self._ensure_flusher_thread)
            return
        f = Flusher(self._ctx, metrics=sh.metrics)
        sh.flusher = f
        await f.start_task(clients)

    # ------------------------------------------------------------------ lifecycle

    def setup(self) -> None:
        """Create the MongoDB indexes and the outbox consumer group (idempotent)."""
        self._run(self._setup_plan())

    async def asetup(self) -> None:
        """Async ``setup``."""
        await self._arun(self._setup_plan())

    def _setup_plan(self) -> Plan:
        yield from self._mongo_setup_plan()
        yield from self._redis_setup_plan()

    def _mongo_setup_plan(self) -> Plan:
        from .migrations import record_version_plan

        cols = self._ctx.collections
        yield Parallel([Mongo(getattr(cols, kind), "create_indexes", (models,))
                        for kind, models in INDEXES.items()])
        yield from record_version_plan(self._ctx)

    def _redis_setup_plan(self) -> Plan:
        from .outbox.flusher import ensure_group_plan

        # load the Lua scripts now so the first put is already one round trip
        yield Pipeline([["SCRIPT", "LOAD", src] for src in SCRIPTS.values()])
        yield from ensure_group_plan(self._ctx)

    def _mongo_setup_failed(self, exc: TierUnavailableError, clients: Clients | None) -> None:
        """Entering while MongoDB is down: go on from Redis and set MongoDB up later."""
        log.warning("MongoDB did not answer while the saver started (%s); starting anyway: "
                    "Redis serves the threads it holds and the outbox keeps every write "
                    "until MongoDB answers; the indexes and the schema version are set up "
                    "in the background as soon as it does", exc)
        deferred = self._shared.deferred = DeferredSetup(self._mongo_setup_plan)
        if self._sync is not None:
            deferred.start_thread(self._sync)
        else:
            assert clients is not None
            deferred.start_task(clients)

    def flush(self, timeout_s: float = 30.0) -> None:
        """Wait until everything written so far (by any process) is in MongoDB.
        Raises ``FlushTimeoutError`` after ``timeout_s`` seconds."""
        if self._shared.flusher is not None:
            self._shared.flusher.wake()
        self._run(admin.flush_wait_plan(self._ctx, timeout_s))

    async def aflush(self, timeout_s: float = 30.0) -> None:
        """Async ``flush``."""
        if self._shared.flusher is not None:
            self._shared.flusher.wake()
        await self._arun(admin.flush_wait_plan(self._ctx, timeout_s))

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
                (n,) = self._run(_xlen_plan(self._ctx))
                if n:
                    log.info("closing with %d entries in the outbox %s for the flushers; %s",
                             n, self._ctx.outbox, self._drain_hint())
        except (FlushTimeoutError, TierUnavailableError) as exc:
            log.warning("closing with entries still in the outbox: %s; %s", exc,
                        self._drain_hint())
        finally:
            sh.closed = True
            if sh.deferred is not None:
                sh.deferred.stop()
            if sh.flusher is not None:
                sh.flusher.stop()
            for c in self._owned:
                c.close()

    def _drain_hint(self) -> str:
        """What drains a leftover outbox, for the log line of ``close``."""
        import shlex

        c = self.config
        clients = self._sync or self._async
        where = (f" (Redis {clients.redis_name}, MongoDB {clients.mongo_name})"
                 if clients is not None else "")
        return ("they stay in Redis, and the next saver (flusher='auto') or flusher worker "
                f"with key_prefix={c.key_prefix!r} on this Redis drains them; to drain them "
                f"now run: langgraph-durable --key-prefix {shlex.quote(c.key_prefix)} "
                f"--database {shlex.quote(c.database)} flush  (with REDIS_URL and "
                f"MONGODB_URL set to this saver's servers{where})")

    def _drain_s(self, given: float | None) -> float:
        return self.config.close_drain_timeout_s if given is None else given

    async def aclose(self, drain_timeout_s: float | None = None) -> None:
        """Async ``close``; also closes the asyncio clients made for this event loop."""
        sh = self._shared
        if sh.closed:
            return
        try:
            if sh.flusher is not None and sh.flusher.running:
                await self.aflush(self._drain_s(drain_timeout_s))
            elif self.config.flusher == "off":
                (n,) = await self._arun(_xlen_plan(self._ctx))
                if n:
                    log.info("closing with %d entries in the outbox %s for the flushers; %s",
                             n, self._ctx.outbox, self._drain_hint())
        except (FlushTimeoutError, TierUnavailableError) as exc:
            log.warning("closing with entries still in the outbox: %s; %s", exc,
                        self._drain_hint())
        finally:
            sh.closed = True
            if sh.deferred is not None:
                sh.deferred.stop()
            if sh.flusher is not None:
                await sh.flusher.astop()
            for clients in list(self._per_loop.values()):
                await clients.redis.aclose()
                await clients.db.client.close()
            self._per_loop.clear()
            for c in self._owned:
                await asyncio.to_thread(c.close)

    def __enter__(self) -> Self:
        """``setup()``, except that MongoDB not answering does not stop the saver: its
        part of the set-up is retried in the background (a warning is logged). Raises
        ``TierUnavailableError`` when Redis does not answer."""
        try:
            self._run(self._redis_setup_plan())
            try:
                self._run(self._mongo_setup_plan())
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
            await self._arun(self._redis_setup_plan())
            try:
                await self._arun(self._mongo_setup_plan())
            except TierUnavailableError as exc:
                self._mongo_setup_failed(exc, self._async_clients())
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
        It is None when Redis does not answer, after ``close()``, and when called from the
        event loop of a saver with asyncio clients only (use ``astats()`` there)."""
        live: int | None = None
        if not self._shared.closed:
            try:
                (live,) = self._run(_xlen_plan(self._ctx))
            except (TierUnavailableError, SyncCallInEventLoopError):
                live = None
        return self._stats(live)

    async def astats(self) -> dict[str, Any]:
        """Async ``stats`` (``outbox_length`` read with the asyncio clients)."""
        live: int | None = None
        if not self._shared.closed:
            try:
                (live,) = await self._arun(_xlen_plan(self._ctx))
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


def _xlen_plan(ctx: Context) -> Plan:
    return (yield Pipeline([["XLEN", ctx.outbox]]))


class _Shared:
    """State shared by a saver and the shallow copies ``with_allowlist`` makes of it."""

    def __init__(self, metrics: Metrics) -> None:
        self.lock = threading.Lock()
        self.flusher: Flusher | None = None
        self.deferred: DeferredSetup | None = None
        self.closed = False
        self.metrics = metrics
        self.last_read_tier: str | None = None
