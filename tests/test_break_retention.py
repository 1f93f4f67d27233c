"""Retention by policy against bad input and bad data: TTLs no expiry can hold, damaged
retention documents, a thread with damaged records among the due ones, and a put made
while the sweep runs. The flusher and the sweep keep working for every other thread."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from pydantic import ValidationError

from langgraph_durable import CorruptRecordError, DurableSaver
from langgraph_durable.config import ThreadTTL
from langgraph_durable.core.ops import DeleteMany
from langgraph_durable.durable.retention_docs import MAX_TTL_MINUTES
from langgraph_durable.errors import InvalidIdentifierError
from langgraph_durable.io.drivers import run_sync
from langgraph_durable.plans import retention_policy as P
from langgraph_durable.testing import drop_key_prefix, unique_options

from .test_ttl_sweep import HOUR, POLICY, chain, ids_of


@pytest.fixture
def tsaver(redis_url: str, mongo_url: str) -> Iterator[DurableSaver]:
    """A saver with a 60-minute default TTL (the tests sweep themselves)."""
    with DurableSaver.from_urls(redis_url, mongo_url, **unique_options(ttl=POLICY)) as s:
        yield s


def retention(saver: DurableSaver) -> Any:
    return saver.sync_clients.db[saver.context.collections.retention]


@pytest.mark.parametrize("bad", [float("inf"), 1e300, MAX_TTL_MINUTES + 1, True])
def test_a_default_ttl_no_expiry_can_hold_is_refused(bad: Any) -> None:
    with pytest.raises(ValidationError, match="default_ttl"):
        ThreadTTL(default_ttl=bad)
    assert ThreadTTL(default_ttl=MAX_TTL_MINUTES).default_ttl == MAX_TTL_MINUTES


@pytest.mark.parametrize("bad", [1e300, float("inf"), MAX_TTL_MINUTES + 1])
def test_a_huge_ttl_is_refused_where_it_is_given_and_never_stops_the_flusher(
        tsaver: DurableSaver, bad: float) -> None:
    with pytest.raises(InvalidIdentifierError, match="thread 'big'.*at most 52704000"):
        chain(tsaver, "big", 1, lgd_ttl_minutes=bad)
    with pytest.raises(ValueError, match="TTL of thread 'big' must be minutes >= 0 and at "
                                         "most 52704000"):
        tsaver.set_thread_ttl("big", bad)
    chain(tsaver, "ok", 1, lgd_ttl_minutes=MAX_TTL_MINUTES)  # flushed: chain flushes
    facts = tsaver.thread_retention("ok")
    assert facts is not None and facts.last_activity_ms is not None
    assert facts.expires_ms == facts.last_activity_ms + MAX_TTL_MINUTES * 60_000


@pytest.mark.parametrize("damage", ["x", 1e300, [5], float("nan"), True])
def test_a_damaged_own_ttl_in_a_retention_document_never_stops_the_flusher(
        tsaver: DurableSaver, damage: Any) -> None:
    chain(tsaver, "a", 1, lgd_ttl_minutes=5)
    chain(tsaver, "b", 1)
    retention(tsaver).update_one({"_id": "a"}, {"$set": {"ttl": damage}})
    # a second run of both threads: flushed in one round, the damaged TTL counts as none
    for tid in ("a", "b"):
        cfg: Any = {"configurable": {"thread_id": tid, "checkpoint_ns": ""}}
        cp = empty_checkpoint()
        tsaver.put(cfg, cp, {"step": 9}, {})
    tsaver.flush(timeout_s=10)
    a, b = tsaver.sync_clients.db[tsaver.context.collections.retention].find(
        {"_id": {"$in": ["a", "b"]}}, sort=[("_id", 1)])
    assert a["exp"] == a["at"] + 60 * 60_000  # the policy's default_ttl, 60 minutes
    assert b["exp"] == b["at"] + 60 * 60_000
    assert len(ids_of(tsaver, "b")) == 2


def test_a_damaged_retention_document_is_named_and_the_others_still_listed(
        tsaver: DurableSaver) -> None:
    for tid in ("a", "b", "c"):
        chain(tsaver, tid, 1)
    retention(tsaver).update_one({"_id": "b"}, {"$set": {"at": [1]}})
    retention(tsaver).update_one({"_id": "c"}, {"$set": {"ttl": "x"}})
    with pytest.raises(CorruptRecordError, match="retention document of thread 'b' is "
                                                 "damaged: field 'at' holds list") as info:
        tsaver.thread_retention("b")
    assert info.value.thread_id == "b"
    with pytest.raises(CorruptRecordError, match="thread 'c'.*field 'ttl' holds str"):
        tsaver.thread_retention("c")
    assert [r.thread_id for r in tsaver.retention_due()] == ["a"]


def _damage_latest(saver: DurableSaver, redis_client: Any, tid: str) -> None:
    """Thread ``tid`` in MongoDB only, its newest checkpoint document's values damaged."""
    drop_key_prefix(redis_client, saver.config.key_prefix)
    cps = saver.sync_clients.db[saver.context.collections.checkpoints]
    newest = cps.find_one({"thread_id": tid}, sort=[("checkpoint_id", -1)])
    assert newest is not None
    cps.update_one({"_id": newest["_id"]}, {"$set": {"vals": "x"}})


@pytest.mark.parametrize("strategy", ["delete", "keep_latest"])
def test_one_thread_with_damaged_records_never_stops_the_sweep_of_the_others(
        redis_url: str, mongo_url: str, redis_client: Any, strategy: str) -> None:
    policy = {**POLICY, "strategy": strategy}
    with DurableSaver.from_urls(redis_url, mongo_url, **unique_options(ttl=policy)) as s:
        for tid in ("a", "b", "c"):
            chain(s, tid, 2)
        retention(s).update_one({"_id": "a"}, {"$inc": {"exp": -1000}})  # due first
        _damage_latest(s, redis_client, "a")
        later = time.time() + 2 * HOUR
        report = s.sweep(now=later)
        assert list(report.failed) == ["a"]
        assert "thread 'a'" in report.failed["a"] and "'vals'" in report.failed["a"]
        if strategy == "delete":
            assert report.deleted == ["b", "c"]
            assert ids_of(s, "b") == ids_of(s, "c") == []
        else:
            assert report.pruned == ["b", "c"]
            assert len(ids_of(s, "b")) == len(ids_of(s, "c")) == 1
        assert report.summary()["failed"] == 1
        # the damaged thread is left as it was, and tried again by the next sweep
        cps = s.sync_clients.db[s.context.collections.checkpoints]
        assert cps.count_documents({"thread_id": "a"}) == 2
        assert list(s.sweep(now=later).failed) == ["a"]


def test_prune_leaves_a_thread_with_damaged_records_and_prunes_the_others(
        redis_url: str, mongo_url: str, redis_client: Any) -> None:
    with DurableSaver.from_urls(redis_url, mongo_url, **unique_options()) as s:
        for tid in ("a", "b", "c"):
            chain(s, tid, 2)
        _damage_latest(s, redis_client, "b")
        with pytest.raises(CorruptRecordError, match="prune did every other thread but "
                                                     "left 1 thread") as info:
            s.prune(["a", "b", "c"])
        assert [e.thread_id for e in info.value.damaged] == ["b"]
        assert info.value.thread_id == "b" and "'vals'" in str(info.value)
        assert len(ids_of(s, "a")) == len(ids_of(s, "c")) == 1  # pruned
        cps = s.sync_clients.db[s.context.collections.checkpoints]
        assert cps.count_documents({"thread_id": "b"}) == 2  # left as it was


def _runs(saver: DurableSaver, thread: str, run_ids: list[str]) -> None:
    """One checkpoint per run of ``run_ids`` (metadata ``run_id``) in ``thread``, each
    with a value of its own, flushed."""
    cfg: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    for i, run in enumerate(run_ids):
        cp = empty_checkpoint()
        cp["channel_values"] = {"v": f"{thread}{i}"}
        cp["channel_versions"] = {"v": f"{i + 1:032}.0"}
        cfg = saver.put(cfg, cp, {"step": i, "run_id": run}, {"v": f"{i + 1:032}.0"})
    saver.flush()


def test_delete_for_runs_leaves_a_thread_with_damaged_records_and_does_the_others(
        redis_url: str, mongo_url: str, redis_client: Any) -> None:
    with DurableSaver.from_urls(redis_url, mongo_url, **unique_options()) as s:
        for tid in ("a", "b", "c"):
            _runs(s, tid, ["r2", "r1"])
        _damage_latest(s, redis_client, "b")  # b's r1 checkpoint
        with pytest.raises(CorruptRecordError, match="delete_for_runs did every other "
                                                     "thread but left 1 thread") as info:
            s.delete_for_runs(["r1"])
        assert [e.thread_id for e in info.value.damaged] == ["b"]
        cps = s.sync_clients.db[s.context.collections.checkpoints]
        assert {t: cps.count_documents({"thread_id": t}) for t in "abc"} == {
            "a": 1, "b": 2, "c": 1}  # r1's gone from a and c; b left as it was
        assert [t.metadata["run_id"] for t in s.list({"configurable": {"thread_id": "a"}})
                ] == ["r2"]


def test_a_put_made_while_the_sweep_runs_is_not_swept_away(tsaver: DurableSaver) -> None:
    """Two threads due; while the sweep deletes the first, a run writes to the second:
    the sweep leaves the second (``moved``) with the checkpoint the run stored."""
    chain(tsaver, "a", 1)
    chain(tsaver, "b", 1)
    retention(tsaver).update_one({"_id": "a"}, {"$inc": {"exp": -1000}})  # a first
    fresh: list[Any] = []

    def write_to_b() -> None:
        cfg: Any = {"configurable": {"thread_id": "b", "checkpoint_ns": ""}}
        latest = tsaver.get_tuple(cfg)
        assert latest is not None
        cp = empty_checkpoint()
        cp["channel_values"] = {"v": "fresh"}
        cp["channel_versions"] = {"v": f"{99:032}.0"}
        fresh.append(tsaver.put(latest.config, cp, {"step": 7}, {"v": f"{99:032}.0"}))

    def hooked(plan: Any) -> Any:
        """``plan``, with ``write_to_b`` run once, when the delete of ``a`` reaches
        MongoDB (after the sweep read the due threads' expiries again)."""
        op = plan.send(None)
        while True:
            if not fresh and any(isinstance(o, DeleteMany) for o in getattr(op, "ops", [op])):
                write_to_b()
            reply = yield op
            try:
                op = plan.send(reply)
            except StopIteration as done:
                return done.value

    plan = P.sweep_plan(tsaver.context, "sweeper", now_ms=int((time.time() + 2 * HOUR) * 1000))
    report = run_sync(hooked(plan), tsaver.sync_clients)
    assert fresh, "the run wrote while the sweep ran"
    assert (report.deleted, report.moved) == (["a"], ["b"])
    latest = tsaver.get_tuple({"configurable": {"thread_id": "b"}})
    assert latest is not None and latest.checkpoint["channel_values"] == {"v": "fresh"}
    assert latest.config == fresh[0]
