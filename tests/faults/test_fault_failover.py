"""Scenario 8 (short form): the Redis primary of a cluster and of a Sentinel group is
SIGKILLed after its replica was cut off; acknowledged checkpoints lost with
``redis_min_replicas`` 0 (some: the control) and 1 (none)."""

from __future__ import annotations

import pytest

from faults import s8_failover

from .faultkit import make_env


@pytest.mark.parametrize("kind", ["cluster", "sentinel"])
def test_with_one_required_replica_no_acknowledged_checkpoint_is_lost_in_a_failover(
    kind: str, mongo_url: str, tmp_path
) -> None:
    env = make_env("redis://unused", mongo_url, tmp_path)
    without = s8_failover.trial(env, kind, "cut", 0, cut_s=0.3, after_s=0.3)
    assert without["acked_before_kill"] >= 200
    assert without["lost"] > 0, without  # the control: acknowledged, on no replica, lost
    with_wait = s8_failover.trial(env, kind, "cut", 1, cut_s=0.3, after_s=0.3)
    assert with_wait["acked"] >= 200
    assert with_wait["lost"] == 0, with_wait
    assert with_wait["refused"].get("ReplicationTimeoutError", 0) >= 1, with_wait
