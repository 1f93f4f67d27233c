"""Scenario 11 (short form): the retention sweep's worker SIGKILLed mid-sweep leaves every
thread whole or gone; the next worker finishes; pinned, unanswered-interrupt and live
threads, the memory store and another key prefix stay as they were."""

from __future__ import annotations

import random

from faults import s11_retention

from .faultkit import make_env


def test_a_sweeper_killed_mid_sweep_leaves_threads_whole_or_gone(
        redis_url, mongo_url, tmp_path) -> None:
    env = make_env(redis_url, mongo_url, tmp_path)
    rec = s11_retention.trial(env, 0, random.Random(11), expired=16, pinned=2, asking=2,
                              live=3)
    assert rec["mismatches"] == []
    assert rec["half_deleted"] == 0
    assert 1 <= rec["deleted_before_kill"] < 16  # killed part-way
    assert rec["kept"] == 7
