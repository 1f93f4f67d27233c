"""Scenario 10 (short form): poison pills among threads under load. Every healthy
thread's acknowledged checkpoints reach MongoDB; each damaged record is dead-lettered with
its payload and named by ``flush()``; replay after repair brings the repairable ones in."""

from __future__ import annotations

from faults import s10_poison

from .faultkit import make_env


def test_damaged_records_are_dead_lettered_and_replayed_and_block_no_other_thread(
        redis_url, mongo_url, tmp_path) -> None:
    env = make_env(redis_url, mongo_url, tmp_path)
    res = s10_poison.run(env, threads=40, per_kind=2, steps=2, writers=4)
    assert res.findings == []
    assert (res.acked, res.lost, res.mismatches, res.faults) == (80, 0, 0, 14)
    m = res.measures
    # meta-wrongtype threads leave two entries each (checkpoint, writes); the others one
    assert m["dead letters"] == 16
    assert m["by step"] == "copy 4, parse 6, settle 4, write 2"
    assert m["named by flush()"] in (12, 13, 14, 15, 16)  # settle ones may follow it
    assert m["replayed"] == 10 and m["dropped (unrepairable)"] == 6
    assert m["replayed checkpoints in MongoDB"] == "8 of 8"
    assert m["flush() green after replay"] is True
