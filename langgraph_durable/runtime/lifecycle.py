"""The ``DurableSaver`` beyond LangGraph's calls: how it is made (given clients,
``from_urls``, ``from_conn_string``), its serializer, and its lifecycle (``setup()``,
``check_deployment()``, the context managers, ``flush``, ``close``, ``stats``), each a
delegation to the ``SaverRuntime`` it holds (``runtime/base.py``). The set-up itself runs
once per runtime (``startup.SetupGate``), also from the first call of a saver used without
``with`` (``SaverRuntime.run``)."""

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Collection, Generator, Mapping
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from typing import Any, TypeVar

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.serde.base import SerializerProtocol, maybe_add_typed_methods
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from typing_extensions import Self, Unpack

from ..config import DurableConfig, FromUrlsOptions, SaverOptions
from ..core.items import items_for
from ..core.state_versions import StateMigration, StateVersions, as_migrations
from ..errors import ConfigurationError
from ..io.drivers import Clients
from ..plans.context import Context
from ..settings import (
    check_mongo_url,
    database_of_url,
    hide_password,
    saver_config,
    server_settings,
    with_database,
)
from .base import SET_UP as SET_UP
from .base import SaverRuntime

T = TypeVar("T")


class SaverLifecycle(BaseCheckpointSaver[str], AbstractContextManager,
                     AbstractAsyncContextManager):
    """Construction, serializer and lifecycle of a ``DurableSaver`` (see there for the
    arguments): it holds a ``SaverRuntime`` (``runtime``, shared with its
    ``with_allowlist`` copies) and its own ``context`` (the runtime's with this saver's
    serializer).

    The keyword ``options`` are typed (``config/options.py``, where each is documented):
    ``SaverOptions`` for ``DurableSaver(redis, mongo, ...)``, whose ``ClientOptions``
    (``redis_max_connections``, ``socket_timeout_s``, ``server_selection_timeout_s``,
    ``mongo_socket_timeout_s``)
    would configure nothing and raise ``ConfigurationError``; ``FromUrlsOptions`` for
    ``from_urls`` and ``from_conn_string``."""

    _runtime: SaverRuntime
    _ctx: Context
    _state: StateVersions

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
        state_migrations: Mapping[int, Any] | None = None,
        **options: Unpack[SaverOptions],
    ) -> None:
        super().__init__(serde=serde)
        for name, given in (("redis", redis), ("mongo", mongo), ("async_redis", async_redis),
                            ("async_mongo", async_mongo)):
            if isinstance(given, (str, bytes)):
                raise ConfigurationError(
                    f"DurableSaver({name}=...) takes a client, got a {type(given).__name__} "
                    "(a URL?): build the saver from URLs with DurableSaver.from_urls(redis_url, "
                    "mongo_url, ...) or DurableSaver.from_conn_string()")
        migrations = as_migrations(state_migrations)  # checked before clients are made
        self._hold(SaverRuntime.from_clients(
            redis, mongo, async_redis=async_redis, async_mongo=async_mongo,
            config=saver_config(config, options, builds_clients=False),
            meter_provider=meter_provider), migrations)

    def _hold(self, runtime: SaverRuntime,
              migrations: Mapping[int, StateMigration] | None = None) -> None:
        cfg = runtime.config
        self._state = StateVersions(cfg.state_version, dict(migrations or {}),
                                    cfg.unversioned_state_version, cfg.newer_state)
        self._runtime = runtime
        runtime.gate.watch(self)  # the set-up warns about a permissive serializer
        self._ctx = dataclasses.replace(runtime.context,
                                        **_serde_fields(runtime.config, self.serde))
        _bound_blob_store(runtime.config, self.serde)

    @property
    def state_versions(self) -> StateVersions:
        """The state-version options this saver runs with (``state_version``,
        ``state_migrations``, ``unversioned_state_version``, ``newer_state``; see
        ``core/state_versions.py``)."""
        return self._state

    @property
    def runtime(self) -> SaverRuntime:
        """The ``SaverRuntime`` this saver runs its plans on: clients, set-up, flusher,
        metrics (shared with its ``with_allowlist`` copies)."""
        return self._runtime

    @property
    def config(self) -> DurableConfig:
        """The validated configuration this saver runs with."""
        return self._runtime.config

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
        runtime: SaverRuntime | None = self.__dict__.get("_runtime")
        if not any(all(callable(getattr(value, n, None)) for n in pair)
                   for pair in (("dumps_typed", "loads_typed"), ("dumps", "loads"))):
            raise ConfigurationError(
                f"DurableSaver.serde must be a LangGraph serializer (with dumps_typed and "
                f"loads_typed), not {type(value).__module__}.{type(value).__qualname__}"
                + (f" (key prefix {runtime.config.key_prefix!r})" if runtime is not None
                   else ""))
        value = maybe_add_typed_methods(value)
        self.__dict__["_serde"] = value
        if runtime is not None:
            self._ctx = dataclasses.replace(self._ctx, **_serde_fields(runtime.config, value))
            _bound_blob_store(runtime.config, value)

    # ------------------------------------------------------------------ construction

    @classmethod
    def from_urls(
        cls, redis_url: str, mongo_url: str, *, serde: SerializerProtocol | None = None,
        config: DurableConfig | None = None, meter_provider: Any = None,
        state_migrations: Mapping[int, Any] | None = None,
        **options: Unpack[FromUrlsOptions],
    ) -> Self:
        """A saver with its own clients for ``redis_url`` and ``mongo_url``: sync clients
        now, asyncio clients made on first async use in each event loop. Use it as a
        context manager (``with`` or ``async with``): entering runs ``setup()``, leaving it
        drains the outbox to MongoDB and closes the clients. Used without ``with`` (as
        ``InMemorySaver()`` is), it sets itself up on its first call the same way, and
        ``close()`` drains and closes.

        The configuration is ``config`` or the keyword ``options`` (``FromUrlsOptions``,
        every ``DurableConfig`` field) over ``LGD_*`` environment variables
        (``langgraph_durable.settings``); the database is the one in
        ``mongo_url`` (``mongodb://h:p/myappdb``) unless ``database`` is given. Raises
        ``ConfigurationError`` for ``config`` together with ``options``, for an unknown
        or invalid option (naming it, with the closest option name), for a ``mongo_url``
        that is no MongoDB URL and for a ``database`` that differs from the URL's."""
        migrations = as_migrations(state_migrations)
        cfg = with_database(saver_config(config, options),
                            database_of_url(check_mongo_url(mongo_url)),
                            f"MongoDB URL {hide_password(mongo_url)!r}")
        saver = cls.__new__(cls)
        BaseCheckpointSaver.__init__(saver, serde=serde)
        saver._hold(SaverRuntime.from_urls(redis_url, mongo_url, config=cfg,
                                           meter_provider=meter_provider), migrations)
        return saver

    @classmethod
    def from_conn_string(
        cls, redis_url: str | None = None, mongo_url: str | None = None, *,
        serde: SerializerProtocol | None = None, config: DurableConfig | None = None,
        meter_provider: Any = None, state_migrations: Mapping[int, Any] | None = None,
        **options: Unpack[FromUrlsOptions],
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
                             meter_provider=meter_provider,
                             state_migrations=state_migrations, **options)

    def with_allowlist(self, extra_allowlist: Collection[tuple[str, ...]]) -> Self:
        """LangGraph's ``with_allowlist``: a shallow copy whose serializer also accepts the
        msgpack types of ``extra_allowlist``. The copy shares this saver's runtime (clients,
        flusher, metrics), heads and item store (its serialization cache and decoded copies:
        LangGraph makes such copies for graphs and subgraphs, which must not start cold),
        and is closed together with it. (Assigning ``serde`` instead starts a new item
        store.)"""
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
        return self._runtime.sync_clients

    # ------------------------------------------------------------------ running plans

    @property
    def is_closed(self) -> bool:
        """True once ``close()``/``aclose()`` began: every later call raises
        ``SaverClosedError``."""
        return self._runtime.closed

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
        return self._runtime.run(plan)

    async def arun(self, plan: Generator[Any, Any, T]) -> T:
        """Async ``run``: on the asyncio clients of the running event loop, or, with sync
        clients only, on those in a worker thread; sets a saver up first as ``run`` does.
        Raises what the plan and the set-up raise and ``SaverClosedError`` after
        ``close()``."""
        return await self._runtime.arun(plan)

    # ------------------------------------------------------------------ lifecycle

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
        return self._runtime.setup()

    async def asetup(self) -> None:
        """Async ``setup``."""
        await self._runtime.asetup()

    def check_deployment(self) -> None:
        """Check, writing nothing, what ``setup()`` checks: that this saver's key prefix is
        not bound to another database or collection_prefix (Redis) and that its collections
        do not belong to another key prefix (MongoDB's ``meta``; skipped when MongoDB does
        not answer). Raises ``ConfigurationError`` naming both sides, and
        ``TierUnavailableError`` when Redis does not answer. The saver then no longer sets
        itself up on its first call: for tools that only read (the CLI's ``threads``,
        ``show``, ...), so that reading writes nothing; a saver that writes should be set
        up (``with``, ``setup()`` or its first call) instead."""
        self._runtime.check_deployment()

    async def acheck_deployment(self) -> None:
        """Async ``check_deployment``."""
        await self._runtime.acheck_deployment()

    def __enter__(self) -> Self:
        """``setup()`` (unless the saver set itself up already), except that MongoDB not
        answering does not stop the saver: its part of the set-up is retried in the
        background (a warning is logged); then the flusher starts (``flusher="auto"``).
        Raises ``TierUnavailableError`` when Redis does not answer and
        ``ConfigurationError`` for a key prefix bound to another database or
        collection_prefix, or collections owned by another key prefix (then the saver is
        closed)."""
        self._runtime.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._runtime.close()

    async def __aenter__(self) -> Self:
        """Async ``__enter__``."""
        await self._runtime.astart()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self._runtime.aclose()

    def flush(self, timeout_s: float = 30.0) -> None:
        """Wait until everything written so far (by any process) is in MongoDB, and this
        saver's in-process flusher has counted the round that moved it (``stats()``).
        Raises ``FlushTimeoutError`` after ``timeout_s`` seconds."""
        self._runtime.flush(timeout_s)

    async def aflush(self, timeout_s: float = 30.0) -> None:
        """Async ``flush``."""
        await self._runtime.aflush(timeout_s)

    def close(self, drain_timeout_s: float | None = None) -> None:
        """Drain the outbox (up to ``drain_timeout_s`` seconds, default the configured
        ``close_drain_timeout_s``; what is left stays in Redis for the next flusher, never
        lost: a warning is logged), stop the flusher, close the clients this saver created.
        Later calls raise ``SaverClosedError`` (also those of its ``with_allowlist``
        copies)."""
        self._runtime.close(drain_timeout_s)

    async def aclose(self, drain_timeout_s: float | None = None) -> None:
        """Async ``close``; also closes the asyncio clients made for this event loop."""
        await self._runtime.aclose(drain_timeout_s)

    def stats(self) -> dict[str, Any]:
        """The numbers of ``langgraph_durable.metrics`` as a plain dict: reads by tier
        (``hot``/``durable``/``miss``), puts, writes, bytes written per tier, flush counts
        and lags (seconds), per-operation round-trip times (seconds), and the in-process
        flusher's rounds, entries (``reaped``: of them, taken from flushers whose
        heartbeat lapsed), errors, lag (seconds) and the outbox length it saw after its
        last round (``outbox_length_seen``). Right after ``flush()`` returns they include
        the round that drained what it waited for (``flush()`` waits for the in-process
        flusher to count it); with ``flusher="process"`` they are the child's, at most a
        second old.

        ``outbox_length`` is read from Redis now (one ``XLEN``, at most ``socket_timeout_s``
        seconds): the entries waiting for MongoDB at this moment, whoever flushes them.
        It is None when Redis does not answer, after ``close()``, and for a saver with
        asyncio clients only when called from inside their event loop (use ``astats()``
        there) or when no running event loop owns them."""
        return self._runtime.stats()

    async def astats(self) -> dict[str, Any]:
        """Async ``stats`` (``outbox_length`` read with the asyncio clients)."""
        return await self._runtime.astats()


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


def _bound_blob_store(config: DurableConfig, serde: Any) -> None:
    """Give the blob store of the saver's serializer (an ``ExternalRefSerializer``'s
    ``store``) the saver's ``blob_timeout_s``/``blob_retries`` when either is set
    (keyword, ``config=`` or ``LGD_*``) and the store bounds a client of its own
    (``S3BlobStore.use_bounds``); a store with a client given, or of another kind, is
    left as it is."""
    use_bounds = getattr(getattr(serde, "store", None), "use_bounds", None)
    if callable(use_bounds) and {"blob_timeout_s", "blob_retries"} & config.model_fields_set:
        use_bounds(config.blob_timeout_s, config.blob_retries)
