"""A thread's status and timeline tree from checkpoint tuples alone
(``langgraph_durable.inspection.timeline``): pure functions, no server."""

from __future__ import annotations

import datetime
from typing import Any

from langgraph.checkpoint.base import CheckpointTuple, empty_checkpoint
from langgraph.types import Interrupt

from langgraph_durable.inspection import timeline

NOW = datetime.datetime(2026, 12, 1, 12, 0, tzinfo=datetime.timezone.utc)


def tup(cid: str, parent: str | None, *, updated: list[str], step: int, age_s: float = 0,
        writes: list[tuple[str, str, Any]] | None = None,
        seen: dict[str, dict[str, str]] | None = None) -> CheckpointTuple:
    cp = empty_checkpoint()
    cp["id"] = cid
    cp["ts"] = (NOW - datetime.timedelta(seconds=age_s)).isoformat()
    cp["updated_channels"] = updated  # type: ignore[typeddict-unknown-key]
    cp["versions_seen"] = seen or {}
    return CheckpointTuple(
        {"configurable": {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": cid}},
        cp, {"step": step, "source": "loop"}, (
            {"configurable": {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": parent}}
            if parent else None), writes or [])


def test_status_reads_errors_interrupts_next_nodes_and_age() -> None:
    running = tup("c2", "c1", updated=["branch:to:b"], step=1, age_s=5)
    assert timeline.status(running, NOW) == {"status": "running", "detail": None,
                                             "next": ["b"]}
    assert timeline.status(tup("c2", "c1", updated=["branch:to:b"], step=1, age_s=500),
                           NOW)["status"] == "stalled"
    assert timeline.status(tup("c3", "c2", updated=["messages"], step=2), NOW)["status"] == "done"
    asked = tup("c2", "c1", updated=["branch:to:b"], step=1,
                writes=[("task", "__interrupt__", [Interrupt(value={"q": "publish?"})])])
    assert timeline.status(asked, NOW) == {"status": "interrupted", "detail": {"q": "publish?"},
                                           "next": ["b"]}
    failed = tup("c2", "c1", updated=["branch:to:b"], step=1,
                 writes=[("task", "__error__", ValueError("boom"))])
    assert timeline.status(failed, NOW)["status"] == "error"
    forked = tup("f1", None, updated=["branch:to:b"], step=1)
    forked.metadata["source"] = "fork"
    assert timeline.status(forked, NOW)["status"] == "ready"  # waits for an invoke
    assert timeline.next_nodes(tup("c0", None, updated=["__start__"], step=-1).checkpoint) == [
        "__start__"]


def test_the_last_node_is_the_one_that_saw_the_newest_version() -> None:
    seen = {"__input__": {}, "__start__": {"__start__": "00000000000000000000000000000001.0"},
            "a": {"branch:to:a": "00000000000000000000000000000002.0"},
            "b": {"branch:to:b": "00000000000000000000000000000003.0"},
            "c": {"branch:to:c": "00000000000000000000000000000003.0"}}
    assert timeline.last_nodes(tup("c", None, updated=[], step=3, seen=seen).checkpoint) == [
        "b", "c"]


def test_a_branch_opens_a_lane_and_durations_are_from_the_parent() -> None:
    rows = timeline.timeline([
        tup("c0", None, updated=["__start__"], step=-1, age_s=30),
        tup("c1", "c0", updated=["branch:to:a"], step=0, age_s=20),
        tup("c2", "c1", updated=["branch:to:b"], step=1, age_s=10),
        tup("c2x", "c1", updated=["branch:to:b"], step=1, age_s=5),  # update_state on c1
        tup("c3x", "c2x", updated=[], step=2, age_s=0),
    ])
    assert [(r["checkpoint_id"], r["lane"], r["branch"]) for r in rows] == [
        ("c0", 0, False), ("c1", 0, False), ("c2", 0, False), ("c2x", 1, True),
        ("c3x", 1, False)]
    assert [r["duration_s"] for r in rows] == [None, 10.0, 10.0, 15.0, 5.0]
    assert [r["ran"] for r in rows] == [["__start__"], ["a"], ["b"], ["b"], []]
