"""Plans that change stored history, with canned replies: flush-wait and release deadlines
on a controlled clock, delete_thread's tombstones before MongoDB, prune, copy_thread."""

from __future__ import annotations

from typing import Any

import pytest

from langgraph_durable.core.ops import (
    BulkWrite,
    DeleteMany,
    Find,
    Op,
    Pipeline,
    Script,
    UpdateDoc,
)
from langgraph_durable.core.records import member
from langgraph_durable.durable import documents as D
from langgraph_durable.errors import DeadLetteredError, FlushTimeoutError
from langgraph_durable.hot.keys import TOMBSTONE_TTL_S
from langgraph_durable.hot.scripts import DeleteThreadReply
from langgraph_durable.plans import history_edits, thread_copy

from .stepping import Drive, FakeClock, context, drive
from .test_read_plans import IDS, page_reply, stored

MARK = b"1700000000000-5"


def outbox(left: bool) -> Any:
    """Replies of a flush-wait: the newest entry is MARK; it stays while ``left``."""
    def answer(op: Op[Any]) -> Any:
        assert isinstance(op, Pipeline)
        cmd = op.commands[0][0]
        if cmd == "XREVRANGE":
            return [[(MARK, {b"t": b"t"})]]
        if cmd == "XRANGE":
            return [[(MARK, {b"t": b"t"})] if left else []]
        assert cmd == "XLEN"
        return [7]
    return answer


def test_flush_wait_returns_once_the_entries_seen_at_the_start_are_gone() -> None:
    ctx = context()
    calls = {"n": 0}

    def answer(op: Op[Any]) -> Any:
        calls["n"] += 1
        return outbox(left=calls["n"] < 4)(op)

    done = drive(history_edits.flush_wait_plan(ctx, 5.0), answer, ctx.clock)  # type: ignore[arg-type]
    assert done.kinds() == ["Pipeline", "Pipeline", "Sleep", "Pipeline", "Sleep", "Pipeline"]
    assert done.result == 1


def test_flush_wait_on_an_empty_outbox_returns_at_once() -> None:
    done = drive(history_edits.flush_wait_plan(context(), 5.0), lambda op: [[]])
    assert (done.kinds(), done.result) == (["Pipeline"], 0)


def test_flush_wait_times_out_on_the_controlled_clock() -> None:
    ctx = context()
    clock = ctx.clock
    assert isinstance(clock, FakeClock)
    start = clock.now_s
    record = Drive()
    with pytest.raises(FlushTimeoutError, match="still holds 7 entries after 0.5 s"):
        drive(history_edits.flush_wait_plan(ctx, 0.5), outbox(left=True), clock, record)
    assert 0.5 <= clock.now_s - start < 0.6  # slept in growing pauses, up to the deadline
    assert record.kinds()[-1] == "Pipeline" and record.ops[-1].commands[0][0] == "XLEN"  # type: ignore[attr-defined]


def test_delete_thread_tombstones_in_redis_before_deleting_in_mongodb() -> None:
    ctx = context()
    keys = ctx.keys("t")

    finds: list[Find] = []

    def answer(op: Op[Any]) -> Any:
        if isinstance(op, Pipeline):
            return [[]]  # outbox empty
        if isinstance(op, Find):  # checkpoints only MongoDB holds; none after the deletes
            finds.append(op)
            return [{"checkpoint_ns": "", "checkpoint_id": IDS[0]}] if len(finds) == 1 else []
        if isinstance(op, Script) and op.name == "page":  # Redis holds none of it now
            return page_reply([], [], complete=0)
        if isinstance(op, Script):  # deletion time (ms), the members Redis held
            return DeleteThreadReply(1700000000123, [member("", IDS[1])])
        return None

    done = drive(history_edits.delete_thread_plan(ctx, "t"), answer)
    assert done.kinds() == ["Pipeline", "Find", "delete_thread", "BulkWrite",
                            # gone for readers before MongoDB loses anything (registry 'd')
                            "registry_forget", "Parallel",
                            "DeleteMany", "DeleteMany", "DeleteMany", "DeleteMany",
                            "DeleteMany",  # the thread summary (durable/summary_docs.py)
                            "DeleteMany",
                            # the summary set again from what is left (a new run since):
                            # the latest checkpoint read in both tiers: none, so deleted
                            "page", "Find", "BulkWrite",
                            # the effect journal: Redis, then MongoDB (plans/effect_journal.py)
                            "Pipeline", "DeleteMany",
                            # then the thread registry: MongoDB holds none of it, so marked
                            # deleted if Redis holds no key of it (plans/thread_registry.py)
                            "FindOne", "registry_forget"]
    script = done.ops[2]
    assert isinstance(script, Script)
    # the outbox stream too: its last id's time stamps the tombstones when later than the
    # clock (an entry stamped ahead of it, hot/lua/include/generation_entry.lua)
    assert list(script.keys) == [*keys.all, keys.gone, ctx.outbox_of("t")]
    assert list(script.args) == [TOMBSTONE_TTL_S, member("", IDS[0])]
    stones = done.ops[3]  # MongoDB's tombstones: each checkpoint either tier held, and '*'
    assert isinstance(stones, BulkWrite) and stones.collection == ctx.collections.tombstones
    assert [r.filter["_id"] for r in stones.requests] == [
        D.doc_id("t", f) for f in sorted([member("", IDS[0]), member("", IDS[1]), "*"])]
    assert {r.update["$max"]["at_ms"] for r in stones.requests
            if isinstance(r, UpdateDoc)} == {1700000000123}
    deletes = [op for op in done.ops if isinstance(op, DeleteMany)]
    cols = ctx.collections
    assert [d.collection for d in deletes[:4]] == [cols.checkpoints, cols.blobs, cols.writes,
                                                   cols.items]
    assert [d.filter for d in deletes[:4]] == [D.stored_before("t", 1700000000123)] * 4
    assert (deletes[4].collection, deletes[4].filter) == (cols.threads,
                                                             {"_id": "1:t", "thread_id": "t"})
    assert deletes[5].collection == cols.chunks  # chunks after their owners


def test_prune_keep_latest_drops_older_checkpoints_with_their_writes_and_blobs() -> None:
    ctx = context()
    p0, p1 = stored(ctx, 0, "zero"), stored(ctx, 1, "one")
    cols = ctx.collections
    wid = D.doc_id("t", "", IDS[0], "task", 0)

    def answer(op: Op[Any]) -> Any:
        if isinstance(op, Pipeline):  # Redis time at the start, then the outbox: empty
            return [[b"1700000001", b"500000"]] if op.commands[0][0] == "TIME" else [[]]
        if isinstance(op, Find) and op.collection == cols.checkpoints:
            return [D.checkpoint_doc("t", p.record) for p in (p0, p1)]
        if isinstance(op, Find) and op.collection == cols.blobs:
            return [D.blob_doc("t", f, v) for p in (p0, p1) for f, v in p.blobs]
        if isinstance(op, Find) and op.collection == cols.writes:
            return [{"_id": wid, "checkpoint_ns": "", "checkpoint_id": IDS[0]}]
        if isinstance(op, Find) and op.collection == cols.items:
            return []  # no list values: no items
        return 1 if isinstance(op, Script) else None

    done = drive(history_edits.prune_plan(ctx, ["t"], "keep_latest"), answer)
    assert done.kinds()[:2] == ["Pipeline", "Pipeline"]  # TIME, then the flush-wait
    assert list(done.ops[0].commands) == [["TIME"]]  # type: ignore[attr-defined]
    script = next(op for op in done.ops if isinstance(op, Script))
    assert script.name == "delete_parts"
    (old_blob,) = [f for f, _ in p0.blobs]
    assert list(script.args) == [TOMBSTONE_TTL_S, 1, member("", IDS[0]), old_blob]
    bulk = {op.collection: [r.filter["_id"] for r in op.requests]
            for op in done.ops if isinstance(op, BulkWrite)}
    assert bulk == {cols.checkpoints: [D.doc_id("t", "", IDS[0])], cols.writes: [wid],
                    cols.blobs: D.blob_ids("t", [old_blob]),  # no items to delete
                    cols.tombstones: [D.doc_id("t", member("", IDS[0]))]}
    assert not any(isinstance(op, Pipeline) and op.commands[0][0] == "HDEL"
                   for op in done.ops)


def test_prune_checks_its_arguments_before_any_operation() -> None:
    with pytest.raises(ValueError, match="keep_last must be an int >= 1"):
        plan = history_edits.prune_plan(context(), ["t"], "keep_latest", keep_last=0)
        drive(plan, lambda op: None)


def test_copy_thread_stamps_the_copies_with_redis_time_and_drops_stale_hot_keys() -> None:
    ctx = context()
    p0 = stored(ctx, 0, "zero")
    cols = ctx.collections

    def answer(op: Op[Any]) -> Any:
        if isinstance(op, Pipeline):
            return [[b"1700000001", b"500000"]] if op.commands[0][0] == "TIME" else [[]]
        if isinstance(op, Find):
            return [D.checkpoint_doc("src", p0.record)] if op.collection == cols.checkpoints \
                else []
        if isinstance(op, Script):
            return 0  # released
        return None

    done = drive(thread_copy.copy_thread_plan(ctx, "src", "dst"), answer)
    (copy,) = [op for op in done.ops if isinstance(op, BulkWrite)]
    first = copy.requests[0]
    assert isinstance(first, UpdateDoc)
    doc = first.update
    assert first.filter == {"_id": D.doc_id("dst", "", IDS[0]), "thread_id": "dst"}
    # the copy's Redis time, over an earlier copy's document too (a delete of "dst" that
    # began before keeps it)
    assert doc["$set"]["thread_id"] == "dst" and doc["$max"] == {"put_ms": 1700000001500}
    kinds = done.kinds()  # released, then the copy's thread summary read and written
    assert "release" in kinds and kinds[kinds.index("release") + 1] == "page"


def test_release_gives_up_at_the_deadline_keeping_the_hot_keys() -> None:
    ctx = context(delete_flush_timeout_s=1)
    clock = ctx.clock
    assert isinstance(clock, FakeClock)

    def answer(op: Op[Any]) -> Any:
        return 3 if isinstance(op, Script) else outbox(left=True)(op)

    with pytest.raises(FlushTimeoutError):
        drive(history_edits.release_plan(ctx, "t"), answer, clock)
    assert clock.now_s - 1000.0 >= 1.0


def test_a_dead_letter_of_a_long_thread_id_is_named_by_its_start_and_length() -> None:
    long_id, long_error = "t" * 60_000, "ResponseError: " + "x" * 5_000
    exc = DeadLetteredError([(long_id, "1-0", long_error), ("short", "2-0", "boom")],
                            "p:outbox:dead")
    assert str(exc) == (
        "2 outbox entries were dead-lettered in 'p:outbox:dead' instead of reaching "
        f"MongoDB: thread {'t' * 120!r}... (60,000 characters) entry 1-0 "
        f"(ResponseError: {'x' * 285}... (5,015 characters)); "
        "thread 'short' entry 2-0 (boom)")
    assert exc.entries[0] == (long_id, "1-0", long_error)  # whole in the attribute


def test_a_dead_letter_of_a_store_entry_names_its_namespace() -> None:
    exc = DeadLetteredError([("\x00sv.big", "3-0", "BulkWriteFailed: codes [10334]")],
                            "p:outbox:dead")
    assert "store namespace 'v.big' entry 3-0 (BulkWriteFailed: codes [10334])" in str(exc)
