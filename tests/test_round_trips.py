"""Round trips per operation, counted on the wire: Redis commands sent by the client
(socket-level instrumentation) and MongoDB commands (PyMongo command monitoring)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pymongo
import pytest
import redis
from langgraph.checkpoint.base import empty_checkpoint

from langgraph_durable import DurableSaver
from langgraph_durable.testing import MongoCommandCounter, drop_key_prefix, unique_options


class RedisCounter:
    """Counts packets sent by redis-py connections (one per command or pipeline)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.sent: list[Any] = []
        original = redis.connection.AbstractConnection.send_packed_command

        def counting(conn: Any, command: Any, check_health: bool = True) -> None:
            self.sent.append(command)
            original(conn, command, check_health)

        monkeypatch.setattr(redis.connection.AbstractConnection, "send_packed_command", counting)




@pytest.fixture
def counted(redis_url: str, mongo_url: str, monkeypatch: pytest.MonkeyPatch
            ) -> Iterator[tuple[DurableSaver, RedisCounter, MongoCommandCounter]]:
    listener = MongoCommandCounter()
    r = redis.Redis.from_url(redis_url)
    m = pymongo.MongoClient(mongo_url, event_listeners=[listener])
    saver = DurableSaver(r, m, **unique_options(flusher="off"))
    saver.setup()
    counter = RedisCounter(monkeypatch)
    yield saver, counter, listener
    r.close()
    m.close()


def _checkpoint(n: int) -> dict:
    cp = empty_checkpoint()
    cp["channel_values"] = {"messages": ["m"] * n, "count": n}
    cp["channel_versions"] = {"messages": f"{n:032}.1", "count": f"{n:032}.1"}
    return cp


def _sent(counter: RedisCounter, fn: Any) -> int:
    counter.sent.clear()
    fn()
    return len(counter.sent)


def test_put_put_writes_and_latest_get_tuple_are_one_redis_round_trip_each(counted) -> None:
    saver, counter, mongo = counted
    cfg = {"configurable": {"thread_id": "rt", "checkpoint_ns": ""}}
    saver.put(cfg, _checkpoint(1), {"step": -1}, {"messages": f"{1:032}.1", "count": f"{1:032}.1"})
    cp = _checkpoint(2)
    cp["channel_versions"]["messages"] = f"{1:032}.1"  # unchanged channel: older version
    mongo.names.clear()
    assert _sent(counter, lambda: saver.put(cfg, cp, {"step": 0}, {"count": f"{2:032}.1"})) == 1
    saved = {"configurable": {**cfg["configurable"], "checkpoint_id": cp["id"]}}
    assert _sent(counter, lambda: saver.put_writes(saved, [("count", 3), ("x", 1)], "task-1")) == 1
    assert _sent(counter, lambda: saver.get_tuple(cfg)) == 1
    assert saver.last_read_tier == "hot"
    assert mongo.names == []  # write-behind: nothing reached MongoDB on the call path


def test_cold_latest_get_tuple_after_redis_is_emptied(counted, redis_client) -> None:
    saver, counter, mongo = counted
    cfg = {"configurable": {"thread_id": "cold", "checkpoint_ns": ""}}
    cp = _checkpoint(1)
    saved = saver.put(cfg, cp, {"step": -1}, {"messages": f"{1:032}.1", "count": f"{1:032}.1"})
    saver.put_writes(saved, [("count", 3)], "task-1")
    from langgraph_durable.io.drivers import run_sync
    from langgraph_durable.outbox.flusher import consumer_name, flush_batch_plan

    run_sync(flush_batch_plan(saver.context, consumer_name(), block_ms=0, claim=False),
             saver.sync_clients)
    before = saver.get_tuple(cfg)
    drop_key_prefix(redis_client, saver.config.key_prefix)
    mongo.names.clear()
    redis_trips = _sent(counter, lambda: saver.get_tuple(cfg))
    mongo_trips = list(mongo.names)
    after = saver.get_tuple(cfg)
    assert saver.last_read_tier == "durable"
    assert after.checkpoint == before.checkpoint
    assert after.pending_writes == before.pending_writes == [("task-1", "count", 3)]
    # Redis miss (1) + Redis pending writes of the cold checkpoint (1);
    # MongoDB: the checkpoint (1), then its blobs and writes, each joined with the items
    # its list values name (2 aggregates, concurrent): two sequential rounds
    assert redis_trips == 2
    assert mongo_trips == ["find", "aggregate", "aggregate"]


def test_cold_get_tuple_finds_inherited_values_in_the_same_two_rounds(
        counted, redis_client) -> None:
    saver, counter, mongo = counted
    cfg = {"configurable": {"thread_id": "inh", "checkpoint_ns": ""}}
    big = "b" * 5000  # over inline.INLINE_MAX_BYTES: a blobs document
    cp = _checkpoint(1)
    cp["channel_values"].update(user="ada", big=big)
    cp["channel_versions"].update(user=f"{1:032}.1", big=f"{1:032}.1")
    saved = saver.put(cfg, cp, {"step": -1}, dict(cp["channel_versions"]))
    cp2 = _checkpoint(2)  # user and big inherited from the first checkpoint
    cp2["channel_values"].update(user="ada", big=big)
    cp2["channel_versions"].update(user=f"{1:032}.1", big=f"{1:032}.1")
    saved = saver.put(saved, cp2, {"step": 0}, _versions(2))
    saver.put_writes(saved, [("count", 3)], "task-1")
    from langgraph_durable.io.drivers import run_sync
    from langgraph_durable.outbox.flusher import consumer_name, flush_batch_plan

    run_sync(flush_batch_plan(saver.context, consumer_name(), block_ms=0, claim=False),
             saver.sync_clients)
    db, cols = saver.sync_clients.db, saver.context.collections
    assert [d["channel"] for d in db[cols.blobs].find({"thread_id": "inh"})] == ["big"]
    before = saver.get_tuple(cfg)
    drop_key_prefix(redis_client, saver.config.key_prefix)
    mongo.names.clear()
    redis_trips = _sent(counter, lambda: saver.get_tuple(cfg))
    mongo_trips = list(mongo.names)
    after = saver.get_tuple(cfg)
    assert saver.last_read_tier == "durable"
    assert after.checkpoint == before.checkpoint
    assert after.checkpoint["channel_values"] == {"messages": ["m", "m"], "count": 2,
                                                  "user": "ada", "big": big}
    # as before inline values: the checkpoint, then one aggregate for the values (its own,
    # the first checkpoint's inside that document, big's blobs document: $unionWith) and
    # one for the writes, concurrent, each joining the items
    assert redis_trips == 2
    assert mongo_trips == ["find", "aggregate", "aggregate"]


def _versions(n: int) -> dict:
    return {"messages": f"{n:032}.1", "count": f"{n:032}.1"}


def test_a_thread_started_in_redis_is_read_without_mongodb(counted, redis_client) -> None:
    saver, counter, mongo = counted
    cfg = {"configurable": {"thread_id": "new", "checkpoint_ns": ""}}
    first = saver.put(cfg, _checkpoint(1), {"step": -1}, _versions(1))  # LangGraph's input
    saver.put(first, _checkpoint(2), {"step": 0}, _versions(2))
    assert redis_client.hget(saver.context.keys("new").meta, "complete") == b"1"
    mongo.names.clear()
    sub = {"configurable": {"thread_id": "new", "checkpoint_ns": "tool:1"}}
    assert saver.get_tuple(sub) is None  # a subgraph's first read: nothing to ask MongoDB
    assert [t.metadata["step"] for t in saver.list(cfg)] == [0, -1]
    assert saver.get_tuple({"configurable": {**cfg["configurable"],
                                              "checkpoint_id": "nope"}}) is None
    assert mongo.names == []


@pytest.mark.parametrize("how", ["continued", "writes first", "not an input checkpoint"])
def test_a_thread_redis_may_not_hold_whole_asks_mongodb(counted, redis_client, how) -> None:
    saver, counter, mongo = counted
    cfg = {"configurable": {"thread_id": "old", "checkpoint_ns": ""}}
    first = saver.put(cfg, _checkpoint(1), {"step": -1}, _versions(1))
    if how == "continued":  # the hot keys expired; a new run continues from MongoDB
        from langgraph_durable.io.drivers import run_sync
        from langgraph_durable.outbox.flusher import flush_batch_plan

        run_sync(flush_batch_plan(saver.context, "c", block_ms=0, claim=False), saver.sync_clients)
        redis_client.delete(*saver.context.keys("old").all)
        saver.put(first, _checkpoint(2), {"step": 0}, _versions(2))
    elif how == "writes first":  # a retried task's writes reach an expired thread first
        redis_client.delete(*saver.context.keys("old").all)
        saver.put_writes(first, [("count", 1)], "task")
        saver.put(cfg, _checkpoint(3), {"step": -1}, _versions(3))
    else:  # a parentless put that is not LangGraph's input checkpoint (raw API use)
        redis_client.delete(*saver.context.keys("old").all)
        saver.put(cfg, _checkpoint(3), {"step": 4}, _versions(3))
    assert redis_client.hget(saver.context.keys("old").meta, "complete") is None
    mongo.names.clear()
    assert saver.get_tuple({"configurable": {"thread_id": "old", "checkpoint_ns": "x"}}) is None
    assert mongo.names == ["find"]


def test_a_thread_no_tier_holds_is_answered_by_one_redis_round_trip_without_mongodb(
        counted, redis_client) -> None:
    saver, counter, mongo = counted
    registry = saver.context.registry_of("never-seen")
    assert redis_client.hget(registry, "\x00epoch").startswith(b"complete ")
    cfg = {"configurable": {"thread_id": "never-seen", "checkpoint_ns": ""}}
    mongo.names.clear()
    assert _sent(counter, lambda: saver.get_tuple(cfg)) == 1
    assert saver.get_tuple(cfg) is None and saver.last_read_tier == "miss"
    assert saver.get_tuple({"configurable": {**cfg["configurable"],
                                              "checkpoint_id": "nope"}}) is None
    assert list(saver.list(cfg)) == []
    assert list(saver.list({"configurable": {"thread_id": "never-seen"}})) == []
    assert mongo.names == []
    # the registry not complete: a miss asks MongoDB, as before
    redis_client.hset(registry, "\x00epoch", "partial x")
    assert saver.get_tuple(cfg) is None
    assert mongo.names == ["find"]


def test_writes_racing_a_new_threads_first_put_still_leave_it_read_without_mongodb(
        counted, redis_client) -> None:
    # LangGraph sends a step's put_writes concurrently with its put: the writes may land
    # first and make the thread's meta; the complete registry still tells it is new
    saver, counter, mongo = counted
    cfg = {"configurable": {"thread_id": "raced", "checkpoint_ns": ""}}
    cp = _checkpoint(1)
    saver.put_writes({"configurable": {**cfg["configurable"], "checkpoint_id": cp["id"]}},
                     [("count", 1)], "task")
    saver.put(cfg, cp, {"step": -1}, _versions(1))
    assert redis_client.hget(saver.context.keys("raced").meta, "complete") == b"1"
    mongo.names.clear()
    assert saver.get_tuple({"configurable": {"thread_id": "raced", "checkpoint_ns": "x"}}) is None
    assert [t.metadata["step"] for t in saver.list(cfg)] == [-1]
    assert saver.get_tuple(cfg).pending_writes == [("task", "count", 1)]


@pytest.mark.parametrize("lost", ["hot keys expired", "a new Redis"])
def test_a_write_redis_cannot_answer_for_asks_mongodb_once_per_thread(
    counted, redis_client, lost
) -> None:
    """Redis neither holds the parent nor a tombstone of it, nor every tombstone of the
    thread: the UNKNOWN reply, one concurrent MongoDB round (the checkpoint and the
    thread's tombstones), loading those into Redis, the put again: 3 Redis round trips.
    Then Redis answers alone: a put naming a checkpoint it holds, and a task's writes
    reaching a checkpoint before its put (``durability="async"``), are one round trip
    each and ask MongoDB nothing."""
    from langgraph_durable.io.drivers import run_sync
    from langgraph_durable.outbox.flusher import flush_batch_plan

    saver, counter, mongo = counted
    cfg = {"configurable": {"thread_id": "cold", "checkpoint_ns": ""}}
    first = saver.put(cfg, _checkpoint(1), {"step": -1}, _versions(1))
    run_sync(flush_batch_plan(saver.context, "c", block_ms=0, claim=False), saver.sync_clients)
    if lost == "a new Redis":
        drop_key_prefix(redis_client, saver.config.key_prefix)
    else:
        # its keys expired, and its tombstones' hash too (it expires on its own)
        redis_client.delete(*saver.context.keys("cold").all, saver.context.keys("cold").gone)
    mongo.names.clear()
    second: dict = {}
    assert _sent(counter, lambda: second.update(
        saver.put(first, _checkpoint(2), {"step": 0}, _versions(2)))) == 3
    assert mongo.names == ["find", "find"]
    mongo.names.clear()
    assert _sent(counter, lambda: saver.put_writes(second, [("count", 1)], "task")) == 1
    early = {"configurable": {**cfg["configurable"], "checkpoint_id": "1ef-not-put-yet"}}
    assert _sent(counter, lambda: saver.put_writes(early, [("count", 2)], "task")) == 1
    assert _sent(counter, lambda: saver.put(second, _checkpoint(3), {"step": 1},
                                            _versions(3))) == 1
    assert mongo.names == []
