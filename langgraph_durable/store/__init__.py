"""``DurableStore``: LangGraph's long-term memory store (``BaseStore``) on the saver's tiers.

A put returns once Redis holds the item and its outbox entry (one STORE_PUT script, one
round trip, one hash slot); the flusher carries it to MongoDB; reads see every write that
returned, flushed or not (``plans/store_items.py``); Redis keeps a bounded hot window, MongoDB
all. Answers equal ``InMemoryStore``'s (``store/batch.py``). It runs on a ``SaverRuntime``:
its own (``from_urls``, ``from_conn_string``) or a running saver's (``DurableStore(saver)``
or ``saver.store()``: one set of connections, one outbox, one flusher).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Awaitable, Iterable, Mapping
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from typing import TYPE_CHECKING, Any

from langchain_core.embeddings import Embeddings
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    Op,
    PutOp,
    Result,
    TTLConfig,
    validate_op_namespace,
)
from typing_extensions import Self, Unpack

from ..config import DurableConfig, StoreFromUrlsOptions
from ..core.item_versions import ItemVersions, store_item_versions
from ..core.ops import Plan
from ..core.state_versions import as_migrations
from ..errors import ConfigurationError
from ..plans import store_items as P
from ..plans.context import Clock, Context
from ..plans.store_match import ExactScorer, VectorScorer
from ..runtime.base import SET_UP, SaverRuntime
from ..serde.external import ExternalRefSerializer
from ..settings import (
    check_mongo_url,
    database_of_url,
    hide_password,
    saver_config,
    server_settings,
    with_database,
)
from .admission import Admission
from .batch import Answers, batch_plan, check_op, prepare_put, ttl_problem
from .embedding import as_floats, index_config, prepared_puts, queries_of, texts_of
from .single import get_one_plan, lone, put_one_plan
from .ttl_sweeper import TtlSweeper
from .vectors import StoreVectors

SWEEP_LIMIT = 1000
"""Most expired items one TTL sweep deletes (bounded work per sweep)."""

_TTL_KEYS = frozenset({"default_ttl", "refresh_on_read", "omit_expired",
                       "sweep_interval_minutes"})
_TTL_FLAGS = frozenset({"refresh_on_read", "omit_expired"})


def checked_ttl(ttl: object) -> TTLConfig | None:
    """``DurableStore``'s ``ttl`` as given (a copy), or None for none or ``{}``. Raises
    ``ConfigurationError`` naming the key when ``ttl`` is not a mapping, names a key other
    than LangGraph's ``TTLConfig`` keys ``default_ttl`` (minutes), ``refresh_on_read``
    (bool), ``omit_expired`` (bool) and ``sweep_interval_minutes``, or gives one a value
    of another type."""
    if ttl is None:
        return None
    if not isinstance(ttl, Mapping):
        raise ConfigurationError(
            f"DurableStore ttl={ttl!r}: a TTLConfig mapping of default_ttl (minutes), "
            f"refresh_on_read and sweep_interval_minutes, e.g. {{'default_ttl': 60}}")
    unknown = set(ttl) - _TTL_KEYS
    if unknown:
        raise ConfigurationError(f"DurableStore ttl: unknown key(s) {sorted(unknown)} "
                                 f"(known: {sorted(_TTL_KEYS)})")
    for key, value in ttl.items():
        number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if key in _TTL_FLAGS:
            problem = None if isinstance(value, bool) else "is not True or False"
        elif key == "default_ttl":
            problem = None if value is None else ttl_problem(value)
        else:  # sweep_interval_minutes
            problem = None if value is None or (number and 0 < value < float("inf")) else (
                "is not a number of minutes over 0")
        if problem:
            raise ConfigurationError(f"DurableStore ttl: {key}={value!r} {problem}")
    return dict(ttl) if ttl else None  # type: ignore[return-value]

if TYPE_CHECKING:
    import numpy as np


class DurableStore(BaseStore, AbstractContextManager, AbstractAsyncContextManager):
    """LangGraph's ``BaseStore`` (memories shared across threads: ``store=`` on
    ``compile()``, ``get_store()`` in nodes) on Redis and MongoDB, with the saver's
    promises: a put returns once Redis holds it, atomically with its outbox entry, and
    reaches MongoDB through the flusher; reads see every write that returned; nothing
    acknowledged is lost by a kill of the application or of the flusher, nor by MongoDB
    being down (puts keep working within ``max_outbox``). Sync and async methods alike.

    ``search`` without a query lists items by namespace (compared as text: the labels
    joined by ``.``, so ``("a-b",)`` comes before ``("a", "b")``), oldest first within
    one, and reads about ``offset + limit`` documents (more with a filter: until that
    many pass); with a query it scores every item under the prefix from its embeddings
    and reads the values of the page only (``plans/store_search.py``).

    Args:
        saver: a ``DurableSaver`` whose runtime (clients, flusher, outbox, key prefix,
            settings, metrics) the store shares; closing the store leaves it open.
        runtime: a ``SaverRuntime`` to run on instead (``from_urls`` makes one).
        index: LangGraph's ``IndexConfig`` for semantic search: ``dims``, ``embed`` (a
            LangChain ``Embeddings``, or a sync or async function of a list of texts)
            and ``fields`` (paths to embed, default the whole value ``"$"``); also
            ``distance_type`` (``"cosine"`` default, ``"inner_product"``, ``"l2"``: the
            score is the negated distance), as PostgresStore's.
        ttl: ``TTLConfig``: ``default_ttl`` (minutes, for puts that give none),
            ``refresh_on_read`` (default True) and ``sweep_interval_minutes`` (a sweeper
            thread deletes expired items every so often while the store is entered);
            ``omit_expired`` is accepted with either value: reads never return an
            expired item, swept or not (what LangGraph's ``omit_expired=True`` asks;
            ``False`` only allows a store to return them).
        serde: the serializer of values (default LangGraph's ``JsonPlusSerializer``; an
            ``EncryptedSerializer`` works; not an ``ExternalRefSerializer``: the
            collector of external objects does not read the store).
        scorer: the vector-search step (default ``ExactScorer``: exact scores in NumPy).
        clock: where the store reads the time of puts' expiry and of reads (default the
            system's; tests pass one they control).
        vector_search: where semantic search runs (``DurableConfig.vector_search``, whose
            value, from the runtime's configuration, ``from_urls`` options or
            ``LGD_VECTOR_SEARCH``, is the default): ``"auto"``, ``"exact"``, ``"redis"``
            or ``"mongodb"``; resolved when the store sets up (``setup()``, entering it,
            or its first batch), reported by ``vector_search`` and logged
            (``plans/store_vectors.py``).
        vector_algorithm: the Redis index's algorithm, used when the index is created:
            ``"FLAT"`` (default: exact brute force inside Redis, so the redis path
            answers the same set as the exact one; measured p50 about 1 ms at 10,000
            vectors of 256 dims) or ``"HNSW"`` (approximate, for stores far larger;
            its recall@10 is measured by ``benchmarks/store.py``).
        state_version: the application's current state version (an int >= 1), recorded
            with every item put and checked on every read (``core/item_versions.py``);
            default the saver's (``DurableConfig.state_version``, from the runtime's
            configuration, ``from_urls`` options or ``LGD_STATE_VERSION``), so one option
            versions checkpoints and items; without one anywhere nothing is recorded or
            checked. Set it only once every process (application and flusher) runs
            this release: older ones refuse a versioned record with
            ``CorruptRecordError``.
        state_migrations: ``{k: StateMigration(items=fn, ...)}``: the ``items`` hook
            turns an item value of version k into k + 1's when it is read
            (``fn(namespace, key, value) -> value``); a plain function, or a step
            without ``items``, keeps item values as they are. Default the saver's
            ``state_migrations`` when made from a saver (the same registry), else none.
        unversioned_state_version: the version of an item put without one (default the
            configuration's, 1).
        newer_state: an item of a newer version than ``state_version``: ``"raise"``
            (``StateVersionError``) or ``"read"`` (returned as stored); default the
            configuration's (``"raise"``).
        read_as_stored: reads return item values as stored, neither migrated nor checked
            against the state version (puts still record it): what the tools show
            (``langgraph-durable store get``). Default False.

    Reads of an older item return its migrated value (a ``search`` filter applies to
    it) and store nothing; the application's next ``put`` of the item stores it in the
    running version, and embeds it again (a migration never recomputes embeddings).

    Raises ``ConfigurationError`` for neither or both of ``saver`` and ``runtime``, for
    an ``ExternalRefSerializer`` as ``serde``, for an unknown ``ttl`` key, for an
    ``index`` without ``dims`` or ``embed``, for an ``index`` without NumPy installed
    (the ``memory`` extra), for a bad state version option and for an unknown
    ``vector_search`` or ``vector_algorithm``;
    at set-up for ``vector_search="redis"`` on a Redis without the query engine and for
    ``"mongodb"`` (``plans/store_vectors.resolve_plan``).
    """

    supports_ttl: bool = True

    def __init__(self, saver: Any = None, *, runtime: SaverRuntime | None = None,
                 index: IndexConfig | None = None, ttl: TTLConfig | None = None,
                 serde: SerializerProtocol | None = None,
                 scorer: VectorScorer | None = None, clock: Clock | None = None,
                 vector_search: str | None = None, vector_algorithm: str = "FLAT",
                 state_version: int | None = None,
                 state_migrations: Mapping[int, Any] | None = None,
                 unversioned_state_version: int | None = None,
                 newer_state: str | None = None, read_as_stored: bool = False) -> None:
        if (saver is None) == (runtime is None):
            raise ConfigurationError("DurableStore needs a saver (DurableStore(saver)) or a "
                                     "runtime, or use DurableStore.from_urls(...)")
        held = getattr(saver, "runtime", None) if saver is not None else runtime
        if not isinstance(held, SaverRuntime):
            raise ConfigurationError(f"DurableStore(saver): a DurableSaver, not {saver!r:.80}")
        versions = store_item_versions(held.config, saver, state_version, state_migrations,
                                       unversioned_state_version, newer_state,
                                       read_as_stored)
        self._runtime: SaverRuntime = held
        self._owns = saver is None
        self._ctx: Context = self._runtime.context
        if clock is not None:
            self._ctx = dataclasses.replace(self._ctx, clock=clock)
        if isinstance(serde, ExternalRefSerializer):
            raise ConfigurationError(
                "DurableStore cannot store values through an ExternalRefSerializer: the "
                "collector of external objects (gc) does not read the store, so it would "
                "delete objects the store refers to; pass its inner serializer")
        self._answers = Answers(serde or JsonPlusSerializer(), versions)
        self._scorer: VectorScorer = scorer or ExactScorer(
            str((index or {}).get("distance_type") or "cosine"))
        self.ttl_config: TTLConfig | None = checked_ttl(ttl)
        self.index_config: dict[str, Any] | None = None
        self.embeddings: Embeddings | None = None
        if index:
            self.index_config, self.embeddings = index_config(index)
        self._sweeper = TtlSweeper(self.sweep_ttl)
        self._admission = Admission()
        self._vectors = StoreVectors(self._runtime, self.index_config, self._scorer,
                                     vector_search or self._runtime.config.vector_search,
                                     vector_algorithm)

    # ------------------------------------------------------------------ construction

    @classmethod
    def from_urls(cls, redis_url: str, mongo_url: str, *, index: IndexConfig | None = None,
                  ttl: TTLConfig | None = None, serde: SerializerProtocol | None = None,
                  config: DurableConfig | None = None, meter_provider: Any = None,
                  clock: Clock | None = None, vector_algorithm: str = "FLAT",
                  state_migrations: Mapping[int, Any] | None = None,
                  **options: Unpack[StoreFromUrlsOptions]) -> Self:
        """A store with its own clients and flusher for ``redis_url`` and ``mongo_url``,
        configured as ``DurableSaver.from_urls`` is (``config`` or keyword ``options``
        over ``LGD_*`` variables; the database from the URL). Use it with ``with`` or
        ``async with`` (entering sets up, leaving drains the outbox and closes), or call
        ``close()``; ``vector_search``, ``state_version``, ``unversioned_state_version``
        and ``newer_state`` are options; ``state_migrations`` as ``DurableStore``'s.
        Raises ``ConfigurationError`` as ``DurableSaver.from_urls`` does."""
        migrations = as_migrations(state_migrations)  # checked before clients are made
        ttl = checked_ttl(ttl)
        cfg = with_database(saver_config(config, options),
                            database_of_url(check_mongo_url(mongo_url)),
                            f"MongoDB URL {hide_password(mongo_url)!r}")
        runtime = SaverRuntime.from_urls(redis_url, mongo_url, config=cfg,
                                         meter_provider=meter_provider)
        runtime.owner = "DurableStore"
        return cls(runtime=runtime, index=index, ttl=ttl, serde=serde, clock=clock,
                   vector_algorithm=vector_algorithm, state_migrations=migrations)

    @classmethod
    def from_conn_string(cls, redis_url: str | None = None, mongo_url: str | None = None,
                         *, index: IndexConfig | None = None, ttl: TTLConfig | None = None,
                         serde: SerializerProtocol | None = None,
                         config: DurableConfig | None = None, meter_provider: Any = None,
                         clock: Clock | None = None, vector_algorithm: str = "FLAT",
                         state_migrations: Mapping[int, Any] | None = None,
                         **options: Unpack[StoreFromUrlsOptions]) -> Self:
        """``from_urls`` (the same keywords) with URLs left out read from
        ``REDIS_URL``/``MONGODB_URL``, for ``with DurableStore.from_conn_string(...) as
        store`` (or ``async with``). Raises ``ConfigurationError`` when a URL is given
        neither way."""
        env = server_settings()
        redis_url, mongo_url = redis_url or env.redis_url, mongo_url or env.mongodb_url
        if not redis_url or not mongo_url:
            raise ConfigurationError("DurableStore.from_conn_string needs a Redis URL and a "
                                     "MongoDB URL: pass them or set REDIS_URL and MONGODB_URL")
        return cls.from_urls(redis_url, mongo_url, index=index, ttl=ttl, serde=serde,
                             config=config, meter_provider=meter_provider, clock=clock,
                             vector_algorithm=vector_algorithm,
                             state_migrations=state_migrations, **options)

    @property
    def vector_search(self) -> str | None:
        """Where semantic search runs: ``"redis"`` (the Redis Query Engine's index),
        ``"exact"`` (in the application), ``"none"`` (no ``index``: no semantic search),
        or None before the store set up."""
        return self._vectors.path

    def rebuild_vector_index(self) -> int:
        """Fill the Redis index from MongoDB's items now (``plans/store_vectors.
        rebuild_plan``; a search does it by itself when the index has no state); returns
        the items written. Raises ``ConfigurationError`` unless the store searches
        through Redis."""
        return self._vectors.rebuild()

    async def arebuild_vector_index(self) -> int:
        """Async ``rebuild_vector_index``."""
        return await self._vectors.arebuild()

    @property
    def state_version(self) -> int | None:
        """The state version this store records with its puts and migrates reads to
        (None: none)."""
        return self._answers.versions.current

    @property
    def state_versions(self) -> ItemVersions:
        """The store's state-version options (``core/item_versions.py``)."""
        return self._answers.versions

    @property
    def runtime(self) -> SaverRuntime:
        """The ``SaverRuntime`` the store runs on (a saver's when made from one)."""
        return self._runtime

    # ------------------------------------------------------------------ lifecycle

    def __enter__(self) -> Self:
        if self._owns:
            self._runtime.start()
        try:
            self._vectors.resolve(rebuild=True, tolerant=True)
        except BaseException:
            self.close()
            raise
        self._start_sweeper()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        if self._owns:
            await self._runtime.astart()
        try:
            await self._vectors.aresolve(rebuild=True, tolerant=True)
        except BaseException:
            await self.aclose()
            raise
        self._start_sweeper()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()

    def setup(self) -> Awaitable[None]:
        """Set up now (MongoDB's indexes of the store and the saver, the outbox group, the
        key prefix's binding), as ``DurableSaver.setup()``, and choose where semantic
        search runs (``vector_search``; the Redis index is rebuilt from MongoDB when it
        has no state); raises their errors. Inside a running event loop it returns a
        future, as ``DurableSaver.setup()`` does."""
        done = self._runtime.setup()
        if done is not SET_UP:
            return asyncio.ensure_future(self._after_setup(done))
        self._vectors.resolve(rebuild=True)
        return done

    async def _after_setup(self, done: Awaitable[None]) -> None:
        await done
        await self._vectors.aresolve(rebuild=True)

    async def asetup(self) -> None:
        """Async ``setup``."""
        await self._runtime.asetup()
        await self._vectors.aresolve(rebuild=True)

    def flush(self, timeout_s: float = 30.0) -> None:
        """Wait until every write so far is in MongoDB (``FlushTimeoutError`` after
        ``timeout_s`` seconds)."""
        self._runtime.flush(timeout_s)

    async def aflush(self, timeout_s: float = 30.0) -> None:
        """Async ``flush``."""
        await self._runtime.aflush(timeout_s)

    def close(self) -> None:
        """Stop the TTL sweeper; close the runtime (drain the outbox, close the clients)
        when the store made it, else leave the saver's running."""
        self._sweeper.stop()
        if self._owns:
            self._runtime.close()

    async def aclose(self) -> None:
        """Async ``close``."""
        self._sweeper.stop()
        if self._owns:
            await self._runtime.aclose()

    # ------------------------------------------------------------------ TTL sweep

    def sweep_ttl(self, limit: int = SWEEP_LIMIT) -> int:
        """Delete up to ``limit`` items expired now from both tiers (through the outbox:
        Redis at once, MongoDB at the next flush); returns how many. Reads never return
        an expired item, swept or not."""
        return self._runtime.run(P.sweep_plan(self._ctx, self._now_ms(), limit))

    async def asweep_ttl(self, limit: int = SWEEP_LIMIT) -> int:
        """Async ``sweep_ttl``."""
        return await self._runtime.arun(P.sweep_plan(self._ctx, self._now_ms(), limit))

    def start_ttl_sweeper(self, sweep_interval_minutes: float | None = None) -> None:
        """Start the sweeper thread (as ``PostgresStore.start_ttl_sweeper``): a
        ``sweep_ttl()`` every ``sweep_interval_minutes`` (default the ``ttl`` config's,
        else 5) until ``stop_ttl_sweeper()`` or ``close()``. Entering the store starts
        it when the ``ttl`` config names an interval. Needs sync clients (a store made
        from URLs or from a saver with sync clients); does nothing when running."""
        self._start_sweeper(sweep_interval_minutes or 5)

    def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the sweeper thread; True once it stopped (within ``timeout`` seconds)."""
        return self._sweeper.stop(timeout)

    def _start_sweeper(self, minutes: float | None = None) -> None:
        minutes = minutes or (self.ttl_config or {}).get("sweep_interval_minutes")
        if minutes and self._runtime.clients.sync is not None:
            self._sweeper.start(minutes)

    # ------------------------------------------------------------------ batches

    def _now_ms(self) -> int:
        return self._ctx.clock.time_ns() // 1_000_000

    def _split(self, ops: Iterable[Op]) -> tuple[list[Op], dict[tuple[tuple[str, ...], str],
                                                                    PutOp]]:
        listed = list(ops)
        puts: dict[tuple[tuple[str, ...], str], PutOp] = {}
        for op in listed:
            validate_op_namespace(op)
            check_op(op)
            if isinstance(op, PutOp):
                puts[(op.namespace, op.key)] = op
        return listed, puts

    def _one_plan(self, op: GetOp | PutOp) -> Plan[list[Result]]:
        """The plan of a batch of the one op ``op`` (``single.lone``), checked as
        ``_split`` checks every op."""
        validate_op_namespace(op)
        check_op(op)
        now = self._now_ms()
        if isinstance(op, GetOp):
            return get_one_plan(self._ctx, self._answers, op, now)
        return put_one_plan(self._ctx, prepare_put(op, self._answers.serde, now,
                                                   state_version=self.state_version), now)

    def _dims(self) -> int:
        return int(self.index_config["dims"]) if self.index_config else 0

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run LangGraph's store operations (``GetOp``, ``SearchOp``,
        ``ListNamespacesOp``, ``PutOp``); results in order (None for puts). Raises
        ``InvalidNamespaceError`` for a bad namespace label (empty, holding ``.`` or
        NUL), ``InvalidIdentifierError`` for an item key holding NUL (both before
        anything is read or written), ``OutboxFullError`` when the
        outbox is full, ``TierUnavailableError`` when a needed server does not answer."""
        listed = list(ops)
        one = lone(listed, self.index_config is not None)
        if one is not None:
            return self._runtime.run(self._one_plan(one))
        listed, puts = self._split(listed)
        now = self._now_ms()
        embedded = texts_of(self.index_config, puts.values())
        texts = [t for _, _, ts in embedded for t in ts]
        vectors = self.embeddings.embed_documents(texts) if texts and self.embeddings else []
        queries = {q: as_floats(self.embeddings.embed_query(q), self._dims(), q)
                   for q in queries_of(self.embeddings, listed)} if self.embeddings else {}
        prepared = prepared_puts(puts, embedded, vectors, now, self._answers.serde,
                                 self.state_version, self._dims())
        scorer = self._vectors.resolve() if queries else self._scorer
        return self._runtime.run(batch_plan(self._ctx, self._answers, listed, prepared,
                                            queries, scorer, self._dims(), now))

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """Async ``batch`` (embeddings through the embedder's async methods); at most
        ``admission.MAX_ASYNC_BATCHES`` run at once on a loop, the others wait their
        turn, and a lone search or namespace listing waiting for its turn joins an
        identical one waiting too (``store/admission.py``)."""
        return await self._admission.run(list(ops), self._abatch)

    async def _abatch(self, listed: list[Op]) -> list[Result]:
        one = lone(listed, self.index_config is not None)
        if one is not None:
            return await self._runtime.arun(self._one_plan(one))
        listed, puts = self._split(listed)
        now = self._now_ms()
        embedded = texts_of(self.index_config, puts.values())
        texts = [t for _, _, ts in embedded for t in ts]
        vectors = (await self.embeddings.aembed_documents(texts)
                   if texts and self.embeddings else [])
        queries: dict[str, np.ndarray] = {}
        if self.embeddings is not None:
            for q in queries_of(self.embeddings, listed):
                queries[q] = as_floats(await self.embeddings.aembed_query(q), self._dims(), q)
        prepared = prepared_puts(puts, embedded, vectors, now, self._answers.serde,
                                 self.state_version, self._dims())
        scorer = await self._vectors.aresolve() if queries else self._scorer
        return await self._runtime.arun(batch_plan(self._ctx, self._answers, listed,
                                                   prepared, queries, scorer,
                                                   self._dims(), now))


__all__ = ["DurableStore"]
