"""get_delta_channel_history served from storage equals InMemorySaver's, whether the chain
is in Redis, in MongoDB only, or split between them, for chains longer than one batch."""

from __future__ import annotations

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver

from langgraph_durable.plans import delta as delta_module
from langgraph_durable.testing import drop_key_prefix

CHANNELS = ["a", "b", "c"]


def build(savers, n: int, snapshot_every: dict[str, int], on_step=None) -> dict:
    """n checkpoints in a line; channel ch gets a stored value every snapshot_every[ch]
    steps and an empty blob otherwise; two writes per step on a and b."""
    cfgs = [{"configurable": {"thread_id": "d", "checkpoint_ns": ""}} for _ in savers]
    versions: dict[str, str] = {}
    for i in range(n):
        cp = empty_checkpoint()
        new = {}
        values = {}
        for ch in CHANNELS:
            if i % snapshot_every[ch] == 0 or i % 5 == 1:
                versions[ch] = f"{i + 1:032}.{ch}"
                new[ch] = versions[ch]
                if i % snapshot_every[ch] == 0:
                    values[ch] = f"{ch}-snapshot-{i}"
        cp["channel_versions"] = dict(versions)
        cp["channel_values"] = values
        for k, s in enumerate(savers):
            cfgs[k] = s.put(cfgs[k], {**cp, "id": cp["id"]}, {"step": i}, new)
            s.put_writes(cfgs[k], [("a", f"a{i}"), ("b", f"b{i}")], f"task-{i % 3}",
                         task_path=f"~{i % 2}")
            s.put_writes(cfgs[k], [("a", f"a{i}-x")], f"task-{(i + 1) % 3}")
        if on_step:
            on_step(i)
    return cfgs[0]


def compare(mem: InMemorySaver, saver, cfg: dict, channels=CHANNELS) -> None:
    expected = mem.get_delta_channel_history(config=cfg, channels=channels)
    assert saver.get_delta_channel_history(config=cfg, channels=channels) == expected
    latest = {"configurable": {"thread_id": "d", "checkpoint_ns": ""}}
    assert saver.get_delta_channel_history(config=latest, channels=channels) == \
        mem.get_delta_channel_history(config=latest, channels=channels)


def test_chain_in_redis(saver) -> None:
    mem = InMemorySaver()
    cfg = build([mem, saver], 40, {"a": 7, "b": 13, "c": 100})
    compare(mem, saver, cfg)
    assert saver.get_delta_channel_history(config=cfg, channels=[]) == {}


def test_chain_in_mongodb_only(saver, redis_client) -> None:
    mem = InMemorySaver()
    cfg = build([mem, saver], 150, {"a": 9, "b": 70, "c": 1000})
    saver.flush()
    drop_key_prefix(redis_client, saver.config.key_prefix)  # Redis lost: MongoDB only
    compare(mem, saver, cfg)


def test_chain_split_between_tiers_with_seed_blobs_only_in_mongodb(saver, redis_client) -> None:
    mem = InMemorySaver()

    def empty_redis_at(i: int) -> None:
        if i == 30:
            saver.flush()
            drop_key_prefix(redis_client, saver.config.key_prefix)

    cfg = build([mem, saver], 60, {"a": 11, "b": 45, "c": 1000}, on_step=empty_redis_at)
    compare(mem, saver, cfg)


def test_chain_longer_than_one_redis_walk(saver, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(delta_module, "REDIS_STEPS", 8)
    monkeypatch.setattr(delta_module, "MONGO_BATCH", 5)
    mem = InMemorySaver()
    cfg = build([mem, saver], 50, {"a": 1000, "b": 17, "c": 1000})
    compare(mem, saver, cfg)
