"""The thread registry: with MongoDB down, a brand-new thread starts (Redis knows every thread
it has stored, so "no such thread" needs no MongoDB read), and reaches MongoDB after it
returns; a Redis whose registry is missing or not complete still asks MongoDB."""

from __future__ import annotations

from typing import Any

import pytest
import redis
import redis.cluster
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from redis.crc import key_slot

from langgraph_durable import DurableSaver, TierUnavailableError
from langgraph_durable.config import DurableConfig
from langgraph_durable.hot.keys import EPOCH_FIELD
from langgraph_durable.hot.registry_scripts import ClaimReply, claim_op, decide_op
from langgraph_durable.io.drivers import run_sync
from langgraph_durable.io.redis_urls import redis_client_from_url
from langgraph_durable.testing import drop_key_prefix, mongo_server, unique_options, wait_for

from .graphs import build_answering, build_nested

TURNS = 3
DOWN = {"server_selection_timeout_s": 0.3}


def _turns(graph: Any, thread: str) -> list[Any]:
    cfg = {"configurable": {"thread_id": thread}}
    return [graph.invoke({"messages": [HumanMessage(f"q {k}", id=f"h-{k}")]}, cfg)
            for k in range(TURNS)]


async def _aturns(graph: Any, thread: str) -> list[Any]:
    cfg = {"configurable": {"thread_id": thread}}
    return [await graph.ainvoke({"messages": [HumanMessage(f"q {k}", id=f"h-{k}")]}, cfg)
            for k in range(TURNS)]


def _history(graph: Any, thread: str) -> list[tuple[Any, ...]]:
    """What ``get_state_history`` shows, without the savers' own checkpoint ids."""
    cfg = {"configurable": {"thread_id": thread}}
    return [(s.values, s.next, s.metadata["step"], s.metadata["source"])
            for s in graph.get_state_history(cfg)]


def _reference(thread: str) -> tuple[list[Any], list[tuple[Any, ...]]]:
    g = build_answering(InMemorySaver())
    return _turns(g, thread), _history(g, thread)


def _epoch(r: Any, saver: DurableSaver, thread: str) -> bytes | None:
    return r.hget(saver.context.registry_of(thread), EPOCH_FIELD)


def _mongo_alone(redis_url: str, mongo_url: str, opts: dict[str, Any], thread: str
                 ) -> list[tuple[Any, ...]]:
    """The thread's history read from MongoDB alone (every Redis key of the prefix gone)."""
    with redis_client_from_url(redis_url, DurableConfig(), asyncio=False) as r:
        drop_key_prefix(r, str(opts["key_prefix"]))
    with DurableSaver.from_urls(redis_url, mongo_url, **opts) as s:
        # MongoDB holds threads: a registry set up now is partial, never complete
        assert _epoch_of(s, thread).startswith(b"partial ")
        return _history(build_answering(s), thread)


def _epoch_of(saver: DurableSaver, thread: str) -> bytes | None:
    reply = run_sync(_hget(saver.context.registry_of(thread)), saver.sync_clients)
    return reply


def _hget(key: str) -> Any:
    from langgraph_durable.core.ops import Pipeline

    (value,) = yield Pipeline([["HGET", key, EPOCH_FIELD]])
    return value


def test_a_new_thread_runs_a_graph_while_mongodb_is_down_and_reaches_it_after(
        redis_url: str, redis_client: redis.Redis) -> None:
    answers, history = _reference("brand-new")
    opts = unique_options(**DOWN)
    with mongo_server() as ms:
        with DurableSaver.from_urls(redis_url, ms.url, **opts) as s:
            assert _epoch(redis_client, s, "brand-new").startswith(b"complete ")
            graph = build_answering(s)
            ms.stop()
            assert _turns(graph, "brand-new") == answers  # no TierUnavailableError
            assert _history(graph, "brand-new") == history
            assert redis_client.hexists(s.context.registry_of("brand-new"), "brand-new")
            ms.start()
            s.flush(timeout_s=30)
        assert _mongo_alone(redis_url, ms.url, opts, "brand-new") == history


async def test_async_a_new_thread_runs_a_graph_while_mongodb_is_down(
        redis_url: str, redis_client: redis.Redis) -> None:
    answers, history = _reference("brand-new-async")
    opts = unique_options(**DOWN)
    with mongo_server() as ms:
        async with DurableSaver.from_urls(redis_url, ms.url, **opts) as s:
            graph = build_answering(s)
            ms.stop()
            assert await _aturns(graph, "brand-new-async") == answers
            cfg = {"configurable": {"thread_id": "brand-new-async"}}
            states = [(x.values, x.metadata["step"]) async for x in graph.aget_state_history(cfg)]
            assert states == [(v, step) for v, _, step, _ in history]
            ms.start()
            await s.aflush(timeout_s=30)
        assert _mongo_alone(redis_url, ms.url, opts, "brand-new-async") == history


def _nested_run(saver: Any) -> list[Any]:
    """A new thread through a subgraph's interrupt and its resume; what each step shows."""
    graph = build_nested(saver)
    cfg = {"configurable": {"thread_id": "nested-new"}}
    first = graph.invoke({"topic": "tides", "notes": []}, cfg)
    paused = graph.get_state(cfg, subgraphs=True)
    inner = paused.tasks[0].state
    done = graph.invoke(Command(resume="moon"), cfg)
    first["__interrupt__"] = [i.value for i in first["__interrupt__"]]  # ids: the saver's
    return [first, paused.values, paused.next, inner.values, inner.next, done,
            [s.values for s in graph.get_state_history(cfg)]]


def test_a_new_thread_with_a_subgraph_and_an_interrupt_runs_while_mongodb_is_down(
        redis_url: str) -> None:
    expected = _nested_run(InMemorySaver())
    with mongo_server() as ms:
        with DurableSaver.from_urls(redis_url, ms.url, **unique_options(**DOWN)) as s:
            ms.stop()
            assert _nested_run(s) == expected
            ms.start()
            s.flush(timeout_s=30)


def test_a_redis_that_lost_its_data_asks_mongodb_again(redis_url: str,
                                                       redis_client: redis.Redis) -> None:
    _, history = _reference("only-in-mongodb")
    opts = unique_options(**DOWN)
    with mongo_server() as ms:
        with DurableSaver.from_urls(redis_url, ms.url, **opts) as s:
            graph = build_answering(s)
            _turns(graph, "only-in-mongodb")
            s.flush(timeout_s=30)
            drop_key_prefix(redis_client, s.config.key_prefix)  # Redis lost everything
            assert _history(graph, "only-in-mongodb") == history  # found in MongoDB
            _turns(graph, "another")  # PUT recreates the registry: without an epoch
            assert _epoch(redis_client, s, "another") is None
            ms.stop()
            cfg = {"configurable": {"thread_id": "started-after-the-loss"}}
            with pytest.raises(TierUnavailableError):  # never "no such thread"
                s.get_tuple(cfg)
            ms.start()
            s.flush(timeout_s=30)
        # a saver set up now finds MongoDB holding threads: the registry is partial
        with DurableSaver.from_urls(redis_url, ms.url, **opts) as s:
            assert _epoch(redis_client, s, "x").startswith(b"partial ")
            redis_client.delete(*s.context.keys("only-in-mongodb").all)  # hot keys expired
            assert _history(build_answering(s), "only-in-mongodb") == history
            ms.stop()
            with pytest.raises(TierUnavailableError):
                s.get_tuple({"configurable": {"thread_id": "started-after-the-loss"}})
            ms.start()


def test_setup_with_unflushed_entries_and_no_registry_leaves_it_partial(
        redis_url: str, redis_client: redis.Redis) -> None:
    # Redis holds a thread only in the outbox (MongoDB empty), and the registry is gone
    # (evicted, or written by a version without one): the thread must never be taken for
    # absent once its hot keys expire
    _, history = _reference("unflushed")
    opts = unique_options(flusher="off", **DOWN)
    with mongo_server() as ms:
        with DurableSaver.from_urls(redis_url, ms.url, **opts) as s:
            _turns(build_answering(s), "unflushed")
            redis_client.delete(s.context.registry_of("unflushed"))
        with DurableSaver.from_urls(redis_url, ms.url, **{**opts, "flusher": "auto"}) as s:
            assert _epoch(redis_client, s, "unflushed").startswith(b"partial ")
            s.flush(timeout_s=30)
            redis_client.delete(*s.context.keys("unflushed").all)
            assert _history(build_answering(s), "unflushed") == history


def test_setup_while_mongodb_is_down_decides_the_registry_once_it_answers(
        redis_url: str, redis_client: redis.Redis) -> None:
    answers, _ = _reference("after-the-deferred-setup")
    with mongo_server() as ms:
        ms.stop()
        with DurableSaver.from_urls(redis_url, ms.url, **unique_options(**DOWN)) as s:
            assert _epoch(redis_client, s, "t") is None  # not decided: not trusted
            with pytest.raises(TierUnavailableError):
                s.get_tuple({"configurable": {"thread_id": "t"}})
            ms.start()
            wait_for(lambda: s.runtime.deferred.done, 30, "the deferred MongoDB set-up")
            assert _epoch(redis_client, s, "t").startswith(b"complete ")
            ms.stop()
            assert _turns(build_answering(s), "after-the-deferred-setup") == answers
            ms.start()


def test_a_registry_claimed_again_or_lost_is_settled_only_by_the_standing_claim(
        saver: DurableSaver, redis_client: redis.Redis) -> None:
    reg, outbox = saver.context.registries[0], saver.context.outboxes[0]
    redis_client.delete(reg)

    def run(op: Any) -> Any:
        def plan() -> Any:
            return (yield op)
        return run_sync(plan(), saver.sync_clients)

    assert run(claim_op(reg, outbox, "a")) == ClaimReply(b"", 0)
    assert run(claim_op(reg, outbox, "b")) == ClaimReply(b"", 0)  # a second saver setting up
    assert run(decide_op(reg, "a", "complete")) is False  # its claim was taken over
    assert redis_client.hget(reg, EPOCH_FIELD) == b"pending b"
    redis_client.delete(reg)  # lost between claim and settle
    redis_client.hset(reg, "t", 1)  # a put recreates it
    assert run(decide_op(reg, "b", "complete")) is False
    assert redis_client.hget(reg, EPOCH_FIELD) is None
    assert run(claim_op(reg, outbox, "c")) == ClaimReply(b"", 0)
    assert run(decide_op(reg, "c", "complete")) is True
    assert run(claim_op(reg, outbox, "d")) == ClaimReply(b"complete c", -1)  # decided: kept


def test_copy_thread_registers_its_target_and_delete_thread_forgets_the_thread(
        redis_url: str, redis_client: redis.Redis) -> None:
    _, history = _reference("source")
    with mongo_server() as ms:
        with DurableSaver.from_urls(redis_url, ms.url, **unique_options(**DOWN)) as s:
            graph = build_answering(s)
            _turns(graph, "source")
            s.copy_thread("source", "copy")
            reg = s.context.registry_of
            assert redis_client.hexists(reg("copy"), "copy")
            assert _history(graph, "copy") == history  # from MongoDB: Redis released it
            s.delete_thread("source")
            # marked deleted: read as absent, its tombstones still asked for by late writes
            assert redis_client.hget(reg("source"), "source") == b"d"
            assert _history(graph, "source") == []
            ms.stop()
            assert s.get_tuple({"configurable": {"thread_id": "source"}}) is None
            with pytest.raises(TierUnavailableError):  # only MongoDB holds the copy
                s.get_tuple({"configurable": {"thread_id": "copy"}})
            ms.start()


def test_on_a_cluster_a_new_thread_starts_while_mongodb_is_down(
        redis_cluster_url: str) -> None:
    answers, history = _reference("cluster-new")
    opts = unique_options(**DOWN)
    with mongo_server() as ms:
        with DurableSaver.from_urls(redis_cluster_url, ms.url, **opts) as s:
            ctx = s.context
            assert len(ctx.registries) == ctx.partitions == 16
            for t in ("cluster-new", "a", "b"):  # each registry in its threads' slot
                assert key_slot(ctx.registry_of(t).encode()) == key_slot(ctx.keys(t).cp.encode())
            assert all(_epoch_of(s, t).startswith(b"complete ") for t in ("a", "b"))
            graph = build_answering(s)
            ms.stop()
            assert _turns(graph, "cluster-new") == answers
            assert _history(graph, "cluster-new") == history
            ms.start()
            s.flush(timeout_s=30)
        assert _mongo_alone(redis_cluster_url, ms.url, opts, "cluster-new") == history


def test_a_rebuilt_registry_holds_every_thread_of_both_tiers_and_is_trusted(
        redis_url: str, redis_client: redis.Redis) -> None:
    from langgraph_durable.plans.thread_registry import rebuild_plan, states_plan

    _, history = _reference("in-mongodb")
    opts = unique_options(**DOWN)
    with mongo_server() as ms:
        with DurableSaver.from_urls(redis_url, ms.url, **opts) as s:
            graph = build_answering(s)
            _turns(graph, "in-mongodb")
            s.flush(timeout_s=30)
            redis_client.delete(*s.context.keys("in-mongodb").all)  # its hot keys expired
            _turns(graph, "in-redis")
            redis_client.delete(*s.context.registries)  # a version without registries
        with DurableSaver.from_urls(redis_url, ms.url, **opts) as s:
            assert [st for _, st, _ in run_sync(states_plan(s.context), s.sync_clients)] \
                == ["partial"]
            assert run_sync(rebuild_plan(s.context), s.sync_clients) == 2
            assert run_sync(states_plan(s.context), s.sync_clients) == [
                (s.context.registries[0], "complete", 2)]
            graph = build_answering(s)
            ms.stop()
            assert s.get_tuple({"configurable": {"thread_id": "brand-new"}}) is None
            assert _history(graph, "in-redis") == _reference("in-redis")[1]  # hot: no MongoDB
            with pytest.raises(TierUnavailableError):  # registered: MongoDB is asked
                s.get_tuple({"configurable": {"thread_id": "in-mongodb"}})
            ms.start()
            assert _history(graph, "in-mongodb") == history


def test_forgetting_keeps_a_thread_registered_while_either_tier_holds_it(
        saver: DurableSaver, redis_client: redis.Redis) -> None:
    # what delete_thread meets when a new run on the thread ran while it deleted
    from langgraph_durable.plans.thread_registry import forget_plan

    graph, reg = build_answering(saver), saver.context.registry_of("t")
    _turns(graph, "t")
    saver.flush(timeout_s=30)
    redis_client.delete(*saver.context.keys("t").all)  # only MongoDB holds it
    assert run_sync(forget_plan(saver.context, "t"), saver.sync_clients) is False
    assert redis_client.hexists(reg, "t")
    saver.delete_thread("t")  # both tiers empty: marked deleted
    assert redis_client.hget(reg, "t") == b"d"
    _turns(graph, "t")  # a new run registers it again
    assert redis_client.hget(reg, "t") == b"1"
    saver.sync_clients.db[saver.context.collections.checkpoints].delete_many({})
    assert run_sync(forget_plan(saver.context, "t"), saver.sync_clients) is False  # in Redis
    assert redis_client.hexists(reg, "t")


def test_savers_setting_up_at_once_leave_every_registry_decided_complete(
        redis_url: str, mongo_url: str, redis_client: redis.Redis) -> None:
    import threading

    opts = unique_options(outbox_partitions=4)
    savers = [DurableSaver.from_urls(redis_url, mongo_url, **opts) for _ in range(4)]
    errors: list[BaseException] = []

    def setup(s: DurableSaver) -> None:
        try:
            s.setup()
        except BaseException as exc:  # reported below
            errors.append(exc)

    workers = [threading.Thread(target=setup, args=(s,)) for s in savers]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    try:
        assert errors == []
        # each partition decided once, by whichever claim stood last on it
        epochs = [redis_client.hget(reg, EPOCH_FIELD) for reg in savers[0].context.registries]
        assert [e.split(b" ")[0] for e in epochs] == [b"complete"] * 4
    finally:
        for s in savers:
            s.close()
