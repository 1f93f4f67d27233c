"""The thread summary's merge and its writers' guard (durable/summary_docs.py,
plans/summary_upkeep.py), without servers: a round of an older checkpoint never moves a
summary back, writes that arrive before their checkpoint are kept for it, a replay
changes nothing, and a writer that lost a race to another reads and merges again."""

from __future__ import annotations

import datetime
from typing import Any

from langgraph_durable.core.ops import BulkWrite, BulkWriteFailed, Find, Op, WriteFailure
from langgraph_durable.durable import summary_docs as S
from langgraph_durable.plans import summary_upkeep as P
from langgraph_durable.plans.thread_list import with_status

from .stepping import context, drive

A, B = "1f000000-0000-6000-8000-00000000000a", "1f000000-0000-6000-8000-00000000000b"
TS = "2026-12-02T10:00:00+00:00"


def facts(cid: str | None, **kw: Any) -> S.Facts:
    return S.Facts(cid=cid, ts=TS if cid else None, next=kw.pop("next", []), **kw)


def test_an_older_checkpoint_never_moves_the_summary_back() -> None:
    doc = S.merge("t", None, facts(B, step=2), 1)
    assert doc is not None and (doc["cid"], doc["step"], doc["state"]) == (B, 2, "done")
    assert S.merge("t", doc, facts(A, step=1, next=["x"]), 2) is None  # nothing changes
    again = S.merge("t", doc, facts(B, step=2), 3)
    assert again is None  # a replayed round


def test_writes_that_arrive_before_their_checkpoint_are_kept_for_it() -> None:
    doc = S.merge("t", None, facts(A, next=["ask"]), 1)
    assert doc is not None and doc["state"] == "active"
    early = {B: {"task~-3": S.write_fact("__interrupt__", [1, 2], None)}}
    doc = S.merge("t", doc, S.Facts(writes=early), 2)  # another round flushed them first
    assert doc is not None and (doc["cid"], doc["interrupts"], doc["pw_cid"]) == (A, 0, B)
    doc = S.merge("t", doc, facts(B, next=["ask"]), 3)  # then their checkpoint
    assert doc is not None
    assert (doc["cid"], doc["interrupts"], doc["state"]) == (B, 2, "interrupted")


def test_an_error_write_makes_the_state_error_and_keeps_its_text() -> None:
    doc = S.merge("t", None, facts(A, next=["tool"]), 1)
    w = {A: {"task~-1": S.write_fact("__error__", ["boom"], "ValueError: " + "x" * 500)}}
    doc = S.merge("t", doc, S.Facts(writes=w), 2)
    assert doc is not None and doc["state"] == "error" and doc["errors"] == 1
    assert len(doc["error"]) == S.ERROR_CHARS and doc["error"].startswith("ValueError: x")


def test_a_writer_that_lost_a_race_reads_and_merges_again() -> None:
    ctx = context()
    cols = ctx.collections
    theirs = S.merge("t", None, facts(B, step=2), 5)  # another flusher's, written first
    finds: list[Any] = [[], [theirs]]  # first read: none yet; after the race: theirs
    writes: list[BulkWrite] = []

    def answer(op: Op[Any]) -> Any:
        if isinstance(op, Find):
            assert op.collection == cols.threads
            return finds.pop(0)
        if isinstance(op, BulkWrite):
            writes.append(op)
            if len(writes) == 1:  # the insert meets the other writer's document
                raise BulkWriteFailed(cols.threads, [WriteFailure(0, 11000)])
            return None
        raise AssertionError(op)

    done = drive(P.upkeep_plan(ctx, {"t": facts(A, step=1)}), answer)
    # the second read found a newer checkpoint: nothing of the older one is written
    assert done.kinds() == ["Find", "BulkWrite", "Find"] and done.result == 0
    writes.clear()
    finds[:] = [[], [theirs]]
    newer = "1f000000-0000-6000-8000-00000000000c"
    done = drive(P.upkeep_plan(ctx, {"t": facts(newer, step=3)}), answer)
    assert done.kinds() == ["Find", "BulkWrite", "Find", "BulkWrite"] and done.result == 1
    (replace,) = writes[1].requests
    assert replace.filter == {"_id": S.summary_id("t"), "thread_id": "t",  # type: ignore[union-attr]
                              "rev": theirs["rev"]}  # guarded by the revision it read
    assert replace.doc["cid"] == newer and replace.doc["rev"] == theirs["rev"] + 1  # type: ignore[union-attr]


def test_status_is_decided_when_read() -> None:
    doc = S.merge("t", None, facts(A, next=["work"]), 1)
    assert doc is not None and doc["state"] == "active"
    at = doc["at"]
    assert with_status(doc, at + datetime.timedelta(seconds=60), 120)["status"] == "running"
    assert with_status(doc, at + datetime.timedelta(seconds=121), 120)["status"] == "stalled"
