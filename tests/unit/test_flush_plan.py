"""One flush round with canned replies: own pending entries, claiming idle ones, new
entries, the dead-letter stream, acknowledgement and the take-back of deleted records."""

from __future__ import annotations

from typing import Any

import ormsgpack
import pytest
import redis.exceptions

from langgraph_durable.core.ops import (
    BulkWrite,
    BulkWriteFailed,
    DeleteMany,
    Find,
    InsertDoc,
    Op,
    Pipeline,
    Script,
    UpdateDoc,
    WriteFailure,
)
from langgraph_durable.core.records import member
from langgraph_durable.durable import documents as D
from langgraph_durable.hot.keys import CONSUMER_GROUP
from langgraph_durable.hot.scripts import AckSettleReply
from langgraph_durable.outbox.flusher import BatchStats, Flusher, flush_batch_plan
from langgraph_durable.outbox.group import dead_letter_key
from langgraph_durable.plans.fence import insert_else_upsert

from .stepping import context, drive
from .test_read_plans import IDS, stored, writes

EID = b"1699999999000-0"  # one second before the fake clock's wall time
M0 = member("", IDS[0]).encode()  # the member of checkpoint IDS[0] (a tombstone's field)


class Tiers:
    """Redis's records of thread t (one checkpoint with a blob, one write) and the
    replies to a flush round's operations."""

    def __init__(self, ctx: Any, *, acked: int = 1,
                 tombstones: dict[bytes, bytes] | None = None) -> None:
        self.ctx = ctx
        p = stored(ctx, 0, "zero")
        (w,) = writes(ctx, 0, [("v", 1)])
        m = member("", IDS[0])
        self.wfield = f"{m}\x00task\x000"
        k = ctx.keys("t")
        self.hashes = {(k.cp, m): p.args.record, (k.cv, m): p.args.index,
                       **{(k.bl, f): v for f, v in p.args.blobs}, (k.w, self.wfield): w.pack()}
        # outbox payloads: [kind, member, fields, item digests, bytes named] (no list
        # values: no items)
        size = len(p.args.record) + sum(len(v) for _, v in p.args.blobs)
        assert p.args.payload == ormsgpack.packb(
            ["cp", m, [f for f, _ in p.args.blobs], [], size])
        self.cp_entry = {b"t": b"t", b"p": p.args.payload}
        self.w_entry = {b"t": b"t", b"p": ormsgpack.packb(["w", m, [self.wfield], [],
                                                           len(w.pack())])}
        self.pending: list[Any] = []  # own pending entries
        self.claimable: list[Any] = []  # idle entries of other consumers
        self.new: list[Any] = []  # entries not yet delivered
        # Redis's tombstones of t: known complete ('!') unless a test says otherwise
        self.acked, self.tombstones = acked, {b"!": b"1", **(tombstones or {})}
        self.mongo_tombstones: list[dict[str, Any]] = []  # asked without '!'

    def __call__(self, op: Op[Any]) -> Any:
        if isinstance(op, Pipeline):
            name = op.commands[0][0]
            if name == "XREADGROUP":
                return [self.pending if op.commands[0][-1] == "0" else self.new]
            if name == "XAUTOCLAIM":
                return [self.claimable]
            if name == "HSTRLEN":
                return [10] * len(op.commands)
            if name == "HMGET":
                return [[self.hashes.get((c[1], n)) for n in c[2:]] for c in op.commands]
            if name == "HGETALL":
                return [self.tombstones]
            return [1] * len(op.commands)  # XADD / XACK / XDEL of the dead letters
        if isinstance(op, Find) and op.collection == self.ctx.collections.tombstones:
            return self.mongo_tombstones
        if isinstance(op, Find) and op.collection == self.ctx.collections.threads:
            return []  # no thread summary yet
        if isinstance(op, Script) and op.name == "group_upkeep":
            return [0, 0]  # nothing removed or rewound
        if isinstance(op, Script) and op.name == "ack_settle":
            n = (len(op.args) - 4) // 2  # one thread: group, ttl, maxhot, k, (id, member)...
            return AckSettleReply([bool(self.acked)] * n, 0)
        return None  # MongoDB writes


def test_a_round_copies_its_own_pending_entries_and_acknowledges_them() -> None:
    ctx = context()
    tiers = Tiers(ctx)
    tiers.pending = [(EID, tiers.cp_entry), (b"1699999999000-1", tiers.w_entry)]
    done = drive(flush_batch_plan(ctx, "me", block_ms=10, claim=False), tiers)
    # own pending (XREADGROUP 0), the records (HMGET: the entries carry their sizes, so
    # no HSTRLEN), two bulk writes (the small channel value is inside its checkpoint's
    # document: no blobs document), the thread summary (read, then one bulk write:
    # plans/summary_upkeep.py), the tombstones, the acknowledgement
    assert done.kinds() == ["Pipeline", "Pipeline", "BulkWrite", "BulkWrite",
                            "Find", "BulkWrite", "Pipeline", "ack_settle"]
    summary = done.ops[5]
    assert isinstance(summary, BulkWrite) and summary.collection == ctx.collections.threads
    (doc,) = [r.doc for r in summary.requests]  # type: ignore[union-attr]
    assert (doc["thread_id"], doc["cid"], doc["state"]) == ("t", IDS[0], "done")
    assert [op.commands[0][0] for op in done.ops[:2] if isinstance(op, Pipeline)] == [
        "XREADGROUP", "HMGET"]
    tomb = done.ops[6]  # the deletes' tombstones, after the writes, before the ack
    assert isinstance(tomb, Pipeline) and tomb.commands == [["HGETALL", ctx.keys("t").gone]]
    cols = ctx.collections
    assert [op.collection for op in done.ops if isinstance(op, BulkWrite)] == [
        cols.writes, cols.checkpoints,  # writes before checkpoints
        cols.threads]  # the summary after the records it names
    for op in done.ops[2:4]:  # new documents are inserted, not upserted
        assert isinstance(op, BulkWrite) and all(isinstance(r, InsertDoc) for r in op.requests)
    (cp,) = done.ops[3].requests  # type: ignore[attr-defined]
    assert cp.doc["v"] == 4 and [e["k"] for e in cp.doc["vals"]] == ["1:v|1:1"]
    ack = done.ops[-1]
    assert isinstance(ack, Script)
    assert list(ack.keys) == [ctx.outbox, *ctx.keys("t").all]
    m = ormsgpack.unpackb(tiers.cp_entry[b"p"])[1]
    assert list(ack.args) == [CONSUMER_GROUP, ctx.config.hot_ttl_s,
                              ctx.config.hot_max_checkpoints, 2, EID, m, 0,
                              b"1699999999000-1", m, 0]
    stats = done.result
    assert (stats.entries, stats.documents, stats.dead, stats.outbox_length) == (2, 2, 0, 0)
    assert stats.lags_s == [1.0, 1.0]  # read from ctx.clock


def test_with_nothing_pending_a_claiming_round_tends_the_group_and_claims_idle_entries() -> None:
    ctx = context(claim_idle_s=2)
    tiers = Tiers(ctx)
    tiers.claimable = [(EID, tiers.cp_entry)]
    done = drive(flush_batch_plan(ctx, "me", block_ms=10, claim=True), tiers)
    first = [op.name if isinstance(op, Script) else op.commands[0][0]
             for op in done.ops[:3]]
    assert first == ["XREADGROUP", "group_upkeep", "XAUTOCLAIM"]
    claim = done.ops[2]
    assert isinstance(claim, Pipeline)
    assert list(claim.commands[0][:6]) == [
        "XAUTOCLAIM", ctx.outbox, CONSUMER_GROUP, "me", 2000, "0-0"]
    assert done.result.entries == 1


def test_new_entries_are_read_blocking_up_to_block_ms() -> None:
    ctx = context()
    tiers = Tiers(ctx)
    tiers.new = [(EID, tiers.w_entry)]
    done = drive(flush_batch_plan(ctx, "me", block_ms=250, claim=False), tiers)
    read_new = done.ops[1]
    assert isinstance(read_new, Pipeline)
    assert list(read_new.commands[0]) == ["XREADGROUP", "GROUP", CONSUMER_GROUP, "me", "COUNT",
                                          ctx.config.flush_batch_size, "BLOCK", 250,
                                          "STREAMS", ctx.outbox, ">"]
    assert done.result.documents == 1


def test_an_empty_outbox_ends_the_round() -> None:
    done = drive(flush_batch_plan(context(), "me", block_ms=0, claim=False), Tiers(context()))
    assert done.kinds() == ["Pipeline", "Pipeline"] and done.result.entries == 0


def test_an_entry_that_cannot_be_read_goes_to_the_dead_letter_stream() -> None:
    ctx = context()
    tiers = Tiers(ctx)
    tiers.pending = [(EID, {b"t": b"t", b"p": b"\xc1"}), (b"1699999999000-1", tiers.w_entry)]
    done = drive(flush_batch_plan(ctx, "me", block_ms=0, claim=False), tiers)
    at = next(i for i, op in enumerate(done.ops) if isinstance(op, Pipeline)
              and op.commands[0][0] == "XADD")
    (xadd,), (xack, xdel) = done.ops[at].commands, done.ops[at + 1].commands
    # the dead letter keeps the entry's own fields (thread, payload), its stream and id
    assert list(xadd[:3]) == ["XADD", dead_letter_key(ctx), "*"]
    letter = dict(zip(xadd[3::2], xadd[4::2]))
    assert {k: letter[k] for k in (b"entry", b"stream", b"thread", b"step", b"f:t", b"f:p")
            } == {b"entry": EID, b"stream": ctx.outbox.encode(), b"thread": b"t",
                  b"step": b"parse", b"f:t": b"t", b"f:p": b"\xc1"}
    assert list(xack) == ["XACK", ctx.outbox, CONSUMER_GROUP, EID]
    assert list(xdel) == ["XDEL", ctx.outbox, EID]
    assert (done.result.entries, done.result.dead, done.result.documents) == (2, 1, 1)


def test_entries_another_consumer_acknowledged_first_are_taken_back_after_a_delete() -> None:
    ctx = context()
    tiers = Tiers(ctx, acked=0, tombstones={b"*": b"1699999999500"})  # deleted after EID
    tiers.pending = [(EID, tiers.cp_entry)]
    done = drive(flush_batch_plan(ctx, "me", block_ms=0, claim=False), tiers)
    deletes = [op for op in done.ops if isinstance(op, DeleteMany)]
    cols = ctx.collections
    # and the summary that round wrote (plans/fence.py)
    assert [op.collection for op in deletes] == [cols.checkpoints, cols.blobs, cols.threads,
                                                 cols.chunks]
    assert deletes[0].filter == {"_id": {"$in": [D.doc_id("t", "", IDS[0])]}}


def test_a_round_a_delete_overtook_takes_back_what_it_wrote_before_acknowledging() -> None:
    # not a stalled round: its own entry, acknowledged by it, but the delete removed the
    # checkpoint from MongoDB between this round's read of the records and its write
    ctx = context()
    tiers = Tiers(ctx, acked=1, tombstones={M0: b"1699999999500"})
    tiers.pending = [(EID, tiers.cp_entry)]
    done = drive(flush_batch_plan(ctx, "me", block_ms=0, claim=False), tiers)
    kinds = done.kinds()
    assert kinds.index("DeleteMany") < kinds.index("ack_settle")
    deletes = [op for op in done.ops if isinstance(op, DeleteMany)]
    assert deletes[0].filter == {"_id": {"$in": [D.doc_id("t", "", IDS[0])]}}
    tiers.tombstones = {b"!": b"1", M0: b"1699999998000"}  # a delete before the entry: kept
    again = drive(flush_batch_plan(ctx, "me", block_ms=0, claim=False), tiers)
    assert "DeleteMany" not in again.kinds()


def test_a_round_asks_mongodb_for_the_tombstones_redis_does_not_hold_in_full() -> None:
    # Redis lost its data after a delete_thread: its tombstones of t are gone (no '!'),
    # MongoDB's remain; the round that stalled across both still takes its copy back
    ctx = context()
    tiers = Tiers(ctx, acked=0)
    tiers.tombstones = {}
    tiers.mongo_tombstones = [{"thread_id": "t", "f": M0.decode(), "at_ms": 1699999999500},
                              {"thread_id": "t", "f": "*", "at_ms": 1699999999500}]
    tiers.pending = [(EID, tiers.cp_entry)]
    done = drive(flush_batch_plan(ctx, "me", block_ms=0, claim=False), tiers)
    ask = next(op for op in done.ops if isinstance(op, Find)
               and op.collection != ctx.collections.threads)
    assert (ask.collection, ask.filter) == (ctx.collections.tombstones,
                                            {"thread_id": {"$in": ["t"]}})
    deletes = [op for op in done.ops if isinstance(op, DeleteMany)]
    cols = ctx.collections
    # and the summary that round wrote (plans/fence.py)
    assert [op.collection for op in deletes] == [cols.checkpoints, cols.blobs, cols.threads,
                                                 cols.chunks]
    assert deletes[0].filter == {"_id": {"$in": [D.doc_id("t", "", IDS[0])]}}
    tiers.mongo_tombstones = []  # never deleted: nothing taken back
    assert "DeleteMany" not in drive(flush_batch_plan(ctx, "me", block_ms=0, claim=False),
                                     tiers).kinds()


class TierTrouble(Tiers):
    """``Tiers`` whose records pipeline (HMGET) returns ``error`` in place of each reply,
    as a pipeline run with ``raise_on_error=False`` does."""

    def __init__(self, ctx: Any, error: Exception) -> None:
        super().__init__(ctx)
        self.error = error

    def __call__(self, op: Op[Any]) -> Any:
        if isinstance(op, Pipeline) and op.commands[0][0] == "HMGET":
            assert op.raise_on_error is False
            return [self.error] * len(op.commands)
        return super().__call__(op)


@pytest.mark.parametrize("error", [
    redis.exceptions.ConnectionError("Connection reset by peer"),  # a cluster node lost
    redis.exceptions.TimeoutError("Timeout reading from socket"),
    redis.exceptions.ReadOnlyError("READONLY You can't write against a read only replica."),
    redis.exceptions.ResponseError("OOM command not allowed when used memory > 'maxmemory'"),
    redis.exceptions.ResponseError("LOADING Redis is loading the dataset in memory"),
])
def test_a_tier_error_in_the_records_pipeline_fails_the_round_and_sets_nothing_aside(
        error: Exception) -> None:
    ctx = context()
    tiers = TierTrouble(ctx, error)
    tiers.pending = [(EID, tiers.cp_entry)]
    with pytest.raises(type(error)):
        drive(flush_batch_plan(ctx, "me", block_ms=0, claim=False), tiers)


def test_a_wrongtype_in_the_records_pipeline_sets_aside_that_thread_only() -> None:
    ctx = context()
    tiers = TierTrouble(ctx, redis.exceptions.ResponseError(
        "WRONGTYPE Operation against a key holding the wrong kind of value"))
    tiers.pending = [(EID, tiers.cp_entry)]
    done = drive(flush_batch_plan(ctx, "me", block_ms=0, claim=False), tiers)
    assert "BulkWrite" not in done.kinds() and "ack_settle" not in done.kinds()
    (xadd,) = next(op for op in done.ops if isinstance(op, Pipeline)
                   and op.commands[0][0] == "XADD").commands
    letter = dict(zip(xadd[3::2], xadd[4::2]))
    assert (letter[b"step"], letter[b"f:p"]) == (b"copy", tiers.cp_entry[b"p"])
    assert letter[b"error"].startswith(b"ResponseError: WRONGTYPE")
    assert done.result.dead == 1


@pytest.mark.parametrize("code", [13, 14031, 8000])  # Unauthorized, disk full, Atlas
def test_a_write_error_of_the_server_fails_the_round_instead_of_dead_lettering(
        code: int) -> None:
    ctx = context()
    tiers = Tiers(ctx)
    tiers.pending = [(EID, tiers.cp_entry)]

    def answer(op: Op[Any]) -> Any:
        if isinstance(op, BulkWrite):
            raise _bulk_error((0, code))
        return tiers(op)

    with pytest.raises(BulkWriteFailed):
        drive(flush_batch_plan(ctx, "me", block_ms=0, claim=False), answer)


def test_a_thread_whose_settle_failed_is_dead_lettered_after_its_acknowledgement() -> None:
    ctx = context()
    tiers = Tiers(ctx)
    tiers.pending = [(EID, tiers.cp_entry)]

    def answer(op: Op[Any]) -> Any:
        if isinstance(op, Script) and op.name == "ack_settle":
            return AckSettleReply([True], 0, {0: "WRONGTYPE Operation against a key"})
        return tiers(op)

    done = drive(flush_batch_plan(ctx, "me", block_ms=0, claim=False), answer)
    kinds = done.kinds()
    xadd_at = next(i for i, op in enumerate(done.ops) if isinstance(op, Pipeline)
                   and op.commands[0][0] == "XADD")
    assert kinds.index("ack_settle") < xadd_at
    letter = dict(zip(done.ops[xadd_at].commands[0][3::2], done.ops[xadd_at].commands[0][4::2]))
    assert (letter[b"step"], letter[b"error"]) == (
        b"settle", b"settle failed: WRONGTYPE Operation against a key")
    assert done.result.dead == 1 and done.result.documents == 1  # written: cp (value inside)


def test_a_missing_group_is_created_again() -> None:
    ctx = context()

    def answer(op: Op[Any]) -> Any:
        assert isinstance(op, Pipeline)
        if op.commands[0][0] == "XREADGROUP":
            raise redis.exceptions.ResponseError("NOGROUP No such key or consumer group")
        return [b"OK"]

    done = drive(flush_batch_plan(ctx, "me", block_ms=0, claim=False), answer)
    assert isinstance(done.ops[-1], Pipeline)
    assert list(done.ops[-1].commands[0]) == ["XGROUP", "CREATE", ctx.outbox, CONSUMER_GROUP,
                                              "0", "MKSTREAM"]
    assert done.result.entries == 0


def _bulk_error(*codes: tuple[int, int]) -> BulkWriteFailed:
    return BulkWriteFailed("col", [WriteFailure(i, c, "x") for i, c in codes])


def test_documents_already_stored_get_their_upserts_after_the_inserts() -> None:
    docs = [{"_id": n, "thread_id": "t"} for n in "abc"]
    ups = {n: UpdateDoc({"_id": n}, {"$set": {"x": 1}}, upsert=True) for n in "abc"}
    calls: list[Any] = []

    def answer(op: Op[Any]) -> Any:
        calls.append(op)
        if len(calls) == 1:  # b and c were stored already (a replayed entry)
            raise _bulk_error((1, 11000), (2, 11000))
        return None

    done = drive(insert_else_upsert("col", docs, lambda d: ups[d["_id"]]), answer)
    first, second = done.ops
    assert isinstance(first, BulkWrite) and isinstance(second, BulkWrite)
    assert [r.doc for r in first.requests if isinstance(r, InsertDoc)] == docs
    assert list(second.requests) == [ups["b"], ups["c"]]
    assert drive(insert_else_upsert("col", [], ups.get), answer).ops == []


def test_an_insert_error_other_than_a_duplicate_is_raised() -> None:
    docs = [{"_id": "a", "thread_id": "t"}]

    def answer(op: Op[Any]) -> Any:
        raise _bulk_error((0, 2))

    with pytest.raises(BulkWriteFailed):
        drive(insert_else_upsert("col", docs, D.upsert), answer)


def test_the_flusher_lingers_only_after_a_light_round() -> None:
    flusher = Flusher(context(flush_batch_size=400, flush_linger_s=0.2))
    waits = {n: flusher._linger_s(BatchStats(entries=n)) for n in (0, 1, 99, 100, 400)}
    # empty: the read already blocked; 100 of 400 and more: a good batch, no lag added
    assert waits == {0: 0.0, 1: 0.2, 99: 0.2, 100: 0.0, 400: 0.0}


def test_entries_without_sizes_are_measured_in_redis_and_grouped_by_bytes(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # entries an older version wrote ([kind, member, fields, digests]) carry no size
    ctx = context()
    tiers = Tiers(ctx)
    old = [{b"t": b"t", b"p": ormsgpack.packb(ormsgpack.unpackb(e[b"p"])[:4])}
           for e in (tiers.cp_entry, tiers.w_entry)]
    tiers.pending = [(EID, old[0]), (b"1699999999000-1", old[1])]
    done = drive(flush_batch_plan(ctx, "me", block_ms=0, claim=False), tiers)
    strlen = done.ops[1]
    assert isinstance(strlen, Pipeline)
    k = ctx.keys("t")
    assert [list(c) for c in strlen.commands] == [
        ["HSTRLEN", k.cp, member("", IDS[0])],
        *(["HSTRLEN", k.bl, f] for f in ormsgpack.unpackb(old[0][b"p"])[2]),
        ["HSTRLEN", k.w, tiers.wfield]]
    assert done.result.documents == 2  # the checkpoint (its value inside) and the write
    # sizes past the round's bound split the round into groups: two record reads
    monkeypatch.setattr("langgraph_durable.outbox.rounds.ROUND_BYTES", 15)
    tiers.pending = [(EID, tiers.cp_entry), (b"1699999999000-1", tiers.w_entry)]
    again = drive(flush_batch_plan(ctx, "me", block_ms=0, claim=False), tiers)
    reads = [op for op in again.ops if isinstance(op, Pipeline) and op.commands[0][0] == "HMGET"]
    assert len(reads) == 2 and again.result.documents == 2


def test_a_round_after_a_clean_one_does_not_ask_for_own_pending_entries() -> None:
    flusher = Flusher(context())
    tiers = Tiers(flusher.ctx)
    tiers.new = [(EID, tiers.w_entry)]

    def first_read() -> str:
        done = drive(flusher._round_plan(), tiers)
        op = done.ops[0]
        assert isinstance(op, Pipeline) and op.commands[0][0] == "XREADGROUP"
        return str(op.commands[0][-1])

    assert first_read() == "0"  # a new flusher: entries a crash left pending, if any
    flusher._succeeded()
    assert first_read() == ">"  # the last round acknowledged all it took
    flusher._failed(RuntimeError("MongoDB down"), 0.05)
    assert first_read() == "0"  # a failed round may have left its entries pending
