"""A saver starts while MongoDB is down (an application restarting during an outage): Redis
serves what it holds, the MongoDB set-up happens in the background once MongoDB answers."""

from __future__ import annotations

import logging

import pymongo
import pytest
from langgraph.checkpoint.base import empty_checkpoint

from faults.tiers import wait_for
from langgraph_durable import DurableSaver, TierUnavailableError
from langgraph_durable.testing import mongo_server, unique_options

INDEX_NAMES = ["_id_", "run_id", "thread_ns_checkpoint", "thread_ns_vals"]  # checkpoints


def _checkpoint(value: int) -> dict:
    cp = empty_checkpoint()
    cp["channel_values"] = {"v": value}
    cp["channel_versions"] = {"v": str(value)}
    return cp


def _indexes(url: str, database: str) -> list[str]:
    with pymongo.MongoClient(url, serverSelectionTimeoutMS=2000) as client:
        return sorted(i["name"] for i in client[database]["checkpoints"].list_indexes())


def test_entering_succeeds_while_mongodb_is_down(redis_url, caplog) -> None:
    opts = unique_options(server_selection_timeout_s=0.3)
    cfg = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    with mongo_server() as ms:
        ms.stop()
        with caplog.at_level(logging.WARNING, "langgraph_durable"), \
                DurableSaver.from_urls(redis_url, ms.url, **opts) as saver:
            assert "MongoDB did not answer while the saver started" in caplog.text
            assert "set up in the background as soon as it does" in caplog.text
            saver.put(cfg, _checkpoint(1), {"step": 0}, {"v": "1"})  # served by Redis
            tup = saver.get_tuple({"configurable": {"thread_id": "t"}})
            assert tup is not None and tup.checkpoint["channel_values"] == {"v": 1}
            assert saver.last_read_tier == "hot"
            ms.start()
            wait_for(lambda: saver.runtime.deferred.done, 30, "the deferred MongoDB set-up")
            assert _indexes(ms.url, opts["database"]) == INDEX_NAMES
            saver.flush(timeout_s=30)
            # logged by the set-up's thread right after it set done
            wait_for(lambda: "MongoDB answered: indexes created and schema version recorded"
                     in caplog.text, 10, "the set-up's log line")
        with pymongo.MongoClient(ms.url) as client:
            assert client[opts["database"]]["checkpoints"].count_documents(
                {"thread_id": "t"}) == 1


async def test_async_entering_succeeds_while_mongodb_is_down(redis_url) -> None:
    opts = unique_options(server_selection_timeout_s=0.3)
    with mongo_server() as ms:
        ms.stop()
        async with DurableSaver.from_urls(redis_url, ms.url, **opts) as saver:
            cfg = {"configurable": {"thread_id": "a", "checkpoint_ns": ""}}
            await saver.aput(cfg, _checkpoint(2), {"step": 0}, {"v": "2"})
            tup = await saver.aget_tuple({"configurable": {"thread_id": "a"}})
            assert tup is not None and tup.checkpoint["channel_values"] == {"v": 2}
            ms.start()
            wait_for(lambda: saver.runtime.deferred.done, 30, "the deferred MongoDB set-up")
            assert _indexes(ms.url, opts["database"]) == INDEX_NAMES


def test_entering_still_fails_when_redis_is_down(mongo_url) -> None:
    with pytest.raises(TierUnavailableError, match="Redis 127.0.0.1:1 did not answer"):
        with DurableSaver.from_urls("redis://127.0.0.1:1/0", mongo_url, socket_timeout_s=0.3,
                                    **unique_options()):
            pass
