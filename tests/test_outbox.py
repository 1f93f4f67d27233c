"""The outbox invariants of DESIGN.md §4: idempotence (replay changes nothing) and no
resurrection (a delete is never undone by a late flush)."""

from __future__ import annotations

import threading
from typing import Any

import pytest
import redis
from langgraph.checkpoint.base import empty_checkpoint

from faults.common import tap
from langgraph_durable import DurableSaver, FlushTimeoutError
from langgraph_durable.hot.keys import CONSUMER_GROUP
from langgraph_durable.io.drivers import run_sync
from langgraph_durable.outbox.flusher import consumer_name, flush_batch_plan
from langgraph_durable.plans import history_edits
from langgraph_durable.testing import drop_key_prefix, unique_options, wait_for


@pytest.fixture
def manual(redis_url: str, mongo_url: str) -> Any:
    """A saver with no in-process flusher: the test flushes by hand, like a worker."""
    with DurableSaver.from_urls(redis_url, mongo_url, **unique_options(flusher="off")) as s:
        yield s


def flush_round(saver: DurableSaver, consumer: str | None = None) -> int:
    stats = run_sync(flush_batch_plan(saver.context, consumer or consumer_name(), block_ms=0,
                                      claim=False), saver.sync_clients)
    return stats.entries


def mongo_docs(saver: DurableSaver) -> dict[str, list[dict]]:
    db = saver.sync_clients.db
    cols = saver.context.collections
    return {name: sorted(db[name].find({}), key=lambda d: d["_id"])
            for name in (cols.checkpoints, cols.blobs, cols.writes)}


def write_history(saver: DurableSaver, thread_id: str, n: int, run_id: str = "run-1") -> list:
    cfg: dict = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    ids = []
    for i in range(n):
        cp = empty_checkpoint()
        cp["channel_values"] = {"count": i}
        cp["channel_versions"] = {"count": f"{i + 1:032}.0"}
        cfg = saver.put(cfg, cp, {"step": i, "run_id": run_id}, {"count": f"{i + 1:032}.0"})
        saver.put_writes(cfg, [("count", i + 1), ("__interrupt__", f"stop-{i}")], f"task-{i}")
        ids.append(cfg["configurable"]["checkpoint_id"])
    return ids


def outbox_entries(saver: DurableSaver, r: redis.Redis) -> list:
    return r.xrange(saver.context.outbox)


def test_replaying_every_outbox_entry_leaves_mongodb_unchanged(manual, redis_client) -> None:
    write_history(manual, "idem", 3)
    entries = outbox_entries(manual, redis_client)
    assert len(entries) == 6  # 3 puts + 3 put_writes
    while flush_round(manual):
        pass
    first = mongo_docs(manual)
    # values inside the checkpoints, one writes document per call
    assert [len(v) for v in first.values()] == [3, 0, 3]
    for _, fields in entries * 2:  # every entry delivered twice more
        redis_client.xadd(manual.context.outbox, fields)
    assert flush_round(manual) == 12
    assert mongo_docs(manual) == first


def test_delete_thread_waits_for_pending_entries_and_is_not_undone_by_a_late_flush(
    manual, redis_client, monkeypatch
) -> None:
    write_history(manual, "victim", 4)
    old_entries = outbox_entries(manual, redis_client)
    done, marked = threading.Event(), threading.Event()
    real_wait = history_edits.flush_wait_plan

    def noted_wait(ctx: Any, timeout_s: float) -> Any:  # says when it read what it waits for
        return (yield from tap(real_wait(ctx, timeout_s), after=lambda *_: marked.set()))

    monkeypatch.setattr(history_edits, "flush_wait_plan", noted_wait)
    t = threading.Thread(target=lambda: (manual.delete_thread("victim"), done.set()))
    t.start()
    # the delete read the outbox's newest ids before any flush (else, on a loaded
    # machine, it could start after the flush below and have nothing to wait for)
    assert marked.wait(10)
    assert not done.wait(0.2)  # the delete waits: 8 entries are not in MongoDB yet
    while flush_round(manual):
        pass
    t.join(10)
    assert done.is_set()
    for _, fields in old_entries:  # a late, duplicated delivery of every old entry
        redis_client.xadd(manual.context.outbox, fields)
    assert flush_round(manual) == 8
    assert [len(v) for v in mongo_docs(manual).values()] == [0, 0, 0]
    assert manual.get_tuple({"configurable": {"thread_id": "victim"}}) is None
    keys = manual.context.keys("victim")
    left = redis_client.keys(keys.tag.replace("{", "\\{").replace("}", "\\}") + "*")
    assert left == [keys.gone.encode()]  # only the delete's tombstone, which expires
    assert 0 < redis_client.ttl(keys.gone) <= 7 * 24 * 3600


def test_delete_with_no_flusher_times_out_and_keeps_the_thread(redis_url, mongo_url) -> None:
    opts = unique_options(flusher="off", delete_flush_timeout_s=0.2)
    with DurableSaver.from_urls(redis_url, mongo_url, **opts) as saver:
        write_history(saver, "kept", 2)
        with pytest.raises(FlushTimeoutError, match="still holds 4 entries"):
            saver.delete_thread("kept")
        assert saver.get_tuple({"configurable": {"thread_id": "kept"}}).metadata["step"] == 1


def test_delete_for_runs_and_prune_are_not_undone_by_late_flushes(saver, redis_client) -> None:
    ids_a = write_history(saver, "runs", 2, run_id="run-a")
    write_history(saver, "runs", 2, run_id="run-b")
    entries = outbox_entries(saver, redis_client)
    saver.flush()
    saver.delete_for_runs(["run-a"])
    for _, fields in entries:
        redis_client.xadd(saver.context.outbox, fields)
    saver.flush()
    remaining = [t.metadata["run_id"] for t in saver.list({"configurable": {"thread_id": "runs"}})]
    assert remaining == ["run-b", "run-b"]
    assert all(saver.get_tuple({"configurable": {"thread_id": "runs", "checkpoint_ns": "",
                                                 "checkpoint_id": i}}) is None for i in ids_a)
    saver.prune(["runs"])
    for _, fields in entries:
        redis_client.xadd(saver.context.outbox, fields)
    saver.flush()
    assert len(list(saver.list({"configurable": {"thread_id": "runs"}}))) == 1


def test_a_late_older_interrupt_write_never_replaces_a_newer_one(manual, redis_client) -> None:
    cfg = {"configurable": {"thread_id": "order", "checkpoint_ns": ""}}
    cfg = manual.put(cfg, empty_checkpoint(), {"step": 0}, {})
    manual.put_writes(cfg, [("__interrupt__", "old")], "task")
    older = outbox_entries(manual, redis_client)[-1][1]
    while flush_round(manual):
        pass
    manual.put_writes(cfg, [("__interrupt__", "new")], "task")
    while flush_round(manual):
        pass
    redis_client.xadd(manual.context.outbox, older)  # redelivery of the first write's entry
    flush_round(manual)
    drop_key_prefix(redis_client, manual.config.key_prefix)
    assert manual.get_tuple(cfg).pending_writes == [("task", "__interrupt__", "new")]


def test_a_poison_entry_goes_to_the_dead_letter_stream_and_the_rest_flows(
    manual, redis_client
) -> None:
    write_history(manual, "ok", 1)
    redis_client.xadd(manual.context.outbox, {"t": "bad", "p": b"\xc1not-msgpack"})
    keys = manual.context.keys("corrupt")
    cfg = {"configurable": {"thread_id": "corrupt", "checkpoint_ns": ""}}
    cfg = manual.put(cfg, empty_checkpoint(), {"step": 0}, {})
    redis_client.hset(keys.cp, f"\x00{cfg['configurable']['checkpoint_id']}", b"\xc1broken")
    write_history(manual, "ok2", 1)
    while flush_round(manual):
        pass
    from langgraph_durable.outbox.flusher import dead_letter_key

    dead = redis_client.xrange(dead_letter_key(manual.context))
    assert sorted(d[1][b"thread"] for d in dead) == [b"bad", b"corrupt"]
    assert b"CorruptRecordError" in [d for d in dead if d[1][b"thread"] == b"corrupt"][0][1][
        b"error"]
    assert redis_client.xlen(manual.context.outbox) == 0
    cps = manual.sync_clients.db[manual.context.collections.checkpoints]
    assert sorted(cps.distinct("thread_id")) == ["ok", "ok2"]


@pytest.mark.parametrize("redis_lost_the_tombstones", [False, True])
def test_a_stalled_flush_round_that_writes_after_a_delete_is_fenced(
    redis_url, mongo_url, redis_client, redis_lost_the_tombstones
) -> None:
    from langgraph_durable.core.ops import BulkWrite
    from langgraph_durable.io.drivers import execute_sync

    opts = unique_options(flusher="off", claim_idle_s=0.01)
    with DurableSaver.from_urls(redis_url, mongo_url, **opts) as saver:
        write_history(saver, "z", 3)
        # the stalled round reads the entries and their records, then stalls before writing
        stalled = flush_batch_plan(saver.context, "stalled", block_ms=0, claim=False)
        op, result = stalled.send(None), None
        while not isinstance(op, BulkWrite):
            op = stalled.send(execute_sync(op, saver.sync_clients))
        # meanwhile another flusher claims the idle entries and flushes them
        wait_for(lambda: all(  # the entries are idle past claim_idle_s (10 ms)
            p["time_since_delivered"] > 10 for p in redis_client.xpending_range(
                saver.context.outbox, CONSUMER_GROUP, "-", "+", 100)), 5, "idle entries")
        claimed = run_sync(flush_batch_plan(saver.context, "rescuer", block_ms=0, claim=True),
                           saver.sync_clients)
        assert claimed.entries == 6
        saver.delete_thread("z")  # the outbox is drained: the delete proceeds
        assert [len(v) for v in mongo_docs(saver).values()] == [0, 0, 0]
        if redis_lost_the_tombstones:  # only MongoDB's tombstones tell of the delete now
            assert redis_client.delete(saver.context.keys("z").gone) == 1
        # the stalled round wakes up and writes what it read before the delete ...
        try:
            while True:
                result = execute_sync(op, saver.sync_clients)
                op = stalled.send(result)
        except StopIteration:
            pass
        # ... and, finding the delete's tombstones, takes it back out
        assert [len(v) for v in mongo_docs(saver).values()] == [0, 0, 0]
        assert saver.get_tuple({"configurable": {"thread_id": "z"}}) is None


def test_a_round_stores_its_documents_encoded_as_built_the_same_as_dicts(
        manual, redis_client) -> None:
    """A flush round holds its documents as BSON from the moment it builds them
    (``Context.docs``, ``io/mongo_calls.BSON_DOCS``: one object each for the garbage
    collector, not a dict and its lists) and stores exactly what the same round stores
    from dicts, replays included (their upserts decode the document)."""
    from dataclasses import replace

    from bson.raw_bson import RawBSONDocument
    from langchain_core.messages import AIMessage, HumanMessage

    from langgraph_durable.core.ops import BulkWrite, InsertDoc
    from langgraph_durable.plans.context import DocCodec

    cfg: dict = {"configurable": {"thread_id": "enc", "checkpoint_ns": ""}}
    msgs: list = [HumanMessage("hi", id="h0")]
    for i in range(3):
        msgs = [*msgs, AIMessage(f"answer {i} " * 40, id=f"a{i}")]
        cp = empty_checkpoint()
        cp["channel_values"] = {"messages": msgs, "count": i, "big": b"x" * 5000}
        cp["channel_versions"] = {c: f"{i + 1:032}.0" for c in ("messages", "count", "big")}
        cfg = manual.put(cfg, cp, {"step": i, "run_id": "r"}, cp["channel_versions"])
        manual.put_writes(cfg, [("messages", [AIMessage(f"w{i}", id=f"w{i}")]),
                                ("__interrupt__", f"stop-{i}")], f"task-{i}")
    entries = outbox_entries(manual, redis_client)
    db, cols = manual.sync_clients.db, manual.context.collections
    names = (cols.checkpoints, cols.blobs, cols.writes, cols.items)

    def stored() -> dict[str, list[dict]]:
        return {n: sorted(db[n].find({}, {"put_ms": 0}), key=lambda d: d["_id"])
                for n in names}

    def flush(ctx: Any) -> list[type]:
        kinds: list[type] = []

        def seen(op: Any) -> None:
            if isinstance(op, BulkWrite):
                kinds.extend(type(m.doc) for m in op.requests if isinstance(m, InsertDoc))

        plan = flush_batch_plan(ctx, consumer_name(), block_ms=0, claim=False)
        while run_sync(tap(plan, before=seen), manual.sync_clients).entries:
            plan = flush_batch_plan(ctx, consumer_name(), block_ms=0, claim=False)
        return kinds

    assert set(flush(replace(manual.context, docs=DocCodec()))) == {dict}
    as_dicts = stored()
    # 3 checkpoints, their 5,000-byte values (over the inline bound), 3 calls, 7 messages
    assert [len(as_dicts[n]) for n in names] == [3, 3, 3, 7]
    for n in names:
        db[n].delete_many({})
    for _, fields in entries:
        redis_client.xadd(manual.context.outbox, fields)
    assert set(flush(manual.context)) == {RawBSONDocument}
    assert stored() == as_dicts
    for _, fields in entries:  # replayed: the upserts of documents already stored
        redis_client.xadd(manual.context.outbox, fields)
    flush(manual.context)
    assert stored() == as_dicts
