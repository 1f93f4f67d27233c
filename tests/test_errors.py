"""Errors are part of the interface: each names what was wrong, and stored data stays
intact and the thread resumable."""

from __future__ import annotations

import asyncio
import socket

import pymongo
import pytest
import redis
import redis.asyncio
from langgraph.checkpoint.base import empty_checkpoint

from langgraph_durable import (
    ConfigurationError,
    CorruptRecordError,
    DurableSaver,
    EventLoopNotRunningError,
    InvalidIdentifierError,
    OutboxFullError,
    SaverClosedError,
    SchemaVersionError,
    SerializationError,
    SyncCallInEventLoopError,
    TierUnavailableError,
)
from langgraph_durable.core.schema import NEWEST_DOCUMENT_VERSION
from langgraph_durable.testing import unique_options

ROOT = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}


def put(saver: DurableSaver, cfg: dict, value: object = 1, step: int = 0) -> dict:
    cp = empty_checkpoint()
    cp["channel_values"] = {"v": value}
    cp["channel_versions"] = {"v": f"{step + 1:032}.0"}
    return saver.put(cfg, cp, {"step": step}, {"v": f"{step + 1:032}.0"})


def test_unserializable_value_names_channel_type_and_thread_and_writes_nothing(saver) -> None:
    first = put(saver, ROOT, 1)
    with pytest.raises(SerializationError,
                       match=r"channel 'v' \(ns ''\) of thread 't': value of type "
                             r"socket\.socket"):
        put(saver, first, socket.socket(), step=1)
    assert saver.get_tuple(ROOT).config == first
    assert saver.get_tuple(ROOT).checkpoint["channel_values"] == {"v": 1}


def test_value_over_max_value_bytes_is_refused_with_its_size(redis_url, mongo_url) -> None:
    with DurableSaver.from_urls(redis_url, mongo_url,
                                **unique_options(max_value_bytes=1000)) as saver:
        with pytest.raises(SerializationError, match=r"is 20\d\d bytes serialized, over "
                                                     r"max_value_bytes=1000"):
            put(saver, ROOT, "x" * 2000)
        assert saver.get_tuple(ROOT) is None


@pytest.mark.parametrize(
    "thread_id, message",
    [
        (None, r"thread_id'\] is required"),
        (["a"], "thread_id must be a str, int or UUID, got list"),
        (b"bytes", "thread_id must be a str, int or UUID, got bytes"),
        ("a\x00b", "thread_id contains a NUL character"),
    ],
)
def test_bad_thread_ids_are_refused(saver, thread_id, message) -> None:
    with pytest.raises(InvalidIdentifierError, match=message):
        put(saver, {"configurable": {"thread_id": thread_id}})


def test_int_unicode_and_10kb_thread_ids_round_trip(saver) -> None:
    for tid in (42, "名前-🦜", "x" * 10_240):
        cfg = put(saver, {"configurable": {"thread_id": tid}}, value=str(tid)[:5])
        got = saver.get_tuple({"configurable": {"thread_id": tid}})
        assert got.config == cfg
        assert got.config["configurable"]["thread_id"] == str(tid)
        assert got.checkpoint["channel_values"] == {"v": str(tid)[:5]}


def test_nested_checkpoint_ns_is_its_own_namespace(saver) -> None:
    put(saver, ROOT, "root")
    nested = {"configurable": {"thread_id": "t", "checkpoint_ns": "a:1|b:2"}}
    put(saver, nested, "nested")
    assert saver.get_tuple(nested).checkpoint["channel_values"] == {"v": "nested"}
    assert [t.config["configurable"]["checkpoint_ns"]
            for t in saver.list({"configurable": {"thread_id": "t"}})] == ["", "a:1|b:2"]


def test_put_writes_without_checkpoint_id_is_refused(saver) -> None:
    with pytest.raises(InvalidIdentifierError, match=r"put_writes of thread 't' \(ns ''\) "
                                                     r"needs config\['configurable'\]"):
        saver.put_writes(ROOT, [("v", 1)], "task")


def test_operator_and_dotted_filter_keys_are_data_not_queries(saver) -> None:
    put(saver, ROOT)
    cfg = {"configurable": {"thread_id": "t"}}
    assert list(saver.list(cfg, filter={"$where": "1 == 1"})) == []
    assert list(saver.list(cfg, filter={"step": {"$gte": -10}})) == []
    assert list(saver.list(cfg, filter={"a.b": 1})) == []
    assert len(list(saver.list(cfg, filter={"step": 0}))) == 1


def test_corrupt_value_in_redis_names_the_checkpoint(saver, redis_client) -> None:
    cfg = put(saver, ROOT)
    saver.flush()
    keys = saver.context.keys("t")
    field = f"\x00{cfg['configurable']['checkpoint_id']}"
    redis_client.hset(keys.cp, field, b"\xc1garbage")
    with pytest.raises(CorruptRecordError, match="undecodable record at checkpoint"):
        saver.get_tuple(ROOT)


def test_newer_schema_version_in_mongodb_is_a_clear_error(saver, redis_client) -> None:
    put(saver, ROOT)
    saver.flush()
    redis_client.delete(*saver.context.keys("t").all)
    db = saver.sync_clients.db
    db[saver.context.collections.checkpoints].update_many({"thread_id": "t"}, {"$set": {"v": 99}})
    with pytest.raises(SchemaVersionError,
                       match=f"schema version 99, newer than {NEWEST_DOCUMENT_VERSION} "):
        saver.get_tuple(ROOT)
    cps = db[saver.context.collections.checkpoints]
    assert cps.count_documents({"thread_id": "t", "v": 99}) == 1


def test_outbox_full_raises_and_writes_nothing(redis_url, mongo_url) -> None:
    opts = unique_options(flusher="off", max_outbox=2, on_outbox_full="raise")
    with DurableSaver.from_urls(redis_url, mongo_url, **opts) as saver:
        cfg = put(saver, ROOT, 1, 0)
        cfg = put(saver, cfg, 2, 1)
        with pytest.raises(OutboxFullError, match="max_outbox=2 entries"):
            put(saver, cfg, 3, 2)
        assert saver.get_tuple(ROOT).checkpoint["channel_values"] == {"v": 2}


def test_outbox_full_blocks_until_timeout_then_raises(redis_url, mongo_url) -> None:
    opts = unique_options(flusher="off", max_outbox=1, outbox_full_timeout_s=0.1)
    with DurableSaver.from_urls(redis_url, mongo_url, **opts) as saver:
        cfg = put(saver, ROOT, 1, 0)
        with pytest.raises(OutboxFullError):
            put(saver, cfg, 2, 1)


def test_saver_used_after_close_raises(redis_url, mongo_url) -> None:
    saver = DurableSaver.from_urls(redis_url, mongo_url, **unique_options())
    with saver:
        put(saver, ROOT)
    with pytest.raises(SaverClosedError, match="closed"):
        saver.get_tuple(ROOT)


async def test_sync_call_from_the_loop_of_async_only_clients_raises(redis_url, mongo_url):
    r = redis.asyncio.Redis.from_url(redis_url)
    m = pymongo.AsyncMongoClient(mongo_url)
    saver = DurableSaver(r, m, **unique_options())
    await saver.asetup()
    with pytest.raises(SyncCallInEventLoopError, match="Use the async method"):
        saver.get_tuple(ROOT)
    # from another thread the same sync call is carried to the saver's loop and works
    assert await asyncio.to_thread(saver.get_tuple, ROOT) is None
    await saver.aclose()
    await r.aclose()
    await m.close()


def test_sync_call_on_async_only_clients_with_no_loop_says_so(redis_url, mongo_url) -> None:
    r = redis.asyncio.Redis.from_url(redis_url)
    m = pymongo.AsyncMongoClient(mongo_url)
    saver = DurableSaver(r, m, **unique_options())  # made outside any event loop
    with pytest.raises(EventLoopNotRunningError) as caught:
        saver.get_tuple(ROOT)
    message = str(caught.value)
    assert "none owns them yet" in message and "from_urls" in message
    assert "called from inside the event loop" not in message
    with pytest.raises(ConfigurationError, match="asyncio clients only"):
        saver.sync_clients  # noqa: B018

    async def use_then_leave() -> None:  # the first async call binds the clients to a loop
        assert await saver.aget_tuple(ROOT) is None
        await saver.aclose()
        await r.aclose()
        await m.close()

    asyncio.run(use_then_leave())
    with pytest.raises(SaverClosedError):
        saver.get_tuple(ROOT)


def test_sync_call_after_the_clients_loop_ended_raises_instead_of_hanging(
    redis_url, mongo_url
) -> None:
    r = redis.asyncio.Redis.from_url(redis_url)
    m = pymongo.AsyncMongoClient(mongo_url)
    saver = DurableSaver(r, m, **unique_options(flusher="off"))

    async def first_use() -> None:
        assert await saver.aget_tuple(ROOT) is None

    asyncio.run(first_use())
    with pytest.raises(EventLoopNotRunningError, match="that loop is closed"):
        saver.get_tuple(ROOT)


def test_redis_down_fails_fast_naming_the_server(mongo_url) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    r = redis.Redis(port=port, socket_connect_timeout=0.5, socket_timeout=0.5)
    m = pymongo.MongoClient(mongo_url)
    saver = DurableSaver(r, m, **unique_options(flusher="off"))
    with pytest.raises(TierUnavailableError, match=f"Redis 127.0.0.1:{port}|localhost:{port}"):
        put(saver, ROOT)
    m.close()
