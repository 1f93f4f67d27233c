"""Scenario 6 (short form): two processes invoke one thread_id at the same moment.

With on_concurrent_run="raise" (the default since the concurrency rule landed) the later
run is refused loudly and writes nothing; with "fork" both branches are kept and the latest
state shows one run only, as InMemorySaver does."""

from __future__ import annotations

import pytest

from faults import s6_concurrent

from .faultkit import make_env


@pytest.fixture
def env(redis_url, mongo_url, tmp_path):
    return make_env(redis_url, mongo_url, tmp_path)


def test_raise_rule_refuses_the_later_of_two_concurrent_processes(env) -> None:
    rec = s6_concurrent.trial(env, 0, "raise", cold=False)
    assert rec["overlapped"]
    assert len(rec["errors"]) == 1 and rec["errors"][0].startswith("ConcurrentRunError")
    assert rec["silent"] == []  # no message missing without an error
    assert rec["forks"] == 0 and rec["refused_in_history"] == 0  # nothing written


def test_fork_rule_keeps_both_branches_latest_shows_one(env) -> None:
    rec = s6_concurrent.trial(env, 1, "fork", cold=True)
    assert rec["overlapped"] and rec["errors"] == []
    assert rec["forks"] == 1 and rec["both_in_history"]
    assert len(rec["missing_from_latest"]) == 1  # as InMemorySaver: one run wins "latest"


def test_concurrent_run_error_names_the_new_head(redis_url, mongo_url) -> None:
    from langgraph.checkpoint.base import empty_checkpoint

    from langgraph_durable import ConcurrentRunError, DurableSaver
    from langgraph_durable.testing import unique_options

    opts = unique_options()
    root = {"configurable": {"thread_id": "race", "checkpoint_ns": ""}}
    with DurableSaver.from_urls(redis_url, mongo_url, **opts) as a, \
            DurableSaver.from_urls(redis_url, mongo_url, **opts) as b:
        base = a.put(root, empty_checkpoint(), {"step": 0}, {})
        assert a.get_tuple(root) and b.get_tuple(root)  # both runs read the same latest
        won = a.put(base, empty_checkpoint(), {"step": 1}, {})
        with pytest.raises(ConcurrentRunError) as info:
            b.put(base, empty_checkpoint(), {"step": 1}, {})
        assert won["configurable"]["checkpoint_id"] in str(info.value)
