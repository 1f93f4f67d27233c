"""Real Redis, MongoDB-wire and S3 servers for tests, the demo and benchmarks (never mocks).

Each context manager (:func:`redis_server`, :func:`mongo_server`, :func:`s3_server`) resolves
its server in this order:

1. an environment variable (``REDIS_URL``, ``MONGODB_URL``, ``S3_ENDPOINT_URL``): the server is
   external, so ``stop``/``start``/``kill`` raise :class:`ServerError`;
2. a Docker container through testcontainers, when it is importable and a Docker engine answers
   (set ``LANGGRAPH_DURABLE_NO_DOCKER=1`` to skip); such a server can only be stopped;
3. a local process on a free 127.0.0.1 port with a temporary folder, removed on exit:
   ``redis-server``, SecantusDB's ``secantusd-py`` and moto's ``moto_server``.

Loaded as a pytest plugin (``-p langgraph_durable.testing``) it also provides the fixtures
``redis_server_proc``, ``mongo_server_proc``, ``s3_server_proc`` (session scoped),
``redis_url``, ``mongo_url``, ``s3_endpoint_url`` and ``clean_servers``. The multi-node
setups (a Redis Cluster, a Sentinel group, a one-node MongoDB replica set) live in
:mod:`langgraph_durable.testing.cluster`, which builds on the servers' launchers
(:mod:`langgraph_durable.testing.launchers`); loaded as a plugin too (``-p
langgraph_durable.testing.cluster``) it provides ``redis_cluster_proc``/
``redis_cluster_url``, ``redis_sentinel_proc``/``redis_sentinel_url`` and
``mongo_replica_set_url``. Tests that stop or restart a server must make their own with the
context managers, not stop the shared ones.

Two helpers every test and fault scenario shares: :func:`unique_options` (a key prefix and
database no other saver uses) and :func:`wait_for` (the one bounded poll; never a fixed
sleep).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pymongo
import pymongo.monitoring
import redis
import redis.cluster

from .launchers import (
    MongoServer,
    RedisServer,
    S3Server,
    ServerError,
    mongo_server,
    redis_server,
    s3_server,
)

try:
    import pytest
except ImportError:  # pragma: no cover - the demo may run without pytest
    pytest = None  # type: ignore[assignment]

__all__ = ["MongoServer", "RedisServer", "S3Server", "ServerError"]
__all__ += ["drop_key_prefix", "drop_namespace", "mongo_server", "redis_server", "s3_server"]
__all__ += ["unique_options", "wait_for"]


def unique_options(**options: object) -> dict[str, object]:
    """``DurableSaver`` options with a ``key_prefix`` and ``database`` no other saver uses
    (``t<10 hex>``, ``lgd_<10 hex>``), plus ``options``; so tests never see each other's
    data and need no FLUSHALL."""
    tag = uuid.uuid4().hex[:10]
    return {"key_prefix": f"t{tag}", "database": f"lgd_{tag}", **options}


def wait_for(pred: Callable[[], Any], timeout_s: float, what: str, pause_s: float = 0.01) -> Any:
    """Poll ``pred`` every ``pause_s`` seconds until it returns a true value (returned) or
    ``timeout_s`` seconds pass (raises ``TimeoutError`` naming ``what``). A bounded wait
    for a condition, never a timing assertion."""
    deadline = time.monotonic() + timeout_s
    while True:
        got = pred()
        if got:
            return got
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout_s} s waiting for {what}")
        time.sleep(pause_s)


def drop_key_prefix(client: redis.Redis | redis.cluster.RedisCluster, key_prefix: str) -> int:
    """Delete every Redis key of savers with ``key_prefix`` (threads, outbox, dead letters:
    the keys ``{<key_prefix>:...``) and nothing else (SCAN, then DEL in batches of 500; on a
    cluster client SCAN covers every primary and DEL is split by slot).
    Returns how many keys were deleted. Use it instead of FLUSHDB, which would delete every
    other application's keys on that Redis."""
    if not key_prefix or ":" in key_prefix or any(c in key_prefix for c in "*?[]\\"):
        raise ValueError(f"not a key_prefix: {key_prefix!r}")
    keys = list(client.scan_iter(match="{" + key_prefix + ":*", count=1000))
    for i in range(0, len(keys), 500):
        client.delete(*keys[i:i + 500])
    return len(keys)


def drop_namespace(redis_url: str, mongo_url: str, key_prefix: str, database: str) -> None:
    """Remove what savers with ``key_prefix`` and ``database`` stored: their Redis keys
    (``drop_key_prefix``; ``redis_url`` in any scheme a saver takes, a cluster's on every
    primary) and that MongoDB database, nothing else."""
    from ..config import DurableConfig
    from ..io.redis_urls import redis_client_from_url

    with redis_client_from_url(redis_url, DurableConfig(), asyncio=False) as r:
        drop_key_prefix(r, key_prefix)
    with pymongo.MongoClient[dict[str, Any]](mongo_url) as m:
        m.drop_database(database)


if pytest is not None:

    @pytest.fixture(scope="session")
    def redis_server_proc() -> Iterator[RedisServer]:
        """Session-wide :class:`RedisServer` (no AOF). Do not stop it; make your own."""
        with redis_server() as server:
            yield server

    @pytest.fixture(scope="session")
    def mongo_server_proc() -> Iterator[MongoServer]:
        """Session-wide :class:`MongoServer` (standalone, in memory: its data does not
        outlive it). Do not stop it; make your own."""
        with mongo_server(in_memory=True) as server:
            yield server

    @pytest.fixture(scope="session")
    def s3_server_proc() -> Iterator[S3Server]:
        """Session-wide :class:`S3Server`. Do not stop it; make your own."""
        with s3_server() as server:
            yield server

    @pytest.fixture(scope="session")
    def redis_url(redis_server_proc: RedisServer) -> str:
        """URL of the session Redis server."""
        return redis_server_proc.url

    @pytest.fixture(scope="session")
    def mongo_url(mongo_server_proc: MongoServer) -> str:
        """URL of the session MongoDB-wire server."""
        return mongo_server_proc.url

    @pytest.fixture(scope="session")
    def s3_endpoint_url(s3_server_proc: S3Server) -> str:
        """Endpoint URL of the session S3 server."""
        return s3_server_proc.endpoint_url

    @pytest.fixture
    def clean_servers(redis_url: str, mongo_url: str) -> Iterator[tuple[str, str]]:
        """A key prefix and a MongoDB database no one else uses, as ``(key_prefix,
        database)``; both are removed after the test (``drop_namespace``). Nothing else on
        the servers is touched (it used to FLUSHALL and drop every database)."""
        import uuid

        tag = uuid.uuid4().hex[:10]
        prefix, database = f"clean{tag}", f"clean_{tag}"
        yield prefix, database
        drop_namespace(redis_url, mongo_url, prefix, database)


class MongoCommandCounter(pymongo.monitoring.CommandListener):
    """A PyMongo command listener that records the name of every command a client sends
    (``find``, ``aggregate``, ``insert``, ...) in ``names``, in order; the handshake and
    session commands (``hello``, ``isMaster``, ``ping``, ``endSessions``) are left out.
    Pass it as ``MongoClient(..., event_listeners=[counter])`` or register it with
    ``pymongo.monitoring.register`` (what tests and benchmarks count round trips with)."""

    IGNORED = frozenset({"hello", "isMaster", "ping", "endSessions"})

    def __init__(self) -> None:
        self.names: list[str] = []

    def started(self, event: pymongo.monitoring.CommandStartedEvent) -> None:
        if event.command_name not in self.IGNORED:
            self.names.append(event.command_name)

    def succeeded(self, event: pymongo.monitoring.CommandSucceededEvent) -> None:
        pass

    def failed(self, event: pymongo.monitoring.CommandFailedEvent) -> None:
        pass
