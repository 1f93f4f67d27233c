"""Outbox entries left behind by a process that exited are drained by the next saver or
worker by default, whatever state the consumer group is in; consumers leave the group when
they stop; ``status`` shows the age of the oldest unflushed entry."""

from __future__ import annotations

import asyncio
import json
import logging

from langgraph.checkpoint.base import empty_checkpoint
from typer.testing import CliRunner

from faults.tiers import wait_for
from langgraph_durable import DurableSaver
from langgraph_durable.hot.keys import CONSUMER_GROUP
from langgraph_durable.testing import unique_options


def _put_many(saver: DurableSaver, thread: str, n: int) -> None:
    cfg = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    for i in range(n):
        cp = empty_checkpoint()
        cp["channel_values"] = {"v": i}
        cp["channel_versions"] = {"v": str(i + 1)}
        cfg = saver.put(cfg, cp, {"step": i}, {"v": str(i + 1)})


def _in_mongo(saver: DurableSaver, thread: str) -> int:
    assert saver.sync_clients is not None
    return saver.sync_clients.db[saver.context.collections.checkpoints].count_documents(
        {"thread_id": thread})


def _consumers(redis_client, outbox: str) -> dict[str, int]:
    return {c["name"].decode(): int(c["pending"])
            for c in redis_client.xinfo_consumers(outbox, CONSUMER_GROUP)}


def test_entries_left_by_a_flusher_off_process_are_drained_by_the_next_saver(
        redis_url, mongo_url, caplog) -> None:
    opts = unique_options()
    with caplog.at_level(logging.INFO, "langgraph_durable"), \
            DurableSaver.from_urls(redis_url, mongo_url, flusher="off", **opts) as app:
        _put_many(app, "left", 4)
    assert (f"closing with 4 entries in the outbox {{{opts['key_prefix']}:outbox}} for the "
            "flushers; they stay in Redis, and the next saver (flusher='auto') or flusher "
            f"worker with key_prefix={opts['key_prefix']!r} on this Redis drains them; to "
            f"drain them now run: langgraph-durable --key-prefix {opts['key_prefix']} "
            f"--database {opts['database']} flush  (with REDIS_URL and MONGODB_URL set to "
            "this saver's servers (Redis 127.0.0.1:") in caplog.text

    from langgraph_durable.cli import app as cli_app

    env = {"REDIS_URL": redis_url, "MONGODB_URL": mongo_url,
           "LGD_KEY_PREFIX": opts["key_prefix"], "LGD_DATABASE": opts["database"]}
    res = CliRunner().invoke(cli_app, ["status", "--json"], env=env)
    outbox = json.loads(res.stdout)["outbox"]
    assert outbox["length"] == 4 and outbox["oldest_age_s"] > 0

    with DurableSaver.from_urls(redis_url, mongo_url, **opts) as nxt:  # no flush() called
        wait_for(lambda: _in_mongo(nxt, "left") == 4, 30, "the next saver's flusher")


def test_entries_delivered_to_a_consumer_deleted_since_are_delivered_again(
        redis_url, mongo_url, redis_client, caplog) -> None:
    opts = unique_options(claim_idle_s=0.2)
    with DurableSaver.from_urls(redis_url, mongo_url, flusher="off", **opts) as app:
        _put_many(app, "orphan", 3)
        outbox = app.context.outbox
    # a consumer read them, then was deleted with its pending list (XGROUP DELCONSUMER by
    # hand): the group's last-delivered id is past entries no consumer holds
    redis_client.xreadgroup(CONSUMER_GROUP, "gone", {outbox: ">"}, count=10)
    assert redis_client.xgroup_delconsumer(outbox, CONSUMER_GROUP, "gone") == 3
    assert redis_client.xpending(outbox, CONSUMER_GROUP)["pending"] == 0
    with caplog.at_level(logging.WARNING, "langgraph_durable"), \
            DurableSaver.from_urls(redis_url, mongo_url, **opts) as nxt:
        wait_for(lambda: _in_mongo(nxt, "orphan") == 3, 30, "the orphaned entries")
    assert "although the group had delivered them" in caplog.text
    assert redis_client.xlen(outbox) == 0


def test_entries_pending_with_a_dead_consumer_are_claimed(redis_url, mongo_url,
                                                          redis_client) -> None:
    opts = unique_options(claim_idle_s=0.2)
    with DurableSaver.from_urls(redis_url, mongo_url, flusher="off", **opts) as app:
        _put_many(app, "dead", 3)
        outbox = app.context.outbox
    redis_client.xreadgroup(CONSUMER_GROUP, "dead-host-1-x", {outbox: ">"}, count=10)
    with DurableSaver.from_urls(redis_url, mongo_url, **opts) as nxt:
        wait_for(lambda: _in_mongo(nxt, "dead") == 3, 30, "the claimed entries")
        # holding nothing now, it is removed once idle 10 x claim_idle_s
        wait_for(lambda: "dead-host-1-x" not in _consumers(redis_client, outbox), 30,
                 "the dead consumer to be removed")


def test_a_saver_removes_its_consumer_on_close(redis_url, mongo_url, redis_client) -> None:
    opts = unique_options()
    for _ in range(3):
        with DurableSaver.from_urls(redis_url, mongo_url, **opts) as saver:
            _put_many(saver, "c", 2)
            me = saver.stats()["flusher"]["consumer"]
            # the flusher thread's first XREADGROUP makes it a consumer of the group
            wait_for(lambda me=me, s=saver: me in _consumers(redis_client, s.context.outbox), 30,
                     "the flusher to join the consumer group")
        assert saver.runtime.flusher.left_group is True
        assert _consumers(redis_client, saver.context.outbox) == {}


async def test_an_async_saver_removes_its_consumer_on_close(redis_url, mongo_url,
                                                            redis_client) -> None:
    import pymongo
    import redis.asyncio

    opts = unique_options()
    r = redis.asyncio.Redis.from_url(redis_url)
    m = pymongo.AsyncMongoClient(mongo_url)
    try:
        async with DurableSaver(r, m, **opts) as saver:
            await saver.aput({"configurable": {"thread_id": "a", "checkpoint_ns": ""}},
                             empty_checkpoint(), {"step": 0}, {})
            for _ in range(1000):  # the flusher task's first XREADGROUP joins the group
                if _consumers(redis_client, saver.context.outbox):
                    break
                await asyncio.sleep(0.01)
            assert len(_consumers(redis_client, saver.context.outbox)) == 1
        assert _consumers(redis_client, saver.context.outbox) == {}
    finally:
        await r.aclose()
        await m.close()


def test_a_consumer_holding_entries_is_kept_and_idle_empty_ones_are_removed(
        redis_url, mongo_url, redis_client) -> None:
    from langgraph_durable.io.drivers import run_sync
    from langgraph_durable.outbox.group import leave_plan

    opts = unique_options(claim_idle_s=0.1)
    with DurableSaver.from_urls(redis_url, mongo_url, **opts | {"flusher": "off"}) as app:
        _put_many(app, "k", 2)
        outbox = app.context.outbox
        redis_client.xgroup_createconsumer(outbox, CONSUMER_GROUP, "ghost")  # holds nothing
        redis_client.xreadgroup(CONSUMER_GROUP, "holder", {outbox: ">"}, count=1)
        assert run_sync(leave_plan(app.context, "holder"), app.sync_clients) is False
        assert _consumers(redis_client, outbox) == {"ghost": 0, "holder": 1}
        assert run_sync(leave_plan(app.context, "ghost"), app.sync_clients) is True
        redis_client.xgroup_createconsumer(outbox, CONSUMER_GROUP, "ghost")
    with DurableSaver.from_urls(redis_url, mongo_url, **opts) as last:
        wait_for(lambda: _in_mongo(last, "k") == 2, 30, "the held entry to be claimed")
        wait_for(lambda: not {"ghost", "holder"} & set(_consumers(redis_client, outbox)), 30,
                 "the idle consumers to be removed")
