"""A deleted thread stays deleted after Redis lost its data (issue 21 item 4).

Every delete leaves its tombstones in Redis (7 days) and in MongoDB (the ``tombstones``
collection, ``tombstone_ttl_s``). Redis answers on the call path; MongoDB's are asked only
when Redis cannot answer: a write names a checkpoint Redis neither holds nor has a
tombstone of (a new Redis, Redis's tombstones expired, the hot window let it go).
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import pymongo
import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver

from langgraph_durable import DurableConfig, DurableSaver, ThreadDeletedError
from langgraph_durable.core.records import member
from langgraph_durable.durable import documents as D
from langgraph_durable.testing import drop_key_prefix, unique_options
from tests.test_deleted_threads import cfg, put  # the same checkpoints as there


def cid(config: dict) -> str:
    return str(config["configurable"]["checkpoint_id"])


def stored(saver: DurableSaver, thread: str) -> list[Any]:
    saver.flush()
    return [t.config for t in saver.list(cfg(thread))]


def lose(saver: DurableSaver, redis_client: Any, how: str, thread: str) -> None:
    """Redis cannot answer any more: a new Redis (every key of the prefix gone, the outbox
    and its consumer group too), or the thread's Redis tombstones expired (7 days)."""
    saver.flush()
    if how == "a new Redis":
        drop_key_prefix(redis_client, saver.config.key_prefix)
    else:
        redis_client.delete(saver.context.keys(thread).gone)


def tombstones(saver: DurableSaver, mongo_url: str) -> pymongo.collection.Collection:
    client: pymongo.MongoClient = pymongo.MongoClient(mongo_url)
    return client[saver.config.database][saver.context.collections.tombstones]


HOW = ["a new Redis", "Redis's tombstones expired"]


@pytest.mark.parametrize("how", HOW)
def test_a_late_put_and_put_writes_after_redis_lost_its_data_are_refused(
    saver, redis_client, how
) -> None:
    c1 = put(saver, cfg("t"), 0)
    c2 = put(saver, c1, 1)
    saver.put_writes(c2, [("v", 5)], "task-1")
    saver.delete_thread("t")
    lose(saver, redis_client, how, "t")
    with pytest.raises(ThreadDeletedError) as err:
        put(saver, c2, 2)
    assert (err.value.thread_id, err.value.checkpoint_ns, err.value.checkpoint_id) == \
        ("t", "", cid(c2))
    assert err.value.deleted_at_ms > 0 and cid(c2) in str(err.value)
    with pytest.raises(ThreadDeletedError):
        saver.put_writes(c1, [("v", 6)], "task-2")
    assert stored(saver, "t") == []  # nothing written, in either tier
    assert saver.get_tuple(cfg("t")) is None
    n1 = put(saver, cfg("t"), 0, run_id="new")  # a new run on the thread_id works
    n2 = put(saver, n1, 1, run_id="new")
    assert stored(saver, "t") == [n2, n1]


async def test_a_late_aput_after_a_new_redis_is_refused_and_a_new_run_works(
    asaver, redis_client
) -> None:
    c1 = await asaver.aput(cfg("a"), empty_checkpoint(), {"step": -1}, {})
    await asaver.adelete_thread("a")
    await asaver.aflush()
    drop_key_prefix(redis_client, asaver.config.key_prefix)
    with pytest.raises(ThreadDeletedError):
        await asaver.aput(c1, empty_checkpoint(), {"step": 0}, {})
    with pytest.raises(ThreadDeletedError):
        await asaver.aput_writes(c1, [("v", 1)], "task-1")
    n1 = await asaver.aput(cfg("a"), empty_checkpoint(), {"step": -1}, {})
    got = await asaver.aget_tuple(cfg("a"))
    assert got is not None and got.config == n1


@pytest.mark.parametrize("how", HOW)
def test_pruned_and_run_deleted_checkpoints_stay_refused_after_redis_lost_its_data(
    saver, redis_client, how
) -> None:
    c1 = put(saver, cfg("p"), 0)
    c2 = put(saver, c1, 1)
    c3 = put(saver, c2, 2)
    saver.prune(["p"], strategy="keep_latest")
    r1 = put(saver, cfg("q"), 0, run_id="doomed")
    saver.delete_for_runs(["doomed"])
    lose(saver, redis_client, how, "p")
    if how != "a new Redis":
        redis_client.delete(saver.context.keys("q").gone)
    with pytest.raises(ThreadDeletedError):
        put(saver, c2, 9)
    with pytest.raises(ThreadDeletedError):
        saver.put_writes(r1, [("v", 1)], "task-1")
    c4 = put(saver, c3, 3)  # the kept latest: MongoDB holds it and no tombstone of it
    saver.put_writes(c4, [("v", 1)], "task-1")
    assert stored(saver, "p") == [c4, c3]
    assert stored(saver, "q") == []


def test_checkpoints_copied_onto_a_deleted_thread_id_take_writes_after_a_new_redis(
    saver, redis_client
) -> None:
    """copy_thread stores the source's checkpoints on the target after the target's
    delete (a later ``put_ms`` than the tombstone): writes naming them are taken."""
    s1 = put(saver, cfg("src"), 0)
    saver.copy_thread("src", "dst")
    saver.delete_thread("dst")  # tombstones s1's id on dst ...
    saver.copy_thread("src", "dst")  # ... which is stored there again after
    lose(saver, redis_client, "a new Redis", "dst")
    same = cfg("dst", cid(s1))
    d2 = put(saver, same, 1)
    saver.put_writes(d2, [("v", 3)], "task-1")
    assert stored(saver, "dst") == [d2, same]


def test_writes_for_a_checkpoint_not_stored_yet_are_taken_after_a_new_redis(
    saver, redis_client
) -> None:
    """A task's writes may arrive before their checkpoint's put (durability="async"):
    neither Redis nor MongoDB knows the checkpoint, and no tombstone names it: taken, as
    InMemorySaver takes them."""
    def play(s: Any, lost: bool) -> Any:
        c1 = put(s, cfg("w"), 0)
        s.delete_thread("w")
        if lost:
            lose(s, redis_client, "a new Redis", "w")
        n1 = put(s, cfg("w"), 0, run_id="new")
        cp = empty_checkpoint()
        s.put_writes(cfg("w", cp["id"]), [("v", 5)], "task-1")
        n2 = s.put(n1, cp, {"step": 0, "source": "loop"}, {})
        got = s.get_tuple(cfg("w"))
        return (got.config == n2, got.pending_writes, cid(c1) != cid(n1))

    assert play(saver, True) == play(InMemorySaver(), False) == (True, [("task-1", "v", 5)],
                                                                 True)


def test_once_both_tombstones_expired_a_late_put_is_taken_as_in_memory_saver_takes_it(
    saver, redis_client, mongo_url
) -> None:
    c1 = put(saver, cfg("old"), 0)
    saver.delete_thread("old")
    lose(saver, redis_client, "a new Redis", "old")
    # expire them: the checkpoint's and the whole thread's ('*')
    assert tombstones(saver, mongo_url).delete_many({"thread_id": "old"}).deleted_count == 2
    c2 = put(saver, c1, 1)  # tombstone_ttl_s later: nothing remembers the delete
    got = saver.get_tuple(cfg("old"))
    assert got is not None and got.config == c2 and got.parent_config == c1


def test_a_delete_leaves_one_tombstone_document_per_checkpoint_and_one_for_the_thread(
    saver, mongo_url
) -> None:
    c1 = put(saver, cfg("d"), 0)
    c2 = put(saver, c1, 1)
    saver.delete_thread("d")
    docs = sorted(tombstones(saver, mongo_url).find({"thread_id": "d"}), key=lambda d: d["f"])
    assert [d["_id"] for d in docs] == [D.doc_id("d", f) for f in
                                        sorted([member("", cid(c1)), member("", cid(c2)), "*"])]
    at = docs[0]["at_ms"]
    assert {d["at_ms"] for d in docs} == {at}
    assert all(d["deleted_at"].replace(tzinfo=timezone.utc) ==
               datetime.fromtimestamp(at / 1000, tz=timezone.utc) for d in docs)


def test_the_tombstones_ttl_index_follows_tombstone_ttl_s(redis_url, mongo_url) -> None:
    """SecantusDB may never expire a document: the index and its options are checked, not
    the expiry (MongoDB's TTL monitor removes a document after ``expireAfterSeconds``)."""
    opts = unique_options(tombstone_ttl_s=123_456)

    def indexes(s: DurableSaver) -> dict[str, Any]:
        col = tombstones(s, mongo_url)
        return {ix["name"]: (list(ix["key"]), ix.get("expireAfterSeconds"))
                for ix in col.list_indexes()}

    with DurableSaver.from_urls(redis_url, mongo_url, **opts) as s:
        assert indexes(s) == {"_id_": (["_id"], None),
                              "thread_field": (["thread_id", "f"], None),
                              "deleted_at_ttl": (["deleted_at"], 123_456)}
    with DurableSaver.from_urls(redis_url, mongo_url,
                                **{**opts, "tombstone_ttl_s": 654_321}) as s:
        assert indexes(s)["deleted_at_ttl"] == (["deleted_at"], 654_321)
    assert DurableConfig().tombstone_ttl_s == 30 * 86400  # longer than Redis's 7 days
    with pytest.raises(ValueError, match="tombstone_ttl_s"):
        DurableConfig(tombstone_ttl_s=10)
