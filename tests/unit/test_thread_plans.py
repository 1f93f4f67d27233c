"""Plans over a thread's namespaces and over threads, with canned replies: the namespaces
Redis alone answers (the complete flag), MongoDB's added; delete_for_runs' tombstones;
list_threads counting a checkpoint both tiers hold once."""

from __future__ import annotations

from typing import Any

from langgraph_durable.core.ops import Aggregate, Find, Op, Pipeline, Scan, Script
from langgraph_durable.core.records import member
from langgraph_durable.plans import history_edits, read, threads

from .stepping import context, drive
from .test_read_plans import IDS


def test_namespaces_of_a_thread_redis_holds_whole_do_not_ask_mongodb() -> None:
    ctx = context()
    hot = {b"": member("", IDS[1]).encode(), b"sub": member("sub", IDS[0]).encode()}
    # ns hash, meta complete, index exists, registry epoch, the thread in the registry
    done = drive(read.namespaces_plan(ctx, "t"),
                 lambda op: [hot, b"1", 1, b"complete n", b"1"])
    assert done.kinds() == ["Pipeline"]
    assert done.result == ["sub", ""]  # first-written order


def test_namespaces_only_mongodb_holds_are_added() -> None:
    ctx = context()

    def answer(op: Op[Any]) -> Any:
        if isinstance(op, Pipeline):
            return [{b"": member("", IDS[2]).encode()}, None, 1, b"partial n", b"1"]
        assert isinstance(op, Aggregate)
        return [{"_id": "", "first": IDS[0]}, {"_id": "old", "first": IDS[1]}]

    done = drive(read.namespaces_plan(ctx, "t"), answer)
    assert done.result == ["", "old"]


def test_delete_for_runs_removes_each_threads_checkpoints_with_tombstones() -> None:
    ctx = context()

    def answer(op: Op[Any]) -> Any:
        if isinstance(op, Pipeline):
            return [[]]
        if isinstance(op, Find) and op.collection == ctx.collections.checkpoints:
            assert op.filter == {"run_id": {"$in": ["r1"]}}
            return [{"thread_id": "a", "checkpoint_ns": "", "checkpoint_id": IDS[0]},
                    {"thread_id": "b", "checkpoint_ns": "", "checkpoint_id": IDS[1]}]
        if isinstance(op, Find):
            return []
        return 1 if isinstance(op, Script) else None

    done = drive(history_edits.delete_for_runs_plan(ctx, ["r1"]), answer)
    scripts = [op for op in done.ops if isinstance(op, Script)]
    assert [(s.name, s.keys[0], list(s.args[1:])) for s in scripts
            if s.name != "page"] == [
        ("delete_parts", ctx.keys("a").cp, [1, member("", IDS[0])]),
        ("delete_parts", ctx.keys("b").cp, [1, member("", IDS[1])])]
    # then each thread's summary is set again from its latest checkpoint (its page)
    assert [s.name for s in scripts][2] == "page"


def test_list_threads_counts_a_checkpoint_both_tiers_hold_once() -> None:
    ctx = context()
    cols = ctx.collections

    def answer(op: Op[Any]) -> Any:
        if isinstance(op, Scan):
            return [ctx.keys("a").idx.encode(), ctx.keys("b").idx.encode()]
        if isinstance(op, Aggregate) and "$limit" in op.pipeline[-1]:
            return [{"_id": "a"}]
        if isinstance(op, Aggregate):
            return [{"_id": {"t": "a", "ns": ""}, "n": 2, "last": IDS[1]}]
        if isinstance(op, Pipeline):  # ZRANGE of a's and b's indexes
            return [[member("", IDS[1]).encode(), member("", IDS[2]).encode()],
                    [member("", IDS[0]).encode()]]
        assert isinstance(op, Find) and op.collection == cols.checkpoints
        return [{"checkpoint_id": IDS[1]}]  # flushed: already counted in MongoDB's 2

    done = drive(threads.list_threads_plan(ctx, 10, None), answer)
    page = done.result
    assert [(t.thread_id, t.checkpoints, t.last_checkpoint_id, t.in_redis, t.in_mongodb)
            for t in page.threads] == [("a", 3, IDS[2], True, True),
                                       ("b", 1, IDS[0], True, False)]
    assert page.next_cursor is None
