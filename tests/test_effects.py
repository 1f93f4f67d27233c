"""Side effects once (``langgraph_durable.effects``): real graphs on real servers calling a
real local HTTP service (``tests/effects_support.py``) that counts what it did."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.func import entrypoint, task
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from langgraph_durable import DurableSaver, effects
from langgraph_durable.errors import ConfigurationError, EffectFailedError
from langgraph_durable.plans.effect_journal import collection
from langgraph_durable.testing import unique_options

from .effects_support import (
    State,
    charge,
    pay_async_then_approve,
    pay_in_subgraph,
    pay_then_approve,
    pay_then_fail,
)


def _config() -> dict[str, Any]:
    return {"configurable": {"thread_id": f"t-{uuid.uuid4().hex[:8]}"}}


def test_an_effect_before_interrupt_runs_once_across_the_resume(saver: DurableSaver,
                                                                 svc: Any) -> None:
    graph, config = pay_then_approve(saver), _config()
    first = graph.invoke({"url": svc.url, "amount": 42}, config)
    receipt = first["__interrupt__"][0].value["receipt"]
    done = graph.invoke(Command(resume=True), config)
    assert svc.calls == 1
    assert done["receipt"] == receipt == {"id": "ch_1", "amount": 42}
    assert done["approved"] is True


async def test_an_async_effect_before_interrupt_runs_once_across_the_resume(
        asaver: DurableSaver, svc: Any) -> None:
    graph, config = pay_async_then_approve(asaver), _config()
    await graph.ainvoke({"url": svc.url, "amount": 7}, config)
    done = await graph.ainvoke(Command(resume="ok"), config)
    assert svc.calls == 1
    assert done["receipt"] == {"id": "ch_1", "amount": 7}
    assert done["approved"] == "ok"


def test_an_effect_in_a_subgraph_runs_once_across_the_resume(saver: DurableSaver,
                                                             svc: Any) -> None:
    graph, config = pay_in_subgraph(saver), _config()
    graph.invoke({"url": svc.url, "amount": 5}, config)
    done = graph.invoke(Command(resume=True), config)
    assert svc.calls == 1
    assert done["receipt"] == {"id": "ch_1", "amount": 5}
    journal = saver.run(_journal(saver, config))
    assert [(d["name"], d["state"]) for d in journal] == [("pay", "done")]
    assert journal[0]["task_ns"].startswith("checkout:") and "|pay:" in journal[0]["task_ns"]


def test_a_retry_policy_does_not_repeat_a_journaled_effect(saver: DurableSaver,
                                                           svc: Any) -> None:
    failures = [2]  # the first two attempts fail after paying
    graph = pay_then_fail(saver, failures)
    done = graph.invoke({"url": svc.url, "amount": 9}, _config())
    assert failures == [0]
    assert svc.calls == 1
    assert done["receipt"] == {"id": "ch_1", "amount": 9}


def test_an_effect_in_a_task_of_an_entrypoint_runs_once_across_the_resume(
        saver: DurableSaver, svc: Any) -> None:
    @task
    def pay(url: str) -> dict[str, Any]:
        first = effects.once("pay", charge, url, 3)
        second = effects.once("pay", charge, url, 4)  # call 1 of "pay": its own effect
        return {"first": first, "second": second, "ok": interrupt("approve?")}

    @entrypoint(checkpointer=saver)
    def flow(url: str) -> dict[str, Any]:
        return pay(url).result()

    config = _config()
    flow.invoke(svc.url, config)
    done = flow.invoke(Command(resume=True), config)
    assert svc.calls == 2
    assert done == {"first": {"id": "ch_1", "amount": 3},
                    "second": {"id": "ch_2", "amount": 4}, "ok": True}


def test_idempotency_key_is_the_same_on_a_resume_and_differs_by_thread_and_call(
        saver: DurableSaver) -> None:
    seen: list[tuple[str, str]] = []
    inside: list[tuple[str, str]] = []

    def node(state: State) -> dict[str, Any]:
        seen.append((effects.idempotency_key("pay"), effects.idempotency_key("pay")))
        before = effects.idempotency_key("mail")
        inside.append((before, effects.once("mail", lambda: effects.idempotency_key("mail"))))
        return {"approved": interrupt("ok?")}

    g = StateGraph(State)
    g.add_node("node", node)
    g.add_edge(START, "node")
    g.add_edge("node", END)
    graph = g.compile(checkpointer=saver)
    a, b = _config(), _config()
    graph.invoke({}, a)
    graph.invoke(Command(resume=1), a)
    graph.invoke({}, b)
    (a0, a1), (again0, again1), (b0, b1) = seen
    assert (again0, again1) == (a0, a1)  # the resume re-executes: the same keys
    assert len({a0, a1, b0, b1}) == 4  # another call number, another thread: others
    assert a0.startswith("lgd-") and len(a0) == 44
    # the n-th idempotency_key(name) is the key of the n-th once(name) (inside its fn)
    assert all(before == within for before, within in inside)


def test_once_outside_a_graph_run_raises_configuration_error() -> None:
    with pytest.raises(ConfigurationError, match="outside"):
        effects.once("pay", lambda: 1)
    with pytest.raises(ConfigurationError, match="outside"):
        effects.idempotency_key("pay")


def test_once_with_another_checkpointer_raises_configuration_error_naming_it() -> None:
    graph = pay_then_approve(InMemorySaver())
    with pytest.raises(ConfigurationError, match="needs a DurableSaver.*InMemorySaver"):
        graph.invoke({"url": "http://127.0.0.1:9/", "amount": 1}, _config())


def _failing_graph(saver: DurableSaver, journal_errors: bool, calls: list[int]) -> Any:
    def node(state: State) -> dict[str, Any]:
        def refuse() -> None:
            calls.append(1)
            raise PermissionError("card declined")

        try:
            effects.once("pay", refuse, journal_errors=journal_errors)
        except (PermissionError, EffectFailedError) as exc:
            return {"receipt": {"error": type(exc).__name__}, "approved": interrupt("ok?")}
        return {}

    g = StateGraph(State)
    g.add_node("node", node)
    g.add_edge(START, "node")
    g.add_edge("node", END)
    return g.compile(checkpointer=saver)


@pytest.mark.parametrize("journal_errors,calls_after_resume,error_after_resume", [
    (False, 2, "PermissionError"), (True, 1, "EffectFailedError")])
def test_an_error_of_the_effect_is_journaled_only_when_asked(
        saver: DurableSaver, journal_errors: bool, calls_after_resume: int,
        error_after_resume: str) -> None:
    calls: list[int] = []
    graph, config = _failing_graph(saver, journal_errors, calls), _config()
    graph.invoke({}, config)
    done = graph.invoke(Command(resume=True), config)
    assert len(calls) == calls_after_resume
    assert done["receipt"] == {"error": error_after_resume}


def _journal(saver: DurableSaver, config: dict[str, Any]) -> Any:
    from langgraph_durable.plans.effect_journal import journal_plan

    return journal_plan(saver.context, config["configurable"]["thread_id"])


def test_the_journal_reaches_mongodb_and_answers_when_redis_lost_it(
        redis_url: str, mongo_url: str, svc: Any) -> None:
    options = unique_options()
    config = _config()
    tid = config["configurable"]["thread_id"]
    with DurableSaver.from_urls(redis_url, mongo_url, **options) as saver:
        graph = pay_then_approve(saver)
        graph.invoke({"url": svc.url, "amount": 11}, config)
        saver.flush()
        docs = list(saver.sync_clients.db[collection(saver.context)].find({"thread_id": tid}))
        assert [(d["name"], d["n"], d["state"], d["v"]) for d in docs] == [("pay", 0, "done", 2)]
        keys = saver.context.keys(tid)
        saver.sync_clients.redis.delete(*keys.all, keys.fx)  # Redis lost the thread
        done = graph.invoke(Command(resume=True), config)
    assert svc.calls == 1
    assert done["receipt"] == {"id": "ch_1", "amount": 11}


def test_delete_thread_removes_the_journal_from_both_tiers(saver: DurableSaver,
                                                           svc: Any) -> None:
    graph, config = pay_then_approve(saver), _config()
    tid = config["configurable"]["thread_id"]
    graph.invoke({"url": svc.url, "amount": 1}, config)
    saver.delete_thread(tid)
    assert saver.run(_journal(saver, config)) == []
    assert saver.sync_clients.redis.exists(saver.context.keys(tid).fx) == 0
    graph.invoke({"url": svc.url, "amount": 1}, config)  # a new run: pays again
    assert svc.calls == 2


def test_copy_thread_copies_the_journal_so_the_copy_resumes_without_paying_again(
        saver: DurableSaver, svc: Any) -> None:
    graph, config = pay_then_approve(saver), _config()
    graph.invoke({"url": svc.url, "amount": 8}, config)
    target = {"configurable": {"thread_id": config["configurable"]["thread_id"] + "-copy"}}
    saver.copy_thread(config["configurable"]["thread_id"], target["configurable"]["thread_id"])
    copied = saver.run(_journal(saver, target))
    assert [(d["thread_id"], d["name"], d["state"]) for d in copied] == [
        (target["configurable"]["thread_id"], "pay", "done")]
    done = graph.invoke(Command(resume=True), target)
    assert svc.calls == 1
    assert done["receipt"] == {"id": "ch_1", "amount": 8}


def test_delete_for_runs_removes_the_effects_of_the_runs_checkpoints(
        saver: DurableSaver, svc: Any) -> None:
    graph, config = pay_then_approve(saver), _config()
    run = str(uuid.uuid4())
    graph.invoke({"url": svc.url, "amount": 2}, {**config, "metadata": {"run_id": run}})
    assert len(saver.run(_journal(saver, config))) == 1
    saver.delete_for_runs([run])
    assert saver.run(_journal(saver, config)) == []


def test_prune_keep_latest_removes_the_effects_of_the_dropped_checkpoints(
        saver: DurableSaver, svc: Any) -> None:
    graph, config = pay_then_approve(saver), _config()
    graph.invoke({"url": svc.url, "amount": 1}, config)
    graph.invoke(Command(resume=True), config)  # the first run ends
    graph.invoke({"url": svc.url, "amount": 2}, config)  # the second stops at interrupt()
    latest = saver.get_tuple(config).config["configurable"]["checkpoint_id"]
    assert len(saver.run(_journal(saver, config))) == 2
    saver.prune([config["configurable"]["thread_id"]], strategy="keep_latest")
    kept = saver.run(_journal(saver, config))
    assert [(d["checkpoint_id"], d["state"]) for d in kept] == [(latest, "done")]
    done = graph.invoke(Command(resume=True), config)  # the kept effect still answers
    assert svc.calls == 2
    assert done["receipt"] == {"id": "ch_2", "amount": 2}


def test_an_unflushed_journal_never_expires_and_a_flushed_one_gets_hot_ttl_s(
        redis_url: str, mongo_url: str, svc: Any) -> None:
    options = unique_options(hot_ttl_s=600)
    config = _config()
    tid = config["configurable"]["thread_id"]
    with DurableSaver.from_urls(redis_url, mongo_url, **options, flusher="off") as saver:
        pay_then_approve(saver).invoke({"url": svc.url, "amount": 3}, config)
        fx = saver.context.keys(tid).fx
        assert saver.sync_clients.redis.ttl(fx) == -1
    with DurableSaver.from_urls(redis_url, mongo_url, **options) as saver:
        saver.flush()
        assert 0 < saver.sync_clients.redis.ttl(fx) <= 600
        saver.sync_clients.redis.delete(fx)  # the journal expired, the thread did not
        done = pay_then_approve(saver).invoke(Command(resume=True), config)
    assert svc.calls == 1  # read back from MongoDB: not paid again
    assert done["receipt"] == {"id": "ch_1", "amount": 3}


def test_on_a_redis_cluster_the_journal_lives_in_the_threads_slot(
        redis_cluster_url: str, mongo_url: str, svc: Any) -> None:
    from redis.crc import key_slot

    config = _config()
    tid = config["configurable"]["thread_id"]
    with DurableSaver.from_urls(redis_cluster_url, mongo_url, **unique_options()) as saver:
        keys = saver.context.keys(tid)
        assert key_slot(keys.fx.encode()) == key_slot(keys.meta.encode()) == key_slot(
            saver.context.outbox_of(tid).encode())
        graph = pay_then_approve(saver)
        graph.invoke({"url": svc.url, "amount": 4}, config)
        done = graph.invoke(Command(resume=True), config)
        saver.flush()
        assert [d["tier"] for d in saver.run(_journal(saver, config))] == ["hot"]
        assert saver.sync_clients.db[saver.context.collections.effects].count_documents(
            {"thread_id": tid, "state": "done"}) == 1
        saver.delete_thread(tid)
        assert saver.run(_journal(saver, config)) == []
    assert svc.calls == 1
    assert done["receipt"] == {"id": "ch_1", "amount": 4}


def test_a_replay_a_fork_and_a_new_run_get_new_task_ids_so_their_effects_run_again(
        saver: DurableSaver, svc: Any) -> None:
    from .effects_support import pay_only

    graph, config = pay_only(saver), _config()
    graph.invoke({"url": svc.url, "amount": 2}, config)
    before_pay = next(h for h in graph.get_state_history(config) if h.next == ("pay",))
    graph.invoke(None, before_pay.config)  # replay from the checkpoint before the payment
    assert svc.calls == 2
    graph.invoke(None, graph.update_state(before_pay.config, {"amount": 3}))  # a fork
    assert svc.calls == 3
    graph.invoke({"url": svc.url, "amount": 2}, config)  # a new run on the thread
    assert svc.calls == 4


def test_while_mongodb_is_down_effects_of_threads_redis_holds_keep_working(
        redis_url: str, svc: Any) -> None:
    from langgraph_durable.testing import mongo_server

    opts = unique_options(server_selection_timeout_s=0.3)
    a, b = _config(), _config()
    with mongo_server() as ms:
        with DurableSaver.from_urls(redis_url, ms.url, **opts) as saver:
            graph = pay_then_approve(saver)
            graph.invoke({"url": svc.url, "amount": 1}, a)
            ms.stop()
            done = graph.invoke(Command(resume=True), a)  # the journal answers from Redis
            graph.invoke({"url": svc.url, "amount": 2}, b)  # a new thread's new effect
            assert svc.calls == 2
            ms.start()
            saver.flush(timeout_s=30)
            effects_docs = saver.sync_clients.db[saver.context.collections.effects]
            assert sorted((d["thread_id"], d["state"]) for d in effects_docs.find()) == sorted(
                [(a["configurable"]["thread_id"], "done"), (b["configurable"]["thread_id"],
                                                           "done")])
    assert done["receipt"] == {"id": "ch_1", "amount": 1}
