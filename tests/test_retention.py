"""Retention (prune keep_last / older_than_s, both tiers, DeltaChannel-safe) and
list_threads (both tiers merged, paged, sync and async)."""

from __future__ import annotations

import datetime
import time
import uuid
from typing import Any

import pytest
import redis
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver

from langgraph_durable import DurableSaver, ThreadInfo
from langgraph_durable.core.records import checkpoint_time_s
from langgraph_durable.durable.inline import split_key

from .graphs import CONFIG, THREAD, build_delta, delta_script
from .test_graph_equivalence import Run

DAY = 86400.0


def uuid6_at(unix_s: float, seq: int = 0) -> str:
    """A uuid6 checkpoint id whose time is ``unix_s`` (as LangGraph's ``uuid6`` makes)."""
    ticks = int(unix_s * 1e7) + 0x01B21DD213814000
    n = ((ticks >> 12) & 0xFFFFFFFFFFFF) << 80 | (ticks & 0x0FFF) << 64
    n |= (seq & 0x3FFF) << 48 | 0x1234
    n = (n & ~(0xF000 << 64)) | 6 << 76  # version 6
    n = (n & ~(0xC000 << 48)) | 0x8000 << 48  # RFC 4122 variant
    return str(uuid.UUID(int=n))


def put_chain(saver: DurableSaver, thread: str, ids: list[str], ns: str = "") -> None:
    """Checkpoints ``ids`` (oldest first) of ``thread``, each with a new value of channel
    ``v`` and one pending write."""
    cfg: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": ns}}
    for i, cid in enumerate(ids):
        cp = empty_checkpoint()
        cp["id"] = cid
        cp["channel_values"] = {"v": i}
        cp["channel_versions"] = {"v": f"{i + 1:032}.0"}
        cfg = saver.put(cfg, cp, {"step": i}, {"v": f"{i + 1:032}.0"})
        saver.put_writes(cfg, [("v", i + 1)], f"task-{i}")


def stored(saver: DurableSaver, thread: str) -> dict[str, Any]:
    """What each tier holds of ``thread``: MongoDB documents per collection, Redis members."""
    db, r = saver.sync_clients.db, saver.sync_clients.redis
    cols, keys = saver.context.collections, saver.context.keys(thread)
    q = {"thread_id": thread}
    return {
        "checkpoints": sorted(d["checkpoint_id"] for d in db[cols.checkpoints].find(q)),
        "writes": sorted(d["checkpoint_id"] for d in db[cols.writes].find(q)),
        # stored values: blobs documents and those inside checkpoints (durable/inline.py)
        "blobs": sorted([int(d["version"].split(".")[0]) for d in db[cols.blobs].find(q)]
                        + [int(split_key(e["k"])[1].split(".")[0])
                           for d in db[cols.checkpoints].find(q) for e in d.get("vals", [])]),
        "redis": sorted(m.split(b"\x00")[1].decode() for m in r.zrange(keys.idx, 0, -1)),
        "redis_blobs": r.hlen(keys.bl),
    }


def test_checkpoint_time_is_read_from_the_uuid6_id() -> None:
    when = datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc).timestamp()
    assert checkpoint_time_s(uuid6_at(when)) == pytest.approx(when, abs=1e-6)
    assert checkpoint_time_s(str(uuid.uuid4())) is None
    assert checkpoint_time_s("my-own-id") is None


def test_prune_keep_last_keeps_the_newest_n_in_both_tiers(saver: DurableSaver) -> None:
    now = time.time()
    ids = [uuid6_at(now - 100 + i) for i in range(10)]
    put_chain(saver, "k", ids)
    saver.prune(["k"], keep_last=3)
    left = stored(saver, "k")
    assert left["checkpoints"] == left["writes"] == left["redis"] == ids[7:]
    assert left["blobs"] == [8, 9, 10]  # the values the kept checkpoints refer to
    assert left["redis_blobs"] == 3
    got = [t.config["configurable"]["checkpoint_id"]
           for t in saver.list({"configurable": {"thread_id": "k"}})]
    assert got == ids[:6:-1]
    assert saver.get_tuple({"configurable": {"thread_id": "k"}}).checkpoint[  # type: ignore[union-attr]
        "channel_values"] == {"v": 9}


def test_prune_older_than_keeps_young_checkpoints_and_always_the_newest(
        saver: DurableSaver) -> None:
    now = time.time()
    old = [uuid6_at(now - 40 * DAY + i) for i in range(4)]
    young = [uuid6_at(now - 2 * DAY + i) for i in range(2)]
    put_chain(saver, "mixed", old + young)
    put_chain(saver, "stale", old)
    saver.prune(["mixed", "stale"], older_than_s=30 * DAY)
    assert stored(saver, "mixed")["checkpoints"] == young
    assert stored(saver, "stale")["checkpoints"] == old[-1:]  # the newest stays
    assert stored(saver, "stale")["redis"] == old[-1:]
    # keep_last and older_than_s keep the union of both
    put_chain(saver, "both", old + young)
    saver.prune(["both"], keep_last=3, older_than_s=30 * DAY)
    assert stored(saver, "both")["checkpoints"] == old[-1:] + young


def test_prune_older_than_never_drops_a_checkpoint_whose_id_has_no_time(
        saver: DurableSaver) -> None:
    put_chain(saver, "custom", ["a-1", "a-2", "a-3"])
    saver.prune(["custom"], older_than_s=0)
    assert stored(saver, "custom")["checkpoints"] == ["a-1", "a-2", "a-3"]


def test_prune_delete_older_than_removes_only_inactive_threads(saver: DurableSaver) -> None:
    now = time.time()
    put_chain(saver, "idle", [uuid6_at(now - 40 * DAY + i) for i in range(3)])
    put_chain(saver, "busy", [uuid6_at(now - 40 * DAY), uuid6_at(now - 60)])
    saver.prune(["idle", "busy", "never-existed"], strategy="delete", older_than_s=30 * DAY)
    assert stored(saver, "idle") == {"checkpoints": [], "writes": [], "blobs": [],
                                     "redis": [], "redis_blobs": 0}
    assert len(stored(saver, "busy")["checkpoints"]) == 2


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"strategy": "newest"}, "prune strategy must be 'keep_latest' or 'delete', got 'newest'"),
    ({"keep_last": 0}, "prune keep_last must be an int >= 1, got 0"),
    ({"keep_last": 2, "strategy": "delete"},
     "prune keep_last applies to strategy 'keep_latest', not 'delete'"),
    ({"older_than_s": -1}, "prune older_than_s must be seconds >= 0, got -1"),
])
def test_prune_refuses_bad_options_before_touching_anything(
        saver: DurableSaver, kwargs: dict[str, Any], message: str) -> None:
    put_chain(saver, "safe", [uuid6_at(time.time() - 5 + i) for i in range(3)])
    with pytest.raises(ValueError) as err:
        saver.prune(["safe"], **kwargs)
    assert str(err.value) == message
    saver.flush()
    assert len(stored(saver, "safe")["checkpoints"]) == 3


@pytest.mark.parametrize("keep_last", [2, 4])
def test_every_checkpoint_kept_by_keep_last_rebuilds_its_delta_channel(
        keep_last: int, saver: DurableSaver, redis_client: redis.Redis) -> None:
    memory = Run(build_delta, InMemorySaver())
    durable = Run(build_delta, saver, redis_client)
    memory.play(delta_script)
    durable.play(delta_script)
    saver.prune([THREAD], keep_last=keep_last)
    durable.cold()  # read back from MongoDB alone
    expected = {s.metadata["step"]: s.values for s in memory.graph.get_state_history(CONFIG)}
    history = list(durable.graph.get_state_history(CONFIG))
    steps = [s.metadata["step"] for s in history]
    assert steps[:keep_last] == [17, 16, 15, 14][:keep_last]
    assert len(steps) < len(expected)  # something was dropped
    for s in history:  # the heads and every ancestor kept for them read as before
        assert s.values == expected[s.metadata["step"]], s.metadata["step"]


async def test_aprune_keep_last(asaver: DurableSaver) -> None:
    cfg: Any = {"configurable": {"thread_id": "ak", "checkpoint_ns": ""}}
    for i in range(5):
        cp = empty_checkpoint()
        cp["id"] = uuid6_at(time.time() - 10 + i)
        cfg = await asaver.aput(cfg, cp, {"step": i}, {})
    await asaver.aprune(["ak"], keep_last=2)
    got = [t.metadata["step"] async for t in asaver.alist({"configurable": {"thread_id": "ak"}})]
    assert got == [4, 3]


# ------------------------------------------------------------------ list_threads


def test_list_threads_merges_both_tiers_counts_each_checkpoint_once_and_pages(
        redis_url: str, mongo_url: str) -> None:
    from langgraph_durable.testing import unique_options

    opts = unique_options()
    now = time.time()
    a_ids = [uuid6_at(now - 50 + i) for i in range(5)]
    with DurableSaver.from_urls(redis_url, mongo_url, **opts) as s:
        put_chain(s, "a", a_ids[:3])  # flushed, still in Redis too
        put_chain(s, "a", [uuid6_at(now - 49.5)], ns="sub:1")
        put_chain(s, "b", [uuid6_at(now - 20)])  # MongoDB only
        s.flush()
        s.sync_clients.redis.delete(*s.context.keys("b").all)
    with DurableSaver.from_urls(redis_url, mongo_url, flusher="off", **opts) as s:
        cfg: Any = {"configurable": {"thread_id": "a", "checkpoint_ns": "",
                                     "checkpoint_id": a_ids[2]}}
        for cid in a_ids[3:]:  # Redis only (not flushed)
            cp = empty_checkpoint()
            cp["id"] = cid
            cfg = s.put(cfg, cp, {"step": 9}, {})
        put_chain(s, "c", ["custom-1", "custom-2"])  # Redis only, ids without a time
        first = s.list_threads(limit=2)
        assert [t.thread_id for t in first.threads] == ["a", "b"]
        assert first.next_cursor == "b"
        a, b = first.threads
        assert a == ThreadInfo("a", 6, a_ids[4], datetime.datetime.fromtimestamp(
            checkpoint_time_s(a_ids[4]), tz=datetime.timezone.utc), True, True)  # type: ignore[arg-type]
        assert (b.checkpoints, b.in_redis, b.in_mongodb) == (1, False, True)
        assert abs(b.last_activity.timestamp() - (now - 20)) < 1e-3  # type: ignore[union-attr]
        last = s.list_threads(limit=2, cursor=first.next_cursor)
        assert last.next_cursor is None
        assert last.threads == [ThreadInfo("c", 2, "custom-2", None, True, False)]
        assert s.list_threads().threads == [a, b, *last.threads]
        assert s.list_threads(cursor="c").threads == []
        with pytest.raises(ValueError, match="limit must be an int >= 1, got 0"):
            s.list_threads(limit=0)


async def test_alist_threads(asaver: DurableSaver) -> None:
    cfg: Any = {"configurable": {"thread_id": "x", "checkpoint_ns": ""}}
    for _ in range(3):
        cfg = await asaver.aput(cfg, empty_checkpoint(), {}, {})
    page = await asaver.alist_threads(limit=10)
    assert [(t.thread_id, t.checkpoints, t.in_redis) for t in page.threads] == [("x", 3, True)]
    assert page.next_cursor is None
