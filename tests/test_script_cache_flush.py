"""A Redis whose script cache was emptied (``SCRIPT FLUSH``, a restart without the
scripts, a failover to a replica that never loaded them) mid-run: every script the saver
and its flusher send by ``EVALSHA`` (put, BIND, HEARTBEAT_BEAT, GROUP_UPKEEP/LEAVE,
HEARTBEAT_FORGET) answers ``NOSCRIPT`` once and is sent again as ``EVAL``: nothing fails,
the heartbeat keeps beating, the flusher moves what follows to MongoDB and leaves its
group at close."""

from __future__ import annotations

import asyncio
import time

import pymongo
import redis
import redis.cluster
from langgraph.checkpoint.base import empty_checkpoint

from langgraph_durable import DurableSaver
from langgraph_durable.config import DurableConfig
from langgraph_durable.hot.keys import heartbeats_key
from langgraph_durable.io.clients import redis_from_url
from langgraph_durable.testing import unique_options, wait_for


def checkpoint(n: int) -> tuple:
    cp = empty_checkpoint()
    cp["channel_values"] = {"n": n}
    cp["channel_versions"] = {"n": f"{n + 1:032}.0"}
    return cp, {"step": n}, {"n": f"{n + 1:032}.0"}


def beat_scores(client: redis.Redis, prefix: str) -> list[float]:
    return [s for _, s in client.zrange(heartbeats_key(prefix), 0, -1, withscores=True)]


def test_a_flushed_script_cache_is_loaded_again_by_a_sync_saver_and_its_flusher(
        redis_url: str, mongo_url: str, redis_client: redis.Redis) -> None:
    opts = unique_options(heartbeat_ttl_s=0.3)
    prefix, database = opts["key_prefix"], opts["database"]
    cfg = {"configurable": {"thread_id": "th", "checkpoint_ns": ""}}
    with DurableSaver.from_urls(redis_url, mongo_url, **opts) as saver:
        cfg = saver.put(cfg, *checkpoint(0))
        saver.flush()
        redis_client.script_flush()
        cfg = saver.put(cfg, *checkpoint(1))
        saver.flush()
        before = max(beat_scores(redis_client, prefix))
        redis_client.script_flush()
        wait_for(lambda: max(beat_scores(redis_client, prefix) or [0]) > before, 10,
                 "a heartbeat after SCRIPT FLUSH")
        redis_client.script_flush()  # for GROUP_LEAVE at close
    assert beat_scores(redis_client, prefix) == []  # left the registry at close
    redis_client.script_flush()
    with DurableSaver.from_urls(redis_url, mongo_url, **opts) as again:  # BIND again
        assert again.get_tuple(cfg).checkpoint["channel_values"] == {"n": 1}
    docs = pymongo.MongoClient(mongo_url)[database]["checkpoints"]
    assert docs.count_documents({"thread_id": "th"}) == 2


async def test_a_flushed_script_cache_is_loaded_again_by_an_async_saver_and_its_flusher(
        redis_url: str, mongo_url: str, redis_client: redis.Redis) -> None:
    opts = unique_options(heartbeat_ttl_s=0.3)
    prefix, database = opts["key_prefix"], opts["database"]
    cfg = {"configurable": {"thread_id": "th", "checkpoint_ns": ""}}
    async with DurableSaver.from_urls(redis_url, mongo_url, **opts) as saver:
        cfg = await saver.aput(cfg, *checkpoint(0))
        await saver.aflush()
        redis_client.script_flush()
        cfg = await saver.aput(cfg, *checkpoint(1))
        await saver.aflush()
        before = max(beat_scores(redis_client, prefix))
        redis_client.script_flush()
        deadline = time.monotonic() + 10
        while max(beat_scores(redis_client, prefix) or [0]) <= before:
            assert time.monotonic() < deadline, "no heartbeat after SCRIPT FLUSH"
            await asyncio.sleep(0.05)
        redis_client.script_flush()
    assert beat_scores(redis_client, prefix) == []
    docs = pymongo.MongoClient(mongo_url)[database]["checkpoints"]
    assert docs.count_documents({"thread_id": "th"}) == 2


def test_a_flushed_script_cache_on_every_cluster_primary_is_loaded_again(
        redis_cluster_url: str, mongo_url: str) -> None:
    client = redis_from_url(redis_cluster_url, DurableConfig(), asyncio=False)
    opts = unique_options(heartbeat_ttl_s=0.3)
    prefix, database = opts["key_prefix"], opts["database"]
    threads = [f"th{n}" for n in range(8)]  # over several slots, so several primaries
    try:
        with DurableSaver.from_urls(redis_cluster_url, mongo_url, **opts) as saver:
            cfgs = {t: saver.put({"configurable": {"thread_id": t, "checkpoint_ns": ""}},
                                 *checkpoint(0)) for t in threads}
            saver.flush()
            client.execute_command("SCRIPT", "FLUSH",
                                   target_nodes=redis.cluster.RedisCluster.PRIMARIES)
            for t in threads:
                saver.put(cfgs[t], *checkpoint(1))
            saver.flush()
            before = max(beat_scores(client, prefix))
            client.execute_command("SCRIPT", "FLUSH",
                                   target_nodes=redis.cluster.RedisCluster.PRIMARIES)
            wait_for(lambda: max(beat_scores(client, prefix) or [0]) > before, 10,
                     "a heartbeat after SCRIPT FLUSH")
        docs = pymongo.MongoClient(mongo_url)[database]["checkpoints"]
        assert docs.count_documents({}) == 2 * len(threads)
    finally:
        client.close()
