"""DurableSaver: LangGraph's checkpointer contract over a Redis hot tier and a MongoDB
durable tier. This module is the shell: it validates calls, picks the sync or asyncio
clients and drives the plans in ``plans/`` (written once for both APIs)."""

from __future__ import annotations

import asyncio
import logging
import random
import threading
import weakref
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
    get_checkpoint_id,
)
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer

from . import clients as C
from .config import DurableConfig
from .context import Context
from .drivers import Clients, Mongo, Parallel, Pipeline, Plan, run_async, run_sync
from .durable.documents import INDEXES
from .errors import SaverClosedError, SyncCallInEventLoopError
from .hot.scripts import SCRIPTS
from .outbox.flusher import Flusher
from .plans import admin, delta, read, write
from .records import check_id

log = logging.getLogger("langgraph_durable.saver")

PAGE_SIZE = 64
"""Checkpoints fetched per round trip by ``list``."""


class DurableSaver(BaseCheckpointSaver[str], AbstractContextManager, AbstractAsyncContextManager):
    """A LangGraph checkpointer that survives crashes; a drop-in for ``InMemorySaver``.

    Every ``put``/``put_writes`` is committed to Redis (one round trip, one Lua script,
    atomic with its outbox entry) before it returns; a flusher copies it to MongoDB off
    the critical path (``durability="strict"`` waits for MongoDB too). Reads go to Redis
    first and to MongoDB for what Redis no longer holds. Answers equal InMemorySaver's.

    Args:
        redis: ``redis.Redis`` / ``redis.cluster.RedisCluster`` or their
            ``redis.asyncio`` counterparts.
        mongo: ``pymongo.MongoClient`` / ``AsyncMongoClient`` (a Motor client works), or
            a database of one.
        async_redis, async_mongo: asyncio clients when ``redis``/``mongo`` are sync ones,
            so both APIs run natively.
        serde: serializer (default LangGraph's ``JsonPlusSerializer``;
            ``EncryptedSerializer`` works and keeps metadata encrypted too).
        config: a ``DurableConfig``; or pass its fields as keyword ``options``.

    With sync clients, sync methods run directly and async ones in a worker thread.
    With asyncio clients only, async methods run natively and sync ones are sent to the
    client's event loop; calling them *from* that loop raises
    ``SyncCallInEventLoopError`` instead of deadlocking.
    """

    def __init__(
        self,
        redis: Any = None,
        mongo: Any = None,
        *,
        async_redis: Any = None,
        async_mongo: Any = None,
        serde: Any = None,
        config: DurableConfig | None = None,
        **options: Any,
    ) -> None:
        super().__init__(serde=serde)
        self.config = config.model_copy(update=options) if config else DurableConfig(**options)
        if options and config:
            self.config = DurableConfig(**{**config.model_dump(), **options})
        if redis is not None and C.is_async_redis(redis):
            redis, async_redis = None, redis
        if mongo is not None and C.is_async_mongo(mongo):
            mongo, async_mongo = None, mongo
        if (redis is None) != (mongo is None) or (async_redis is None) != (async_mongo is None):
            raise ValueError("DurableSaver needs a Redis and a MongoDB client of the same "
                             "kind (both sync, both asyncio, or both pairs)")
        if redis is None and async_redis is None:
            raise ValueError("DurableSaver needs Redis and MongoDB clients (or use from_urls)")
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
        self._shared = _Shared()

    # ------------------------------------------------------------------ construction

    @classmethod
    def from_urls(
        cls, redis_url: str, mongo_url: str, *, serde: Any = None,
        config: DurableConfig | None = None, **options: Any,
    ) -> DurableSaver:
        """A saver with its own clients for ``redis_url`` and ``mongo_url``: sync clients
        now, asyncio clients made on first async use in each event loop. Use it as a
        context manager (``with`` or ``async with``): leaving it drains the outbox to
        MongoDB and closes the clients."""
        cfg = config or DurableConfig(**options)
        if config and options:
            cfg = DurableConfig(**{**config.model_dump(), **options})
        r = C.redis_from_url(redis_url, cfg, asyncio=False)
        m = C.mongo_from_url(mongo_url, cfg, asyncio=False)
        saver = cls(r, m, serde=serde, config=cfg)
        saver._urls = (redis_url, mongo_url)
        saver._owned += [r, m]
        return saver

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
                f = Flusher(self._ctx)
                f.start_thread(self._sync)
                sh.flusher = f

    async def _aensure_flusher(self, clients: Clients) -> None:
        sh = self._shared
        if self.config.flusher == "off" or sh.flusher is not None:
            return
        if self._sync is not None:
            await asyncio.to_thread(self._ensure_flusher_thread)
            return
        f = Flusher(self._ctx)
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
        from .outbox.flusher import ensure_group_plan

        cols = self._ctx.collections
        yield Parallel([Mongo(getattr(cols, kind), "create_indexes", (models,))
                        for kind, models in INDEXES.items()])
        # load the Lua scripts now so the first put is already one round trip
        yield Pipeline([["SCRIPT", "LOAD", src] for src in SCRIPTS.values()])
        yield from ensure_group_plan(self._ctx)

    def flush(self, timeout_s: float = 30.0) -> None:
        """Wait until everything written so far (by any process) is in MongoDB.
        Raises ``FlushTimeoutError`` after ``timeout_s`` seconds."""
        self._run(admin.flush_wait_plan(self._ctx, timeout_s))

    async def aflush(self, timeout_s: float = 30.0) -> None:
        """Async ``flush``."""
        await self._arun(admin.flush_wait_plan(self._ctx, timeout_s))

    def close(self, drain_timeout_s: float = 30.0) -> None:
        """Drain the outbox (up to ``drain_timeout_s`` seconds), stop the flusher, close
        the clients this saver created. Later calls raise ``SaverClosedError``."""
        sh = self._shared
        if sh.closed:
            return
        try:
            if sh.flusher is not None and sh.flusher.running:
                self.flush(drain_timeout_s)
        finally:
            sh.closed = True
            if sh.flusher is not None:
                sh.flusher.stop()
            for c in self._owned:
                c.close()

    async def aclose(self, drain_timeout_s: float = 30.0) -> None:
        """Async ``close``; also closes the asyncio clients made for this event loop."""
        sh = self._shared
        if sh.closed:
            return
        try:
            if sh.flusher is not None and sh.flusher.running:
                await self.aflush(drain_timeout_s)
        finally:
            sh.closed = True
            if sh.flusher is not None:
                await sh.flusher.astop()
            for clients in list(self._per_loop.values()):
                await clients.redis.aclose()
                await clients.db.client.close()
            self._per_loop.clear()
            for c in self._owned:
                await asyncio.to_thread(c.close)

    def __enter__(self) -> DurableSaver:
        self._run(self._setup_plan())
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    async def __aenter__(self) -> DurableSaver:
        await self._arun(self._setup_plan())
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    def stats(self) -> dict[str, Any]:
        """Counters as a plain dict: reads by tier (``hot``/``durable``/``miss``), puts,
        writes, and the in-process flusher's rounds, entries, errors and lag (seconds)."""
        sh = self._shared
        f = sh.flusher
        lags = sorted(f.lags_s) if f else []
        return {
            **dict(sh.counters),
            "flusher": None if f is None else {
                "consumer": f.consumer, "rounds": f.rounds, "entries": f.entries,
                "errors": f.errors, "last_error": f.last_error,
                "lag_p50_s": lags[len(lags) // 2] if lags else None,
                "lag_max_s": lags[-1] if lags else None,
            },
        }

    # ------------------------------------------------------------------ the contract

    def _count(self, key: str, n: int = 1) -> None:
        self._shared.counters[key] = self._shared.counters.get(key, 0) + n

    def _tier(self, page: read.Page) -> CheckpointTuple | None:
        self._count("reads_hot", page.hot)
        self._count("reads_durable", page.durable)
        if not page.tuples:
            self._count("reads_miss")
            self._shared.last_read_tier = "miss"
            return None
        self._shared.last_read_tier = "hot" if page.hot else "durable"
        return page.tuples[0]

    @property
    def last_read_tier(self) -> str | None:
        """Which tier answered the last ``get_tuple``: ``"hot"``, ``"durable"`` or ``"miss"``."""
        return self._shared.last_read_tier

    def _get_plan(self, config: RunnableConfig) -> Plan:
        tid, ns = write.thread_ns(config)
        cid = get_checkpoint_id(config)
        if cid is not None:
            cid = check_id("checkpoint_id", cid, thread_id=tid)
        return read.get_tuple_plan(self._ctx, tid, ns, cid)

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint named by ``config`` (latest of its thread and namespace when it has
        no ``checkpoint_id``), with pending writes in ``writes_sort_key`` order, or None.
        One Redis round trip when Redis holds it; mirrors ``InMemorySaver.get_tuple``."""
        return self._tier(self._run(self._get_plan(config)))

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """Async ``get_tuple``."""
        return self._tier(await self._arun(self._get_plan(config)))

    def put(self, config: RunnableConfig, checkpoint: Checkpoint,
            metadata: CheckpointMetadata, new_versions: ChannelVersions) -> RunnableConfig:
        """Store ``checkpoint`` (values of the channels in ``new_versions`` only) under the
        thread and namespace of ``config``; its ``checkpoint_id`` becomes the parent.
        Raises ``SerializationError`` (nothing written) for a value the serializer
        refuses, ``OutboxFullError`` when MongoDB is ``max_outbox`` entries behind."""
        self._count("puts")
        return self._run(write.put_plan(self._ctx, config, checkpoint, metadata, new_versions))

    async def aput(self, config: RunnableConfig, checkpoint: Checkpoint,
                   metadata: CheckpointMetadata, new_versions: ChannelVersions) -> RunnableConfig:
        """Async ``put``."""
        self._count("puts")
        return await self._arun(
            write.put_plan(self._ctx, config, checkpoint, metadata, new_versions))

    def put_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]],
                   task_id: str, task_path: str = "") -> None:
        """Store pending writes of ``task_id`` for the checkpoint of ``config``. Writes to
        ``WRITES_IDX_MAP`` channels overwrite; others are insert-once (a retry changes
        nothing), as in InMemorySaver."""
        self._count("put_writes")
        self._run(write.put_writes_plan(self._ctx, config, writes, task_id, task_path))

    async def aput_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]],
                          task_id: str, task_path: str = "") -> None:
        """Async ``put_writes``."""
        self._count("put_writes")
        await self._arun(write.put_writes_plan(self._ctx, config, writes, task_id, task_path))

    def _list_steps(self, config: RunnableConfig | None, filter: Mapping[str, Any] | None,
                    before: RunnableConfig | None, limit: int | None) -> Any:
        ctx = self._ctx
        before_id = get_checkpoint_id(before) if before else None
        if config is None:
            yield admin.flush_wait_plan(ctx, ctx.config.delete_flush_timeout_s)
            threads = yield read.threads_plan(ctx)
            conf_ns, exact = None, None
        else:
            threads = [write.thread_ns(config)[0]]
            conf_ns = config["configurable"].get("checkpoint_ns")
            exact = get_checkpoint_id(config)
        left = limit
        if exact and before_id and exact >= before_id:
            return
        for tid in threads:
            spaces = [conf_ns] if conf_ns is not None else (yield read.namespaces_plan(ctx, tid))
            for ns in spaces:
                cursor = before_id
                while left is None or left > 0:
                    count = PAGE_SIZE if filter or left is None else min(left, PAGE_SIZE)
                    page = yield read.page_plan(ctx, tid, ns, before=cursor, exact=exact,
                                                count=1 if exact else count, filter=filter)
                    for tup in page.tuples:
                        if left is not None:
                            if left <= 0:
                                return
                            left -= 1
                        yield tup
                    if page.cursor is None or exact:
                        break
                    cursor = page.cursor

    def list(self, config: RunnableConfig | None, *, filter: dict[str, Any] | None = None,
             before: RunnableConfig | None = None, limit: int | None = None,
             ) -> Iterator[CheckpointTuple]:
        """Checkpoints newest first (per namespace, namespaces in first-written order),
        filtered by top-level metadata equality, strictly before ``before``'s
        checkpoint_id, at most ``limit``; mirrors ``InMemorySaver.list``. Both tiers are
        merged so each checkpoint appears once. ``config=None`` lists every thread
        (after a flush, from MongoDB)."""
        steps = self._list_steps(config, filter, before, limit)
        send: Any = None
        while True:
            try:
                step = steps.send(send)
            except StopIteration:
                return
            if isinstance(step, CheckpointTuple):
                send = None
                yield step
            else:
                send = self._run(step)

    async def alist(self, config: RunnableConfig | None, *, filter: dict[str, Any] | None = None,
                    before: RunnableConfig | None = None, limit: int | None = None,
                    ) -> AsyncIterator[CheckpointTuple]:
        """Async ``list``."""
        steps = self._list_steps(config, filter, before, limit)
        send: Any = None
        while True:
            try:
                step = steps.send(send)
            except StopIteration:
                return
            if isinstance(step, CheckpointTuple):
                send = None
                yield step
            else:
                send = await self._arun(step)

    def delete_thread(self, thread_id: str) -> None:
        """Delete every checkpoint, blob and write of ``thread_id`` in both tiers, after the
        outbox drained (so no late flush brings any of it back)."""
        self._run(admin.delete_thread_plan(self._ctx, check_id("thread_id", thread_id)))

    async def adelete_thread(self, thread_id: str) -> None:
        """Async ``delete_thread``."""
        await self._arun(admin.delete_thread_plan(self._ctx, check_id("thread_id", thread_id)))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Delete the checkpoints whose metadata ``run_id`` is in ``run_ids``, with their
        writes, in both tiers. Blobs stay (other checkpoints may share them)."""
        self._run(admin.delete_for_runs_plan(self._ctx, list(run_ids)))

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Async ``delete_for_runs``."""
        await self._arun(admin.delete_for_runs_plan(self._ctx, list(run_ids)))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint, blob and write (the whole parent chain) of one thread to
        another; the source is unchanged."""
        self._run(admin.copy_thread_plan(self._ctx, check_id("thread_id", source_thread_id),
                                         check_id("thread_id", target_thread_id)))

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Async ``copy_thread``."""
        await self._arun(admin.copy_thread_plan(
            self._ctx, check_id("thread_id", source_thread_id),
            check_id("thread_id", target_thread_id)))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """``keep_latest``: keep each namespace's newest checkpoint (and, for DeltaChannel,
        its ancestors back to a stored value of every delta channel); ``delete``: remove
        all. Raises ``ValueError`` for another strategy."""
        ids = [check_id("thread_id", t) for t in thread_ids]
        self._run(admin.prune_plan(self._ctx, ids, strategy))

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """Async ``prune``."""
        ids = [check_id("thread_id", t) for t in thread_ids]
        await self._arun(admin.prune_plan(self._ctx, ids, strategy))

    def _delta_plan(self, config: RunnableConfig, channels: Sequence[str]) -> Plan:
        tid, ns = write.thread_ns(config)
        return delta.delta_history_plan(self._ctx, tid, ns, get_checkpoint_id(config), channels)

    def get_delta_channel_history(self, *, config: RunnableConfig, channels: Sequence[str]
                                  ) -> Mapping[str, DeltaChannelHistory]:
        """Per-channel writes and seed along the parent chain, walked only back to each
        channel's nearest stored value: one Redis round trip while the chain is in Redis,
        a few MongoDB queries per 64 ancestors beyond; mirrors
        ``InMemorySaver.get_delta_channel_history``."""
        if not channels:
            return {}
        return self._run(self._delta_plan(config, channels))

    async def aget_delta_channel_history(self, *, config: RunnableConfig,
                                         channels: Sequence[str]
                                         ) -> Mapping[str, DeltaChannelHistory]:
        """Async ``get_delta_channel_history``."""
        if not channels:
            return {}
        return await self._arun(self._delta_plan(config, channels))

    def get_next_version(self, current: str | None, channel: None) -> str:  # type: ignore[override]
        """Next channel version: ``"<int:032>.<random:016>"``, as InMemorySaver and
        PostgresSaver make them (strings order like the integers they start with)."""
        if current is None:
            n = 0
        elif isinstance(current, int):
            n = current
        else:
            n = int(str(current).split(".")[0])
        return f"{n + 1:032}.{random.random():016}"


class _Shared:
    """State shared by a saver and the shallow copies ``with_allowlist`` makes of it."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.flusher: Flusher | None = None
        self.closed = False
        self.counters: dict[str, int] = {}
        self.last_read_tier: str | None = None
