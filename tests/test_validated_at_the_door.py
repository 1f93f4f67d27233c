"""What the stores cannot hold is refused at the door: a NUL in any identifier (thread_id,
checkpoint_ns, checkpoint_id, the parent checkpoint_id, task_id, task_path, a channel) or
in a channel version, and a channel version of a type LangGraph never makes, raise
``InvalidIdentifierError`` naming the thread and what was wrong, and nothing is stored:
no checkpoint, no write, no outbox entry, nothing for the flusher to dead-letter.

(Before, a NUL in a channel version was taken by Redis and served, and the flusher could
not split its field: the acknowledged put was dead-lettered and lost from MongoDB.)"""

from __future__ import annotations

from typing import Any

import pytest
import redis
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from langgraph_durable import DurableSaver, InvalidIdentifierError, effects
from langgraph_durable.outbox.group import dead_letter_key

ROOT = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}


def _checkpoint(versions: dict[Any, Any], value: object = 1) -> dict[str, Any]:
    cp: dict[str, Any] = dict(empty_checkpoint())
    cp["channel_values"] = {ch: value for ch in versions}
    cp["channel_versions"] = dict(versions)
    return cp


def _what_is_stored(saver: DurableSaver, redis_client: redis.Redis) -> dict[str, Any]:
    """Everything both tiers hold of thread "t", after a flush."""
    saver.flush()
    db, cols = saver.sync_clients.db, saver.context.collections
    keys = saver.context.keys("t")
    return {
        "checkpoints": sorted(d["_id"] for d in db[cols.checkpoints].find({"thread_id": "t"})),
        "blobs": sorted(d["_id"] for d in db[cols.blobs].find({"thread_id": "t"})),
        "writes": sorted(d["_id"] for d in db[cols.writes].find({"thread_id": "t"})),
        "redis blobs": sorted(redis_client.hkeys(keys.bl)),
        "redis writes": sorted(redis_client.hkeys(keys.w)),
        "redis checkpoints": sorted(redis_client.zrange(keys.idx, 0, -1)),
        "dead letters": redis_client.xlen(dead_letter_key(saver.context)),
    }


def test_put_refuses_what_the_key_layout_cannot_hold_and_stores_nothing(
        saver: DurableSaver, redis_client: redis.Redis) -> None:
    # the versions LangGraph makes are taken: str (ours, InMemorySaver's), int
    # (BaseCheckpointSaver.get_next_version) and float
    cfg: dict = {"configurable": {"thread_id": "other"}}
    for step, version in enumerate([saver.get_next_version(None, None), 2, 3.5]):
        cfg = saver.put(cfg, _checkpoint({"v": version}, step), {"step": step},
                        {"v": version})
        got = saver.get_tuple(cfg)
        assert got is not None and got.checkpoint["channel_values"] == {"v": step}
        assert got.checkpoint["channel_versions"] == {"v": version}

    v1 = f"{1:032}.0"
    first = saver.put(ROOT, _checkpoint({"v": v1}), {"step": 0}, {"v": v1})
    before = _what_is_stored(saver, redis_client)
    assert len(before["checkpoints"]) == 1 and before["dead letters"] == 0

    child = {"configurable": {**first["configurable"]}}
    cases: list[tuple[dict, dict, dict, str]] = [
        # (config, channel_versions, new_versions, message)
        (child, {"v": "2\x00x"}, {"v": "2\x00x"},
         r"the version of channel 'v' of thread 't' contains a NUL character: '2\\x00x'"),
        (child, {"v": None}, {"v": None},
         r"the version of channel 'v' of thread 't' must be a str, int or float \(as "
         r"get_next_version makes it\), got NoneType"),
        (child, {"v": (2, 0)}, {"v": (2, 0)}, "must be a str, int or float .* got tuple"),
        (child, {"v": True}, {"v": True}, "must be a str, int or float .* got bool"),
        (child, {"v": b"2"}, {"v": b"2"}, "must be a str, int or float .* got bytes"),
        (child, {"v": "2\udcff"}, {"v": "2\udcff"},
         r"the version of channel 'v' of thread 't' is not valid UTF-8"),
        # a channel of channel_versions that did not change this step
        (child, {"v": v1, "w\x00x": v1}, {}, "channel of thread 't' contains a NUL"),
        (child, {"v": "2", "w": None}, {"v": "2"}, "channel 'w' .* got NoneType"),
        (child, {"v\x00": "2"}, {"v\x00": "2"}, "channel of thread 't' contains a NUL"),
        ({"configurable": {"thread_id": "t", "checkpoint_ns": "",
                           "checkpoint_id": "p\x00q"}}, {"v": "2"}, {"v": "2"},
         "parent checkpoint_id of thread 't' contains a NUL character"),
        ({"configurable": {"thread_id": "t", "checkpoint_ns": "",
                           "checkpoint_id": ["p"]}}, {"v": "2"}, {"v": "2"},
         "parent checkpoint_id must be a str, int or UUID, got list"),
        ({"configurable": {"thread_id": "t", "checkpoint_ns": "a\x00b"}}, {"v": "2"},
         {"v": "2"}, "checkpoint_ns of thread 't' contains a NUL character"),
        ({"configurable": {"thread_id": "t\x00"}}, {"v": "2"}, {"v": "2"},
         "thread_id contains a NUL character"),
    ]
    for config, versions, new_versions, message in cases:
        with pytest.raises(InvalidIdentifierError, match=message):
            saver.put(config, _checkpoint(versions, 2), {"step": 1}, new_versions)
    bad_id = _checkpoint({"v": "2"}, 2)
    bad_id["id"] = "c\x00d"
    with pytest.raises(InvalidIdentifierError,
                       match="checkpoint_id of thread 't' contains a NUL character"):
        saver.put(child, bad_id, {"step": 1}, {"v": "2"})

    assert _what_is_stored(saver, redis_client) == before
    assert saver.get_tuple(ROOT).config == first  # type: ignore[union-attr]


async def test_aput_refuses_a_nul_in_a_channel_version(
        asaver: DurableSaver, redis_client: redis.Redis) -> None:
    with pytest.raises(InvalidIdentifierError, match="version of channel 'v' of thread 't' "
                                                     "contains a NUL"):
        await asaver.aput(ROOT, _checkpoint({"v": "1\x00"}), {"step": 0}, {"v": "1\x00"})
    assert await asaver.aget_tuple(ROOT) is None
    await asaver.aflush()
    assert redis_client.xlen(dead_letter_key(asaver.context)) == 0


def test_put_writes_refuses_what_the_key_layout_cannot_hold_and_stores_nothing(
        saver: DurableSaver, redis_client: redis.Redis) -> None:
    cfg = saver.put(ROOT, _checkpoint({"v": "1"}), {"step": 0}, {"v": "1"})
    saver.put_writes(cfg, [("v", 5)], "task-ok", "~path")
    before = _what_is_stored(saver, redis_client)
    assert len(before["writes"]) == 1

    cases: list[tuple[dict, list, str, Any, str]] = [
        # (config, writes, task_id, task_path, message)
        (cfg, [("v", 6)], "task", "~a\x00b", "task_path of thread 't' contains a NUL"),
        (cfg, [("v", 6)], "task", ["~a"], "task_path must be a str, int or UUID, got list"),
        (cfg, [(None, 6)], "task", "", "channel must be a str, int or UUID, got NoneType"),
        (cfg, [("v", 6)], "ta\x00sk", "", "task_id of thread 't' contains a NUL"),
        ({"configurable": {**cfg["configurable"], "checkpoint_id": "c\x00"}}, [("v", 6)],
         "task", "", "checkpoint_id of thread 't' contains a NUL"),
    ]
    for config, writes, task_id, task_path, message in cases:
        with pytest.raises(InvalidIdentifierError, match=message):
            saver.put_writes(config, writes, task_id, task_path)

    assert _what_is_stored(saver, redis_client) == before
    got = saver.get_tuple(cfg)
    assert got is not None and got.pending_writes == [("task-ok", "v", 5)]


def test_once_refuses_a_task_namespace_with_a_nul_before_calling_the_effect(
        saver: DurableSaver, redis_client: redis.Redis) -> None:
    """A node name holding a NUL makes the task's checkpoint_ns, which the journal's field
    holds (``task_ns NUL task_id NUL name NUL n``): refused before ``fn`` is called
    (with ``durability="exit"`` no put comes before the node; before, the effect ran and
    its journal entries were dead-lettered by the flusher)."""
    calls: list[int] = []

    class S(TypedDict, total=False):
        n: int

    def pay(state: S) -> dict[str, Any]:
        return {"n": effects.once("pay", lambda: calls.append(1) or 5)}

    g = StateGraph(S)
    g.add_node("pay\x00x", pay)
    g.add_edge(START, "pay\x00x")
    g.add_edge("pay\x00x", END)
    with pytest.raises(InvalidIdentifierError,
                       match=r"checkpoint_ns of thread 't' contains a NUL character: "
                             r"'pay\\x00x:"):
        g.compile(checkpointer=saver).invoke({"n": 0}, {"configurable": {"thread_id": "t"}},
                                             durability="exit")
    assert calls == []
    saver.flush()
    assert redis_client.xlen(dead_letter_key(saver.context)) == 0
    assert redis_client.hlen(saver.context.keys("t").fx) == 0
