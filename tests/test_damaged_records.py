"""Damaged records at rest give ``CorruptRecordError`` naming the thread and the key or
document, on every read path; never a bare ``ResponseError``/``KeyError``/``TypeError``,
never an empty state. ``list(None)`` lists every other thread and then raises."""

from __future__ import annotations

import pymongo
import pytest
from langgraph.checkpoint.base import empty_checkpoint

from langgraph_durable import CorruptRecordError, DurableSaver
from langgraph_durable.errors import MissingValueError
from langgraph_durable.testing import drop_key_prefix

from .write_forms import ungroup


def put(saver: DurableSaver, thread: str, value: object, step: int, parent: dict | None = None
        ) -> dict:
    cfg = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    if parent is not None:
        cfg["configurable"]["checkpoint_id"] = parent["configurable"]["checkpoint_id"]
    cp = empty_checkpoint()
    cp["channel_values"] = {"v": value}
    cp["channel_versions"] = {"v": f"{step + 1:032}.0"}
    return saver.put(cfg, cp, {"step": step}, {"v": f"{step + 1:032}.0"})


def thread(tid: str) -> dict:
    return {"configurable": {"thread_id": tid}}


def two_steps(saver: DurableSaver, tid: str = "t") -> dict:
    """A checkpoint holding a list (items in Redis's ``it``) with a pending write."""
    first = put(saver, tid, ["a", "b"], 0)
    second = put(saver, tid, ["a", "b", "c"], 1, first)
    saver.put_writes(second, [("v", "w")], "task-1")
    return second


def go_cold(saver: DurableSaver, redis_client) -> None:
    saver.flush()
    drop_key_prefix(redis_client, saver.config.key_prefix)  # Redis lost: MongoDB only


# ------------------------------------------------------------------ hot: wrong-type keys


@pytest.mark.parametrize("suffix", ["cp", "bl", "w", "it"])
def test_a_hot_key_of_the_wrong_type_names_the_thread_and_the_key(saver, redis_client,
                                                                   suffix) -> None:
    two_steps(saver)
    saver.flush()  # (the flusher reads no damaged key)
    key = getattr(saver.context.keys("t"), suffix)
    redis_client.delete(key)
    redis_client.set(key, "not a hash")
    with pytest.raises(CorruptRecordError,
                       match=rf"Redis key '{key}' \(its '{suffix}' key\) of thread 't' holds a "
                             r"string, not a hash") as info:
        saver.get_tuple(thread("t"))
    assert (info.value.tier, info.value.thread_id, info.value.key) == ("hot", "t", key)
    with pytest.raises(CorruptRecordError, match="of thread 't' holds a string"):
        list(saver.list(thread("t")))
    with pytest.raises(CorruptRecordError, match="of thread 't' holds a string"):
        list(saver.list({"configurable": {"thread_id": "t", "checkpoint_ns": ""}}))


async def aput(saver: DurableSaver, tid: str, value: object) -> dict:
    cfg = {"configurable": {"thread_id": tid, "checkpoint_ns": ""}}
    cp = {**empty_checkpoint(), "channel_values": {"v": value}, "channel_versions": {"v": "1"}}
    return await saver.aput(cfg, cp, {"step": 0}, {"v": "1"})


def blobs_of(saver: DurableSaver, mongo_url: str):
    client = pymongo.MongoClient(mongo_url)
    return client, client[saver.config.database]


def drop_values(db, saver: DurableSaver, tid: str) -> int:
    """Remove every stored channel value of ``tid`` from MongoDB, in blobs documents and
    inside its checkpoint documents (``vals``); returns how many were removed."""
    cols = saver.context.collections
    inline = sum(len(d.get("vals") or ()) for d in db[cols.checkpoints].find(
        {"thread_id": tid}, {"vals": 1}))
    db[cols.checkpoints].update_many({"thread_id": tid}, {"$unset": {"vals": ""}})
    return inline + db[cols.blobs].delete_many({"thread_id": tid}).deleted_count


async def test_a_hot_key_of_the_wrong_type_raises_in_the_async_api(asaver, redis_client) -> None:
    await aput(asaver, "t", 1)
    await asaver.aflush()
    key = asaver.context.keys("t").cp
    redis_client.delete(key)
    redis_client.set(key, "x")
    with pytest.raises(CorruptRecordError, match=rf"Redis key '{key}' \(its 'cp' key\)"):
        await asaver.aget_tuple(thread("t"))
    with pytest.raises(CorruptRecordError, match="of thread 't' holds a string"):
        [t async for t in asaver.alist(thread("t"))]


def test_the_namespace_hash_of_the_wrong_type_names_it(saver, redis_client) -> None:
    two_steps(saver)
    saver.flush()
    key = saver.context.keys("t").ns
    redis_client.delete(key)
    redis_client.set(key, "x")
    with pytest.raises(CorruptRecordError, match=rf"Redis key '{key}' \(its 'ns' key\)"):
        list(saver.list(thread("t")))


# ------------------------------------------------------------------ cold: documents


@pytest.mark.parametrize("change, problem", [
    ({"$unset": {"checkpoint": ""}}, r"field 'checkpoint' is missing"),
    ({"$set": {"checkpoint": "text"}}, r"field 'checkpoint' holds str 'text', not binary "
                                       r"data"),
    ({"$set": {"checkpoint": 5}}, r"field 'checkpoint' holds int 5, not binary data"),
    ({"$unset": {"blob_fields": ""}}, r"field 'blob_fields' is missing"),
])
def test_a_damaged_checkpoint_document_names_the_document_and_the_field(
        saver, redis_client, change, problem) -> None:
    cfg = two_steps(saver)
    go_cold(saver, redis_client)
    cid = cfg["configurable"]["checkpoint_id"]
    cps = saver.sync_clients.db[saver.context.collections.checkpoints]
    assert cps.update_one({"thread_id": "t", "checkpoint_id": cid}, change).modified_count == 1
    where = rf"MongoDB checkpoints document '.*' \(thread 't', ns '', checkpoint '{cid}'\) is " \
            rf"damaged: {problem}"
    with pytest.raises(CorruptRecordError, match=where) as info:
        saver.get_tuple(thread("t"))
    assert (info.value.tier, info.value.thread_id, info.value.checkpoint_id) == (
        "durable", "t", cid)
    with pytest.raises(CorruptRecordError, match=where):
        list(saver.list(thread("t")))
    with pytest.raises(CorruptRecordError, match=where):
        list(saver.list(thread("t"), filter={"step": 1}))


@pytest.mark.parametrize("form", ["per call", "per write"])
def test_a_damaged_write_document_names_it(saver, redis_client, form) -> None:
    cfg = two_steps(saver)
    go_cold(saver, redis_client)
    writes = saver.sync_clients.db[saver.context.collections.writes]
    if form == "per write":  # as releases before stored them
        ungroup(saver, "t")
        writes.update_one({"thread_id": "t"}, {"$set": {"idx": "zero"}})
        problem = r"field 'idx' holds str 'zero', not an integer"
    else:
        writes.update_one({"thread_id": "t"}, {"$set": {"writes.0.idx": "zero"}})
        problem = r"write 0 of field 'writes' has idx 'zero', not an integer"
    cid = cfg["configurable"]["checkpoint_id"]
    with pytest.raises(CorruptRecordError,
                       match=rf"MongoDB writes document .* checkpoint '{cid}'\) is damaged: "
                             + problem):
        saver.get_tuple(cfg)


def test_a_writes_document_repeating_an_idx_is_named_not_read_as_fewer_writes(
        saver, redis_client) -> None:
    """One call's document holds each idx once; a second entry with the same idx would
    hide a pending write silently (the first kept): it is damage, named."""
    cfg = put(saver, "t", 1, 0)
    saver.put_writes(cfg, [("v", "w0"), ("v", "w1")], "task-1")
    put(saver, "other", 1, 0)
    go_cold(saver, redis_client)
    writes = saver.sync_clients.db[saver.context.collections.writes]
    writes.update_one({"thread_id": "t"}, {"$set": {"writes.1.idx": 0}})
    cid = cfg["configurable"]["checkpoint_id"]
    with pytest.raises(CorruptRecordError,
                       match=rf"MongoDB writes document .* checkpoint '{cid}'\) is damaged: "
                             r"write 1 of field 'writes' repeats idx 0"):
        saver.get_tuple(cfg)
    assert saver.get_tuple(thread("other")) is not None


# ------------------------------------------------------------------ cold: missing values


def test_missing_blob_documents_are_an_error_not_an_empty_state(saver, redis_client) -> None:
    empty = {"configurable": {"thread_id": "e", "checkpoint_ns": ""}}
    cp = empty_checkpoint()
    cp["channel_versions"] = {"v": "1", "none": "1"}
    cp["channel_values"] = {"v": 1}  # 'none' changed to no value: stored as empty
    saver.put(empty, cp, {"step": 0}, {"v": "1", "none": "1"})
    cfg = two_steps(saver)
    go_cold(saver, redis_client)
    assert saver.get_tuple(thread("e")).checkpoint["channel_values"] == {"v": 1}
    assert drop_values(saver.sync_clients.db, saver, "t") == 2
    cid = cfg["configurable"]["checkpoint_id"]
    with pytest.raises(MissingValueError,
                       match=rf"checkpoint '{cid}' \(thread 't', ns ''\) names version "
                             rf"'{2:032}.0' of channel 'v', whose value neither Redis nor "
                             r"MongoDB holds") as info:
        saver.get_tuple(thread("t"))
    e = info.value
    assert (e.thread_id, e.checkpoint_ns, e.checkpoint_id, e.channel, e.version) == (
        "t", "", cid, "v", f"{2:032}.0")
    with pytest.raises(MissingValueError):
        list(saver.list(thread("t")))
    assert saver.get_tuple(thread("e")).checkpoint["channel_values"] == {"v": 1}


async def test_missing_blob_documents_raise_in_the_async_api(asaver, redis_client,
                                                              mongo_url) -> None:
    await aput(asaver, "t", 1)
    await asaver.aflush()
    drop_key_prefix(redis_client, asaver.config.key_prefix)
    client, db = blobs_of(asaver, mongo_url)
    with client:
        assert drop_values(db, asaver, "t") == 1
    with pytest.raises(MissingValueError, match="channel 'v'"):
        await asaver.aget_tuple(thread("t"))


def test_delta_history_with_missing_values_raises(saver, redis_client) -> None:
    cfg = two_steps(saver)
    go_cold(saver, redis_client)
    drop_values(saver.sync_clients.db, saver, "t")
    with pytest.raises(MissingValueError, match="channel 'v'"):
        saver.get_delta_channel_history(config=cfg, channels=["v"])


# ------------------------------------------------------------------ list(None)


def test_list_none_yields_every_other_thread_then_names_the_damaged_one(
        saver, redis_client) -> None:
    for tid in ("a", "b", "c"):
        two_steps(saver, tid)
    saver.flush()
    key = saver.context.keys("b").cp
    redis_client.delete(key)
    redis_client.set(key, "x")
    got = []
    with pytest.raises(CorruptRecordError, match=r"could not list 1 thread\(s\) with damaged "
                                                 r"records .*thread 'b'") as info:
        for tup in saver.list(None):
            got.append(tup.config["configurable"]["thread_id"])
    assert sorted(got) == ["a", "a", "c", "c"]
    assert [e.thread_id for e in info.value.damaged] == ["b"]
    for tid in ("a", "c"):
        assert len(list(saver.list(thread(tid)))) == 2
    with pytest.raises(CorruptRecordError, match="thread 'b'"):
        list(saver.list(thread("b")))


async def test_alist_none_yields_every_other_thread_then_names_the_damaged_one(
        asaver, redis_client, mongo_url) -> None:
    for tid in ("a", "b", "c"):
        await aput(asaver, tid, tid)
    await asaver.aflush()
    drop_key_prefix(redis_client, asaver.config.key_prefix)
    client, db = blobs_of(asaver, mongo_url)
    with client:
        assert drop_values(db, asaver, "b") == 1
    got = []
    with pytest.raises(CorruptRecordError, match=r"could not list 1 thread\(s\) .*channel "
                                                 r"'v', whose value neither") as info:
        async for tup in asaver.alist(None):
            got.append(tup.checkpoint["channel_values"]["v"])
    assert sorted(got) == ["a", "c"]
    (damaged,) = info.value.damaged
    assert isinstance(damaged, MissingValueError) and damaged.thread_id == "b"
    for tid in ("a", "c"):
        assert [t.checkpoint["channel_values"] async for t in asaver.alist(thread(tid))] == [
            {"v": tid}]


def test_list_none_names_checkpoints_of_no_thread(saver) -> None:
    for tid in ("a", "b"):
        two_steps(saver, tid)
    saver.flush()
    cps = saver.sync_clients.db[saver.context.collections.checkpoints]
    cps.update_many({"thread_id": "b"}, {"$unset": {"thread_id": ""}})
    got = []
    with pytest.raises(CorruptRecordError, match=r"could not list 1 thread\(s\) .*thread_id "
                                                 r"None .*belong to no thread") as info:
        for tup in saver.list(None):
            got.append(tup.config["configurable"]["thread_id"])
    assert got == ["a", "a"]
    assert [e.tier for e in info.value.damaged] == ["durable"]


# ------------------------------------------------------------------ copy_thread


def test_copy_thread_of_a_damaged_document_copies_nothing_and_names_it(
        saver, redis_client) -> None:
    cfg = two_steps(saver)
    saver.flush()
    cid = cfg["configurable"]["checkpoint_id"]
    cps = saver.sync_clients.db[saver.context.collections.checkpoints]
    cps.update_one({"thread_id": "t", "checkpoint_id": cid}, {"$unset": {"checkpoint": ""}})
    with pytest.raises(CorruptRecordError,
                       match=rf"MongoDB checkpoints document .*\(thread 't', ns '', checkpoint "
                             rf"'{cid}'\) is damaged: field 'checkpoint' is missing"):
        saver.copy_thread("t", "u")
    assert saver.get_tuple(thread("u")) is None
    assert cps.count_documents({"thread_id": "u"}) == 0
