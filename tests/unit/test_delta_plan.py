"""get_delta_channel_history's plan with canned replies: every CHAIN status (done, left
Redis, a blob Redis lacks, the step limit, target not in Redis) and the MongoDB segment."""

from __future__ import annotations

from typing import Any

from langgraph_durable.core.ops import Aggregate, Find, Op, Script
from langgraph_durable.durable import documents as D
from langgraph_durable.durable import inline as I
from langgraph_durable.hot.scripts import ChainReply, ChainRow, ChainStatus, PartsReply
from langgraph_durable.plans import delta

from .stepping import context, drive
from .test_read_plans import IDS, stored, writes


def chain_row(p: Any, ws: list[Any], seed: bool, missing: bool = False) -> ChainRow:
    """A CHAIN row for ancestor ``p``: its writes, its blob as a seed or as missing."""
    (field, value), = p.args.blobs
    return ChainRow(p.checkpoint_id.encode(), p.args.index, [w.pack() for w in ws],
                    [(field.encode(), value)] if seed else [],
                    [field.encode()] if missing else [])


def chain(status: ChainStatus, rows: list[ChainRow], nxt: str) -> ChainReply:
    """A CHAIN reply naming no items (no list values)."""
    return ChainReply(status, rows, nxt, [], [])


def history(ctx: Any, answer: Any, target: str = IDS[2]) -> tuple[list[str], Any]:
    done = drive(delta.delta_history_plan(ctx, "t", "", target, ["v"]), answer)
    return done.kinds(), done.result.decode(ctx.serde)


def test_a_chain_redis_holds_is_one_script_call() -> None:
    ctx = context()
    p1 = stored(ctx, 1, "seed-1")
    w1 = writes(ctx, 1, [("v", "w1")])
    kinds, got = history(ctx, lambda op: chain(ChainStatus.DONE, [chain_row(p1, w1, True)], ""))
    assert kinds == ["chain"]
    assert got == {"v": {"writes": [("task", "v", "w1")], "seed": "seed-1"}}


def test_a_chain_leaving_redis_goes_on_in_mongodb_from_that_ancestor() -> None:
    ctx = context()
    p0, p1 = stored(ctx, 0, "seed-0"), stored(ctx, 1, "x")
    w1, w0 = writes(ctx, 1, [("v", "w1")]), writes(ctx, 0, [("v", "w0")])
    cols = ctx.collections

    def answer(op: Op[Any]) -> Any:
        if isinstance(op, Script) and op.name == "chain":  # IDS[1] in Redis without seed
            return chain(ChainStatus.LEFT_REDIS, [chain_row(p1, w1, False)], IDS[0])
        if isinstance(op, Find) and op.collection == cols.checkpoints:
            return [D.checkpoint_doc("t", p0.record)]
        if isinstance(op, Find) and op.collection == cols.writes:
            return [D.write_doc("t", "", IDS[0], w) for w in w0]
        if isinstance(op, Aggregate) and op.collection == cols.checkpoints:
            # the seed inside its checkpoint document (durable/inline.py), as unwound
            doc, _ = I.checkpoint_docs("t", p0.record, p0.blobs)
            return [{"checkpoint_ns": "", "vals": e} for e in doc["vals"]]
        if isinstance(op, Script) and op.name == "parts":
            return PartsReply([[]], [None], [], [])  # no writes, blob, items in Redis
        raise AssertionError(op)

    kinds, got = history(ctx, answer)
    assert kinds == ["chain", "Find", "Parallel", "Find", "Aggregate", "parts"]
    assert got == {"v": {"writes": [("task", "v", "w0"), ("task", "v", "w1")],
                         "seed": "seed-0"}}


def test_a_blob_redis_lacks_is_read_from_mongodb_and_the_walk_goes_on() -> None:
    ctx = context()
    p1 = stored(ctx, 1, "from-mongo")
    calls: list[list[Any]] = []

    def answer(op: Op[Any]) -> Any:
        if isinstance(op, Script):
            calls.append(list(op.args))
            return chain(ChainStatus.BLOB_MISSING, [chain_row(p1, [], False, missing=True)],
                         IDS[1])
        # one aggregate asks both places: here the blobs document answers
        assert isinstance(op, Aggregate) and op.collection == ctx.collections.checkpoints
        return [D.blob_doc("t", f, v) for f, v in p1.blobs]

    kinds, got = history(ctx, answer)
    assert kinds == ["chain", "Aggregate"]  # the seed closed the only channel
    assert got == {"v": {"writes": [], "seed": "from-mongo"}}
    assert calls == [["", IDS[2], delta.REDIS_STEPS, "v"]]


def test_the_step_limit_continues_from_the_last_ancestor() -> None:
    ctx = context()
    p1, p0 = stored(ctx, 1, "x"), stored(ctx, 0, "seed-0")
    replies = [chain(ChainStatus.STEP_LIMIT, [chain_row(p1, [], False)], IDS[1]),
               chain(ChainStatus.DONE, [chain_row(p0, [], True)], "")]
    sent: list[Any] = []

    def answer(op: Op[Any]) -> Any:
        assert isinstance(op, Script)
        sent.append(op.args[1])
        return replies.pop(0)

    kinds, got = history(ctx, answer)
    assert kinds == ["chain", "chain"] and sent == [IDS[2], IDS[1]]
    assert got == {"v": {"writes": [], "seed": "seed-0"}}


def test_a_target_redis_does_not_hold_starts_from_its_mongodb_record() -> None:
    ctx = context()
    p1, p0 = stored(ctx, 1, "x"), stored(ctx, 0, "seed-0")
    cols = ctx.collections

    def answer(op: Op[Any]) -> Any:
        if isinstance(op, Script) and op.name == "chain":
            return chain(ChainStatus.TARGET_NOT_IN_REDIS, [], IDS[1])
        if isinstance(op, Find) and op.collection == cols.checkpoints:
            assert op.filter["checkpoint_id"] == {"$lte": IDS[1]}
            return [D.checkpoint_doc("t", p1.record), D.checkpoint_doc("t", p0.record)]
        if isinstance(op, Aggregate) and op.collection == cols.checkpoints:
            return [D.blob_doc("t", f, v) for f, v in p0.blobs]  # a blobs document
        if isinstance(op, Find):
            return []
        return PartsReply([[]], [None], [], [])  # PARTS: no writes, blob, items in Redis

    kinds, got = history(ctx, answer, target=IDS[1])
    assert kinds == ["chain", "Find", "Parallel", "Find", "Aggregate", "parts"]
    assert got == {"v": {"writes": [], "seed": "seed-0"}}  # the target itself is skipped
