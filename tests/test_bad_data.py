"""One bad record never blocks the others (DESIGN.md §2, invariant 7): at each step of a
flush round (parse, copy from Redis, write to MongoDB, fence, acknowledge) an error of one
entry or one thread sets that entry aside as a dead letter with its payload, and the round
finishes for everything else; ``flush()`` names what it waited for and was set aside."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import ormsgpack
import pytest
from langgraph.checkpoint.base import empty_checkpoint

from langgraph_durable import DeadLetteredError, DurableSaver
from langgraph_durable.core.outbox_entry import DeadLetter, OutboxEntry
from langgraph_durable.io.drivers import execute_sync, run_sync, run_with
from langgraph_durable.outbox import dead
from langgraph_durable.outbox.flusher import consumer_name, flush_batch_plan
from langgraph_durable.plans import history_edits
from langgraph_durable.testing import unique_options

from .test_outbox import write_history
from .unit.stepping import FakeClock


@pytest.fixture
def manual(redis_url: str, mongo_url: str) -> Any:
    """A saver with no in-process flusher: the test runs the flush rounds."""
    with DurableSaver.from_urls(redis_url, mongo_url, **unique_options(flusher="off")) as s:
        yield s


def drain(saver: DurableSaver) -> int:
    """Flush rounds until one takes nothing; returns the entries set aside."""
    dead_n = 0
    for _ in range(20):
        stats = run_sync(flush_batch_plan(saver.context, consumer_name(), block_ms=0,
                                          claim=False), saver.sync_clients)
        dead_n += stats.dead
        if not stats.entries:
            return dead_n
    raise AssertionError("the outbox never drained")


def letters(saver: DurableSaver) -> list[DeadLetter]:
    return run_sync(dead.list_plan(saver.context), saver.sync_clients)


def flushed_threads(saver: DurableSaver) -> list[str]:
    db, cols = saver.sync_clients.db, saver.context.collections
    return sorted(db[cols.checkpoints].distinct("thread_id"))


def put_one(saver: DurableSaver, thread: str) -> str:
    cp = empty_checkpoint()
    cp["channel_values"] = {"count": 1}
    cp["channel_versions"] = {"count": "1"}
    cfg = saver.put({"configurable": {"thread_id": thread, "checkpoint_ns": ""}}, cp,
                    {"step": 0}, {"count": "1"})
    return str(cfg["configurable"]["checkpoint_id"])


def test_parse_sets_aside_malformed_unknown_and_garbage_entries_with_their_fields(
        manual, redis_client) -> None:
    r, ctx = redis_client, manual.context
    put_one(manual, "good")
    no_sep = OutboxEntry("t1", "cp", "no-separator", [], [], 0).fields()
    newer = OutboxEntry("t2", "zz", "", [], [], 0).fields()  # a kind of a newer release
    garbage = {b"x": b"\xff\x00y"}
    # a channel version holding a NUL: its blob field splits into 4 parts, not 3
    nul = OutboxEntry("t4", "cp", "\x00c1", ["\x00count\x001\x00x"], [], 0).fields()
    ids = [r.xadd(ctx.outbox_of(t), f) for t, f in
           (("t1", no_sep), ("t2", newer), ("t3", garbage), ("t4", nul))]
    assert drain(manual) == 4
    assert flushed_threads(manual) == ["good"]
    assert r.xlen(ctx.outbox) == 0
    got = {d.entry_id: d for d in letters(manual)}
    assert sorted(got) == sorted(i.decode() for i in ids)
    assert [(got[i.decode()].thread_id, got[i.decode()].step, dict(got[i.decode()].fields))
            for i in ids] == [("t1", "parse", no_sep), ("t2", "parse", newer),
                              ("", "parse", garbage), ("t4", "parse", nul)]
    assert "member 'no-separator'" in got[ids[0].decode()].error
    assert "kind 'zz', unknown to this release" in got[ids[1].decode()].error
    assert got[ids[2].decode()].error.startswith("KeyError")
    assert "field '\\x00count\\x001\\x00x' does not have 3 parts" in got[ids[3].decode()].error
    assert manual.runtime.metrics.flush["dead_letters"] == 0  # the saver's own: no flusher


@pytest.mark.parametrize("key", ["cp", "bl"])
def test_copy_sets_aside_the_entries_of_a_thread_whose_hash_has_the_wrong_type(
        manual, redis_client, key) -> None:
    r, ctx = redis_client, manual.context
    write_history(manual, "ok", 2)
    write_history(manual, "bad", 2)
    k = getattr(ctx.keys("bad"), key)
    r.delete(k)
    r.set(k, "damaged")
    assert drain(manual) == 2  # the two checkpoints of "bad"; its writes are flushed
    assert r.xlen(ctx.outbox) == 0
    got = letters(manual)
    assert [(d.thread_id, d.step) for d in got] == [("bad", "copy")] * 2
    assert all(d.error.startswith("ResponseError: WRONGTYPE") for d in got)
    assert [OutboxEntry.of(d.fields).kind for d in got] == ["cp", "cp"]
    db, cols = manual.sync_clients.db, ctx.collections
    assert db[cols.checkpoints].count_documents({"thread_id": "ok"}) == 2
    assert db[cols.checkpoints].count_documents({"thread_id": "bad"}) == 0
    assert db[cols.writes].count_documents({"thread_id": "bad"}) == 2  # one per put_writes


def test_write_sets_aside_a_checkpoint_mongodb_cannot_store(manual, redis_client) -> None:
    r, ctx = redis_client, manual.context
    put_one(manual, "ok")
    cid = put_one(manual, "huge-int")
    k, m = ctx.keys("huge-int"), f"\x00{cid}"
    rec = ormsgpack.unpackb(r.hget(k.cp, m))
    rec[7] = [["n", 2**63]]  # queryable metadata no BSON integer holds
    r.hset(k.cp, m, ormsgpack.packb(rec))
    assert drain(manual) == 1
    (d,) = letters(manual)
    assert (d.thread_id, d.step) == ("huge-int", "write")
    assert d.error.startswith("OverflowError")
    assert flushed_threads(manual) == ["ok"]


def test_fence_reads_mongodb_tombstones_when_the_thread_tombstones_key_is_damaged(
        manual, redis_client) -> None:
    r, ctx = redis_client, manual.context
    write_history(manual, "t", 1)
    r.delete(ctx.keys("t").gone)
    r.set(ctx.keys("t").gone, "damaged")
    assert drain(manual) == 0
    assert r.xlen(ctx.outbox) == 0 and letters(manual) == []
    assert flushed_threads(manual) == ["t"]


def test_acknowledge_settles_every_other_thread_when_one_cannot_be_settled(
        manual, redis_client) -> None:
    r, ctx = redis_client, manual.context
    write_history(manual, "ok", 1)
    write_history(manual, "bad", 1)
    meta = ctx.keys("bad").meta
    r.delete(meta)
    r.set(meta, "damaged")
    assert drain(manual) == 2
    assert r.xlen(ctx.outbox) == 0
    assert flushed_threads(manual) == ["bad", "ok"]  # written; the settle failed
    got = letters(manual)
    assert [(d.thread_id, d.step) for d in got] == [("bad", "settle")] * 2
    assert "WRONGTYPE" in got[0].error
    assert r.hget(ctx.keys("ok").meta, "dirty") == b"0"  # settled


def test_flush_names_dead_lettered_entries_until_they_are_replayed_or_dropped(
        redis_url, mongo_url, redis_client) -> None:
    opts = unique_options(flusher="off")
    r = redis_client
    with DurableSaver.from_urls(redis_url, mongo_url, **opts) as app:
        ctx = app.context
        k = ctx.keys("bad")
        cid = put_one(app, "bad")
        # its checkpoint hash is moved away and a string put in its place, before a
        # flusher runs
        backup = k.cp + ":backup"
        r.rename(k.cp, backup)
        r.set(k.cp, "damaged")
        with DurableSaver.from_urls(redis_url, mongo_url,
                                    **{**opts, "flusher": "auto"}) as worker:
            with pytest.raises(DeadLetteredError) as e1:
                app.flush(timeout_s=20)
            # the checkpoint's put is acknowledged by Redis, never reached MongoDB: named
            assert [(t, err.split(":")[0]) for t, _e, err in e1.value.entries] == [
                ("bad", "ResponseError")]
            (d,) = letters(app)
            assert e1.value.entries[0][1] == d.entry_id
            assert worker.stats()["flush"]["dead_letters"] == 1  # counted by its flusher
            assert "thread 'bad'" in str(e1.value)
            # the next flush waits for nothing new, and still names it: not replayed/dropped
            with pytest.raises(DeadLetteredError):
                app.flush(timeout_s=20)
            # a saver made after the entry was written and set aside (past the clock-skew
            # margin) is not failed by it: its flush is green
            skew = history_edits.CLOCK_SKEW_MS
            since = int(d.entry_id.split("-")[0]) + skew + 1
            later = replace(ctx, clock=FakeClock(wall_ns=(int(d.id.split("-")[0]) + skew + 1)
                                                 * 1_000_000))
            assert run_sync(history_edits.flush_plan(later, 20, since), app.sync_clients) > since
            with pytest.raises(DeadLetteredError):  # its entry is newer than the mark
                run_sync(history_edits.flush_plan(later, 20, since - 1), app.sync_clients)
            # repaired and replayed: the flusher takes it, the checkpoint reaches MongoDB
            r.delete(k.cp)
            r.rename(backup, k.cp)
            done = run_sync(dead.replay_plan(ctx, [d]), app.sync_clients)
            assert [x.id for x, _ in done.replayed] == [d.id] and done.skipped == []
            app.flush(timeout_s=20)
            assert letters(app) == []
            db, cols = app.sync_clients.db, ctx.collections
            assert db[cols.checkpoints].count_documents(
                {"thread_id": "bad", "checkpoint_id": cid}) == 1
            assert r.hget(k.meta, "dirty") == b"0"  # settled once by the replayed entry


async def test_aflush_names_a_dead_lettered_entry(redis_url, mongo_url, redis_client) -> None:
    opts = unique_options(flusher="off")
    r = redis_client
    async with DurableSaver.from_urls(redis_url, mongo_url, **opts) as app:
        await app.aput({"configurable": {"thread_id": "bad", "checkpoint_ns": ""}},
                       empty_checkpoint(), {"step": 0}, {})
        r.delete(app.context.keys("bad").cv)
        r.set(app.context.keys("bad").cv, "damaged")
        async with DurableSaver.from_urls(redis_url, mongo_url,
                                          **{**opts, "flusher": "auto"}):
            with pytest.raises(DeadLetteredError) as e:
                await app.aflush(timeout_s=20)
    assert [(t, err.split(":")[0]) for t, _e, err in e.value.entries] == [
        ("bad", "ResponseError")]


def test_on_a_redis_cluster_a_damaged_thread_is_set_aside_and_named_by_flush(
        redis_cluster_url, mongo_url) -> None:
    # a cluster pipeline sends each command to its node: the WRONGTYPE of one thread's
    # key comes back in its place, the other partitions' records are written
    opts = unique_options(flusher="off")
    with DurableSaver.from_urls(redis_cluster_url, mongo_url, **opts) as app:
        r, ctx = app.sync_clients.redis, app.context
        for i in range(6):
            put_one(app, f"ok-{i}")
        put_one(app, "bad")
        r.delete(ctx.keys("bad").bl)
        r.set(ctx.keys("bad").bl, "damaged")
        with DurableSaver.from_urls(redis_cluster_url, mongo_url,
                                    **{**opts, "flusher": "auto"}):
            with pytest.raises(DeadLetteredError) as e:
                app.flush(timeout_s=20)
        assert [t for t, _e, _err in e.value.entries] == ["bad"]
        assert flushed_threads(app) == [f"ok-{i}" for i in range(6)]
        (d,) = letters(app)
        assert (d.stream, d.step) == (ctx.outbox_of("bad"), "copy")


def test_flush_names_an_entry_written_before_the_saver_that_it_waited_for(
        manual, redis_client) -> None:
    # the entry is older than the flush's mark (a saver made later: another process wrote
    # it), but it was in the outbox when the flush began and was set aside while it waited
    r, ctx = redis_client, manual.context
    put_one(manual, "bad")
    r.delete(ctx.keys("bad").cp)
    r.set(ctx.keys("bad").cp, "damaged")
    (entry_id,) = [i for i, _ in r.xrange(ctx.outbox)]
    since = int(entry_id.split(b"-")[0]) + 10 * history_edits.CLOCK_SKEW_MS
    drained: list[int] = []

    def step(op: Any) -> Any:
        # the flush's first step reads each partition's newest id (what it waits for);
        # the flusher sets the entry aside right after it, while the flush waits
        reply = execute_sync(op, manual.sync_clients)
        if not drained:
            drained.append(drain(manual))
        return reply

    with pytest.raises(DeadLetteredError) as raised:
        run_with(history_edits.flush_plan(ctx, 20, since), step)
    assert drained == [1]
    assert [(t, e) for t, e, _err in raised.value.entries] == [("bad", entry_id.decode())]
