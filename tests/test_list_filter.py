"""``list(filter=...)`` gives InMemorySaver's answer whichever tier serves the thread.

InMemorySaver keeps a checkpoint when ``filter_value == metadata.get(key)`` for every
filter pair, on the decoded metadata: a missing key reads as ``None``, ``True == 1 == 1.0``,
``1 == 1.0``. MongoDB's own equality differs (booleans are not numbers, a missing field is
not null), so its server-side narrowing may only drop what Python's equality drops. Every
JSON scalar kind and containers are tried against InMemorySaver: hot (Redis), cold
(MongoDB alone), split (older checkpoints in MongoDB only, newer in Redis), sync and
async, with a thread's config and with ``config=None``.
"""

from __future__ import annotations

from typing import Any

import pytest
import redis
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver

from langgraph_durable import DurableSaver
from langgraph_durable.testing import unique_options

METADATA: list[dict[str, Any]] = [
    {"step": 1, "flag": True, "x": 1.0, "n": None, "source": "loop"},
    {"step": 2, "flag": 1, "x": 1, "source": "loop", "tags": ["a", 1], "obj": {"k": 1}},
    {"step": 3, "source": "input", "x": 0, "flag": False, "big": 2**64 - 1, "note": "n" * 2000},
    {"step": 4, "x": 0.0, "flag": 0.0, "s": "", "obj": {"k": 2}, "tags": []},
    {"step": 5, "x": -0.0, "flag": "True", "s": "1", "nan": float("nan"), "big": 2**63},
    {"step": 6, "source": None, "x": 2**53, "flag": 1.5, "uni": "é\u00e9"},
]
"""Six checkpoints of one thread, covering every scalar kind Python and MongoDB compare
differently, plus containers, a long string and ints beyond int64."""

FILTERS: list[dict[str, Any]] = [
    {"n": None}, {"user": None}, {"source": None}, {"flag": True}, {"flag": False},
    {"flag": 1}, {"flag": 1.0}, {"flag": 0}, {"flag": 0.0}, {"flag": "True"}, {"flag": 1.5},
    {"step": True}, {"step": 1.0}, {"step": 2}, {"x": 1}, {"x": 1.0}, {"x": True},
    {"x": 0}, {"x": False}, {"x": -0.0}, {"x": 2**53}, {"x": float(2**53)},
    {"x": 2**53 + 1}, {"big": 2**64 - 1}, {"big": float(2**64)}, {"big": 2**63},
    {"big": float(2**63)},
    {"note": "n" * 2000}, {"note": "n"}, {"s": ""}, {"s": "1"}, {"s": 1}, {"uni": "éé"},
    {"nan": float("nan")}, {"tags": ["a", 1]}, {"tags": []}, {"obj": {"k": 1}},
    {"obj": None}, {"source": "loop", "n": None}, {"source": "loop", "flag": True},
    {"source": "input", "x": False}, {"missing": 0}, {"missing": ""}, {}, {"$where": 1},
    {"a.b": None},
]
"""Filters with the steps InMemorySaver returns for them (compared, not assumed)."""

CFG = {"configurable": {"thread_id": "f", "checkpoint_ns": ""}}


def _store(saver: Any, metadata: list[dict[str, Any]], parent: dict | None = None) -> dict:
    cfg = parent or CFG
    for md in metadata:
        cp = empty_checkpoint()
        cfg = saver.put(cfg, cp, md, {})
    return cfg


def _steps(saver: Any, config: dict | None, flt: dict[str, Any]) -> list[int]:
    return [t.metadata["step"] for t in saver.list(config, filter=flt)
            if t.config["configurable"]["thread_id"] == "f"]


async def _asteps(saver: Any, config: dict | None, flt: dict[str, Any]) -> list[int]:
    return [t.metadata["step"] async for t in saver.alist(config, filter=flt)
            if t.config["configurable"]["thread_id"] == "f"]


def _forget_hot(redis_client: redis.Redis, saver: DurableSaver) -> None:
    """Flush to MongoDB, then delete this saver's Redis keys (only its own prefix)."""
    saver.flush()
    keys = list(redis_client.scan_iter(match="{" + saver.config.key_prefix + ":*"))
    if keys:
        redis_client.delete(*keys)


def _store_in(tier: str, saver: DurableSaver, redis_client: redis.Redis) -> None:
    """``METADATA`` stored so that ``tier`` serves it: ``hot`` (Redis), ``cold`` (MongoDB
    alone) or ``split`` (steps 1-3 in MongoDB only, 4-6 in Redis)."""
    if tier == "split":
        head = _store(saver, METADATA[:3])
        _forget_hot(redis_client, saver)
        _store(saver, METADATA[3:], head)
    else:
        _store(saver, METADATA)
    if tier == "cold":
        _forget_hot(redis_client, saver)


@pytest.fixture
def reference() -> dict[str, list[int]]:
    """InMemorySaver's answer per filter (by ``repr``), root namespace and ``config=None``."""
    mem = InMemorySaver()
    _store(mem, METADATA)
    return {repr(f): _steps(mem, CFG, f) for f in FILTERS}


def test_reference_answers_are_the_ones_the_issue_names(reference) -> None:
    assert reference[repr({"n": None})] == [6, 5, 4, 3, 2, 1]
    assert reference[repr({"user": None})] == [6, 5, 4, 3, 2, 1]
    assert reference[repr({"flag": True})] == [2, 1]
    assert reference[repr({"flag": 1})] == [2, 1]
    assert reference[repr({"flag": 1.0})] == [2, 1]
    assert reference[repr({"step": True})] == [1]
    assert reference[repr({"source": "loop", "n": None})] == [2, 1]
    assert reference[repr({"x": False})] == [5, 4, 3]
    assert reference[repr({"big": float(2**63)})] == [5]
    assert reference[repr({"nan": float("nan")})] == []


@pytest.mark.parametrize("tier", ["hot", "cold", "split"])
def test_list_filter_equals_in_memory_saver_in_every_tier(
    tier: str, redis_url: str, mongo_url: str, redis_client: redis.Redis, reference
) -> None:
    with DurableSaver.from_urls(redis_url, mongo_url, **unique_options()) as saver:
        _store_in(tier, saver, redis_client)
        for flt in FILTERS:
            assert _steps(saver, CFG, flt) == reference[repr(flt)], flt
            assert _steps(saver, None, flt) == reference[repr(flt)], flt


@pytest.mark.parametrize("tier", ["hot", "cold", "split"])
async def test_alist_filter_equals_in_memory_saver_in_every_tier(
    tier: str, redis_url: str, mongo_url: str, redis_client: redis.Redis, reference
) -> None:
    async with DurableSaver.from_urls(redis_url, mongo_url, **unique_options()) as saver:
        _store_in(tier, saver, redis_client)
        for flt in FILTERS:
            assert await _asteps(saver, CFG, flt) == reference[repr(flt)], flt
            assert await _asteps(saver, None, flt) == reference[repr(flt)], flt


def test_filter_with_limit_pages_through_mongodb_like_in_memory_saver(
    redis_url: str, mongo_url: str, redis_client: redis.Redis
) -> None:
    """150 checkpoints (more than a page) alternating ``flag`` True / 1 / 0: a filter that
    MongoDB alone would narrow wrongly, with ``limit`` and ``before``, served cold."""
    md = [{"step": i, "flag": [True, 1, 0][i % 3]} for i in range(150)]
    mem = InMemorySaver()
    _store(mem, md)
    with DurableSaver.from_urls(redis_url, mongo_url, **unique_options()) as saver:
        _store(saver, md)
        _forget_hot(redis_client, saver)
        for flt, limit in (({"flag": True}, None), ({"flag": 1}, 70), ({"flag": 0}, 7)):
            got = [t.metadata["step"] for t in saver.list(CFG, filter=flt, limit=limit)]
            want = [t.metadata["step"] for t in mem.list(CFG, filter=flt, limit=limit)]
            assert got == want
        assert len(list(saver.list(CFG, filter={"flag": 1.0}))) == 100
