"""Round trips per operation for DurableSaver, counted on the wire as
``tests/test_round_trips.py`` does: packets sent by redis-py connections (one per command
or pipeline) and commands PyMongo sends (command monitoring). MongoDB *rounds* count
sequential waits: a command started while another is in flight joins its round (under
asyncio, ``Parallel`` finds go out together)."""

from __future__ import annotations

import asyncio
import threading
import uuid
from typing import Any

import pymongo
import redis
import redis.asyncio
from langgraph.checkpoint.base import empty_checkpoint
from pymongo import monitoring

from langgraph_durable import DurableSaver
from langgraph_durable.outbox.flusher import consumer_name, flush_batch_plan

from . import graphs

_IGNORED = {"hello", "isMaster", "ismaster", "ping", "endSessions", "buildInfo"}


class Tally:
    """Redis packets and MongoDB commands/rounds since the last ``reset``."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.on = False
        self.reset()

    def reset(self) -> None:
        with self.lock:
            self.redis = 0
            self.mongo: list[str] = []
            self.rounds = 0
            self.inflight = 0

    def snapshot(self) -> dict[str, Any]:
        with self.lock:
            return {"redis": self.redis, "mongo": len(self.mongo), "mongo_rounds": self.rounds,
                    "mongo_cmds": list(self.mongo)}


TALLY = Tally()


class _CountingConnection(redis.connection.Connection):
    def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        if TALLY.on:
            with TALLY.lock:
                TALLY.redis += 1
        super().send_packed_command(command, check_health)


class _ACountingConnection(redis.asyncio.connection.Connection):
    async def send_packed_command(self, command: Any, check_health: bool = True) -> None:
        if TALLY.on:
            with TALLY.lock:
                TALLY.redis += 1
        await super().send_packed_command(command, check_health)


class _Listener(monitoring.CommandListener):
    def started(self, event: Any) -> None:
        if TALLY.on and event.command_name not in _IGNORED:
            with TALLY.lock:
                if TALLY.inflight == 0:
                    TALLY.rounds += 1
                TALLY.inflight += 1
                TALLY.mongo.append(event.command_name)

    def _end(self, event: Any) -> None:
        if event.command_name not in _IGNORED:
            with TALLY.lock:
                TALLY.inflight = max(0, TALLY.inflight - 1)

    def succeeded(self, event: Any) -> None:
        self._end(event)

    def failed(self, event: Any) -> None:
        self._end(event)


def _count(fn: Any) -> dict[str, Any]:
    TALLY.reset()
    TALLY.on = True
    try:
        fn()
    finally:
        TALLY.on = False
    return TALLY.snapshot()


async def _acount(coro_fn: Any) -> dict[str, Any]:
    TALLY.reset()
    TALLY.on = True
    try:
        await coro_fn()
    finally:
        TALLY.on = False
    return TALLY.snapshot()


def _per(d: dict[str, Any], n: int) -> dict[str, float]:
    return {"redis": d["redis"] / n, "mongo": d["mongo"] / n}


def measure(redis_url: str, mongo_url: str, turns: int, spt: int) -> dict[str, Any]:
    """Round trips of DurableSaver's operations, sync and async; returns a flat dict."""
    out: dict[str, Any] = {}
    for durability in ("write_behind", "strict"):
        out.update(_sync_case(redis_url, mongo_url, turns, spt, durability))
    out.update(asyncio.run(_async_case(redis_url, mongo_url)))
    return out


def _sync_case(redis_url: str, mongo_url: str, turns: int, spt: int,
               durability: str) -> dict[str, Any]:
    tag = "w" if durability == "write_behind" else "s"
    ns = f"rt{uuid.uuid4().hex[:8]}"
    pool = redis.ConnectionPool.from_url(redis_url, connection_class=_CountingConnection)
    r = redis.Redis(connection_pool=pool)
    m: pymongo.MongoClient = pymongo.MongoClient(mongo_url, event_listeners=[_Listener()])
    out: dict[str, Any] = {}
    try:
        s = DurableSaver(r, m, key_prefix=ns, database=ns, flusher="off", durability=durability)
        s.setup()
        g = graphs.build_agent(s, turns)
        cfg = {"configurable": {"thread_id": "rt-agent"}}
        # one turn first, so the next turns are the steady state (history present)
        g.invoke({"messages": [graphs.human(0)]}, cfg)
        before = dict(s.stats())
        got = _count(lambda: [g.invoke({"messages": [graphs.human(t)]}, cfg)
                              for t in range(1, turns)])
        st = s.stats()
        puts = st["puts"] - before.get("puts", 0)
        pws = st["put_writes"] - before.get("put_writes", 0)
        reads = (st.get("reads_hot", 0) + st.get("reads_durable", 0) + st.get("reads_miss", 0)
                 - before.get("reads_hot", 0) - before.get("reads_durable", 0)
                 - before.get("reads_miss", 0))
        steps = (turns - 1) * spt
        out[f"{tag}.w1_step_redis"] = got["redis"] / steps
        out[f"{tag}.w1_step_mongo"] = got["mongo"] / steps
        out[f"{tag}.w1_calls"] = f"{puts} put, {pws} put_writes, {reads} get_tuple"
        # one put / put_writes / latest get_tuple, as test_round_trips
        last = s.get_tuple(cfg)
        assert last is not None
        cp = empty_checkpoint()
        pcfg = {"configurable": {"thread_id": "rt-one", "checkpoint_ns": ""}}
        one = _count(lambda: s.put(pcfg, cp, {"step": 0, "source": "loop"}, {}))
        out[f"{tag}.put"] = one
        saved = {"configurable": {**pcfg["configurable"], "checkpoint_id": cp["id"]}}
        out[f"{tag}.put_writes"] = _count(lambda: s.put_writes(saved, [("x", 1)], "task-1"))
        if tag == "w":
            out["hot_get"] = _count(lambda: s.get_tuple(cfg))
            assert s.last_read_tier == "hot"
            out["history100_hot"] = _count(lambda: list(g.get_state_history(cfg, limit=100)))
            # the flusher's work for these steps, amortised per super-step
            fl = _count(lambda: _drain(s))
            out["flusher_per_step_redis"] = fl["redis"] / max(1, puts)
            out["flusher_per_step_mongo"] = fl["mongo"] / max(1, puts)
            out["flusher_rounds_note"] = f"{fl['redis']} Redis / {fl['mongo']} MongoDB for " \
                                         f"{puts} puts + {pws} put_writes (batch of up to 500)"
            # one flush round whose entries span many threads
            for i in range(20):
                s.put({"configurable": {"thread_id": f"rt-many-{i}", "checkpoint_ns": ""}},
                      empty_checkpoint(), {"step": 0, "source": "loop"}, {})
            many = _count(lambda: _drain(s))
            out["flusher_20_threads"] = many
            with redis.Redis.from_url(redis_url) as plain:
                plain.delete(*s.context.keys("rt-agent").all)
            out["cold_get"] = _count(lambda: s.get_tuple(cfg))
            assert s.last_read_tier == "durable", s.last_read_tier
            out["history100_cold"] = _count(lambda: list(g.get_state_history(cfg, limit=100)))
    finally:
        r.close()
        with pymongo.MongoClient(mongo_url) as c:
            c.drop_database(ns)
        with redis.Redis.from_url(redis_url) as plain:
            keys = list(plain.scan_iter(match="{" + ns + ":*"))
            if keys:
                plain.delete(*keys)
        m.close()
    return out


def _drain(s: DurableSaver) -> None:
    consumer = consumer_name()
    while s.run(flush_batch_plan(s.context, consumer, block_ms=0, claim=False)).entries:
        pass


async def _async_case(redis_url: str, mongo_url: str) -> dict[str, Any]:
    ns = f"rta{uuid.uuid4().hex[:8]}"
    pool = redis.asyncio.ConnectionPool.from_url(redis_url, connection_class=_ACountingConnection)
    r = redis.asyncio.Redis(connection_pool=pool)
    m: pymongo.AsyncMongoClient = pymongo.AsyncMongoClient(mongo_url,
                                                          event_listeners=[_Listener()])
    out: dict[str, Any] = {}
    try:
        s = DurableSaver(r, m, key_prefix=ns, database=ns, flusher="off")
        await s.asetup()
        g = graphs.build_agent(s, 3, asynchronous=True)
        cfg = {"configurable": {"thread_id": "rt-async"}}
        for t in range(3):
            await g.ainvoke({"messages": [graphs.human(t)]}, cfg)
        out["async.hot_get"] = await _acount(lambda: s.aget_tuple(cfg))
        consumer = consumer_name()
        while (await s.arun(flush_batch_plan(s.context, consumer, block_ms=0,
                                             claim=False))).entries:
            pass
        await r.delete(*s.context.keys("rt-async").all)
        out["async.cold_get"] = await _acount(lambda: s.aget_tuple(cfg))
        assert s.last_read_tier == "durable"
    finally:
        await r.delete(*[k async for k in r.scan_iter(match="{" + ns + ":*")] or ["_none_"])
        await r.aclose()
        await m.drop_database(ns)
        await m.close()
    return out
