"""A heartbeat registry that is not a sorted set (``{<prefix>:heartbeats}`` overwritten as
a string by some other program): HEARTBEAT_BEAT fails with a warning that names the key,
and the flusher goes on moving every thread's checkpoints to MongoDB, sync and async."""

from __future__ import annotations

import logging
from typing import Any

import pymongo
import pytest
import redis
from langgraph.checkpoint.base import empty_checkpoint

from langgraph_durable import DurableSaver
from langgraph_durable.hot.keys import heartbeats_key
from langgraph_durable.testing import unique_options


def checkpoint(n: int) -> tuple:
    cp = empty_checkpoint()
    cp["channel_values"] = {"n": n}
    cp["channel_versions"] = {"n": f"{n + 1:032}.0"}
    return cp, {"step": n}, {"n": f"{n + 1:032}.0"}


def heartbeat_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "langgraph_durable.flusher" and "heartbeat failed" in r.getMessage()]


def string_registry(redis_client: redis.Redis,
                    caplog: pytest.LogCaptureFixture) -> tuple[dict[str, Any], str]:
    """Options of a fresh key prefix whose heartbeat registry is a string, not a sorted
    set, and the registry's key; flusher warnings captured."""
    opts = unique_options(heartbeat_ttl_s=0.3)
    key = heartbeats_key(str(opts["key_prefix"]))
    redis_client.set(key, "not a sorted set")
    caplog.set_level(logging.WARNING, "langgraph_durable.flusher")
    return opts, key


def test_a_string_heartbeat_registry_is_named_and_threads_still_reach_mongodb(
        redis_url: str, mongo_url: str, redis_client: redis.Redis,
        caplog: pytest.LogCaptureFixture) -> None:
    opts, key = string_registry(redis_client, caplog)
    with DurableSaver.from_urls(redis_url, mongo_url, **opts) as saver:
        for thread in ("a", "b"):
            saver.put({"configurable": {"thread_id": thread, "checkpoint_ns": ""}},
                      *checkpoint(0))
        saver.flush()
    docs = pymongo.MongoClient(mongo_url)[opts["database"]]["checkpoints"]
    assert sorted(d["thread_id"] for d in docs.find()) == ["a", "b"]
    warned = heartbeat_warnings(caplog)
    assert warned and key in warned[0] and "WRONGTYPE" in warned[0]
    assert redis_client.get(key) == b"not a sorted set"  # not ours to repair


async def test_a_string_heartbeat_registry_does_not_stop_an_async_flusher(
        redis_url: str, mongo_url: str, redis_client: redis.Redis,
        caplog: pytest.LogCaptureFixture) -> None:
    opts, key = string_registry(redis_client, caplog)
    async with DurableSaver.from_urls(redis_url, mongo_url, **opts) as saver:
        for thread in ("a", "b"):
            await saver.aput({"configurable": {"thread_id": thread, "checkpoint_ns": ""}},
                             *checkpoint(0))
        await saver.aflush()
    docs = pymongo.MongoClient(mongo_url)[opts["database"]]["checkpoints"]
    assert sorted(d["thread_id"] for d in docs.find()) == ["a", "b"]
    warned = heartbeat_warnings(caplog)
    assert warned and key in warned[0] and "WRONGTYPE" in warned[0]
