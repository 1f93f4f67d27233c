"""Scenario 3 (short form): MongoDB stopped while graphs run; bounded outbox, loud refusal
past the bound, new threads start during the outage, drain after restart, nothing
acknowledged lost."""

from __future__ import annotations

import pytest

from faults import s3_mongo_down

from .faultkit import make_env


@pytest.fixture
def env(redis_url, mongo_url, tmp_path):
    return make_env(redis_url, mongo_url, tmp_path)


def test_mongodb_down_bounded_backlog_loud_refusal_then_drain(env) -> None:
    res = s3_mongo_down.run(env, trials_per_policy=1, subgraph_probe=False)
    recs = res.records
    assert {r["policy"] for r in recs} == {"raise", "block"}
    for r in recs:
        assert r["acked_during_outage"] > 0  # puts kept succeeding from Redis
        assert r["max_backlog"] <= s3_mongo_down.MAX_OUTBOX  # never past the bound
        assert r["refused"] > 0 and r["refused_by"] == ["OutboxFullError"]  # loud
        assert r["refused_but_stored"] == 0 and r["dropped"] == 0  # never silent
        assert r["drain_s"] < 60
        # brand-new threads started during the outage: none needed MongoDB to begin
        assert r["new_started"] == s3_mongo_down.NEW_THREADS
        assert "TierUnavailableError" not in r["new_outcomes"], r["new_outcomes"]
        assert r["mismatches_mongo_alone"] == 0
    block = next(r for r in recs if r["policy"] == "block")
    assert block["block_s"] >= s3_mongo_down.BLOCK_S * 0.9  # it did block before raising
    assert res.lost == 0 and res.mismatches == 0, recs
    assert not res.findings
    # the memory store's puts and deletes while MongoDB was down: none lost, none undone
    assert res.measures["store puts acked"] > 20 and res.measures["store deletes acked"] > 5
    assert res.measures["store ops refused while down (OutboxFullError)"] > 0
    assert res.resurrected == 0 and res.measures["store puts lost"] == 0


def test_a_hot_thread_can_enter_a_subgraph_while_mongodb_is_down(env) -> None:
    rec = s3_mongo_down.subgraph_step_while_down(env)
    assert rec["mismatch"] == 0
    assert rec["outcome"] == "finished", rec


def test_flush_wakes_a_flusher_paused_after_failing(redis_url) -> None:
    # a lone flusher failing for longer than claim_idle_s pauses 2 x claim_idle_s after
    # each failure; an explicit flush() (MongoDB is back) must not wait that pause out
    from langgraph.checkpoint.base import empty_checkpoint

    from faults.tiers import wait_for
    from langgraph_durable import DurableSaver
    from langgraph_durable.testing import mongo_server, unique_options

    with mongo_server() as ms, DurableSaver.from_urls(
            redis_url, ms.url, claim_idle_s=2.5, server_selection_timeout_s=0.3,
            **unique_options()) as s:
        ms.stop()
        cp = empty_checkpoint()
        cp["channel_values"] = {"v": 1}
        cp["channel_versions"] = {"v": "1"}
        s.put({"configurable": {"thread_id": "t", "checkpoint_ns": ""}}, cp, {"step": -1},
              {"v": "1"})
        f = s.runtime.flusher
        wait_for(lambda: f._quiet_s() > 0, 30, "the flusher to pause")
        ms.start()
        s.flush(timeout_s=3)  # the pause has ~5 s left: only a woken flusher makes it
        assert s.sync_clients.db["checkpoints"].count_documents({"thread_id": "t"}) == 1
