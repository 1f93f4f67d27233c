"""Scenario 1 (short form): the application SIGKILLed at random points, resumed in a new
process. Nothing acknowledged is lost; the resumed run ends like an uninterrupted one."""

from __future__ import annotations

import pytest

from faults import s1_app_killed

from .faultkit import make_env


@pytest.fixture
def env(redis_url, mongo_url, tmp_path):
    return make_env(redis_url, mongo_url, tmp_path)


def test_application_killed_at_random_points_loses_nothing_acknowledged(env) -> None:
    res = s1_app_killed.run(env, trials=10, seed=11)
    assert res.faults >= 8, res.records  # a kill point may fall after the run ended
    assert res.acked > 50
    assert res.lost == 0, res.records
    assert res.measures["writes lost"] == 0, res.records
    assert res.duplicated == 0, res.records
    assert res.mismatches == 0, res.records
    assert res.measures["resumed from durable tier"] >= 1  # cold resumes happened


def test_kill_right_after_the_acknowledging_step_still_lets_hot_keys_expire(env) -> None:
    # the acknowledgement and the settle (dirty count down, TTL set) are one script: a
    # flusher killed right after it has settled the thread (it used to be two steps, and
    # a kill between them left the thread's hot keys without TTL forever)
    import random

    kill = {"kind": "flush", "n": 1, "point": "after_ack"}
    ref = s1_app_killed.graphs.flow_reference()
    calls = {d: s1_app_killed.graphs.count_calls(d) for d in ("sync", "async")}
    rec = s1_app_killed.trial(env, 0, random.Random(1), ref, calls, 1.0, kill=kill, cold=False)
    assert rec["killed"] and rec["at"] == "flush round #1 after_ack"
    assert rec["lost"] == 0 and rec["mismatch"] == 0
    assert rec["no_ttl"] == 0
