"""Saver-level behaviour beyond the conformance suite: serializers, allowlist copies,
strict durability, async-only clients, hot window."""

from __future__ import annotations

import threading
from decimal import Decimal

import pymongo
import pytest
import redis.asyncio
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from langgraph_durable import DurableSaver, SaverClosedError
from langgraph_durable.io.drivers import run_sync
from langgraph_durable.outbox.flusher import flush_batch_plan
from langgraph_durable.plans import threads
from langgraph_durable.testing import unique_options

ROOT = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}


def put(saver: DurableSaver, cfg: dict, value: object, step: int, **md: object) -> dict:
    cp = empty_checkpoint()
    cp["channel_values"] = {"v": value}
    cp["channel_versions"] = {"v": f"{step + 1:032}.0"}
    return saver.put(cfg, cp, {"step": step, **md}, {"v": f"{step + 1:032}.0"})


def test_encrypted_serializer_keeps_values_and_metadata_unreadable_at_rest(
    redis_url, mongo_url, redis_client
) -> None:
    serde = EncryptedSerializer.from_pycryptodome_aes(key=b"k" * 16)
    with DurableSaver.from_urls(redis_url, mongo_url, serde=serde,
                                **unique_options()) as saver:
        cfg = put(saver, ROOT, "secret-value", 0, user="secret-user")
        saver.put_writes(cfg, [("v", "secret-write")], "task")
        saver.flush()
        got = saver.get_tuple(ROOT)
        assert got.checkpoint["channel_values"] == {"v": "secret-value"}
        assert got.metadata["user"] == "secret-user"
        assert got.pending_writes == [("task", "v", "secret-write")]
        assert [t.metadata["user"] for t in saver.list(ROOT, filter={"user": "secret-user"})] \
            == ["secret-user"]
        db = saver.sync_clients.db
        raw = b"".join(
            bytes(str(d), "utf8")
            for name in (saver.context.collections.checkpoints, saver.context.collections.blobs,
                         saver.context.collections.writes)
            for d in db[name].find({})
        )
        dumped = b"".join(v for k in saver.context.keys("t").all if redis_client.type(k) == b"hash"
                          for v in redis_client.hgetall(k).values())
        for secret in (b"secret-value", b"secret-user", b"secret-write"):
            assert secret not in raw
            assert secret not in dumped


def test_with_allowlist_copy_shares_the_flusher_and_sees_the_same_data(
    redis_url, mongo_url
) -> None:
    serde = JsonPlusSerializer(allowed_msgpack_modules=[("collections", "OrderedDict")])
    saver = DurableSaver.from_urls(redis_url, mongo_url, serde=serde, **unique_options())
    with saver:
        clone = saver.with_allowlist([("decimal", "Decimal")])
        assert clone is not saver and clone.serde is not saver.serde
        assert clone.context.serde is clone.serde and saver.context.serde is saver.serde
        cfg = put(clone, ROOT, Decimal("1.5"), 0)
        assert clone.get_tuple(ROOT).checkpoint["channel_values"] == {"v": Decimal("1.5")}
        assert saver.get_tuple(ROOT).config == cfg
        clone.flush()
        assert clone.stats()["flusher"]["consumer"] == saver.stats()["flusher"]["consumer"]
    with pytest.raises(SaverClosedError):  # closing one closes the machinery both share
        clone.get_tuple(ROOT)


async def test_run_and_arun_drive_a_plan_and_return_its_value(asaver: DurableSaver) -> None:
    await asaver.aput(ROOT, empty_checkpoint(), {"step": 0}, {})
    pages = [asaver.run(threads.list_threads_plan(asaver.context, 10, None)),
             await asaver.arun(threads.list_threads_plan(asaver.context, 10, None))]
    for page in pages:
        assert [t.thread_id for t in page.threads] == ["t"]
        assert page.threads[0].checkpoints == 1


def test_last_read_tier_belongs_to_the_thread_that_read(saver: DurableSaver) -> None:
    put(saver, ROOT, "v0", 0)
    assert saver.last_read_tier is None
    assert saver.get_tuple(ROOT) is not None
    assert saver.last_read_tier == "hot"
    other: list[str | None] = []

    def read_missing() -> None:
        other.append(saver.last_read_tier)  # nothing read in this thread yet
        saver.get_tuple({"configurable": {"thread_id": "nobody", "checkpoint_ns": ""}})
        other.append(saver.last_read_tier)

    worker = threading.Thread(target=read_missing)
    worker.start()
    worker.join()
    assert other == [None, "miss"]
    assert saver.last_read_tier == "hot"  # the other thread's miss is not ours


def test_strict_durability_has_the_checkpoint_in_mongodb_when_put_returns(
    redis_url, mongo_url
) -> None:
    opts = unique_options(durability="strict", flusher="off")
    with DurableSaver.from_urls(redis_url, mongo_url, **opts) as saver:
        cfg = put(saver, ROOT, "v0", 0)
        saver.put_writes(cfg, [("v", "w0"), ("__interrupt__", "i0")], "task")
        db = saver.sync_clients.db
        cols = saver.context.collections
        assert db[cols.checkpoints].count_documents({"thread_id": "t"}) == 1
        # its one small value inside the checkpoint document, as the flusher writes it
        (doc,) = db[cols.checkpoints].find({"thread_id": "t"})
        assert doc["v"] == 4 and len(doc["vals"]) == 1
        assert db[cols.blobs].count_documents({"thread_id": "t"}) == 0
        (doc,) = db[cols.writes].find({"thread_id": "t"})  # one document per put_writes
        assert sorted(w["channel"] for w in doc["writes"]) == ["__interrupt__", "v"]


async def test_async_only_clients_run_the_async_api_natively(redis_url, mongo_url) -> None:
    r = redis.asyncio.Redis.from_url(redis_url)
    m = pymongo.AsyncMongoClient(mongo_url)
    saver = DurableSaver(r, m, **unique_options())
    await saver.asetup()
    cp = empty_checkpoint()
    cfg = await saver.aput(ROOT, cp, {"step": 0}, {})
    await saver.aput_writes(cfg, [("v", 1)], "task")
    got = await saver.aget_tuple(ROOT)
    assert got.pending_writes == [("task", "v", 1)]
    await saver.aflush()
    db = m[saver.config.database]
    assert await db[saver.context.collections.writes].count_documents({"thread_id": "t"}) == 1
    assert saver.stats()["flusher"]["consumer"]
    await saver.aclose()
    await r.aclose()
    await m.close()


def test_flushed_threads_get_a_ttl_and_a_new_write_removes_it(redis_url, mongo_url,
                                                               redis_client) -> None:
    opts = unique_options(hot_ttl_s=600, flusher="off")
    with DurableSaver.from_urls(redis_url, mongo_url, **opts) as saver:
        cfg = put(saver, ROOT, 1, 0)
        keys = saver.context.keys("t")
        assert redis_client.ttl(keys.cp) == -1  # not in MongoDB yet: no TTL
        run_sync(flush_batch_plan(saver.context, "c", block_ms=0, claim=False), saver.sync_clients)
        assert [0 < redis_client.ttl(k) <= 600 for k in (keys.cp, keys.bl, keys.idx)] == \
            [True, True, True]
        put(saver, cfg, 2, 1)
        assert [redis_client.ttl(k) for k in (keys.cp, keys.bl, keys.idx)] == [-1, -1, -1]


def test_list_without_namespace_follows_first_written_order_while_hot(saver) -> None:
    from langgraph.checkpoint.base import empty_checkpoint
    from langgraph.checkpoint.memory import InMemorySaver

    mem = InMemorySaver()
    for ns in ("", "zeta:1", "alpha:2"):  # written in this order, not alphabetical
        cp = empty_checkpoint()
        cp["channel_values"] = {"x": ns}
        cp["channel_versions"] = {"x": "1"}
        for s in (mem, saver):
            s.put({"configurable": {"thread_id": "t", "checkpoint_ns": ns}}, cp,
                  {"step": -1}, {"x": "1"})

    def order(s):
        return [t.config["configurable"]["checkpoint_ns"]
                for t in s.list({"configurable": {"thread_id": "t"}})]

    assert order(mem) == ["", "zeta:1", "alpha:2"]
    assert order(saver) == order(mem)  # served from Redis
    saver.flush()
    saver.sync_clients.redis.delete(*saver.context.keys("t").all)
    assert order(saver) == order(mem)  # served from MongoDB
