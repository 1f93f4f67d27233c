"""Scenario 4 (short form): Redis hung or dead fails fast; Redis SIGKILLed with AOF loses
nothing acknowledged; Redis emptied after a flush answers every read from MongoDB."""

from __future__ import annotations

import random

import pytest

from faults import s4_redis_down

from .faultkit import make_env


@pytest.fixture
def env(redis_url, mongo_url, tmp_path):
    return make_env(redis_url, mongo_url, tmp_path)


def test_redis_hung_or_dead_fails_fast_with_tier_unavailable(env) -> None:
    rec = s4_redis_down.fail_fast(env)
    assert rec["calls"] == 14
    assert rec["wrong"] == []  # every call: TierUnavailableError naming host:port
    assert rec["slow"] == []  # each within 3 x socket_timeout_s
    assert rec["max_s"] < 3 * s4_redis_down.TIMEOUT_S


@pytest.mark.parametrize("fsync", ["everysec", "always"])
def test_redis_sigkill_with_aof_loses_nothing_acknowledged(env, fsync) -> None:
    rng = random.Random(4 if fsync == "always" else 5)
    rec = s4_redis_down.aof_crash(env, rng, fsync)
    assert rec["acked"] > 0
    if fsync == "always":
        assert rec["lost"] == 0, rec  # every acknowledged checkpoint back after the restart
    else:
        # everysec: Redis postpones the AOF write while a slow fsync runs (up to 2 s; seen
        # under CI's disk load), so a SIGKILL may lose the newest acknowledged writes only
        assert rec["lost_only_newest"], rec
    assert rec["not_in_mongo"] == rec["lost"], rec  # the rest in MongoDB after a flush
    assert rec["mismatch"] == 0, rec  # resumed to InMemorySaver's final state


def test_redis_emptied_after_a_flush_every_read_equals_the_previous_answer(env) -> None:
    rec = s4_redis_down.emptied(env)
    assert rec["reads"] > 50
    assert rec["mismatches"] == 0
    assert rec["tier"] == "durable"
    assert rec["resume_mismatch"] == 0


def test_store_items_after_redis_lost_its_data_twice(env) -> None:
    # flushed, the store's Redis keys deleted: every acknowledged put read back from
    # MongoDB alone, no acknowledged delete undone; then every item flipped (live ones
    # deleted, deleted ones put again) where only MongoDB knew them, and lost again
    rec = s4_redis_down.store_faults.redis_lost(env)
    assert rec["puts"] > 30 and rec["deletes"] > 20
    assert (rec["lost"], rec["back"], rec["stray"], rec["search_differs"]) == ([], [], [], 0)


def test_store_items_survive_a_sigkill_of_redis_with_aof(env) -> None:
    # appendfsync always, no flusher: every acknowledged put and delete is back after the
    # restart, then in MongoDB after a drain, and read from MongoDB alone
    rec = s4_redis_down.store_faults.redis_killed(env, seed=5)
    assert rec["killed_mid_run"] and rec["puts"] + rec["deletes"] > 5, rec
    assert (rec["lost"], rec["back"], rec["stray"], rec["search_differs"]) == ([], [], [], 0)
