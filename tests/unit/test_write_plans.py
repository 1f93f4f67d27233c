"""put and put_writes plans with canned replies: the script call, refusals, the outbox-full
policy under a controlled clock, the deleted-checkpoint check, the cluster XADD, strict mode."""

from __future__ import annotations

from typing import Any

import ormsgpack
import pytest
from langgraph.checkpoint.base import empty_checkpoint

from langgraph_durable.core.ops import (
    BulkWrite,
    Find,
    FindOne,
    Op,
    Parallel,
    Pipeline,
    Script,
    UpdateDoc,
)
from langgraph_durable.core.records import CheckpointRecord, WriteRecord, member
from langgraph_durable.durable import documents as D
from langgraph_durable.errors import (
    ConcurrentRunError,
    ConfigurationError,
    InvalidIdentifierError,
    OutboxFullError,
    ThreadDeletedError,
)
from langgraph_durable.hot.keys import outbox_key, partition_of
from langgraph_durable.plans import write

from .stepping import Drive, FakeClock, context, drive, refused

PARENT = "1ef00000-0000-6000-8000-000000000001"
CHILD = "1ef00000-0000-6000-8000-000000000002"
ENTRY = b"1700000000000-0"


def cfg(cid: str | None = None, thread: str = "t") -> Any:
    conf: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ""}
    if cid:
        conf["checkpoint_id"] = cid
    return {"configurable": conf}


def checkpoint(cid: str = CHILD, value: Any = 7) -> Any:
    cp = empty_checkpoint()
    cp["id"] = cid
    cp["channel_values"] = {"v": value}
    cp["channel_versions"] = {"v": "2"}
    return cp


def prepare(ctx: Any, parent: str | None = PARENT) -> write.PreparedPut:
    return write.prepare_put(ctx, cfg(parent), checkpoint(), {"step": 1}, {"v": "2"})


def test_put_is_one_script_call_with_named_arguments() -> None:
    ctx = context()
    put = prepare(ctx)
    done = drive(write.put_plan(ctx, put), lambda op: ENTRY)
    assert done.result == {
        "configurable": {"thread_id": "t", "checkpoint_ns": "", "checkpoint_id": CHILD}}
    (op,) = done.ops
    assert isinstance(op, Script) and op.name == "put"
    keys = ctx.keys("t")
    assert list(op.keys) == [*keys.all, keys.gone, ctx.outbox, ctx.registry_of("t")]
    m = member("", CHILD)
    assert list(op.args[:5]) == [ctx.config.max_outbox, "t", put.args.payload, m, ""]
    # the entry carries the bytes it names: the record and the blob (no items here)
    size = len(op.args[5]) + len(op.args[13])
    assert ormsgpack.unpackb(put.args.payload) == ["cp", m, ["\x00v\x002"], [], size]
    assert list(op.args[7:12]) == ["", "0", member("", PARENT), "0", 1]  # 1 blob pair
    assert op.args[12] == "\x00v\x002"
    rec = CheckpointRecord.unpack("", CHILD, op.args[5], op.args[6])
    assert (rec.parent_id, rec.blob_fields) == (PARENT, ("\x00v\x002",))


def test_first_input_checkpoint_of_a_thread_sets_the_new_thread_flag() -> None:
    ctx = context()
    put = write.prepare_put(ctx, cfg(), checkpoint(), {"step": -1}, {"v": "2"})
    assert put.args.op().args[8] == "1" and put.args.named == ""


def test_stale_head_raises_concurrent_run_error_naming_both_heads() -> None:
    ctx = context()
    ctx.heads.seen("t", "", PARENT)  # this run read PARENT as the latest
    put = prepare(ctx)
    assert put.args.expected_head == member("", PARENT)
    other = "1ef00000-0000-6000-8000-000000000009"

    def answer(op: Op[Any]) -> Any:
        raise refused(f"STALE_HEAD {other}")

    with pytest.raises(ConcurrentRunError, match=f"now {other!r}.*started from {PARENT!r}"):
        drive(write.put_plan(ctx, put), answer)


def test_fork_policy_expects_no_head() -> None:
    ctx = context(on_concurrent_run="fork")
    ctx.heads.seen("t", "", PARENT)
    assert prepare(ctx).args.expected_head == ""


def _full_then(ok_after: int) -> Any:
    calls = {"n": 0}

    def answer(op: Op[Any]) -> Any:
        calls["n"] += 1
        if calls["n"] <= ok_after:
            raise refused("OUTBOX_FULL")
        return ENTRY
    return answer


def test_outbox_full_blocks_with_backoff_until_there_is_room() -> None:
    ctx = context(on_outbox_full="block", outbox_full_timeout_s=5)
    assert isinstance(ctx.clock, FakeClock)
    done = drive(write.put_plan(ctx, prepare(ctx)), _full_then(3), ctx.clock)
    assert done.kinds() == ["put", "Sleep", "put", "Sleep", "put", "Sleep", "put"]
    assert [op.seconds for op in done.ops if hasattr(op, "seconds")] == [0.005, 0.01, 0.02]
    assert done.result["configurable"]["checkpoint_id"] == CHILD


def test_outbox_full_blocks_up_to_the_timeout_then_raises() -> None:
    ctx = context(on_outbox_full="block", outbox_full_timeout_s=1)
    assert isinstance(ctx.clock, FakeClock)
    start = ctx.clock.now_s
    record = Drive()
    with pytest.raises(OutboxFullError, match="max_outbox=.*put of thread 't'"):
        drive(write.put_plan(ctx, prepare(ctx)), _full_then(10**6), ctx.clock, record)
    slept = sum(op.seconds for op in record.ops if hasattr(op, "seconds"))
    assert 1.0 <= slept < 1.1 and ctx.clock.now_s - start == pytest.approx(slept)


def test_outbox_full_with_the_raise_policy_raises_at_once() -> None:
    ctx = context(on_outbox_full="raise")
    record = Drive()
    with pytest.raises(OutboxFullError):
        drive(write.put_plan(ctx, prepare(ctx)), _full_then(1), ctx.clock, record)  # type: ignore[arg-type]
    assert record.kinds() == ["put"]


def _deleted_at(ms: int, put_ms: int | None) -> Any:
    """The put is refused as DELETED until sent with checked-through >= ms; MongoDB's
    copy of the named checkpoint has ``put_ms`` (None = not there)."""
    def answer(op: Op[Any]) -> Any:
        if isinstance(op, FindOne):
            return None if put_ms is None else {"_id": "x", "put_ms": put_ms}
        assert isinstance(op, Script)
        if int(op.args[10 if op.name == "put" else 4]) < ms:  # checked-through ms
            raise refused(f"DELETED {ms}")
        return ENTRY
    return answer


def test_deleted_parent_that_mongodb_holds_from_before_the_delete_raises() -> None:
    ctx = context()
    record = Drive()
    with pytest.raises(ThreadDeletedError, match=f"checkpoint {PARENT!r}.*at 5000 ms"):
        drive(write.put_plan(ctx, prepare(ctx)), _deleted_at(5000, 4000), record=record)
    assert record.kinds() == ["put", "FindOne"]
    find = record.ops[1]
    assert isinstance(find, FindOne) and find.collection == ctx.collections.checkpoints
    assert find.filter == {"_id": D.doc_id("t", "", PARENT), "thread_id": "t"}


def test_deleted_parent_gone_from_mongodb_raises() -> None:
    ctx = context()
    with pytest.raises(ThreadDeletedError):
        drive(write.put_plan(ctx, prepare(ctx)), _deleted_at(5000, None))


def test_deleted_parent_stored_again_since_is_sent_again_checked_through_the_delete() -> None:
    ctx = context()
    done = drive(write.put_plan(ctx, prepare(ctx)), _deleted_at(5000, 6000))
    assert done.kinds() == ["put", "FindOne", "put"]
    assert [op.args[10] for op in done.ops if isinstance(op, Script)] == ["0", "5000"]
    assert done.result["configurable"]["checkpoint_id"] == CHILD


def _unknown(stone_ms: int | None, put_ms: int | None) -> Any:
    """Redis neither holds the named checkpoint nor a tombstone of it (UNKNOWN) until the
    put is sent with a checked-through time; MongoDB's tombstone of it has ``at_ms``
    ``stone_ms`` and its copy ``put_ms`` (None = not there)."""
    def answer(op: Op[Any]) -> Any:  # a Parallel's operations come one by one
        if isinstance(op, FindOne):
            return None if put_ms is None else {"_id": "x", "put_ms": put_ms}
        if isinstance(op, Find):  # every tombstone of the thread
            other = {"f": member("", "1ef-other"), "at_ms": 3000}
            return [other] if stone_ms is None else [other, {"f": member("", PARENT),
                                                             "at_ms": stone_ms}]
        assert isinstance(op, Script)
        if op.name == "learn_tombstones":
            return 1
        if op.args[10] == "0":
            raise refused(f"UNKNOWN {PARENT}")
        return ENTRY
    return answer


@pytest.mark.parametrize("stone_ms, put_ms, checked", [
    (None, None, "1"),  # never deleted, not stored yet (or the tombstone expired): taken
    (None, 4000, "1"),  # never deleted, stored: taken
    (5000, 6000, "5000"),  # deleted, stored again since (copy_thread, an import): taken
])
def test_a_parent_redis_cannot_answer_for_is_checked_in_mongodb_and_sent_again(
    stone_ms: int | None, put_ms: int | None, checked: str
) -> None:
    ctx = context()
    done = drive(write.put_plan(ctx, prepare(ctx)), _unknown(stone_ms, put_ms))
    assert done.kinds() == ["put", "Parallel", "FindOne", "Find", "learn_tombstones", "put"]
    ask = done.ops[1]
    assert isinstance(ask, Parallel)
    assert [(o.collection, dict(o.filter)) for o in ask.ops] == [  # type: ignore[attr-defined]
        (ctx.collections.checkpoints, {"_id": D.doc_id("t", "", PARENT), "thread_id": "t"}),
        (ctx.collections.tombstones, {"thread_id": "t"})]
    learn = done.ops[4]  # the thread's tombstones into Redis, marked complete
    assert isinstance(learn, Script) and list(learn.keys) == [ctx.keys("t").gone]
    stones = [(member("", "1ef-other"), 3000)] + (
        [] if stone_ms is None else [(member("", PARENT), stone_ms)])
    assert list(learn.args[1:]) == [x for pair in sorted(stones) for x in pair]
    puts = [op for op in done.ops if isinstance(op, Script) and op.name == "put"]
    assert [op.args[10] for op in puts] == ["0", checked]
    assert done.result["configurable"]["checkpoint_id"] == CHILD


@pytest.mark.parametrize("put_ms", [None, 4000])
def test_a_parent_only_mongodb_tombstones_raises_thread_deleted(put_ms: int | None) -> None:
    ctx = context()
    record = Drive()
    with pytest.raises(ThreadDeletedError, match=f"checkpoint {PARENT!r}.*at 5000 ms"):
        drive(write.put_plan(ctx, prepare(ctx)), _unknown(5000, put_ms), record=record)
    assert record.kinds() == ["put", "Parallel", "FindOne", "Find", "learn_tombstones"]


def test_on_a_cluster_the_put_and_its_outbox_entry_are_one_script_in_one_slot() -> None:
    ctx = context(cluster=True)  # 16 outbox partitions by default
    assert ctx.partitions == 16
    put = prepare(ctx)
    done = drive(write.put_plan(ctx, put), lambda op: ENTRY)
    (script,) = done.ops
    assert isinstance(script, Script) and script.name == "put"
    stream = ctx.outbox_of("t")
    assert script.keys[-2] == stream == outbox_key("u", partition_of("t", 16), 16)
    assert script.keys[-1] == ctx.registry_of("t")  # the partition's thread registry
    tag = stream[:stream.index("}") + 1]  # {u:p<k>}: every key in the partition's slot
    assert all(k.startswith(tag + ":") for k in script.keys)


def test_a_cluster_needs_two_partitions_or_more() -> None:
    with pytest.raises(ConfigurationError, match="at least 2 on a Redis Cluster"):
        context(cluster=True, outbox_partitions=1)


def test_strict_put_writes_mongodb_then_looks_for_tombstones() -> None:
    ctx = context(durability="strict")

    def answer(op: Op[Any]) -> Any:
        if isinstance(op, Script):
            return ENTRY
        if isinstance(op, Pipeline):  # HGETALL of the tombstones: none, known complete
            return [{b"!": b"1"}]
        return None

    done = drive(write.put_plan(ctx, prepare(ctx)), answer)
    # one document: the checkpoint with its small value inside (as the flusher writes it)
    assert done.kinds() == ["put", "Parallel", "BulkWrite", "Pipeline"]
    cp_write = done.ops[2]
    assert isinstance(cp_write, BulkWrite) and cp_write.collection == ctx.collections.checkpoints
    # stored at the outbox entry's time (its id), set once
    first = cp_write.requests[0]
    assert isinstance(first, UpdateDoc) and first.update["$setOnInsert"] == {
        "put_ms": 1700000000000}
    assert first.update["$max"] == {"v": 4}  # a document holding values: never lowered
    assert len(first.update["$addToSet"]["vals"]["$each"]) == 1


def test_put_writes_marks_special_channels_as_overwriting() -> None:
    ctx = context()
    prepared = write.prepare_put_writes(ctx, cfg(PARENT), [("v", 1), ("__error__", "x")],
                                        "task", "")
    assert prepared is not None
    done = drive(write.put_writes_plan(ctx, prepared), lambda op: ENTRY)
    (op,) = done.ops
    assert isinstance(op, Script) and op.name == "put_writes"
    m = member("", PARENT)
    assert list(op.args[:6]) == [ctx.config.max_outbox, "t", prepared.args.payload, m, "0",
                                 2]  # two triples, no items
    triples = [op.args[i:i + 3] for i in range(6, len(op.args), 3)]
    assert [(f, flag) for f, _, flag in triples] == [
        (f"{m}\x00task\x000", "0"), (f"{m}\x00task\x00-1", "1")]
    w = WriteRecord.unpack(triples[0][1], "test")
    assert (w.channel, w.seq) == ("v", 1_700_000_000_000_000_000)  # seq from ctx.clock


def test_put_writes_without_writes_does_nothing() -> None:
    ctx = context()
    assert write.prepare_put_writes(ctx, cfg(PARENT), [], "task", "") is None
    assert drive(write.put_writes_plan(ctx, None), lambda op: None).ops == []


def test_put_writes_needs_a_checkpoint_id() -> None:
    with pytest.raises(InvalidIdentifierError, match="needs config"):
        write.prepare_put_writes(context(), cfg(), [("v", 1)], "task", "")


def test_put_writes_to_a_deleted_checkpoint_raises() -> None:
    ctx = context()
    prepared = write.prepare_put_writes(ctx, cfg(PARENT), [("v", 1)], "task", "")
    with pytest.raises(ThreadDeletedError):
        drive(write.put_writes_plan(ctx, prepared), _deleted_at(5000, 10))
