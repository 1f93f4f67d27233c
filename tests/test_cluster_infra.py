"""Beyond one Redis: the test Redis Cluster and Sentinel group of ``langgraph_durable.testing``,
the ``redis+cluster://`` / ``redis+sentinel://`` URLs, a saver set up and run on each, and
SecantusDB as a one-node replica set taking write concern ``majority``."""

from __future__ import annotations

import hashlib
import signal
import subprocess
import sys
from typing import Any

import pymongo
import pytest
import redis
import redis.cluster
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from typing_extensions import TypedDict

from langgraph_durable import DurableSaver
from langgraph_durable.config import DurableConfig
from langgraph_durable.errors import ConfigurationError
from langgraph_durable.hot.scripts import SCRIPTS
from langgraph_durable.io.clients import redis_from_url
from langgraph_durable.io.redis_urls import RedisUrl, parse_redis_url
from langgraph_durable.testing import unique_options, wait_for
from langgraph_durable.testing.cluster import (
    RedisClusterServer,
    RedisSentinelServer,
    redis_cluster,
    redis_sentinel,
)

# ------------------------------------------------------------------ the servers


def test_cluster_has_three_primaries_with_a_replica_each_and_every_slot_ok(
    redis_cluster_proc: RedisClusterServer,
) -> None:
    rows = redis_cluster_proc.cluster_nodes()
    primaries = {r["id"]: r for r in rows if "master" in r["flags"]}
    replicas = [r for r in rows if "slave" in r["flags"]]
    assert len(rows) == 6 and len(primaries) == 3 and len(replicas) == 3
    assert sorted(r["master_id"] for r in replicas) == sorted(primaries)  # one each
    ranges = sorted(tuple(map(int, s.split("-"))) for p in primaries.values() for s in p["slots"])
    assert ranges[0][0] == 0 and ranges[-1][1] == 16383
    assert all(a[1] + 1 == b[0] for a, b in zip(ranges, ranges[1:]))  # no gap
    for node in redis_cluster_proc.nodes:
        with redis.Redis("127.0.0.1", node.port) as c:
            info = c.execute_command("CLUSTER INFO")
        assert (info["cluster_state"], info["cluster_slots_ok"]) == ("ok", "16384")
    by_first_slot = sorted(primaries.values(), key=lambda p: int(p["slots"][0].split("-")[0]))
    assert [n.port for n in redis_cluster_proc.masters()] == [p["port"] for p in by_first_slot]


def test_sentinels_name_the_primary_and_know_its_replica_and_each_other(
    redis_sentinel_proc: RedisSentinelServer,
) -> None:
    primary, replica = redis_sentinel_proc.data_nodes
    assert redis_sentinel_proc.master_port() == primary.port
    for sentinel in redis_sentinel_proc.sentinels:
        m = sentinel.master()
        assert (int(m["port"]), m["flags"]) == (primary.port, "master")
        assert (int(m["num-slaves"]), int(m["num-other-sentinels"]), int(m["quorum"])) == (
            1, 2, 2)
    info = replica.info("replication")
    assert (info["role"], info["master_port"], info["master_link_status"]) == (
        "slave", primary.port, "up")


def test_cluster_failover_after_sigkill_promotes_the_replica_and_keeps_acked_keys() -> None:
    with redis_cluster() as cluster:
        first = cluster.masters()[0]  # serves slot 0
        replica = next(r for r in cluster.cluster_nodes() if r["master_id"] == next(
            p["id"] for p in cluster.cluster_nodes() if p["port"] == first.port))
        client = redis_from_url(cluster.url, DurableConfig(), asyncio=False)
        key = "{06S}k"  # hash tag "06S" is slot 0
        assert client.keyslot(key) == 0
        client.set(key, "v")
        assert client.wait(1, 5000, target_nodes=client.get_node_from_key(key)) == 1

        assert cluster.kill_master(0) is first
        cluster.wait_healthy(30)
        assert cluster.masters()[0].port == replica["port"]
        assert first.port not in [n.port for n in cluster.masters()]
        assert wait_for(lambda: _quiet_get(client, key), 10, "key read after failover") == b"v"
        client.close()


def test_sentinel_failover_after_sigkill_promotes_the_replica_and_clients_follow() -> None:
    with redis_sentinel() as group:
        primary, replica = group.data_nodes
        client = redis_from_url(group.url, DurableConfig(), asyncio=False)
        client.set("k", "v")
        assert client.wait(1, 5000) == 1

        assert group.kill_master() is primary
        wait_for(lambda: group.master_port() == replica.port, 30, "replica promoted")
        assert replica.info("replication")["role"] == "master"
        assert wait_for(lambda: _quiet_get(client, "k"), 10, "key read after failover") == b"v"
        client.set("after", "1")  # writes go to the new primary
        with redis.Redis("127.0.0.1", replica.port) as direct:
            assert direct.get("after") == b"1"
        client.close()


def _quiet_get(client: Any, key: str) -> Any:
    try:
        return client.get(key)
    except (redis.ConnectionError, redis.TimeoutError, redis.exceptions.ClusterDownError):
        return None


# ------------------------------------------------------------------ URLs


@pytest.mark.parametrize("url, expected", [
    ("redis://h:1/2", RedisUrl("single", "redis://h:1/2")),
    ("redis+cluster://a:7000,b:7001", RedisUrl(
        "cluster", "redis+cluster://a:7000,b:7001", (("a", 7000), ("b", 7001)))),
    ("redis+cluster://u:p%40ss@a/0", RedisUrl(
        "cluster", "redis+cluster://u:p%40ss@a/0", (("a", 6379),), username="u",
        password="p@ss")),
    ("redis+sentinel://s1,s2:5000/svc", RedisUrl(
        "sentinel", "redis+sentinel://s1,s2:5000/svc", (("s1", 26379), ("s2", 5000)), "svc")),
    ("redis+sentinel://:pw@[::1]:26380/svc/3", RedisUrl(
        "sentinel", "redis+sentinel://:pw@[::1]:26380/svc/3", (("::1", 26380),), "svc", 3,
        None, "pw")),
])
def test_redis_urls_are_parsed(url: str, expected: RedisUrl) -> None:
    assert parse_redis_url(url) == expected


@pytest.mark.parametrize("url, message", [
    ("http://h:1", "Redis URL 'http://h:1': unknown scheme 'http' (use one of redis, rediss, "
     "unix, redis+cluster, redis+sentinel)"),
    ("localhost:6379", "Redis URL 'localhost:6379': no scheme: a Redis URL starts with one "
     "of redis, rediss, unix, redis+cluster, redis+sentinel and :// (e.g. "
     "redis://localhost:6379/0)"),
    ("redis+cluster://", "Redis URL 'redis+cluster://': no host:port given"),
    ("redis+cluster://a:7000/1", "a Redis Cluster has only database 0, the path is /1"),
    ("redis+cluster://a:x", "node 'a:x' has port 'x', not a number from 1 to 65535"),
    ("redis+cluster://a:70000", "node 'a:70000' has port '70000'"),
    ("redis+sentinel://a:1", "expected redis+sentinel://host:port[,host:port...]/service_name"
     "[/db], the path is /"),
    ("redis+sentinel://a:1/svc/x", "database 'x' is not a number"),
    ("redis+cluster://a:1?ssl=true", "redis+cluster URLs take no query options"),
    ("redis+cluster://u:secret@a:x", "Redis URL 'redis+cluster://***@a:x': node 'a:x'"),
])
def test_bad_redis_urls_name_what_is_wrong(url: str, message: str) -> None:
    with pytest.raises(ConfigurationError, match="^Redis URL ") as caught:
        parse_redis_url(url)
    assert message in str(caught.value)
    assert "secret" not in str(caught.value)


def test_from_urls_and_the_worker_refuse_a_bad_url(mongo_url: str, capsys: Any) -> None:
    from langgraph_durable.outbox.worker import run

    with pytest.raises(ConfigurationError, match="a Redis Cluster has only database 0"):
        DurableSaver.from_urls("redis+cluster://127.0.0.1:1/2", mongo_url)
    assert run(["--redis-url", "redis+sentinel://127.0.0.1:1", "--mongo-url", mongo_url]) == 2
    assert capsys.readouterr().err.startswith(
        "error: Redis URL 'redis+sentinel://127.0.0.1:1': expected redis+sentinel://")


@pytest.mark.parametrize("kind", ["cluster", "sentinel"])
async def test_clients_from_urls_are_cluster_and_sentinel_clients(
    kind: str, redis_cluster_url: str, redis_sentinel_url: str,
    redis_sentinel_proc: RedisSentinelServer,
) -> None:
    url = redis_cluster_url if kind == "cluster" else redis_sentinel_url
    sync = redis_from_url(url, DurableConfig(), asyncio=False)
    async_ = redis_from_url(url, DurableConfig(), asyncio=True)
    names = {"cluster": ("RedisCluster", "RedisCluster"), "sentinel": ("Redis", "Redis")}
    assert (type(sync).__name__, type(async_).__name__) == names[kind]
    sync.set("{u}x", "1")
    assert await async_.get("{u}x") == b"1"
    if kind == "sentinel":
        assert sync.connection_pool.service_name == "mymaster"
        assert sync.connection_pool.get_master_address()[1] == redis_sentinel_proc.master_port()
    sync.close()
    await async_.aclose()


# ------------------------------------------------------------------ savers


def _primaries_have_every_script(cluster: RedisClusterServer) -> list[bool]:
    shas = [hashlib.sha1(src.encode()).hexdigest() for src in SCRIPTS.values()]
    found = []
    for node in cluster.masters():
        with redis.Redis("127.0.0.1", node.port) as c:
            found.append(all(c.script_exists(*shas)))
    return found


def test_setup_on_a_given_cluster_client_loads_the_scripts_on_every_primary(
    mongo_url: str,
) -> None:
    with redis_cluster(replicas=0) as cluster:  # its own: a fresh script cache
        assert _primaries_have_every_script(cluster) == [False] * 3
        r = redis.cluster.RedisCluster("127.0.0.1", port=cluster.nodes[0].port)
        m = pymongo.MongoClient[dict[str, Any]](mongo_url)
        saver = DurableSaver(r, m, **unique_options())
        saver.setup()  # was: RedisClusterException: Too many targets for command SCRIPT LOAD
        assert _primaries_have_every_script(cluster) == [True] * 3
        cfg = {"configurable": {"thread_id": "given", "checkpoint_ns": ""}}
        saver.put(cfg, empty_checkpoint(), {"step": 1}, {})
        assert saver.get_tuple(cfg) is not None
        saver.close()
        r.close()
        m.close()


class _Count(TypedDict):
    n: int


def _counter_graph(saver: DurableSaver) -> Any:
    g = StateGraph(_Count)
    g.add_node("add", lambda s: {"n": s["n"] + 1})
    g.add_edge(START, "add")
    return g.compile(checkpointer=saver)


@pytest.mark.parametrize("kind", ["cluster", "sentinel"])
async def test_a_graph_runs_and_flushes_to_mongodb(
    kind: str, request: pytest.FixtureRequest, mongo_url: str
) -> None:
    url = request.getfixturevalue(f"redis_{kind}_url")
    memory = _counter_graph(InMemorySaver())
    threads = [{"configurable": {"thread_id": f"t{i}"}} for i in range(10)]  # many slots
    async with DurableSaver.from_urls(url, mongo_url, **unique_options()) as saver:
        graph = _counter_graph(saver)
        for i, cfg in enumerate(threads):
            assert (await graph.ainvoke({"n": i}, cfg))["n"] == i + 1
            assert graph.invoke({"n": 100}, cfg)["n"] == 101
            memory.invoke({"n": i}, cfg)
            memory.invoke({"n": 100}, cfg)
        await saver.aflush()
        cps = saver.sync_clients.db[saver.context.collections.checkpoints]
        for cfg in threads:
            thread_id = cfg["configurable"]["thread_id"]
            expected = [t.checkpoint["id"] for t in memory.checkpointer.list(cfg)]
            assert len(expected) == 6  # input, loop, node step; twice
            in_mongo = cps.count_documents({"thread_id": thread_id})
            assert (in_mongo, graph.get_state(cfg).values) == (6, {"n": 101})
            assert len([t async for t in saver.alist(cfg)]) == 6


def test_the_one_node_replica_set_takes_write_concern_majority(
    mongo_replica_set_url: str, redis_url: str,
) -> None:
    with pymongo.MongoClient[dict[str, Any]](mongo_replica_set_url) as m:
        hello = m.admin.command("hello")
        assert hello.get("setName") and hello.get("isWritablePrimary") is True
    with DurableSaver.from_urls(redis_url, mongo_replica_set_url,
                                **unique_options(write_concern_w="majority")) as saver:
        cfg = {"configurable": {"thread_id": "rs", "checkpoint_ns": ""}}
        saver.put(cfg, empty_checkpoint(), {"step": 1}, {})
        saver.flush()
        cps = saver.sync_clients.db[saver.context.collections.checkpoints]
        assert cps.write_concern.document["w"] == "majority"
        assert cps.count_documents({"thread_id": "rs"}) == 1


@pytest.mark.parametrize("kind", ["cluster", "sentinel"])
def test_the_worker_process_drains_the_outbox_from_a_cluster_or_sentinel_url(
    kind: str, request: pytest.FixtureRequest, mongo_url: str
) -> None:
    url = request.getfixturevalue(f"redis_{kind}_url")
    opts = unique_options(flusher="off")
    with DurableSaver.from_urls(url, mongo_url, **opts) as saver:
        worker = subprocess.Popen(
            [sys.executable, "-m", "langgraph_durable.outbox.worker", "--redis-url", url,
             "--mongo-url", mongo_url, "--key-prefix", opts["key_prefix"],
             "--database", opts["database"]],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            for i in range(5):
                cfg = {"configurable": {"thread_id": f"w{i}", "checkpoint_ns": ""}}
                saver.put(cfg, empty_checkpoint(), {"step": 1}, {})
            saver.flush(timeout_s=20)
            cps = saver.sync_clients.db[saver.context.collections.checkpoints]
            assert sorted(cps.distinct("thread_id")) == [f"w{i}" for i in range(5)]
        finally:
            worker.send_signal(signal.SIGTERM)
            out, err = worker.communicate(timeout=20)
        assert worker.returncode == 0, err
        assert "5 entries" in out
