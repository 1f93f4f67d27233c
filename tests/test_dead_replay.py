"""Replaying dead letters puts each entry back once and never lowers a thread's unflushed
count twice (``outbox/dead.py``: replay_plan, ``hot/lua/dead_replay.lua``; the ``c``
flag of ``settle`` dead letters, ``hot/lua/ack_settle.lua``), on real servers."""

from __future__ import annotations

from typing import Any

import pytest

from langgraph_durable import DurableSaver
from langgraph_durable.core.outbox_entry import COUNTED_FIELD
from langgraph_durable.hot.scripts import DeadReplayArgs
from langgraph_durable.io.drivers import run_sync
from langgraph_durable.outbox import dead
from langgraph_durable.outbox.group import dead_letter_key
from langgraph_durable.testing import unique_options

from .test_bad_data import drain, letters, put_one
from .test_outbox import write_history


@pytest.fixture
def manual(redis_url: str, mongo_url: str) -> Any:
    """A saver with no in-process flusher: the test runs the flush rounds."""
    with DurableSaver.from_urls(redis_url, mongo_url, **unique_options(flusher="off")) as s:
        yield s


def _damage_cp(r, saver: DurableSaver, thread: str) -> str:
    k = saver.context.keys(thread)
    r.rename(k.cp, k.cp + ":backup")
    r.set(k.cp, "damaged")
    return k.cp


def _one(op: Any) -> Any:
    return (yield op)


def _repair(r, key: str) -> None:
    r.delete(key)
    r.rename(key + ":backup", key)


def test_a_replay_that_died_before_deleting_the_dead_letter_is_finished_without_a_copy(
        manual, redis_client) -> None:
    """The replay added the entry, then its process died before the dead letter's delete:
    the next replay adds nothing, deletes the dead letter, and the thread's count is
    lowered once."""
    r, ctx = redis_client, manual.context
    put_one(manual, "t")
    cp = _damage_cp(r, manual, "t")
    assert drain(manual) == 1
    _repair(r, cp)
    (d,) = letters(manual)
    first = run_sync(_one(DeadReplayArgs(ctx.outbox_of("t"), ctx.keys("t").meta, d.id,
                                         int(d.entry_id.split("-")[0]), 1, d.fields).op()),
                     manual.sync_clients)
    assert first.status == "ADDED"
    done = run_sync(dead.replay_plan(ctx, [d]), manual.sync_clients)
    assert done.replayed == []
    assert done.skipped == [(d, "a replay put it back before: dropped")]
    assert letters(manual) == []
    assert r.xlen(ctx.outbox_of("t")) == 1
    assert drain(manual) == 0
    assert r.hget(ctx.keys("t").meta, "dirty") == b"0"


def test_a_settle_dead_letter_whose_counts_were_not_lowered_lowers_them_when_replayed(
        manual, redis_client) -> None:
    """The settle failed before any count was lowered (a damaged meta): the dead letter
    says so (``c`` = 0) and its replay settles the thread: 'dirty' reaches 0."""
    r, ctx = redis_client, manual.context
    write_history(manual, "bad", 1)
    meta = ctx.keys("bad").meta
    r.rename(meta, meta + ":backup")
    r.set(meta, "damaged")
    assert drain(manual) == 2
    got = letters(manual)
    assert [(d.step, d.fields[COUNTED_FIELD]) for d in got] == [("settle", b"0")] * 2
    _repair(r, meta)
    assert r.hget(meta, "dirty") == b"2"
    done = run_sync(dead.replay_plan(ctx, got), manual.sync_clients)
    assert len(done.replayed) == 2 and done.skipped == []
    assert drain(manual) == 0
    assert r.hget(meta, "dirty") == b"0"


def test_a_settle_dead_letter_of_an_earlier_release_is_not_replayed(
        manual, redis_client) -> None:
    """A ``settle`` dead letter without the ``c`` flag (written before it existed): whether
    its thread's count was lowered is unknown, so it stays, and the reason says to drop
    it (its records are in MongoDB)."""
    r, ctx = redis_client, manual.context
    put_one(manual, "t")
    (eid, fields), = r.xrange(ctx.outbox_of("t"))
    r.xadd(dead_letter_key(ctx), {b"entry": eid, b"stream": ctx.outbox_of("t"),
                                  b"thread": b"t", b"step": b"settle", b"error": b"x",
                                  b"at_ms": b"1", **{b"f:" + k: v for k, v in fields.items()}})
    (d,) = letters(manual)
    done = run_sync(dead.replay_plan(ctx, [d]), manual.sync_clients)
    assert done.replayed == []
    assert done.skipped == [(d, "a settle dead letter of an earlier release (whether its "
                                "thread's count was lowered is unknown; its records are in "
                                "MongoDB): drop it")]
    assert [x.id for x in letters(manual)] == [d.id]


def test_on_a_redis_cluster_two_replays_of_a_dead_letter_put_it_back_once(
        redis_cluster_url, mongo_url) -> None:
    """The claim lives in the thread's slot (its meta, beside its outbox partition): on a
    Redis Cluster too, two replays of the same dead letter add it once and the thread's
    count is lowered once."""
    with DurableSaver.from_urls(redis_cluster_url, mongo_url,
                                **unique_options(flusher="off")) as s:
        r, ctx = s.sync_clients.redis, s.context
        put_one(s, "t")
        put_one(s, "t")
        cp = _damage_cp(r, s, "t")
        assert drain(s) == 2
        _repair(r, cp)
        first, second = letters(s)
        a = run_sync(dead.replay_plan(ctx, [first]), s.sync_clients)
        b = run_sync(dead.replay_plan(ctx, [first]), s.sync_clients)
        assert len(a.replayed) + len(b.replayed) == 1
        assert drain(s) == 0
        assert r.hget(ctx.keys("t").meta, "dirty") == b"1"
        assert r.ttl(cp) == -1
        assert [d.id for d in letters(s)] == [second.id]
