"""DurableSaver: LangGraph's checkpointer contract over a Redis hot tier and a MongoDB
durable tier. This module is the contract: it validates LangGraph's calls, turns them into
the plans of ``plans/`` (written once for both APIs) and runs them on the saver's runtime
(``runtime/base.py``; construction and lifecycle: ``runtime/lifecycle.py``; deleting,
copying, pruning and listing whole threads: ``runtime/thread_methods.py``)."""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import AsyncIterator, Callable, Collection, Iterator, Mapping, Sequence
from datetime import datetime
from typing import Any, Literal, TypeVar

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
    get_checkpoint_id,
)
from langgraph.store.base import IndexConfig, TTLConfig

from .admin.extref_gc import acollect_saver_garbage, collect_saver_garbage
from .core.drive import Steps
from .core.ops import Plan
from .core.records import check_id
from .errors import CorruptRecordError
from .metrics import safe_error
from .plans import delta, history_edits, read, write
from .runtime.lifecycle import SaverLifecycle
from .runtime.retention_methods import RetentionMethods
from .runtime.thread_methods import ThreadMethods
from .serde.gc import GcReport
from .serde.stores import BlobStore
from .store import DurableStore

PAGE_SIZE = 64
"""Checkpoints fetched per round trip by ``list``."""
log = logging.getLogger(__name__)

ReadTier = Literal["hot", "durable", "miss"]
"""Which tier answered a ``get_tuple``: Redis, MongoDB, or neither."""

_T = TypeVar("_T")

class DurableSaver(ThreadMethods, SaverLifecycle, RetentionMethods):
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
            ``EncryptedSerializer`` works and keeps metadata encrypted too). Assigning
            ``saver.serde`` later takes effect for every later call (see ``serde``).
        config: a ``DurableConfig``; or pass its fields as keyword ``options``.
        meter_provider: OpenTelemetry ``MeterProvider`` for ``langgraph_durable.metrics``
            (default the global one; ``stats()`` holds the same numbers).
        state_migrations: ``{k: fn}`` (or ``{k: StateMigration(values=fn, writes=fn)}``)
            turning the channel values of application state version k into k + 1's,
            applied on read to checkpoints older than the ``state_version`` option
            (``core/state_versions.py``; with ``state_version``,
            ``unversioned_state_version`` and ``newer_state``, which are ``DurableConfig``
            fields). A ``StateMigration``'s ``items`` hook migrates the items of
            ``saver.store()``, which shares this registry (``core/item_versions.py``).
            Raises ``ConfigurationError`` for a key that is no int >= 1 or a value that
            is no function.

    Clients are of two kinds (``clients.GivenClients``, ``clients.UrlClients``). Given
    clients stay the caller's (never closed here). With sync clients, sync methods run
    directly and async ones in a worker thread (or natively, when asyncio clients are given
    too). With asyncio clients only, async methods run natively and sync ones are sent to
    the event loop owning the clients (running when the saver was made, else that of the
    first async call); from inside that loop they raise ``SyncCallInEventLoopError``
    instead of deadlocking, and with no running loop owning them
    ``EventLoopNotRunningError``. ``from_urls`` makes sync clients now and asyncio ones per
    event loop, and closes them all on ``close``/``aclose``.

    Set-up: entering (``with``/``async with``) sets the saver up and leaving drains the
    outbox and closes it. A saver used without ``with`` (``checkpointer=DurableSaver.
    from_urls(...)``, as one uses ``InMemorySaver()``) sets itself up on its first call,
    once, with the same checks (a failure is raised to that call and tried again on the
    next); call ``close()`` at shutdown. Its key prefix belongs to one MongoDB database and
    collection_prefix (recorded in Redis at set-up); a saver configured with another raises
    ``ConfigurationError``.

    Beyond LangGraph's contract: ``flush``, ``setup``, ``check_deployment``, ``close``,
    ``stats``, ``gc``, ``list_threads``, retention by policy (``pin_thread``,
    ``unpin_thread``, ``set_thread_ttl``, ``thread_retention``, ``retention_due``,
    ``sweep``: ``runtime/retention_methods.py``) (each with its ``a*`` twin), ``last_read_tier``,
    ``config`` and, for tools, ``run``/``arun`` with ``context`` and ``sync_clients``.

    Structure: this class turns LangGraph's calls into plans and runs them on its
    ``runtime`` (a ``runtime.base.SaverRuntime``: clients, set-up, flusher, metrics; it
    knows nothing of LangGraph); what a call learned (the head it read or wrote, the items
    Redis holds) is applied in one place, ``Context.learn``. Construction, the serializer
    and the lifecycle methods, each a one-line delegation to the runtime, are in
    ``runtime/lifecycle.py``.
    """


    # ------------------------------------------------------------------ the contract

    def _count(self, key: str) -> None:
        self._runtime.metrics.call(key)

    async def _off_loop(self, fn: Callable[..., _T], *args: Any) -> _T:
        """Run ``fn`` (serializing before a plan, decoding after it) in a worker thread when
        the serializer may do blocking I/O (it has ``adumps_typed``, as
        ``ExternalRefSerializer`` uploading to a blob store), else right here."""
        if hasattr(self.serde, "adumps_typed"):
            return await asyncio.to_thread(fn, *args)
        return fn(*args)

    def _put_done(self, prepared: write.PreparedPut, result: RunnableConfig,
                  config: RunnableConfig, checkpoint: Checkpoint,
                  marks: Mapping[str, str]) -> RunnableConfig:
        """What a stored put taught this process: its checkpoint is the head, its items
        are in Redis, and (with a state version) the migrated values it refers to need not
        be stored by the puts of its children (``StateVersions.put_done``)."""
        self._ctx.learn(prepared.thread_id, (prepared.ns, prepared.checkpoint_id),
                        prepared.parts)
        self._state.put_done(config, prepared.thread_id, prepared.ns,
                             prepared.checkpoint_id, checkpoint, marks)
        return result

    def _put_failed(self, config: RunnableConfig, checkpoint: Checkpoint,
                    exc: Exception) -> None:
        """Remember that the put of ``checkpoint`` failed, for an effect of one of its
        tasks waiting for it (``plans/effect_journal.task_checkpoint_plan``)."""
        try:
            tid, ns = write.thread_ns(config)
            cid = str(checkpoint["id"])
        except Exception:  # a config the put refused: no task of it can be waiting
            return
        self._ctx.heads.refused(tid, ns, cid, safe_error(exc))

    def _writes_done(self, prepared: write.PreparedWrites | None) -> None:
        """What stored pending writes taught this process: their items are in Redis."""
        if prepared is not None and prepared.parts:
            self._ctx.learn(prepared.thread_id, None, prepared.parts)

    def _finished(self, page: read.Page) -> read.Page:
        """``page`` after what its read learned was applied (``Context.learn``)."""
        if page.learned is not None:
            self._ctx.learn(*page.learned)
        return page

    def _tier(self, page: read.Page) -> CheckpointTuple | None:
        self._finished(page)
        self._runtime.metrics.read(page.hot, page.durable, 0 if page.tuples else 1)
        tier: ReadTier = ("miss" if not page.tuples else "hot" if page.hot else "durable")
        self._runtime.read_tier.set(tier)
        return page.tuples[0] if page.tuples else None

    @property
    def last_read_tier(self) -> ReadTier | None:
        """Which tier answered the last ``get_tuple``/``aget_tuple`` made *in this thread or
        asyncio task* (by this saver or its ``with_allowlist`` copies): ``"hot"`` (Redis),
        ``"durable"`` (MongoDB) or ``"miss"`` (neither held it); None before the first.
        Calls in other threads or tasks do not change it; ``stats()["reads"]`` counts
        reads by tier over all of them."""
        return self._runtime.read_tier.get()  # type: ignore[return-value]

    def _get_plan(self, config: RunnableConfig) -> Plan:
        tid, ns = write.thread_ns(config)
        # a LangGraph run starts with this read: a put that failed in an earlier run no
        # longer stops an effect (``Heads.read``)
        self._ctx.heads.read(tid, ns)
        cid = get_checkpoint_id(config)
        if cid is not None:
            cid = check_id("checkpoint_id", cid, thread_id=tid)
        return read.get_tuple_plan(self._ctx, tid, ns, cid)

    def _resumed(self, config: RunnableConfig, tup: CheckpointTuple | None
                 ) -> CheckpointTuple | None:
        """``tup`` as the call's state version sees it (``StateVersions.migrate_tuple`` on
        the resume path: a newer one raises ``StateVersionError``)."""
        if tup is None:
            return None
        return self._state.migrate_tuple(tup, self._state.running(config), resume=True)

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint named by ``config`` (latest of its thread and namespace when it has
        no ``checkpoint_id``), with pending writes in ``writes_sort_key`` order, or None.
        One Redis round trip when Redis holds it; mirrors ``InMemorySaver.get_tuple``.

        With a state version (``state_version`` or ``config["configurable"]
        ["state_version"]``), an older checkpoint is returned migrated
        (``state_migrations``; ``StateMigrationError`` for a gap or a failing migration)
        and a newer one raises ``StateVersionError`` (``core/state_versions.py``); nothing
        stored is changed."""
        raw = self._runtime.run(self._get_plan(config))
        return self._resumed(config, self._tier(read.finish_page(self._ctx, raw)))

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """Async ``get_tuple``."""
        raw = await self._runtime.arun(self._get_plan(config))
        return self._resumed(
            config, self._tier(await self._off_loop(read.finish_page, self._ctx, raw)))

    def put(self, config: RunnableConfig, checkpoint: Checkpoint,
            metadata: CheckpointMetadata, new_versions: ChannelVersions) -> RunnableConfig:
        """Store ``checkpoint`` (values of the channels in ``new_versions`` only) under the
        thread and namespace of ``config``; its ``checkpoint_id`` becomes the parent.
        Raises ``SerializationError`` (nothing written) for a value the serializer
        refuses, ``OutboxFullError`` when MongoDB is ``max_outbox`` entries behind.

        With a state version, the stored metadata is a copy of ``metadata`` with
        ``STATE_VERSION_KEY`` set, and the migrated values of a checkpoint read in an
        older version (channels with a marked version) are stored too, unless the parent
        checkpoint this process stored already refers to them
        (``core/written_marks.WrittenMarks``)."""
        self._count("puts")
        try:
            metadata, new_versions, marks = self._state.for_put(config, checkpoint, metadata,
                                                                new_versions)
            prepared = write.prepare_put(self._ctx, config, checkpoint, metadata,
                                         new_versions)
            done = self._runtime.run(write.put_plan(self._ctx, prepared))
        except Exception as exc:
            self._put_failed(config, checkpoint, exc)
            raise
        return self._put_done(prepared, done, config, checkpoint, marks)

    async def aput(self, config: RunnableConfig, checkpoint: Checkpoint,
                   metadata: CheckpointMetadata, new_versions: ChannelVersions) -> RunnableConfig:
        """Async ``put``."""
        self._count("puts")
        try:
            metadata, new_versions, marks = self._state.for_put(config, checkpoint, metadata,
                                                                new_versions)
            prepared = await self._off_loop(write.prepare_put, self._ctx, config,
                                            checkpoint, metadata, new_versions)
            done = await self._runtime.arun(write.put_plan(self._ctx, prepared))
        except Exception as exc:
            self._put_failed(config, checkpoint, exc)
            raise
        return self._put_done(prepared, done, config, checkpoint, marks)

    def put_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]],
                   task_id: str, task_path: str = "") -> None:
        """Store pending writes of ``task_id`` for the checkpoint of ``config``. Writes to
        ``WRITES_IDX_MAP`` channels overwrite; others are insert-once (a retry changes
        nothing), as in InMemorySaver."""
        self._count("put_writes")
        prepared = write.prepare_put_writes(self._ctx, config, writes, task_id, task_path)
        self._runtime.run(write.put_writes_plan(self._ctx, prepared))
        self._writes_done(prepared)

    async def aput_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]],
                          task_id: str, task_path: str = "") -> None:
        """Async ``put_writes``."""
        self._count("put_writes")
        prepared = await self._off_loop(write.prepare_put_writes, self._ctx, config, writes,
                                        task_id, task_path)
        await self._runtime.arun(write.put_writes_plan(self._ctx, prepared))
        self._writes_done(prepared)

    def _list_steps(self, config: RunnableConfig | None, filter: Mapping[str, Any] | None,
                    before: RunnableConfig | None, limit: int | None) -> Any:
        ctx = self._ctx
        before_id = get_checkpoint_id(before) if before else None
        damaged: list[CorruptRecordError] = []
        if config is None:
            yield history_edits.flush_wait_plan(ctx, ctx.config.delete_flush_timeout_s)
            threads, damaged = yield read.threads_plan(ctx)
            conf_ns, exact = None, None
        else:
            threads = [write.thread_ns(config)[0]]
            conf_ns = config["configurable"].get("checkpoint_ns")
            exact = get_checkpoint_id(config)
        left = [limit]
        if exact and before_id and exact >= before_id:
            return
        for tid in threads:
            if left[0] is not None and left[0] <= 0:
                break
            try:
                yield from self._thread_steps(tid, conf_ns, exact, before_id, filter, left)
            except CorruptRecordError as exc:
                if config is not None:
                    raise
                log.warning("list(None) skips the rest of thread %r: %s", tid, exc)
                damaged.append(exc)
        if damaged:
            raise CorruptRecordError.gathered(
                f"list(None) yielded every other checkpoint but could not list "
                f"{len(damaged)} thread(s) with damaged records", damaged)

    def _thread_steps(self, tid: str, conf_ns: str | None, exact: str | None,
                      before_id: str | None, filter: Mapping[str, Any] | None,
                      left: list[int | None]) -> Any:
        ctx = self._ctx
        spaces = [conf_ns] if conf_ns is not None else (yield read.namespaces_plan(ctx, tid))
        for ns in spaces:
            cursor = before_id
            while left[0] is None or left[0] > 0:
                n = left[0]
                count = PAGE_SIZE if filter or n is None else min(n, PAGE_SIZE)
                page = yield read.page_plan(ctx, tid, ns, before=cursor, exact=exact,
                                            count=1 if exact else count, filter=filter)
                for tup in page.tuples:
                    if left[0] is not None:
                        if left[0] <= 0:
                            return
                        left[0] -= 1
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
        (after a flush, from MongoDB).

        Damaged records (``CorruptRecordError``: a record that cannot be decoded, a Redis
        key of the wrong type, a MongoDB document lacking a field, a channel value neither
        tier holds: ``MissingValueError``) raise, naming the thread and the key or
        document. With a ``config`` the error is raised where the listing meets it. With
        ``config=None`` one damaged thread does not hide the others: the rest of that
        thread is skipped (logged as a warning), every other thread's checkpoints are
        yielded, and then ``CorruptRecordError`` is raised naming each thread it could
        not list (``.damaged``: their errors), also when ``limit`` was reached; nothing is
        skipped silently.

        With a state version, older checkpoints are yielded migrated (as ``get_tuple``;
        their metadata shows the stored version, which ``filter`` matches), and a newer
        one raises ``StateVersionError`` unless ``newer_state="read"`` (then yielded as
        stored)."""
        running = self._state.running(config)
        steps = Steps(self._list_steps(config, filter, before, limit))
        for step in steps:
            if isinstance(step, CheckpointTuple):
                yield self._state.migrate_tuple(step, running, resume=False)
                continue
            try:
                page = self.run(step)
                if isinstance(page, read.RecordPage):
                    page = self._finished(read.finish_page(self._ctx, page))
                steps.send(page)
            except CorruptRecordError as exc:  # to _list_steps: skips the thread or raises
                steps.throw(exc)

    async def alist(self, config: RunnableConfig | None, *, filter: dict[str, Any] | None = None,
                    before: RunnableConfig | None = None, limit: int | None = None,
                    ) -> AsyncIterator[CheckpointTuple]:
        """Async ``list`` (damaged records and state versions as there)."""
        running = self._state.running(config)
        steps = Steps(self._list_steps(config, filter, before, limit))
        for step in steps:
            if isinstance(step, CheckpointTuple):
                yield self._state.migrate_tuple(step, running, resume=False)
                continue
            try:
                page = await self.arun(step)
                if isinstance(page, read.RecordPage):
                    page = self._finished(
                        await self._off_loop(read.finish_page, self._ctx, page))
                steps.send(page)
            except CorruptRecordError as exc:  # to _list_steps: skips the thread or raises
                steps.throw(exc)

    def _delta_plan(self, config: RunnableConfig, channels: Sequence[str]
                    ) -> Plan[delta.VersionedRecords]:
        tid, ns = write.thread_ns(config)
        return delta.versioned_history_plan(
            self._ctx, tid, ns, get_checkpoint_id(config), channels,
            with_target=self._state.running(config) is not None)

    def _delta_decoded(self, config: RunnableConfig, found: delta.VersionedRecords
                       ) -> dict[str, DeltaChannelHistory]:
        """The history decoded, its writes through the state migrations' writes hooks
        (checked against the target checkpoint's stored state version)."""
        out = found.records.decode(self.serde)
        running = self._state.running(config)
        if running is None or found.target is None:
            return out
        page = self._finished(read.finish_page(self._ctx, found.target))
        if not page.tuples:
            return out
        tup = page.tuples[0]
        for entry in out.values():
            entry["writes"] = self._state.migrate_writes(tup, running, entry["writes"])
        return out

    def get_delta_channel_history(self, *, config: RunnableConfig, channels: Sequence[str]
                                  ) -> Mapping[str, DeltaChannelHistory]:
        """Per-channel writes and seed along the parent chain, walked only back to each
        channel's nearest stored value: one Redis round trip while the chain is in Redis,
        a few MongoDB queries per 64 ancestors beyond; mirrors
        ``InMemorySaver.get_delta_channel_history``.

        With a state version (one more read: the target checkpoint's stored version), the
        writes of an older checkpoint's history go through the ``writes`` hooks of
        ``state_migrations`` and a newer one raises ``StateVersionError`` unless
        ``newer_state="read"``. The seeds are returned as stored: the walk reads one
        channel's values, not the whole state a ``values`` hook is written for, so a
        migration must not rename or reshape a ``DeltaChannel`` (limitation, see
        ``core/state_versions.py``)."""
        if not channels:
            return {}
        return self._delta_decoded(config, self.run(self._delta_plan(config, channels)))

    async def aget_delta_channel_history(self, *, config: RunnableConfig,
                                         channels: Sequence[str]
                                         ) -> Mapping[str, DeltaChannelHistory]:
        """Async ``get_delta_channel_history``."""
        if not channels:
            return {}
        found = await self.arun(self._delta_plan(config, channels))
        return await self._off_loop(self._delta_decoded, config, found)

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

    def gc(self, store: BlobStore | None = None, *, grace_period_s: float = 3600,
           now: datetime | float | None = None, dry_run: bool = False,
           also_referenced: Collection[str] = ()) -> GcReport:
        """Delete blobs of the external-reference blob store (``store``, default the
        serializer's) that no record of this saver refers to (checkpoints, metadata, channel
        values, pending writes, items, effect journal entries: ``admin/referrers.py``) and that
        are older than ``grace_period_s`` seconds, so a blob uploaded for a checkpoint not yet
        stored is never taken. Blobs other savers refer to go in ``also_referenced``.
        ``now``: the time blob ages are measured from (a ``datetime`` or seconds since the
        epoch; default the current time). Returns a ``serde.GcReport``; raises
        ``ValueError`` when there is no store (no ``store`` and a serializer without one);
        on a Redis Cluster the keys are found on every primary. See
        ``langgraph_durable.admin.extref_gc``."""
        return collect_saver_garbage(self, store, grace_period_s, now, dry_run=dry_run,
                                     also_referenced=also_referenced)

    async def agc(self, store: BlobStore | None = None, *, grace_period_s: float = 3600,
                  now: datetime | float | None = None, dry_run: bool = False,
                  also_referenced: Collection[str] = ()) -> GcReport:
        """Async ``gc``."""
        return await acollect_saver_garbage(self, store, grace_period_s, now, dry_run=dry_run,
                                            also_referenced=also_referenced)

    def store(self, *, index: IndexConfig | None = None, ttl: TTLConfig | None = None,
              **kwargs: Any) -> DurableStore:
        """A ``DurableStore`` (LangGraph's long-term memory store) sharing this saver's
        runtime: its clients, flusher, outbox, key prefix, settings and metrics (one set
        of connections per process). ``index`` and ``ttl`` as ``DurableStore``'s;
        ``kwargs`` its other options (``serde``, ``scorer``, ``clock``, the state
        version options). The store records this saver's ``state_version`` with its
        items and migrates them by the ``items`` hooks of this saver's
        ``state_migrations`` unless given its own (``core/item_versions.py``). The store's
        serializer is its own (LangGraph's ``JsonPlusSerializer`` unless ``serde`` is
        given), not the saver's: the collector of external objects (``gc``) does not
        read the store, so an ``ExternalRefSerializer`` must not be passed. Closing the
        store leaves the saver open; pass both to
        ``builder.compile(checkpointer=saver, store=saver.store())``."""
        return DurableStore(self, index=index, ttl=ttl, **kwargs)
