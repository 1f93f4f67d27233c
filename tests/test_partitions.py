"""The partitioned outbox: one stream per partition, in the slot of the threads it serves,
so a put and its outbox entry are one script, and acknowledging is one script per
partition, on a single Redis and on a Redis Cluster alike."""

from __future__ import annotations

from typing import Any

import redis
import redis.cluster
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from langgraph_durable import DurableSaver
from langgraph_durable.hot.keys import partition_of, thread_keys_of
from langgraph_durable.testing import unique_options

from .graphs import build_answering

THREADS = [f"thread-{i}" for i in range(12)]


def _graph(saver: Any) -> Any:
    return build_answering(saver)


def _run(saver: Any) -> None:
    g = _graph(saver)
    for t in THREADS:
        for turn in range(2):
            g.invoke({"messages": [HumanMessage(f"q {turn}", id=f"h-{turn}")]},
                     {"configurable": {"thread_id": t}})


def _values(saver: Any, thread: str) -> list[Any]:
    return [t.checkpoint["channel_values"] for t in saver.list(
        {"configurable": {"thread_id": thread}})]


def test_entries_go_to_their_threads_partition_and_every_partition_drains(
        redis_url: str, mongo_url: str) -> None:
    ref = InMemorySaver()
    _run(ref)
    opts = unique_options(outbox_partitions=4, flusher="off")
    r = redis.Redis.from_url(redis_url)
    with DurableSaver.from_urls(redis_url, mongo_url, **opts) as s:
        _run(s)
        ctx = s.context
        assert len(ctx.outboxes) == 4
        lengths = [r.xlen(stream) for stream in ctx.outboxes]
        assert sum(lengths) > 0 and sum(1 for n in lengths if n) >= 2  # spread
        for stream in ctx.outboxes:  # each entry is in its thread's partition
            for _eid, fields in r.xrange(stream):
                assert ctx.outbox_of(fields[b"t"].decode()) == stream
        for t in THREADS:  # a thread's keys share its partition's tag
            tag = ctx.outbox_of(t)[:ctx.outbox_of(t).index("}") + 1]
            assert all(k.startswith(tag + ":") for k in ctx.keys(t).all)
            assert thread_keys_of(ctx.config.key_prefix, ctx.keys(t).cp).thread_id == t
        assert s.stats()["outbox_length"] == sum(lengths)
    with DurableSaver.from_urls(redis_url, mongo_url, **{**opts, "flusher": "auto"}) as s:
        s.flush()  # a flusher drains every partition
        assert [r.xlen(stream) for stream in s.context.outboxes] == [0] * 4
        for t in THREADS:
            r.delete(*s.context.keys(t).all)  # MongoDB alone answers
            assert _values(s, t) == _values(ref, t)


def test_on_a_cluster_partitions_spread_over_every_master(redis_cluster_url: str,
                                                          mongo_url: str,
                                                          redis_cluster_proc: Any) -> None:
    with DurableSaver.from_urls(redis_cluster_url, mongo_url, **unique_options()) as s:
        ctx = s.context
        assert ctx.partitions == 16
        client = s.sync_clients.redis
        assert isinstance(client, redis.cluster.RedisCluster)
        owners = {client.get_node_from_key(stream).port for stream in ctx.outboxes}
        assert owners == {m.port for m in redis_cluster_proc.masters()}
        ref = InMemorySaver()
        _run(ref)
        _run(s)
        s.flush()
        assert sum(client.xlen(stream) for stream in ctx.outboxes) == 0
        for t in THREADS:
            assert partition_of(t, 16) == int(ctx.outbox_of(t).split(":p")[1].split(".")[0])
            assert _values(s, t) == _values(ref, t)
