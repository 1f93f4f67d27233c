"""Scenario 2 (short form): a flusher worker SIGKILLed while it holds pending entries; the
other worker claims them; MongoDB ends exactly equal to what Redis holds."""

from __future__ import annotations

import pytest
from langgraph.checkpoint.base import empty_checkpoint

from faults import s2_flusher_killed
from faults.tiers import mongo_checkpoints, wait_for
from langgraph_durable import DurableSaver
from langgraph_durable.core.records import CheckpointRecord, member
from langgraph_durable.io.drivers import run_sync
from langgraph_durable.outbox.flusher import dead_letter_key, flush_batch_plan
from langgraph_durable.testing import unique_options

from .faultkit import make_env


@pytest.fixture
def env(redis_url, mongo_url, tmp_path):
    return make_env(redis_url, mongo_url, tmp_path)


def test_worker_killed_mid_batch_leaves_mongodb_exactly_right(env) -> None:
    res = s2_flusher_killed.run(env, trials=2, seed=2)
    assert res.faults == 2, res.records  # each time killed holding pending entries
    assert res.measures["entries held by the killed worker"] >= 2
    assert res.lost == 0, res.records  # no document missing
    assert res.duplicated == 0, res.records  # none extra, no identity twice
    assert res.mismatches == 0, res.records  # none different; reads equal hot and cold
    assert res.measures["dead letters"] == 0
    assert not res.findings


def test_an_entry_mongodb_refuses_does_not_block_the_outbox(redis_url, mongo_url) -> None:
    opts = unique_options(flusher="off")
    with DurableSaver.from_urls(redis_url, mongo_url, **opts) as saver:
        r = saver.sync_clients.redis
        cfg = saver.put({"configurable": {"thread_id": "big", "checkpoint_ns": ""}},
                        empty_checkpoint(), {"step": 0}, {})
        cid = cfg["configurable"]["checkpoint_id"]
        raw = r.hget(saver.context.keys("big").cp, member("", cid))
        rec = CheckpointRecord.unpack("", cid, raw, r.hget(saver.context.keys("big").cv,
                                                          member("", cid)))
        huge = saver.serde.dumps_typed({"step": 0, "note": "x" * (9 << 20)})
        # a ~27 MB document: the metadata is chunked, but not the queryable md pairs, here
        # made as long as put never would (it copies strings up to 1024 characters)
        rec = CheckpointRecord(rec.ns, rec.checkpoint_id, rec.parent_id, rec.checkpoint, huge,
                               rec.run_id, (("step", 0), ("note", "x" * (9 << 20)),
                                            ("more", "y" * (9 << 20))), rec.blob_fields)
        r.hset(saver.context.keys("big").cp, member("", cid), rec.pack())
        saver.put({"configurable": {"thread_id": "small", "checkpoint_ns": ""}},
                  empty_checkpoint(), {"step": 0}, {})

        def rounds(n: int) -> None:
            for _ in range(n):  # a refused entry is retried, then dead-lettered: no raise
                run_sync(flush_batch_plan(saver.context, "w", block_ms=0, claim=False),
                         saver.sync_clients)

        rounds(3)  # the bad entry is set aside, the others flow
        saver.put({"configurable": {"thread_id": "later", "checkpoint_ns": ""}},
                  empty_checkpoint(), {"step": 0}, {})
        rounds(3)
        assert mongo_checkpoints(saver.sync_clients.db, ["later"])  # not stuck behind it
        assert r.xlen(dead_letter_key(saver.context)) == 1
        wait_for(lambda: r.xlen(saver.context.outbox) == 0, 5, "the outbox to drain")
