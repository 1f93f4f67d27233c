"""Flusher heartbeats (issue 21 item 8): entries a dead flusher held are taken as soon as
its heartbeat lapsed, not after ``claim_idle_s``; a live flusher whose round is stalled
keeps its entries; a consumer without a heartbeat (an older version's) keeps the
``claim_idle_s`` wait. ``claim_idle_s`` is 600 s here, so only the heartbeat path can
move entries a consumer holds within the tests' waits."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint

from faults.common import tap
from langgraph_durable import DurableSaver
from langgraph_durable.core.ops import BulkWrite
from langgraph_durable.hot.keys import CONSUMER_GROUP, heartbeats_key
from langgraph_durable.io.drivers import run_sync
from langgraph_durable.outbox import flusher as flusher_mod
from langgraph_durable.outbox.heartbeat import beat_plan, stop_plan
from langgraph_durable.testing import unique_options, wait_for

from .test_outbox_leftovers import _in_mongo, _put_many

ROOT = Path(__file__).resolve().parents[1]
SLOW_CLAIM = {"claim_idle_s": 600.0, "heartbeat_ttl_s": 0.3}


def _held(r: Any, outboxes: list[str]) -> dict[str, int]:
    """Pending entries per consumer over every outbox stream."""
    out: dict[str, int] = {}
    for s in outboxes:
        for c in r.xpending(s, CONSUMER_GROUP).get("consumers") or []:
            name = c["name"].decode() if isinstance(c["name"], bytes) else c["name"]
            out[name] = out.get(name, 0) + int(c["pending"])
    return out


def _consumers(r: Any, outboxes: list[str]) -> set[str]:
    return {c["name"].decode() for s in outboxes for c in r.xinfo_consumers(s, CONSUMER_GROUP)}


def _registry(r: Any, prefix: str) -> dict[str, float]:
    return {m.decode(): s for m, s in r.zrange(heartbeats_key(prefix), 0, -1, withscores=True)}


CHILD = """
import sys, time
from faults.common import tap
from langgraph_durable import DurableSaver
from langgraph_durable.io.drivers import BulkWrite
from langgraph_durable.outbox import flusher as F
from langgraph.checkpoint.base import empty_checkpoint

orig = F.flush_batch_plan
def stalled(ctx, consumer, **kw):
    def before(op):
        if isinstance(op, BulkWrite):  # read its entries and records: hold them forever
            print("holding", consumer, flush=True)
            time.sleep(3600)
    return tap(orig(ctx, consumer, **kw), before)
F.flush_batch_plan = stalled
redis_url, mongo_url, prefix, database = sys.argv[1:5]
with DurableSaver.from_urls(redis_url, mongo_url, key_prefix=prefix, database=database,
                            claim_idle_s=600, heartbeat_ttl_s=0.3) as s:
    cfg = {"configurable": {"thread_id": "killed", "checkpoint_ns": ""}}
    for i in range(3):
        cp = empty_checkpoint()
        cp["channel_values"] = {"v": i}
        cp["channel_versions"] = {"v": str(i + 1)}
        cfg = s.put(cfg, cp, {"step": i}, {"v": str(i + 1)})
    time.sleep(3600)
"""


def test_entries_of_a_sigkilled_process_are_flushed_by_the_next_saver_long_before_claim_idle_s(
        redis_url, mongo_url, redis_client) -> None:
    opts = unique_options(**SLOW_CLAIM)
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, redis_url, mongo_url, opts["key_prefix"],
         opts["database"]], cwd=str(ROOT), stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(ROOT)}, text=True)
    try:
        line = child.stdout.readline()  # its flusher read entries, then stalled
        assert line.startswith("holding "), line
        dead = line.split()[1]
        with DurableSaver.from_urls(redis_url, mongo_url, **opts | {"flusher": "off"}) as app:
            boxes = app.context.outboxes
            held = wait_for(lambda: _held(redis_client, boxes).get(dead), 30,
                            "the child's flusher to hold entries")
            assert dead in _registry(redis_client, opts["key_prefix"])
        child.send_signal(signal.SIGKILL)
        child.wait(30)
        with DurableSaver.from_urls(redis_url, mongo_url, **opts) as nxt:
            nxt.flush(timeout_s=60)  # claim_idle_s is 600 s: only the heartbeat path
            assert _in_mongo(nxt, "killed") == 3
            assert nxt.stats()["flusher"]["reaped"] == held
            # the dead consumer held nothing more: out of the group and the registry
            assert dead not in _consumers(redis_client, boxes)
            assert dead not in _registry(redis_client, opts["key_prefix"])
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        child.stdout.close()


def test_a_live_flusher_whose_round_is_stalled_keeps_its_entries(
        redis_url, mongo_url, redis_client, monkeypatch: pytest.MonkeyPatch) -> None:
    opts = unique_options(**SLOW_CLAIM)
    release = threading.Event()
    stalled: dict[str, str] = {}
    orig = flusher_mod.flush_batch_plan

    def hooked(ctx: Any, consumer: str, **kw: Any) -> Any:
        def before(op: Any) -> None:
            if isinstance(op, BulkWrite) and stalled.setdefault("consumer", consumer) == consumer:
                release.wait(60)  # the first round to write stalls (a GC pause, a slow net)

        return tap(orig(ctx, consumer, **kw), before)

    monkeypatch.setattr(flusher_mod, "flush_batch_plan", hooked)
    prefix = opts["key_prefix"]
    try:
        with DurableSaver.from_urls(redis_url, mongo_url, **opts) as live:
            _put_many(live, "stalled", 3)
            victim = live.runtime.flusher.consumer
            boxes = live.context.outboxes
            held = wait_for(lambda: stalled.get("consumer") == victim
                            and _held(redis_client, boxes).get(victim), 30, "a stalled round")
            with DurableSaver.from_urls(redis_url, mongo_url, **opts) as other:
                watcher = other.runtime.flusher
                first_score = _registry(redis_client, prefix)[victim]
                beats = watcher.heartbeat.beats
                # ten beats of the other flusher: over three heartbeat TTLs of the stall
                wait_for(lambda: watcher.heartbeat.beats >= beats + 10, 30, "ten beats")
                # the stalled flusher's heartbeat went on beating ...
                assert _registry(redis_client, prefix)[victim] > first_score
                # ... so nothing it holds was taken
                assert _held(redis_client, boxes).get(victim) == held
                assert watcher.reaped == 0
                release.set()
                live.flush(timeout_s=30)
                assert _in_mongo(live, "stalled") == 3
                assert watcher.reaped == 0
    finally:
        release.set()


def test_a_consumer_without_a_heartbeat_is_not_taken_for_dead(redis_url, mongo_url,
                                                               redis_client) -> None:
    opts = unique_options(**SLOW_CLAIM)
    with DurableSaver.from_urls(redis_url, mongo_url, **opts | {"flusher": "off"}) as app:
        _put_many(app, "old", 2)
        outbox = app.context.outbox
    # an older version's consumer: it reads entries, and never beats
    redis_client.xreadgroup(CONSUMER_GROUP, "oldhost-1-abc", {outbox: ">"}, count=10)
    # the old consumer keeps its entries: close() need not wait 10 s for a drain that
    # cannot happen
    with DurableSaver.from_urls(redis_url, mongo_url,
                                **opts | {"close_drain_timeout_s": 0.0}) as nxt:
        f = nxt.runtime.flusher
        beats = f.heartbeat.beats
        wait_for(lambda: f.heartbeat.beats >= beats + 10, 30, "ten beats")
        assert _held(redis_client, [outbox]) == {"oldhost-1-abc": 2}
        assert f.reaped == 0 and _in_mongo(nxt, "old") == 0


def test_a_stopping_flusher_leaves_the_registry_or_marks_itself_lapsed_if_it_holds_entries(
        redis_url, mongo_url, redis_client) -> None:
    opts = unique_options(flusher="off", heartbeat_ttl_s=30.0)
    with DurableSaver.from_urls(redis_url, mongo_url, **opts) as app:
        ctx, clients = app.context, app.sync_clients
        _put_many(app, "t", 1)
        for name in ("empty", "holder"):
            assert run_sync(beat_plan(ctx, name), clients) == []
        redis_client.xreadgroup(CONSUMER_GROUP, "holder", {ctx.outbox: ">"}, count=10)
        assert run_sync(stop_plan(ctx, "empty"), clients) is True
        assert run_sync(stop_plan(ctx, "holder"), clients) is False
        assert _registry(redis_client, ctx.config.key_prefix) == {"holder": 0.0}
        # lapsed: the next beat of any other flusher names it dead
        assert run_sync(beat_plan(ctx, "live"), clients) == ["holder"]


async def test_an_async_saver_beats_while_open_and_leaves_the_registry_on_close(
        redis_url, mongo_url, redis_client) -> None:
    import pymongo
    import redis.asyncio

    opts = unique_options(heartbeat_ttl_s=0.3)
    r = redis.asyncio.Redis.from_url(redis_url)
    m = pymongo.AsyncMongoClient(mongo_url)
    try:
        async with DurableSaver(r, m, **opts) as saver:
            await saver.aput({"configurable": {"thread_id": "a", "checkpoint_ns": ""}},
                             empty_checkpoint(), {"step": 0}, {})
            f = saver.runtime.flusher
            me = f.consumer
            beats = f.heartbeat.beats
            first = _registry(redis_client, opts["key_prefix"])[me]
            while f.heartbeat.beats < beats + 3:
                await __import__("asyncio").sleep(0.05)
            assert _registry(redis_client, opts["key_prefix"])[me] > first
        assert _registry(redis_client, opts["key_prefix"]) == {}
    finally:
        await r.aclose()
        await m.close()


def test_on_a_cluster_a_dead_flushers_entries_in_every_partition_are_taken_at_once(
        redis_cluster_url, mongo_url) -> None:
    opts = unique_options(**SLOW_CLAIM)
    threads = [f"t{i}" for i in range(8)]
    with DurableSaver.from_urls(redis_cluster_url, mongo_url, **opts | {"flusher": "off"}) as app:
        ctx, clients, r = app.context, app.sync_clients, app.sync_clients.redis
        for t in threads:
            _put_many(app, t, 1)
        # a flusher that beat once, read every partition's entries and died
        run_sync(beat_plan(ctx, "dead-1-x"), clients)
        for s in ctx.outboxes:
            r.xreadgroup(CONSUMER_GROUP, "dead-1-x", {s: ">"}, count=10)
        assert _held(r, ctx.outboxes) == {"dead-1-x": 8}
        assert len({s for s in ctx.outboxes if r.xlen(s)}) > 1  # several partitions
    with DurableSaver.from_urls(redis_cluster_url, mongo_url, **opts) as nxt:
        nxt.flush(timeout_s=60)
        assert sum(_in_mongo(nxt, t) for t in threads) == 8
        assert nxt.stats()["flusher"]["reaped"] == 8
        r = nxt.sync_clients.redis
        assert "dead-1-x" not in _consumers(r, ctx.outboxes)
        assert "dead-1-x" not in _registry(r, opts["key_prefix"])
