"""Chunks (values over ``chunks.THRESHOLD_BYTES``) where a delete races other writers.

A chunk carries the latest ``put_ms`` of the owners written with it (``$max``), so a delete
that keeps what was stored after it began keeps those documents' chunks too, and the fence
of a round that a delete overtook takes the chunks of the items it takes back. Each race is
provoked as tests/test_summary_races.py does: the flush rounds and the edit are driven by
hand, the other writer run between two of their operations. Every test failed before
chunks had a ``put_ms`` (the first three with ``CorruptRecordError``: a kept document named
chunks the delete had removed; the last left the item's 3 chunks behind)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint

from faults.common import tap
from langgraph_durable import DurableSaver
from langgraph_durable.core.ops import BulkWrite, DeleteMany, Find, Op, Script
from langgraph_durable.durable import chunks
from langgraph_durable.io.drivers import run_sync
from langgraph_durable.outbox.group import ensure_group_plan
from langgraph_durable.outbox.rounds import flush_batch_plan
from langgraph_durable.plans import history_edits, thread_copy
from langgraph_durable.testing import unique_options

BIG = "X" * 3000  # 3 chunks of 1 KiB once serialized (small_chunks)


def _drained(ctx: Any, timeout_s: float) -> Any:  # the delete found the outbox flushed
    return 0
    yield


@pytest.fixture
def hand(redis_url: str, mongo_url: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    """A saver without a flusher, values over 1 KiB chunked, whose flush rounds the test
    runs (``drain(consumer)``: rounds until the outbox holds no new entry)."""
    monkeypatch.setattr(chunks, "THRESHOLD_BYTES", 1024)
    monkeypatch.setattr(history_edits, "flush_wait_plan", _drained)
    with DurableSaver.from_urls(redis_url, mongo_url, **unique_options(flusher="off")) as s:
        run_sync(ensure_group_plan(s.context), s.sync_clients)

        def drain(consumer: str = "f") -> None:
            while run_sync(flush_batch_plan(s.context, consumer, block_ms=0, claim=False),
                           s.sync_clients).entries:
                pass

        s.drain = drain  # type: ignore[attr-defined]
        yield s


def put(s: DurableSaver, tid: str, step: int, parent: Any = None,
        messages: list[str] | None = None, value: str = "small", **metadata: Any) -> Any:
    """A checkpoint of ``tid`` holding ``value`` (a blob) and ``messages`` (a list: one
    item per message, content-addressed and shared by every checkpoint naming it)."""
    cfg: Any = {"configurable": {"thread_id": tid, "checkpoint_ns": ""}}
    if parent is not None:
        cfg["configurable"]["checkpoint_id"] = parent["configurable"]["checkpoint_id"]
    cp = empty_checkpoint()
    cp["channel_values"] = {"v": value, "messages": messages or []}
    versions = {"v": f"{step + 1:032}.{tid}", "messages": f"{step + 1:032}.{tid}"}
    cp["channel_versions"] = dict(versions)
    return s.put(cfg, cp, {"step": step, **metadata}, versions)


def cold_values(s: DurableSaver, tid: str) -> list[Any]:
    """Every checkpoint of ``tid`` read back from MongoDB alone (its Redis keys dropped)."""
    s.sync_clients.redis.delete(*s.context.keys(tid).all)
    return [t.checkpoint["channel_values"] for t in s.list({"configurable": {"thread_id": tid}})]


def chunk_owners(s: DurableSaver) -> tuple[int, list[str]]:
    """(chunk documents stored, the owners of those whose owning document is gone)."""
    db, cols = s.sync_clients.db, s.context.collections
    owners = {d["_id"] for c in (cols.checkpoints, cols.blobs, cols.writes, cols.items)
              for d in db[c].find({}, {"_id": 1})}
    found = list(db[cols.chunks].find({}, {"owner": 1}))
    return len(found), sorted({c["owner"] for c in found if c["owner"] not in owners})


def before_first(plan: Any, at: Callable[[Op[Any]], bool], hook: Callable[[], None]) -> Any:
    """``plan`` with ``hook()`` run once, just before its first operation ``at`` picks."""
    pending = [hook]
    return tap(plan, before=lambda op: pending.pop()() if pending and at(op) else None)


def deleting_chunks(s: DurableSaver) -> Callable[[Op[Any]], bool]:
    return lambda op: isinstance(op, DeleteMany) and op.collection == s.context.collections.chunks


def test_a_new_run_flushed_while_delete_thread_runs_keeps_its_chunks(hand: Any) -> None:
    old = put(hand, "T", 0, value=BIG)
    hand.drain()
    new: list[Any] = []

    def new_run() -> None:  # put and flushed after the delete's MongoDB deletes
        new.append(put(hand, "T", 0, value=BIG + "new"))
        hand.drain()

    hand.run(before_first(history_edits.delete_thread_plan(hand.context, "T"),
                          deleting_chunks(hand), new_run))
    assert new and old != new[0]
    assert cold_values(hand, "T") == [{"v": BIG + "new", "messages": []}]
    assert chunk_owners(hand) == (3, [])  # the new run's value, nothing of the old


def test_copy_thread_into_a_thread_delete_thread_is_deleting_keeps_the_copied_chunks(
        hand: Any) -> None:
    """The copies are stored after the delete began: their chunks too, though the
    source's were stored before it (a copied chunk takes its copied owner's time)."""
    put(hand, "S", 0, value=BIG, messages=[BIG + "m"])
    put(hand, "T", 0, value=BIG)
    hand.drain()
    copy = lambda: hand.copy_thread("S", "T")  # noqa: E731
    hand.run(before_first(history_edits.delete_thread_plan(hand.context, "T"),
                          deleting_chunks(hand), copy))
    assert cold_values(hand, "T") == [{"v": BIG, "messages": [BIG + "m"]}]
    assert chunk_owners(hand) == (12, [])  # S's blob and item, and their copies


def test_a_second_copy_onto_a_thread_delete_thread_is_deleting_is_kept_whole(
        hand: Any) -> None:
    """T holds a copy of S; a second copy of S lands while ``delete_thread(T)`` runs. Its
    documents have the first copy's ``_id``s: they took the copy's time only when first
    inserted, so the delete removed them and left the chunks the copy wrote (a helper's
    run: 9 orphans, and T empty)."""
    put(hand, "S", 0, value=BIG, messages=[BIG + "m"])
    hand.drain()
    hand.copy_thread("S", "T")
    cols = hand.context.collections
    copy = lambda: hand.copy_thread("S", "T")  # noqa: E731
    hand.run(before_first(  # after the tombstones, before the documents' deletes
        history_edits.delete_thread_plan(hand.context, "T"),
        lambda op: any(isinstance(o, DeleteMany) and o.collection == cols.checkpoints
                       for o in getattr(op, "ops", ())), copy))
    assert cold_values(hand, "T") == [{"v": BIG, "messages": [BIG + "m"]}]
    assert chunk_owners(hand) == (12, [])


def test_a_copy_leaving_out_a_checkpoint_deleted_meanwhile_keeps_the_targets_writes_of_it(
        hand: Any) -> None:
    """T holds a copy of S's c0, with c0's chunked pending write. A second copy finds c0
    pruned from S during its reads and leaves it out: T's own c0 and its write (with the
    write's chunks) stay as the first copy stored them."""
    c0 = put(hand, "S", 0)
    hand.put_writes(c0, [("v", BIG + "w")], "task-1")
    c1 = put(hand, "S", 1, c0)
    hand.drain()
    hand.copy_thread("S", "T")
    cols, pruned = hand.context.collections, []

    def prune() -> None:
        hand.prune(["S"], strategy="keep_latest", keep_last=1)
        pruned.append(True)

    hand.run(before_first(thread_copy.copy_thread_plan(hand.context, "S", "T"),
                          lambda op: any(isinstance(o, Find) and o.collection == cols.blobs
                                         for o in getattr(op, "ops", ())), prune))
    assert pruned
    hand.sync_clients.redis.delete(*hand.context.keys("T").all)
    got = [(t.config["configurable"]["checkpoint_id"], t.pending_writes)
           for t in hand.list({"configurable": {"thread_id": "T"}})]
    assert got == [(c1["configurable"]["checkpoint_id"], []),
                   (c0["configurable"]["checkpoint_id"], [("task-1", "v", BIG + "w")])]
    assert chunk_owners(hand)[1] == []


def test_an_item_a_stalled_round_writes_again_keeps_the_new_runs_chunks(hand: Any) -> None:
    """The old run's entry holding chunked item X is read by a round that stalls; a
    delete_thread starts, a new run stores X again (flushed by another consumer); the
    stalled round then writes X's chunks with its older time. The item's put_ms is the new
    run's ($max), and so is its chunks': the delete keeps both, and the fence of the
    stalled round (older than the delete) takes back neither."""
    c0 = put(hand, "T", 0)
    hand.drain()
    put(hand, "T", 1, c0, messages=["small", BIG])  # the entry holding item X
    cols = hand.context.collections
    go, paused, stalled_done = threading.Event(), threading.Event(), []

    def stalled() -> None:
        def wait() -> None:
            paused.set()
            go.wait(30)
        plan = flush_batch_plan(hand.context, "stalled", block_ms=0, claim=False)
        stalled_done.append(run_sync(before_first(
            plan, lambda op: isinstance(op, BulkWrite) and op.collection == cols.chunks, wait),
            hand.sync_clients))

    thread = threading.Thread(target=stalled)
    thread.start()
    assert paused.wait(30)
    new: list[Any] = []

    def new_run() -> None:
        new.append(put(hand, "T", 0, messages=[BIG]))  # item X again
        hand.drain("other")
        go.set()
        thread.join(30)

    try:
        hand.run(before_first(history_edits.delete_thread_plan(hand.context, "T"),
                              deleting_chunks(hand), new_run))
    finally:
        go.set()
        thread.join(30)
    assert stalled_done and new
    hand.drain()
    assert cold_values(hand, "T") == [{"v": "small", "messages": [BIG]}]
    assert chunk_owners(hand) == (3, [])


def test_the_fence_takes_back_the_chunks_of_the_items_it_takes_back(hand: Any) -> None:
    """A round reads an entry holding chunked item X, then stalls across a whole
    delete_thread; it writes X and its chunks after the delete, and its fence takes them
    back: nothing of the thread is left, no chunk either."""
    put(hand, "T", 0, messages=[BIG])
    cols = hand.context.collections
    deleted: list[bool] = []

    def delete() -> None:
        hand.delete_thread("T")
        deleted.append(True)

    plan = flush_batch_plan(hand.context, "stalled", block_ms=0, claim=False)
    run_sync(before_first(plan, lambda op: isinstance(op, BulkWrite)
                          and op.collection == cols.chunks, delete), hand.sync_clients)
    assert deleted
    db = hand.sync_clients.db
    assert [db[c].count_documents({"thread_id": "T"}) for c in (
        cols.checkpoints, cols.blobs, cols.writes, cols.items, cols.chunks)] == [0] * 5


@pytest.mark.parametrize("when", ["before Redis removes them", "before the item deletes",
                                  "before the chunk deletes"])
def test_prune_keeps_an_item_and_its_chunks_a_new_run_stores_again(hand: Any, when: str) -> None:
    """``prune`` collects item X (only a pruned checkpoint named it); a new run names X
    again, flushed before the prune removes X from Redis, or its document, or its chunks:
    X was deleted by ``_id`` and every chunk of it by owner, and, when Redis still held X,
    the new run's put did not send it again, so MongoDB's copy did not tell the prune, and
    both tiers lost it. Now a write since the prune began keeps the items in Redis (and
    the new run's stored X keeps its document and chunks in MongoDB)."""
    c0 = put(hand, "T", 0, messages=[BIG])
    c1 = put(hand, "T", 1, c0, messages=["m"])
    hand.drain()
    cols = hand.context.collections
    items_deleted: list[bool] = []

    def at(op: Op[Any]) -> bool:  # that step of the prune's collection of items
        if when == "before Redis removes them":
            return isinstance(op, Script) and op.name == "collect_items"
        inner = [op, *getattr(op, "ops", ())]
        if any(isinstance(o, BulkWrite) and o.collection == cols.items for o in inner):
            items_deleted.append(True)
            return when == "before the item deletes"
        return bool(items_deleted) and any(
            isinstance(o, DeleteMany) and o.collection == cols.chunks for o in inner)

    new: list[Any] = []

    def new_run() -> None:
        new.append(put(hand, "T", 2, c1, messages=["m", BIG]))
        hand.drain("other")

    hand.run(before_first(history_edits.prune_plan(hand.context, ["T"], "keep_latest",
                                                   keep_last=1), at, new_run))
    assert new
    hand.drain()
    cfg = {"configurable": {"thread_id": "T", "checkpoint_ns": ""}}
    hot = hand.get_tuple(cfg)
    assert hot is not None and hot.checkpoint["channel_values"]["messages"] == ["m", BIG]
    assert cold_values(hand, "T") == [{"v": "small", "messages": ["m", BIG]},
                                      {"v": "small", "messages": ["m"]}]
    assert chunk_owners(hand) == (3, [])


def test_prune_keeps_the_items_of_a_thread_deleted_and_run_again_meanwhile(hand: Any) -> None:
    """A helper's case: ``delete_thread`` and a new run of as many writes as the prune saw
    land before the prune removes the items it collected from Redis; the new run names
    item X again (Redis had it, its put did not send it). The writes count alone matched
    again (the delete dropped it with the thread's keys); with the generation beside it
    the prune keeps the items, and the new run reads back, hot and cold."""
    c0 = put(hand, "T", 0, messages=[BIG])
    put(hand, "T", 1, c0, messages=["m"])
    hand.drain()
    new: list[Any] = []

    def delete_and_run_again(op: Op[Any]) -> None:
        if new or not (isinstance(op, Script) and op.name == "collect_items"):
            return
        hand.delete_thread("T")
        n0 = put(hand, "T", 0, messages=[BIG])
        new.append(put(hand, "T", 1, n0, messages=[BIG, "y"]))

    hand.run(tap(history_edits.prune_plan(hand.context, ["T"], "keep_latest"),
                 before=delete_and_run_again))
    assert new
    hand.drain()
    assert hand.get_tuple(new[0]).checkpoint["channel_values"]["messages"] == [BIG, "y"]
    assert cold_values(hand, "T") == [{"v": "small", "messages": [BIG, "y"]},
                                      {"v": "small", "messages": [BIG]}]
