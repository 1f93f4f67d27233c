"""``redis_min_replicas`` on a real Redis Cluster (3 + 3) and Sentinel group (1 + 1): a put
returns once a replica holds it (read on the replica right after), and a put asking for
more replicas than exist raises ``ReplicationTimeoutError`` with the checkpoint stored."""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import redis
from langgraph.checkpoint.base import empty_checkpoint
from redis.crc import key_slot

from langgraph_durable import DurableSaver
from langgraph_durable.core.records import member
from langgraph_durable.errors import ReplicationTimeoutError
from langgraph_durable.testing import unique_options
from langgraph_durable.testing.cluster import RedisClusterServer, RedisSentinelServer

KINDS = [(kind, mode) for kind in ("cluster", "sentinel") for mode in ("sync", "async")]


def _replica_of(request: pytest.FixtureRequest, kind: str, key: str) -> Any:
    """The replica process (``.port``, ``._proc``) of the primary that holds ``key``."""
    if kind == "sentinel":
        group: RedisSentinelServer = request.getfixturevalue("redis_sentinel_proc")
        return next(n for n in group.data_nodes if n.port != group.master_port())
    cluster: RedisClusterServer = request.getfixturevalue("redis_cluster_proc")
    slot = int(key_slot(key.encode()))
    rows = cluster.cluster_nodes()
    primary = next(r for r in rows if "master" in r["flags"] and any(
        int(a) <= slot <= int(b) for a, b in (s.split("-") for s in r["slots"])))
    port = next(r["port"] for r in rows if r["master_id"] == primary["id"])
    return next(n for n in cluster.nodes if n.port == port)


def _read_replica(kind: str, port: int, key: str) -> list[bytes]:
    """The fields of hash ``key`` as the replica on ``port`` holds them now."""
    with redis.Redis("127.0.0.1", port) as client:
        if kind == "cluster":
            client.execute_command("READONLY")  # a cluster replica answers reads after this
        return list(client.hkeys(key))


@asynccontextmanager
async def _saver(request: pytest.FixtureRequest, kind: str, mode: str,
                 **options: Any) -> AsyncIterator[DurableSaver]:
    url = request.getfixturevalue(f"redis_{kind}_url")
    mongo = request.getfixturevalue("mongo_url")
    saver = DurableSaver.from_urls(url, mongo, **unique_options(), **options)
    if mode == "async":
        async with saver:
            yield saver
    else:
        with saver:
            yield saver


async def _put(saver: DurableSaver, mode: str, thread: str) -> Any:
    cfg = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    cp = empty_checkpoint()
    if mode == "async":
        return await saver.aput(cfg, cp, {"step": -1}, {})
    return saver.put(cfg, cp, {"step": -1}, {})


@pytest.mark.parametrize("kind, mode", KINDS)
async def test_with_one_required_replica_the_put_returns_after_the_replica_has_it(
    kind: str, mode: str, request: pytest.FixtureRequest,
) -> None:
    """The replica is frozen (SIGSTOP) for 0.3 s while the put runs: WAIT cannot count it
    before it is resumed, so the put returns after the resume, and the replica holds the
    checkpoint (without WAIT the put returns while the replica is still frozen)."""
    async with _saver(request, kind, mode, redis_min_replicas=1,
                      redis_wait_timeout_s=10) as saver:
        for i in range(2):  # two threads: two slots (primaries) on the cluster
            thread = f"rep-{mode}-{i}"
            keys = saver._ctx.keys(thread)
            replica = _replica_of(request, kind, keys.cp)
            resumed = threading.Event()

            def resume(pid: int = replica._proc.pid, resumed: Any = resumed) -> None:
                resumed.set()
                os.kill(pid, signal.SIGCONT)

            os.kill(replica._proc.pid, signal.SIGSTOP)
            timer = threading.Timer(0.3, resume)
            timer.start()
            try:
                stored = await _put(saver, mode, thread)
                assert resumed.is_set(), f"put of {thread} returned with the replica frozen"
            finally:
                timer.join()
            cid = stored["configurable"]["checkpoint_id"]
            assert _read_replica(kind, replica.port, keys.cp) == [member("", cid).encode()]


@pytest.mark.parametrize("kind, mode", KINDS)
async def test_more_required_replicas_than_exist_raises_and_the_checkpoint_is_stored(
    kind: str, mode: str, request: pytest.FixtureRequest,
) -> None:
    async with _saver(request, kind, mode, redis_min_replicas=2,
                      redis_wait_timeout_s=0.05) as saver:
        thread = f"short-{mode}"
        with pytest.raises(ReplicationTimeoutError) as err:
            await _put(saver, mode, thread)
        e = err.value
        assert (e.thread_id, e.wanted, e.replicas, e.timeout_s) == (thread, 2, 1, 0.05)
        assert f"of thread {thread!r} (ns '') IS stored on the Redis primary" in str(e)
        cfg = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
        got = await saver.aget_tuple(cfg) if mode == "async" else saver.get_tuple(cfg)
        assert got is not None and got.config["configurable"]["checkpoint_id"] == (
            e.checkpoint_id)
