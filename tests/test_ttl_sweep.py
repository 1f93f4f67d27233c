"""Retention by policy (``ttl=``): activity recorded by the flusher, per-thread TTL,
refresh, pin/unpin, the interrupt rule, both strategies, the sweep's bound and lease, the
in-process sweeper, sync and async. Time is given to ``sweep(now=...)`` or set through
``set_thread_ttl``: nothing waits for a TTL to pass."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pymongo
import pytest
import redis.asyncio
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.types import Command

from langgraph_durable import DurableSaver
from langgraph_durable.core.outbox_entry import OutboxEntry
from langgraph_durable.durable import retention_docs as R
from langgraph_durable.errors import InvalidIdentifierError
from langgraph_durable.io.drivers import run_sync
from langgraph_durable.plans import retention_policy as P
from langgraph_durable.testing import unique_options, wait_for

from .graphs import build_delta, build_review
from .test_retention import stored, uuid6_at

HOUR = 3600.0
POLICY = {"strategy": "delete", "default_ttl": 60, "sweep_interval_minutes": 60}


@pytest.fixture
def tsaver(redis_url: str, mongo_url: str) -> Iterator[DurableSaver]:
    """A saver with a 60-minute default TTL (the sweeper's interval far away: the tests
    sweep themselves)."""
    with DurableSaver.from_urls(redis_url, mongo_url, **unique_options(ttl=POLICY)) as s:
        yield s


def chain(saver: DurableSaver, thread: str, n: int = 3, **configurable: Any) -> list[str]:
    """``n`` checkpoints of ``thread`` (made now, oldest first) with a pending write each,
    flushed; ``configurable`` goes into every call's config."""
    now = time.time()
    ids = [uuid6_at(now - n + i) for i in range(n)]
    cfg: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": "", **configurable}}
    for i, cid in enumerate(ids):
        cp = empty_checkpoint()
        cp["id"] = cid
        cp["channel_values"] = {"v": i}
        cp["channel_versions"] = {"v": f"{i + 1:032}.0"}
        cfg = saver.put(cfg, cp, {"step": i}, {"v": f"{i + 1:032}.0"})
        cfg["configurable"].update(configurable)
        saver.put_writes(cfg, [("v", i + 1)], f"task-{i}")
    saver.flush()
    return ids


def ids_of(saver: DurableSaver, thread: str) -> list[str]:
    return [t.config["configurable"]["checkpoint_id"]
            for t in saver.list({"configurable": {"thread_id": thread}})]


def test_the_flusher_records_activity_and_the_default_expiry(tsaver: DurableSaver) -> None:
    before_ms = int(time.time() * 1000)
    chain(tsaver, "a")
    facts = tsaver.thread_retention("a")
    assert facts is not None and facts.last_activity_ms is not None
    assert before_ms - 5 <= facts.last_activity_ms <= int(time.time() * 1000) + 5
    assert facts.expires_ms == facts.last_activity_ms + 60 * 60_000
    assert (facts.ttl_minutes, facts.pinned, facts.held) == (None, False, None)


def test_activity_pushes_the_expiry_forward(tsaver: DurableSaver) -> None:
    chain(tsaver, "a", 1)
    first = tsaver.thread_retention("a")
    assert first is not None and first.last_activity_ms is not None
    wait_for(lambda: time.time() * 1000 > first.last_activity_ms + 2, 1, "the next ms")
    cfg: Any = {"configurable": {"thread_id": "a", "checkpoint_ns": "",
                                 "checkpoint_id": ids_of(tsaver, "a")[0]}}
    tsaver.put_writes(cfg, [("v", 9)], "later")
    tsaver.flush()
    second = tsaver.thread_retention("a")
    assert second is not None and second.last_activity_ms is not None
    assert second.last_activity_ms > first.last_activity_ms
    assert second.expires_ms == second.last_activity_ms + 60 * 60_000


def test_a_run_names_its_threads_ttl_through_configurable(tsaver: DurableSaver) -> None:
    chain(tsaver, "short", lgd_ttl_minutes=5)
    facts = tsaver.thread_retention("short")
    assert facts is not None and facts.last_activity_ms is not None
    assert facts.ttl_minutes == 5.0
    assert facts.expires_ms == facts.last_activity_ms + 5 * 60_000
    assert tsaver.get_tuple({"configurable": {"thread_id": "short"}}).metadata[
        R.TTL_KEY] == 5  # type: ignore[union-attr]


@pytest.mark.parametrize("bad", [0, -1, "10", True, float("nan")])
def test_a_bad_ttl_in_configurable_is_refused_naming_the_thread(
        tsaver: DurableSaver, bad: object) -> None:
    with pytest.raises(InvalidIdentifierError, match="'t-bad'"):
        chain(tsaver, "t-bad", 1, lgd_ttl_minutes=bad)
    assert tsaver.get_tuple({"configurable": {"thread_id": "t-bad"}}) is None


def test_without_a_policy_nothing_is_recorded_nor_swept(saver: DurableSaver) -> None:
    chain(saver, "a", 1)
    assert saver.thread_retention("a") is None
    report = saver.sweep(now=time.time() + 1000 * HOUR)
    assert report.skipped.startswith("no retention policy")
    assert len(ids_of(saver, "a")) == 1


def test_the_sweep_deletes_expired_threads_only(tsaver: DurableSaver) -> None:
    gone = chain(tsaver, "expired", lgd_ttl_minutes=1)
    kept = chain(tsaver, "fresh")
    report = tsaver.sweep(now=time.time() + 10 * 60)  # 10 minutes on: past 1, not 60
    assert (report.deleted, report.held, report.pruned) == (["expired"], [], [])
    assert ids_of(tsaver, "expired") == []
    assert stored(tsaver, "expired") == {"checkpoints": [], "writes": [], "blobs": [],
                                         "redis": [], "redis_blobs": 0}
    assert ids_of(tsaver, "fresh") == kept[::-1]
    assert tsaver.thread_retention("expired") is None
    assert gone and tsaver.thread_retention("fresh") is not None


def test_a_pinned_thread_stays_until_unpinned(tsaver: DurableSaver) -> None:
    ids = chain(tsaver, "p")
    tsaver.pin_thread("p")
    later = time.time() + 2 * HOUR
    assert tsaver.sweep(now=later).deleted == []
    assert ids_of(tsaver, "p") == ids[::-1]
    assert tsaver.thread_retention("p").pinned is True  # type: ignore[union-attr]
    assert [f.thread_id for f in tsaver.retention_due()] == []
    tsaver.unpin_thread("p")
    assert [f.thread_id for f in tsaver.retention_due()] == ["p"]
    assert tsaver.sweep(now=later).deleted == ["p"]
    assert ids_of(tsaver, "p") == []


def test_set_thread_ttl_zero_makes_it_due_now(tsaver: DurableSaver) -> None:
    chain(tsaver, "x")
    chain(tsaver, "y")
    tsaver.set_thread_ttl("x", 0)
    assert tsaver.sweep().deleted == ["x"]
    assert ids_of(tsaver, "x") == [] and len(ids_of(tsaver, "y")) == 3
    with pytest.raises(ValueError, match="'y'"):
        tsaver.set_thread_ttl("y", -1)


def test_an_unanswered_interrupt_is_held_then_its_ttl_counts_from_the_answer(
        tsaver: DurableSaver) -> None:
    graph = build_review(tsaver)
    cfg: Any = {"configurable": {"thread_id": "review"}}
    graph.invoke({"draft": "memo", "log": []}, cfg)
    waiting = graph.get_state(cfg)
    assert waiting.interrupts  # review() asks "edit?"
    tsaver.flush()
    later = time.time() + 2 * HOUR
    report = tsaver.sweep(now=later)
    assert (report.held, report.deleted) == (["review"], [])
    assert graph.get_state(cfg).values == waiting.values
    facts = tsaver.thread_retention("review")
    assert facts is not None and (facts.held, facts.expires_ms) == ("interrupt", None)
    assert tsaver.sweep(now=later).held == []  # held: not found due again
    graph.invoke(Command(resume="shorter"), cfg)  # answered; confirm() asks again
    graph.invoke(Command(resume=True), cfg)  # answered: the run ends
    tsaver.flush()
    facts = tsaver.thread_retention("review")
    assert facts is not None and facts.held is None and facts.last_activity_ms is not None
    assert facts.expires_ms == facts.last_activity_ms + 60 * 60_000  # from the answer
    assert tsaver.sweep(now=facts.expires_ms / 1000 - 1).deleted == []
    assert tsaver.sweep(now=facts.expires_ms / 1000).deleted == ["review"]
    assert graph.get_state(cfg).values == {}


def test_keep_latest_prunes_expired_threads_to_their_newest_checkpoint(
        redis_url: str, mongo_url: str) -> None:
    policy = {**POLICY, "strategy": "keep_latest"}
    with DurableSaver.from_urls(redis_url, mongo_url, **unique_options(ttl=policy)) as s:
        ids = chain(s, "k", 5)
        other = chain(s, "other", 2, lgd_ttl_minutes=600)
        report = s.sweep(now=time.time() + 2 * HOUR)
        assert (report.pruned, report.deleted) == (["k"], [])
        left = stored(s, "k")
        assert left["checkpoints"] == left["writes"] == left["redis"] == ids[-1:]
        assert ids_of(s, "other") == other[::-1]
        facts = s.thread_retention("k")
        assert facts is not None and (facts.held, facts.expires_ms) == ("pruned", None)
        assert s.sweep(now=time.time() + 2 * HOUR).pruned == []


def test_a_sweep_takes_at_most_its_limit_soonest_first(tsaver: DurableSaver) -> None:
    for i in range(5):
        chain(tsaver, f"t{i}", 1, lgd_ttl_minutes=10 + i)
    later = time.time() + 2 * HOUR
    assert tsaver.sweep(now=later, limit=2).deleted == ["t0", "t1"]
    assert tsaver.sweep(now=later, dry_run=True).deleted == ["t2", "t3", "t4"]
    assert len(ids_of(tsaver, "t2")) == 1  # the dry run changed nothing
    assert tsaver.sweep(now=later, limit=2).deleted == ["t2", "t3"]
    assert tsaver.sweep(now=later, limit=2).deleted == ["t4"]


def test_one_sweeper_at_a_time_and_once_per_interval(tsaver: DurableSaver) -> None:
    chain(tsaver, "a", 1, lgd_ttl_minutes=1)
    later_ms = int((time.time() + HOUR) * 1000)
    ctx = tsaver.context
    # another sweeper holds the lease for a minute
    assert tsaver.run(P._take_lease(ctx, "other", int(time.time() * 1000), 60_000, False))
    report = tsaver.sweep(now=later_ms / 1000)
    assert report.skipped.startswith("the interval has not passed, or another sweeper")
    assert len(ids_of(tsaver, "a")) == 1
    # its lease lapses (it was killed): the next sweeper takes it
    meta = tsaver.sync_clients.db[ctx.collections.meta]
    meta.update_one({"_id": R.LEASE_ID}, {"$set": {"until": 0}})
    assert tsaver.sweep(now=later_ms / 1000).deleted == ["a"]
    # a scheduled sweep runs once per sweep_interval_minutes (60) whoever asks; the
    # manual sweep just done counts as one
    assert tsaver.run(P.sweep_plan(ctx, "s0", scheduled=True)).skipped
    meta.update_one({"_id": R.LEASE_ID}, {"$set": {"next_at": 0}})
    assert not tsaver.run(P.sweep_plan(ctx, "s1", scheduled=True)).skipped
    assert tsaver.run(P.sweep_plan(ctx, "s2", scheduled=True)).skipped
    lease = tsaver.run(P.lease_plan(ctx))
    assert lease is not None and lease["until"] == 0 and lease["owner"] == "s1"
    assert lease["next_at"] > time.time() * 1000 + 59 * 60_000


class Killed(BaseException):
    """The end of a process killed between two operations (no clean-up runs)."""


def _killed_after(plan: Any, n: int) -> Any:
    """``plan`` run for its first ``n`` operations, then ended as a killed process ends:
    no further step, no clean-up (the lease stays taken until it lapses)."""
    op = plan.send(None)
    for _ in range(n):
        reply = yield op
        try:
            op = plan.send(reply)
        except StopIteration as done:
            return done.value
    raise Killed(f"after {n} operations, before {op!r}"[:200])


def test_a_sweep_killed_at_any_step_leaves_threads_whole_or_gone(
        tsaver: DurableSaver) -> None:
    """Kill the sweep after each of its operations in turn: the expired thread is, for
    every reader, either whole (every checkpoint, value and pending write as before) or
    gone; the next sweep finishes; the other thread is untouched."""
    kept = chain(tsaver, "bystander", 2)
    bystander = tsaver.get_tuple({"configurable": {"thread_id": "bystander"}})
    later = time.time() + 10 * 60  # past the victims' 1 minute, not the bystander's 60
    outcomes = []
    for n in range(1, 200):
        victim = f"victim-{n}"
        ids = chain(tsaver, victim, 3, lgd_ttl_minutes=1)
        whole = [tsaver.get_tuple({"configurable": {"thread_id": victim, "checkpoint_ns": "",
                                                    "checkpoint_id": c}}) for c in ids]
        plan = P.sweep_plan(tsaver.context, "doomed", now_ms=int(later * 1000),
                            lease_s=0.05)
        try:
            run_sync(_killed_after(plan, n), tsaver.sync_clients)
        except Killed:
            pass
        else:
            break  # the sweep ended before its n-th operation: every step was tried
        seen = [tsaver.get_tuple({"configurable": {"thread_id": victim, "checkpoint_ns": "",
                                                   "checkpoint_id": c}}) for c in ids]
        latest = tsaver.get_tuple({"configurable": {"thread_id": victim}})
        if ids_of(tsaver, victim) == []:
            assert latest is None and seen == [None] * 3, f"killed after {n}: partly gone"
            outcomes.append("gone")
        else:
            assert ids_of(tsaver, victim) == ids[::-1], f"killed after {n}"
            assert seen == whole and latest == whole[-1], f"killed after {n}"
            outcomes.append("whole")
        # the killed sweeper's lease lapses (0.05 s); the next sweep finishes the delete
        report = wait_for(lambda: (lambda r: None if r.skipped else r)(
            tsaver.sweep(now=later)), 10, "the killed sweeper's lease to lapse")
        # (nothing left to do when the kill came after its retention document went)
        assert [*report.deleted, *report.gone] in ([victim], []), report
        assert tsaver.thread_retention(victim) is None
        assert stored(tsaver, victim) == {"checkpoints": [], "writes": [], "blobs": [],
                                          "redis": [], "redis_blobs": 0}
    assert "whole" in outcomes and "gone" in outcomes and n > 10
    assert ids_of(tsaver, "bystander") == kept[::-1]
    assert tsaver.get_tuple({"configurable": {"thread_id": "bystander"}}) == bystander


def test_the_in_process_sweeper_sweeps_on_its_interval(redis_url: str, mongo_url: str) -> None:
    policy = {**POLICY, "sweep_interval_minutes": 0.002}  # 0.12 s
    with DurableSaver.from_urls(redis_url, mongo_url, **unique_options(ttl=policy)) as s:
        chain(s, "soon", 2)
        kept = chain(s, "later", 2)
        s.set_thread_ttl("soon", 0)
        wait_for(lambda: s.thread_retention("soon") is None, 20, "the sweeper")
        assert ids_of(s, "soon") == []
        assert ids_of(s, "later") == kept[::-1]
        lease = s.run(P.lease_plan(s.context))
        assert lease is not None and lease["last"]["deleted"] >= 1


async def test_async_pin_ttl_and_sweep(redis_url: str, mongo_url: str) -> None:
    async with DurableSaver.from_urls(redis_url, mongo_url,
                                      **unique_options(ttl=POLICY)) as s:
        for tid in ("a1", "a2"):
            cp = empty_checkpoint()
            await s.aput({"configurable": {"thread_id": tid, "checkpoint_ns": ""}}, cp,
                         {"step": 0}, {})
        await s.aflush()
        await s.apin_thread("a1")
        await s.aset_thread_ttl("a1", 0)
        await s.aset_thread_ttl("a2", 0)
        facts = await s.athread_retention("a1")
        assert facts is not None and facts.pinned
        assert [f.thread_id for f in await s.aretention_due()] == ["a2"]
        report = await s.asweep()
        assert report.deleted == ["a2"]
        assert await s.aget_tuple({"configurable": {"thread_id": "a2"}}) is None
        await s.aunpin_thread("a1")
        assert (await s.asweep()).deleted == ["a1"]


async def test_the_sweeper_of_an_asyncio_flusher_task_sweeps(redis_url: str,
                                                             mongo_url: str) -> None:
    """Asyncio clients only: the flusher is a task of the loop, and so is its sweeper."""
    r, m = redis.asyncio.Redis.from_url(redis_url), pymongo.AsyncMongoClient(mongo_url)
    policy = {**POLICY, "sweep_interval_minutes": 0.002}
    try:
        async with DurableSaver(r, m, **unique_options(ttl=policy)) as s:
            for tid in ("soon", "later"):
                await s.aput({"configurable": {"thread_id": tid, "checkpoint_ns": ""}},
                             empty_checkpoint(), {"step": -1}, {})
            await s.aflush()
            assert s.runtime.flusher is not None and s.runtime.flusher.sweeper is not None
            await s.aset_thread_ttl("soon", 0)
            deadline = time.monotonic() + 20
            while await s.athread_retention("soon") is not None:
                assert time.monotonic() < deadline, "the sweeper task did not sweep"
                await asyncio.sleep(0.05)
            assert await s.aget_tuple({"configurable": {"thread_id": "soon"}}) is None
            assert await s.aget_tuple({"configurable": {"thread_id": "later"}}) is not None
    finally:
        await r.aclose()
        await m.close()


@pytest.fixture
def ksaver(redis_url: str, mongo_url: str) -> Iterator[DurableSaver]:
    """A saver whose policy prunes expired threads to their newest checkpoint."""
    policy = {**POLICY, "strategy": "keep_latest"}
    with DurableSaver.from_urls(redis_url, mongo_url, **unique_options(ttl=policy)) as s:
        yield s


def test_keep_latest_keeps_delta_channel_ancestors(ksaver: DurableSaver) -> None:
    """A DeltaChannel (snapshot every 3 writes) rebuilt from its ancestors: the pruned
    thread's state and its next run equal those of a thread never pruned."""
    graph = build_delta(ksaver)
    for tid in ("pruned", "kept"):
        graph.invoke({"n": 0, "log": ["go"]}, {"configurable": {"thread_id": tid}})
    ksaver.flush()
    ksaver.pin_thread("kept")
    before = graph.get_state({"configurable": {"thread_id": "pruned"}}).values
    assert ksaver.sweep(now=time.time() + 2 * HOUR).pruned == ["pruned"]
    assert len(ids_of(ksaver, "pruned")) < len(ids_of(ksaver, "kept"))
    assert graph.get_state({"configurable": {"thread_id": "pruned"}}).values == before
    for tid in ("pruned", "kept"):
        graph.invoke({"log": ["again"]}, {"configurable": {"thread_id": tid}})
    assert graph.get_state({"configurable": {"thread_id": "pruned"}}).values == \
        graph.get_state({"configurable": {"thread_id": "kept"}}).values


def test_keep_latest_prunes_an_interrupted_thread_and_it_still_resumes(
        ksaver: DurableSaver) -> None:
    graph = build_review(ksaver)
    cfg: Any = {"configurable": {"thread_id": "review"}}
    graph.invoke({"draft": "memo", "log": []}, cfg)
    ksaver.flush()
    assert ksaver.sweep(now=time.time() + 2 * HOUR).pruned == ["review"]
    assert len(ids_of(ksaver, "review")) == 1
    assert graph.get_state(cfg).interrupts  # still waiting for "edit?"
    graph.invoke(Command(resume="shorter"), cfg)
    graph.invoke(Command(resume=True), cfg)
    assert graph.get_state(cfg).values["log"] == [
        "write", "review:shorter", "confirm:True"]


def test_a_replayed_or_late_entry_leaves_the_retention_document_unchanged(
        tsaver: DurableSaver) -> None:
    """Invariant 4 for the retention facts: the flusher's update is a $max, so recording
    the same activity again, or older activity, changes nothing."""
    chain(tsaver, "r", 2, lgd_ttl_minutes=30)
    coll = tsaver.sync_clients.db[tsaver.context.collections.retention]
    doc = coll.find_one({"_id": "r"})
    assert doc is not None
    old = [(f"{doc['at'] - 5000}-0".encode(), "r", OutboxEntry("r", "w", "m", ttl_min=30)),
           (f"{doc['at']}-0".encode(), "r", OutboxEntry("r", "cp", "m", ttl_min=30))]
    assert tsaver.run(P.activity_plan(tsaver.context, old)) == 1
    assert coll.find_one({"_id": "r"}) == doc
