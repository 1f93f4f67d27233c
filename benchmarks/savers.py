"""The savers under test, each opened in a fresh namespace per run (own Redis key prefix,
MongoDB database, PostgreSQL database or SQLite file), with its storage measured the way
its store reports it, and removed after the run.

A spec opens a saver for the sync API (``open_sync``) or the async API (``open_async``);
``drain`` waits until what it acknowledged is in its durable store (DurableSaver's
``flush``; a no-op for the others, whose calls return once stored).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

import pymongo
import redis
import redis.asyncio

from langgraph_durable import DurableSaver


@dataclass
class Env:
    """Where the servers are (``None`` when one could not be started)."""

    redis_url: str
    mongo_url: str
    postgres_url: str | None = None
    redis_stack_url: str | None = None
    tmpdir: str = field(default_factory=lambda: tempfile.mkdtemp(prefix="lgd-bench-"))


@dataclass
class Handle:
    """One open saver and what is needed to measure and remove its namespace."""

    spec: SaverSpec
    saver: Any
    ns: str
    extra: dict[str, Any] = field(default_factory=dict)


class SaverSpec:
    """Base of the saver specs."""

    name = "base"
    label = "base"
    durable_peer = False   # a peer the targets compare DurableSaver against
    is_durable_saver = False
    writes_mongo = False   # its durable store is MongoDB (the DOCS workload runs it)
    only: frozenset[str] | None = None  # workloads this saver runs (None: all)
    store = ""             # what ``storage`` measures

    def __init__(self, env: Env) -> None:
        self.env = env

    def new_ns(self) -> str:
        return f"b{uuid.uuid4().hex[:10]}"

    @contextlib.contextmanager
    def open_sync(self) -> Iterator[Handle]:
        raise NotImplementedError
        yield  # pragma: no cover

    @contextlib.asynccontextmanager
    async def open_async(self) -> AsyncIterator[Handle]:
        raise NotImplementedError
        yield  # pragma: no cover

    def drain(self, h: Handle) -> None:
        """Wait until everything acknowledged is in the durable store."""

    def storage(self, h: Handle) -> dict[str, Any]:
        """Bytes stored: ``{"bytes": int, "method": str, ...}``."""
        raise NotImplementedError

    def cleanup(self, h: Handle) -> None:
        """Remove the namespace (called after the saver is closed)."""


# ---------------------------------------------------------------- reference (LangGraph alone)


class ReferenceSpec(SaverSpec):
    """``floor.ReferenceSaver``: what LangGraph costs with a checkpointer that serializes
    nothing (W1, W3 only; not a peer, not a target)."""

    name, label = "reference", "LangGraph alone (ReferenceSaver)"
    only = frozenset({"W1 sync", "W1 async", "W1 async dsync", "W3"})

    @contextlib.contextmanager
    def open_sync(self) -> Iterator[Handle]:
        from .floor import ReferenceSaver

        yield Handle(self, ReferenceSaver(), self.new_ns())

    @contextlib.asynccontextmanager
    async def open_async(self) -> AsyncIterator[Handle]:
        from .floor import ReferenceSaver

        yield Handle(self, ReferenceSaver(), self.new_ns())


# ---------------------------------------------------------------- InMemorySaver


class InMemorySpec(SaverSpec):
    name, label = "inmemory", "InMemorySaver"
    store = "serialized bytes held (checkpoints, blobs, writes)"

    @contextlib.contextmanager
    def open_sync(self) -> Iterator[Handle]:
        from langgraph.checkpoint.memory import InMemorySaver

        yield Handle(self, InMemorySaver(), self.new_ns())

    @contextlib.asynccontextmanager
    async def open_async(self) -> AsyncIterator[Handle]:
        from langgraph.checkpoint.memory import InMemorySaver

        yield Handle(self, InMemorySaver(), self.new_ns())

    def storage(self, h: Handle) -> dict[str, Any]:
        s = h.saver
        n = 0
        for thread in s.storage.values():
            for ns in thread.values():
                for cp, md, _parent in ns.values():
                    n += len(cp[1]) + len(md[1])
        for (_t, _ns, _ch, _v), typed in s.blobs.items():
            n += len(typed[1])
        for ws in s.writes.values():
            for w in ws.values():
                n += len(w[2][1])
        return {"bytes": n, "method": self.store}


# ---------------------------------------------------------------- DurableSaver


def redis_bytes(url: str, pattern: str) -> tuple[int, int]:
    """(MEMORY USAGE summed over keys matching ``pattern``, number of keys)."""
    total, keys = 0, 0
    with redis.Redis.from_url(url) as r:
        for k in r.scan_iter(match=pattern, count=1000):
            total += int(r.memory_usage(k, samples=0) or 0)
            keys += 1
    return total, keys


def mongo_bytes(url: str, db: str) -> dict[str, Any]:
    """dbStats of ``db``: dataSize (BSON bytes of the documents) and indexSize."""
    with pymongo.MongoClient(url) as c:
        st = c[db].command("dbStats")
    return {"dataSize": int(st.get("dataSize", 0)), "indexSize": int(st.get("indexSize", 0)),
            "objects": int(st.get("objects", 0))}


ASYNC_POOL = 64
"""Connections in the blocking asyncio Redis pool the async DurableSaver runs use."""


async def from_urls_concurrency_check(env: Env, concurrent: int) -> str:
    """Run ``concurrent`` one-step graph threads at once on a ``from_urls`` DurableSaver
    (its default asyncio clients): ``"ok"`` or the error it raised."""
    import asyncio

    from . import graphs

    ns = f"b{uuid.uuid4().hex[:10]}"
    try:
        async with DurableSaver.from_urls(env.redis_url, env.mongo_url, key_prefix=ns,
                                          database=ns) as s:
            g = graphs.build_loop(s, asynchronous=True)
            await asyncio.gather(*(
                g.ainvoke(graphs.loop_input(2), {"configurable": {"thread_id": f"c{i}"}})
                for i in range(concurrent)))
        return "ok"
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    finally:
        DurableSpec(env).cleanup(Handle(DurableSpec(env), None, ns))


@contextlib.asynccontextmanager
async def durable_async(redis_url: str, mongo_url: str, *, pkg: Any = None, **options: Any
                        ) -> AsyncIterator[DurableSaver]:
    """A DurableSaver entered with ``async with``, built like ``from_urls`` (sync clients
    for the flusher thread, asyncio clients for the calls) except that the asyncio Redis
    client has a *blocking* pool of ``ASYNC_POOL`` connections: ``from_urls``' default
    pool raises ``MaxConnectionsError`` once more than 100 calls are in flight (W3's 200
    threads, W5's saturated phase); see ``from_urls_concurrency_check``. ``pkg``: the
    package to build it from (``langgraph_durable`` unless given, e.g. a baseline copy of
    it in ``ab_hot_path.py``)."""
    import importlib

    if pkg is None:
        pkg = importlib.import_module("langgraph_durable")
    clients = importlib.import_module(pkg.__name__ + ".io.clients")
    mongo_from_url, redis_from_url = clients.mongo_from_url, clients.redis_from_url
    cfg = pkg.DurableConfig(**options)
    r = redis_from_url(redis_url, cfg, asyncio=False)
    m = mongo_from_url(mongo_url, cfg, asyncio=False)
    pool = redis.asyncio.BlockingConnectionPool.from_url(
        redis_url, max_connections=ASYNC_POOL, timeout=30,
        socket_timeout=cfg.socket_timeout_s + cfg.flush_interval_s,
        socket_connect_timeout=cfg.socket_timeout_s)
    ar = redis.asyncio.Redis(connection_pool=pool)
    am = mongo_from_url(mongo_url, cfg, asyncio=True)
    try:
        async with pkg.DurableSaver(r, m, async_redis=ar, async_mongo=am, config=cfg) as s:
            yield s
    finally:
        await ar.aclose()
        await am.close()
        r.close()
        m.close()


class DurableSpec(SaverSpec):
    name, label = "durable", "DurableSaver (write-behind)"
    durability = "write_behind"
    is_durable_saver = True
    writes_mongo = True
    store = "MongoDB dbStats.dataSize (+ Redis MEMORY USAGE of the saver's keys)"

    def _make(self, ns: str) -> DurableSaver:
        return DurableSaver.from_urls(self.env.redis_url, self.env.mongo_url, key_prefix=ns,
                                      database=ns, durability=self.durability)

    @contextlib.contextmanager
    def open_sync(self) -> Iterator[Handle]:
        ns = self.new_ns()
        with self._make(ns) as s:
            h = Handle(self, s, ns)
            try:
                yield h
            finally:
                h.extra["stats"] = s.stats()
        self.cleanup(h)

    @contextlib.asynccontextmanager
    async def open_async(self) -> AsyncIterator[Handle]:
        ns = self.new_ns()
        async with durable_async(self.env.redis_url, self.env.mongo_url, key_prefix=ns,
                                 database=ns, durability=self.durability) as s:
            h = Handle(self, s, ns)
            try:
                yield h
            finally:
                h.extra["stats"] = s.stats()
        self.cleanup(h)

    def drain(self, h: Handle) -> None:
        h.saver.flush(120)

    def storage(self, h: Handle) -> dict[str, Any]:
        m = mongo_bytes(self.env.mongo_url, h.ns)
        rb, rk = redis_bytes(self.env.redis_url, "{" + h.ns + ":*")
        return {"bytes": m["dataSize"], "index_bytes": m["indexSize"], "redis_bytes": rb,
                "redis_keys": rk, "method": "MongoDB dbStats.dataSize"}

    def cleanup(self, h: Handle) -> None:
        with contextlib.suppress(Exception), pymongo.MongoClient(self.env.mongo_url) as c:
            c.drop_database(h.ns)
        with contextlib.suppress(Exception), redis.Redis.from_url(self.env.redis_url) as r:
            keys = list(r.scan_iter(match="{" + h.ns + ":*", count=1000))
            for i in range(0, len(keys), 500):
                r.delete(*keys[i:i + 500])


class DurableStrictSpec(DurableSpec):
    name, label = "durable_strict", "DurableSaver (strict)"
    durability = "strict"


class DurableWorkerSpec(DurableSpec):
    """Write-behind with ``flusher="off"`` and the outbox drained by a standalone worker
    process (``python -m langgraph_durable.outbox.worker``), started before each run; in
    pinned mode on the servers' CPU (a worker on another machine): the application's own
    cost."""

    name, label = "durable_worker", "DurableSaver (write-behind, worker process)"
    only = frozenset({"W1 sync", "W1 async", "W1 async dsync", "W3", "DOCS"})

    def _worker(self, ns: str) -> Any:
        import subprocess
        import sys

        from . import cpu

        proc = subprocess.Popen(
            [sys.executable, "-m", "langgraph_durable.outbox.worker", "--redis-url",
             self.env.redis_url, "--mongo-url", self.env.mongo_url, "--key-prefix", ns,
             "--database", ns], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        # wait until it reads the outbox (a consumer in the group), so its start-up is
        # neither timed nor competing with the run
        import time

        outbox = "{" + ns + ":outbox}"
        deadline = time.monotonic() + 30
        with redis.Redis.from_url(self.env.redis_url) as r:
            while time.monotonic() < deadline and proc.poll() is None:
                try:
                    if r.xinfo_consumers(outbox, "flushers"):
                        break
                except redis.ResponseError:
                    pass
                time.sleep(0.05)
        if proc.poll() is not None:
            raise RuntimeError(f"flusher worker exited with {proc.returncode}")
        cpu.SERVERS["flusher worker"] = [proc.pid]
        from . import pinning

        if pinning.PINNED:  # a worker elsewhere: on the servers' CPU, not the application's
            pinning.pin_servers({"flusher worker": [proc.pid]})
        return proc

    @staticmethod
    def _stop(proc: Any) -> None:
        import signal

        from . import cpu

        cpu.SERVERS.pop("flusher worker", None)
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except Exception:
            proc.kill()
            proc.wait()

    @contextlib.contextmanager
    def open_sync(self) -> Iterator[Handle]:
        ns = self.new_ns()
        with DurableSaver.from_urls(self.env.redis_url, self.env.mongo_url, key_prefix=ns,
                                    database=ns, flusher="off") as s:
            proc = self._worker(ns)
            h = Handle(self, s, ns)
            try:
                yield h
            finally:
                s.flush(120)
                self._stop(proc)
        self.cleanup(h)

    @contextlib.asynccontextmanager
    async def open_async(self) -> AsyncIterator[Handle]:
        ns = self.new_ns()
        async with durable_async(self.env.redis_url, self.env.mongo_url, key_prefix=ns,
                                 database=ns, flusher="off") as s:
            proc = self._worker(ns)
            h = Handle(self, s, ns)
            try:
                yield h
            finally:
                await s.aflush(120)
                self._stop(proc)
        self.cleanup(h)


# ---------------------------------------------------------------- MongoDBSaver


class MongoDBSpec(SaverSpec):
    name, label = "mongodb", "MongoDBSaver"
    durable_peer = True
    writes_mongo = True
    store = "MongoDB dbStats.dataSize"

    @contextlib.contextmanager
    def open_sync(self) -> Iterator[Handle]:
        from langgraph.checkpoint.mongodb import MongoDBSaver

        ns = self.new_ns()
        client: pymongo.MongoClient = pymongo.MongoClient(self.env.mongo_url)
        try:
            yield Handle(self, MongoDBSaver(client, db_name=ns), ns)
        finally:
            client.close()
            self.cleanup(Handle(self, None, ns))

    @contextlib.asynccontextmanager
    async def open_async(self) -> AsyncIterator[Handle]:
        # MongoDBSaver's a* methods run its sync methods in the default executor
        with self.open_sync() as h:
            yield h

    def storage(self, h: Handle) -> dict[str, Any]:
        m = mongo_bytes(self.env.mongo_url, h.ns)
        return {"bytes": m["dataSize"], "index_bytes": m["indexSize"], "method": self.store}

    def cleanup(self, h: Handle) -> None:
        with contextlib.suppress(Exception), pymongo.MongoClient(self.env.mongo_url) as c:
            c.drop_database(h.ns)


# ---------------------------------------------------------------- PostgresSaver


_PG_TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes", "checkpoint_migrations")


class PostgresSpec(SaverSpec):
    name, label = "postgres", "PostgresSaver"
    durable_peer = True
    store = "PostgreSQL pg_total_relation_size of its tables (heap+TOAST+indexes)"
    pool_size = 20

    def _db_url(self, ns: str) -> str:
        assert self.env.postgres_url
        base, _, _ = self.env.postgres_url.rpartition("/")
        return f"{base}/{ns}"

    def _create(self, ns: str) -> None:
        import psycopg

        assert self.env.postgres_url
        with psycopg.connect(self.env.postgres_url, autocommit=True) as c:
            c.execute(f'CREATE DATABASE "{ns}"')

    def cleanup(self, h: Handle) -> None:
        import psycopg

        assert self.env.postgres_url
        with contextlib.suppress(Exception), psycopg.connect(self.env.postgres_url,
                                                             autocommit=True) as c:
            c.execute(f'DROP DATABASE IF EXISTS "{h.ns}" WITH (FORCE)')

    @contextlib.contextmanager
    def open_sync(self) -> Iterator[Handle]:
        from langgraph.checkpoint.postgres import PostgresSaver
        from psycopg import Connection
        from psycopg.rows import dict_row

        ns = self.new_ns()
        self._create(ns)
        try:
            with Connection.connect(self._db_url(ns), autocommit=True, prepare_threshold=0,
                                    row_factory=dict_row) as conn:
                s = PostgresSaver(conn)
                s.setup()
                yield Handle(self, s, ns)
        finally:
            self.cleanup(Handle(self, None, ns))

    @contextlib.asynccontextmanager
    async def open_async(self) -> AsyncIterator[Handle]:
        from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
        from psycopg.rows import dict_row
        from psycopg_pool import AsyncConnectionPool

        ns = self.new_ns()
        self._create(ns)
        try:
            async with AsyncConnectionPool(
                self._db_url(ns), min_size=1, max_size=self.pool_size, open=False,
                kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
            ) as pool:
                s = AsyncPostgresSaver(pool)  # type: ignore[arg-type]
                await s.setup()
                yield Handle(self, s, ns)
        finally:
            self.cleanup(Handle(self, None, ns))

    def storage(self, h: Handle) -> dict[str, Any]:
        import psycopg

        with psycopg.connect(self._db_url(h.ns), autocommit=True) as c:
            c.execute("VACUUM ANALYZE")
            sizes = {t: c.execute("SELECT pg_total_relation_size(%s)", (t,)).fetchone()[0]
                     for t in _PG_TABLES}
        return {"bytes": int(sum(sizes.values())), "method": self.store,
                **{f"pg_{t}": int(v) for t, v in sizes.items()}}


# ---------------------------------------------------------------- SqliteSaver


class SqliteSpec(SaverSpec):
    name, label = "sqlite", "SqliteSaver (file)"
    durable_peer = True
    store = "SQLite file size (after a WAL checkpoint)"

    def _path(self, ns: str) -> str:
        return os.path.join(self.env.tmpdir, f"{ns}.sqlite")

    @contextlib.contextmanager
    def open_sync(self) -> Iterator[Handle]:
        from langgraph.checkpoint.sqlite import SqliteSaver

        ns = self.new_ns()
        conn = sqlite3.connect(self._path(ns), check_same_thread=False)
        try:
            s = SqliteSaver(conn)
            s.setup()
            yield Handle(self, s, ns)
        finally:
            conn.close()
            self.cleanup(Handle(self, None, ns))

    @contextlib.asynccontextmanager
    async def open_async(self) -> AsyncIterator[Handle]:
        import aiosqlite
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        ns = self.new_ns()
        try:
            async with aiosqlite.connect(self._path(ns)) as conn:
                s = AsyncSqliteSaver(conn)
                await s.setup()
                yield Handle(self, s, ns)
        finally:
            self.cleanup(Handle(self, None, ns))

    def storage(self, h: Handle) -> dict[str, Any]:
        p = self._path(h.ns)
        with contextlib.closing(sqlite3.connect(p)) as c:
            c.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        size = os.path.getsize(p)
        wal = p + "-wal"
        if os.path.exists(wal):
            size += os.path.getsize(wal)
        return {"bytes": size, "method": self.store}

    def cleanup(self, h: Handle) -> None:
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(OSError):
                os.remove(self._path(h.ns) + suffix)


# ---------------------------------------------------------------- AsyncRedisSaver


class RedisStackSpec(SaverSpec):
    """langgraph-checkpoint-redis against ``REDIS_STACK_URL`` (needs RedisJSON/Search)."""

    name, label = "redis_stack", "AsyncRedisSaver"
    durable_peer = False  # Redis alone: not a durable tier in this comparison
    store = "Redis MEMORY USAGE of checkpoint:* / checkpoint_blob:* / checkpoint_write:* keys"

    @contextlib.contextmanager
    def open_sync(self) -> Iterator[Handle]:
        from langgraph.checkpoint.redis import RedisSaver

        assert self.env.redis_stack_url
        with RedisSaver.from_conn_string(self.env.redis_stack_url) as s:
            s.setup()
            yield Handle(self, s, self.new_ns())

    @contextlib.asynccontextmanager
    async def open_async(self) -> AsyncIterator[Handle]:
        from langgraph.checkpoint.redis.aio import AsyncRedisSaver

        assert self.env.redis_stack_url
        async with AsyncRedisSaver.from_conn_string(self.env.redis_stack_url) as s:
            await s.asetup()
            yield Handle(self, s, self.new_ns())

    def storage(self, h: Handle) -> dict[str, Any]:
        assert self.env.redis_stack_url
        total = 0
        for pat in ("checkpoint*", "write_keys_zset*"):
            total += redis_bytes(self.env.redis_stack_url, pat)[0]
        return {"bytes": total, "method": self.store + " (whole server)"}


def all_specs(env: Env, only: list[str] | None = None) -> tuple[list[SaverSpec], list[str]]:
    """The specs to run and lines saying which savers were left out and why."""
    specs: list[SaverSpec] = [ReferenceSpec(env), InMemorySpec(env), DurableSpec(env),
                              DurableStrictSpec(env), DurableWorkerSpec(env)]
    skipped: list[str] = []
    if env.postgres_url:
        specs.append(PostgresSpec(env))
    else:
        skipped.append("PostgresSaver: PostgreSQL could not be started (see above)")
    import importlib.util

    if importlib.util.find_spec("langgraph.checkpoint.mongodb") is not None:
        specs.append(MongoDBSpec(env))
    else:
        skipped.append("MongoDBSaver: langgraph-checkpoint-mongodb is not installed (the "
                       "`bench` extra has it)")
    specs.append(SqliteSpec(env))
    if env.redis_stack_url:
        specs.append(RedisStackSpec(env))
    else:
        skipped.append("AsyncRedisSaver: REDIS_STACK_URL not set (needs Redis Stack modules)")
    if only:
        dropped = [s.label for s in specs if s.name not in only]
        specs = [s for s in specs if s.name in only]
        if dropped:
            skipped.append("not selected (--savers): " + ", ".join(dropped))
    return specs, skipped
