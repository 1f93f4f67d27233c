"""Thread summaries where a delete races a flush round: the summary the fence of a stalled
round takes back, and the one ``delete_thread`` deletes, are set again from what the
thread holds afterwards (its latest checkpoint and its pending writes), so a live thread
never drops out of the thread list nor shows a deleted checkpoint's error state.
Provoked as tests/test_break_summaries.py does: a round driven by hand, the edit run
between two of its operations."""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any
from unittest import mock

import pytest

from faults.common import tap
from langgraph_durable import DurableSaver
from langgraph_durable.core.ops import DeleteMany, Find, Op, Parallel
from langgraph_durable.io.drivers import run_sync
from langgraph_durable.outbox.group import ensure_group_plan
from langgraph_durable.outbox.rounds import flush_batch_plan
from langgraph_durable.plans import history_edits
from langgraph_durable.plans.thread_list import Census
from langgraph_durable.testing import unique_options

from .test_break_summaries import listed, put, threads_col


def _hooked(plan: Generator[Op[Any], Any, Any], at: Callable[[Op[Any]], bool],
            hook: Callable[[], None] | None) -> Any:
    """``plan`` with ``hook()`` run once, just before its first operation that ``at``
    picks (``faults.common.tap``)."""
    pending = [hook] if hook is not None else []

    def before(op: Op[Any]) -> None:
        if pending and at(op):
            pending.pop()()

    return tap(plan, before=before)


def _drained(ctx: Any, timeout_s: float) -> Any:  # another consumer flushed the outbox
    return 0
    yield


@pytest.fixture
def hand(redis_url: str, mongo_url: str) -> Any:
    """A saver without a flusher whose rounds the test runs (``round(hook)``: ``hook``
    runs before the round reads the summaries it will write, i.e. after it read its
    entries from Redis)."""
    with DurableSaver.from_urls(redis_url, mongo_url, **unique_options(flusher="off")) as s:
        run_sync(ensure_group_plan(s.context), s.sync_clients)
        threads = s.context.collections.threads

        def one_round(hook: Callable[[], None] | None = None) -> Any:
            plan = flush_batch_plan(s.context, "stalled", block_ms=0, claim=False)
            return run_sync(_hooked(plan, lambda op: isinstance(op, Find)
                                    and op.collection == threads, hook), s.sync_clients)

        def drain() -> None:
            while one_round().entries:
                pass

        s.round, s.drain = one_round, drain  # type: ignore[attr-defined]
        yield s


def _delete_runs(s: DurableSaver, *runs: str) -> Callable[[], None]:
    def edit() -> None:
        with mock.patch.object(history_edits, "flush_wait_plan", _drained):
            s.run(history_edits.delete_for_runs_plan(s.context, list(runs)))
    return edit


def test_a_round_stalled_across_delete_for_runs_leaves_the_summary_on_the_latest(
        hand: Any) -> None:
    """T: c0, c1 (run r1), then c2 (run r2) read by a round; ``delete_for_runs(["r2"])``
    sets the summary on c1; the round then writes it on c2, and its fence takes that back.
    The summary stands on c1 again (it was deleted: T dropped out of the list)."""
    c1 = put(hand, "T", 1, put(hand, "T", 0, None, run_id="r1"), run_id="r1")
    put(hand, "other")
    hand.drain()
    put(hand, "T", 2, c1, run_id="r2")
    hand.round(_delete_runs(hand, "r2"))
    hand.drain()
    summary = threads_col(hand).find_one({"thread_id": "T"})
    assert summary is not None
    assert (summary["cid"], summary["step"]) == (c1["configurable"]["checkpoint_id"], 1)
    assert sorted(listed(hand, Census())) == ["T", "other"]


def test_a_stalled_error_write_of_a_deleted_run_hides_no_later_error(hand: Any) -> None:
    """A round holds an error write on c2 while ``delete_for_runs`` removes c2: the
    summary's pending writes are those of c1 afterwards (not of the deleted c2), so an
    error written on c1 later shows: status ``error``."""
    c1 = put(hand, "T", 1, put(hand, "T", 0, None, run_id="r1"), run_id="r1")
    c2 = put(hand, "T", 2, c1, run_id="r2")
    hand.drain()
    hand.put_writes(c2, [("__error__", ValueError("boom on c2"))], "task-1")
    hand.round(_delete_runs(hand, "r2"))
    hand.drain()
    cid1 = c1["configurable"]["checkpoint_id"]
    summary = threads_col(hand).find_one({"thread_id": "T"})
    assert (summary["cid"], summary["pw_cid"], summary["state"]) == (cid1, cid1, "done")
    hand.put_writes(c1, [("__error__", ValueError("boom on c1"))], "task-9")
    hand.drain()
    assert listed(hand, Census(), status="error") == ["T"]
    assert "boom on c1" in threads_col(hand).find_one({"thread_id": "T"})["error"]


def test_a_new_run_flushed_while_delete_thread_runs_stays_listed(hand: Any) -> None:
    """A new run on T puts and is flushed after ``delete_thread`` wrote its tombstones and
    before its MongoDB deletes: its checkpoint stays (stored after the delete began), and
    so does its summary (it was deleted with the old run's: T missing from the list until
    a next put, which an interrupted run never makes)."""
    put(hand, "T", 1, put(hand, "T", 0))
    hand.drain()
    new: dict[str, Any] = {}
    threads = hand.context.collections.threads

    def new_run() -> None:
        new["cfg"] = put(hand, "T", 0, None, run="new")
        hand.drain()

    def before_summary_delete(op: Op[Any]) -> bool:
        return isinstance(op, Parallel) and any(
            isinstance(o, DeleteMany) and o.collection == threads for o in op.ops)

    run_sync(_hooked(history_edits.delete_thread_plan(hand.context, "T"),
                     before_summary_delete, new_run), hand.sync_clients)
    hand.drain()
    latest = hand.get_tuple({"configurable": {"thread_id": "T"}})
    assert latest is not None and latest.config == new["cfg"]
    summary = threads_col(hand).find_one({"thread_id": "T"})
    assert summary is not None and summary["cid"] == new["cfg"]["configurable"]["checkpoint_id"]
    assert listed(hand, Census()) == ["T"]
