"""Trying to break "an effect waits for its task's checkpoint" (``task_checkpoint_plan``)
as a demanding LangGraph user would: subgraphs, fan-out, resumes in a new process, time
travel, other durabilities, a run after a failed put, the saver's copies. Every graph
stores its step checkpoints late (``effects_support.slowed_puts``) so each task starts
before its checkpoint is stored."""

from __future__ import annotations

import operator
import threading
import uuid
from typing import Annotated, Any

import pytest
from langgraph.config import get_config
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, Send, interrupt
from typing_extensions import TypedDict

from langgraph_durable import DurableSaver, effects
from langgraph_durable.errors import EffectCheckpointError
from langgraph_durable.testing import unique_options

from .effects_support import charge, slowed_puts, task_checkpoint_stored


class S(TypedDict, total=False):
    url: str
    items: list[int]
    stored: Annotated[list[bool], operator.add]
    receipts: Annotated[list[Any], operator.add]


def _config() -> dict[str, Any]:
    return {"configurable": {"thread_id": f"brk-{uuid.uuid4().hex[:8]}"}}


def _pay_node(saver: DurableSaver, name: str = "pay", amount: int = 5) -> Any:
    def pay(state: S) -> dict[str, Any]:
        def call() -> dict[str, Any]:
            return {"stored": task_checkpoint_stored(saver), **charge(state["url"], amount)}

        receipt = dict(effects.once(name, call))
        return {"stored": [receipt.pop("stored")], "receipts": [receipt]}

    return pay


def _linear(*nodes: tuple[str, Any]) -> StateGraph:
    g = StateGraph(S)
    prev = START
    for name, fn in nodes:
        g.add_node(name, fn)
        g.add_edge(prev, name)
        prev = name
    g.add_edge(prev, END)
    return g


def _pay_once(saver: Any, svc: Any, late_s: float, **invoke: Any) -> None:
    """Run a one-node graph paying through ``once`` on ``saver`` whose step puts land
    ``late_s`` late: the service is called once, after the task's checkpoint is stored."""
    slow = slowed_puts(saver, late_s)
    out = _linear(("pay", _pay_node(slow))).compile(checkpointer=slow).invoke(
        {"url": svc.url}, _config(), **invoke)
    assert out["stored"] == [True]
    assert svc.calls == 1


class Item(TypedDict):
    """One ``Send`` of ``_fan_out``: the service's URL and the item's number."""

    url: str
    i: int


def _fan_out(pay: Any) -> StateGraph:
    """``START`` -> one ``pay`` task per entry of ``items`` (``Send``) -> ``END``."""
    g = StateGraph(S)
    g.add_node("pay", pay)
    g.add_conditional_edges(START, lambda s: [Send("pay", {"url": s["url"], "i": i})
                                              for i in s["items"]], ["pay"])
    g.add_edge("pay", END)
    return g


# ------------------------------------------------------------------ subgraphs


def test_an_effect_in_a_subgraph_node_waits_for_the_subgraphs_checkpoint(
        saver: DurableSaver, svc: Any) -> None:
    slow = slowed_puts(saver, 0.3)
    sub = _linear(("pay", _pay_node(slow))).compile()
    graph = _linear(("sub", sub)).compile(checkpointer=slow)
    out = graph.invoke({"url": svc.url}, _config())
    assert out["stored"] == [True]
    assert svc.calls == 1


def test_an_effect_in_a_nested_subgraph_waits_and_is_not_repeated_on_resume(
        saver: DurableSaver, svc: Any) -> None:
    slow = slowed_puts(saver, 0.2)

    def ask(state: S) -> dict[str, Any]:
        interrupt("go on?")
        return {}

    inner = _linear(("pay", _pay_node(slow)), ("ask", ask)).compile()
    middle = _linear(("inner", inner)).compile()
    graph = _linear(("middle", middle)).compile(checkpointer=slow)
    config = _config()
    graph.invoke({"url": svc.url}, config)
    assert svc.calls == 1
    out = graph.invoke(Command(resume=True), config)
    assert out["stored"] == [True]
    assert svc.calls == 1


# ------------------------------------------------------------------ parallel tasks


def test_parallel_tasks_of_one_step_each_wait_and_each_call_once(
        saver: DurableSaver, svc: Any) -> None:
    slow = slowed_puts(saver, 0.3)
    g = StateGraph(S)
    g.add_node("a", _pay_node(slow, "pay-a", 1))
    g.add_node("b", _pay_node(slow, "pay-b", 2))
    g.add_node("c", _pay_node(slow, "pay-c", 3))
    for n in "abc":
        g.add_edge(START, n)
        g.add_edge(n, END)
    out = g.compile(checkpointer=slow).invoke({"url": svc.url}, _config())
    assert out["stored"] == [True, True, True]
    assert sorted(r["amount"] for r in out["receipts"]) == [1, 2, 3]
    assert svc.calls == 3


def test_send_fan_out_tasks_each_wait_and_each_call_once(
        saver: DurableSaver, svc: Any) -> None:
    slow = slowed_puts(saver, 0.3)

    def pay(item: Item) -> dict[str, Any]:
        def call() -> dict[str, Any]:
            return {"stored": task_checkpoint_stored(slow), **charge(item["url"], item["i"])}

        receipt = dict(effects.once("pay", call))
        return {"stored": [receipt.pop("stored")], "receipts": [receipt]}

    g = _fan_out(pay)
    config = _config()
    graph = g.compile(checkpointer=slow)
    out = graph.invoke({"url": svc.url, "items": [1, 2, 3, 4]}, config)
    assert out["stored"] == [True] * 4
    assert svc.calls == 4


async def test_async_fan_out_with_aonce_on_a_saver_entered_with_async_with(
        asaver: DurableSaver, svc: Any) -> None:
    slow = slowed_puts(asaver, 0.3)

    async def pay(item: Item) -> dict[str, Any]:
        async def call() -> dict[str, Any]:
            conf = get_config()["configurable"]
            found = await asaver.aget_tuple({"configurable": {
                "thread_id": conf["thread_id"], "checkpoint_ns": "",
                "checkpoint_id": conf["checkpoint_map"][""]}})
            return {"stored": found is not None, "amount": item["i"]}

        receipt = dict(await effects.aonce("pay", call))
        return {"stored": [receipt.pop("stored")], "receipts": [receipt]}

    g = _fan_out(pay)
    out = await g.compile(checkpointer=slow).ainvoke(
        {"url": svc.url, "items": [1, 2, 3]}, _config())
    assert out["stored"] == [True] * 3


# ------------------------------------------------------------------ resumes


def _interrupting(saver: DurableSaver, effect_first: bool) -> Any:
    pay = _pay_node(saver)

    def node(state: S) -> dict[str, Any]:
        if effect_first:
            out = pay(state)
            interrupt("approve?")
            return out
        interrupt("approve?")
        return pay(state)

    return _linear(("node", node)).compile(checkpointer=saver)


@pytest.mark.parametrize("effect_first", [False, True])
def test_a_resume_in_a_new_saver_finds_the_checkpoint_at_once(
        redis_url: str, mongo_url: str, svc: Any, effect_first: bool) -> None:
    options = unique_options()
    config = _config()
    with DurableSaver.from_urls(redis_url, mongo_url, **options) as first:
        _interrupting(first, effect_first).invoke({"url": svc.url}, config)
    assert svc.calls == (1 if effect_first else 0)
    # a new process (nothing in its registry); a wait would stop the effect after 1 s
    with DurableSaver.from_urls(redis_url, mongo_url, **options,
                                effect_checkpoint_wait_s=1) as second:
        out = _interrupting(slowed_puts(second, 0.3), effect_first).invoke(
            Command(resume=True), config)
    assert out["stored"] == [True]
    assert svc.calls == 1


def test_a_resume_in_a_subgraph_in_a_new_saver(
        redis_url: str, mongo_url: str, svc: Any) -> None:
    options = unique_options()
    config = _config()

    def build(saver: DurableSaver) -> Any:
        pay = _pay_node(saver)

        def node(state: S) -> dict[str, Any]:
            interrupt("approve?")
            return pay(state)

        sub = _linear(("node", node)).compile()
        return _linear(("sub", sub)).compile(checkpointer=saver)

    with DurableSaver.from_urls(redis_url, mongo_url, **options) as first:
        build(first).invoke({"url": svc.url}, config)
    with DurableSaver.from_urls(redis_url, mongo_url, **options,
                                effect_checkpoint_wait_s=1) as second:
        out = build(slowed_puts(second, 0.3)).invoke(Command(resume=True), config)
    assert out["stored"] == [True]
    assert svc.calls == 1


# ------------------------------------------------------------------ durabilities


def test_with_durability_sync_the_effect_runs_once_from_a_stored_checkpoint(
        saver: DurableSaver, svc: Any) -> None:
    _pay_once(saver, svc, 0.2, durability="sync")


def test_a_strict_durability_saver_waits_for_the_checkpoint_in_both_tiers(
        redis_url: str, mongo_url: str, svc: Any) -> None:
    with DurableSaver.from_urls(redis_url, mongo_url,
                                **unique_options(durability="strict")) as saver:
        _pay_once(saver, svc, 0.2)


# ------------------------------------------------------------------ failed puts


def test_a_later_run_of_a_thread_whose_put_failed_runs_its_effect(
        saver: DurableSaver, svc: Any) -> None:
    config = _config()
    real, areal = saver.put, saver.aput
    graph = _linear(("pay", _pay_node(saver))).compile(checkpointer=saver)
    slowed_puts(saver, 0.1, fail=True)
    with pytest.raises(EffectCheckpointError):
        graph.invoke({"url": svc.url}, config)
    assert svc.calls == 0
    saver.put, saver.aput = real, areal  # the tier is fine again
    slowed_puts(saver, 0.3)
    # the same thread run again in the same process: its step's put is in flight when
    # the effect starts, and will succeed; the failure of the earlier run is no reason
    out = graph.invoke(None, config)
    assert out["stored"] == [True]
    assert svc.calls == 1


def test_a_new_input_to_a_thread_whose_put_failed_runs_its_effect(
        saver: DurableSaver, svc: Any) -> None:
    config = _config()
    real = saver.put
    graph = _linear(("pay", _pay_node(saver))).compile(checkpointer=saver)
    slowed_puts(saver, 0.1, fail=True)
    with pytest.raises(EffectCheckpointError):
        graph.invoke({"url": svc.url}, config)

    def held_back(*args: Any) -> Any:  # every put of the run, its input's too, lands late
        threading.Event().wait(0.3)
        return real(*args)

    saver.put = held_back  # type: ignore[method-assign]
    out = graph.invoke({"url": svc.url}, config)
    assert out["stored"] == [True]
    assert svc.calls == 1


# ------------------------------------------------------------------ the saver's copies


def test_an_allowlist_copy_of_the_saver_waits_like_the_saver(
        saver: DurableSaver, svc: Any) -> None:
    _pay_once(saver.with_allowlist([("tests", "x")]), svc, 0.3)


# ------------------------------------------------------------------ deletion


def test_a_thread_deleted_while_its_effect_waits_stops_the_effect_uncalled(
        saver: DurableSaver, svc: Any) -> None:
    from langgraph_durable.testing import wait_for

    config = _config()
    tid = config["configurable"]["thread_id"]
    started, deleted = threading.Event(), threading.Event()
    # the step's put is sent once the delete returned (not after a fixed time, which a
    # loaded machine's delete could outlast: the put stored, the effect called)
    slow = slowed_puts(saver, 0, after=deleted)
    pay = _pay_node(slow)
    errors: list[BaseException] = []

    def node(state: S) -> dict[str, Any]:
        started.set()  # the effect's wait for the held-back put begins now
        return pay(state)

    def deleter() -> None:
        try:
            # the run's input checkpoint is stored (not held back): the run has begun;
            # its step's task runs, its effect waiting for the step's checkpoint
            wait_for(lambda: saver.get_tuple(config), 10, "the run's first checkpoint")
            assert started.wait(10), "the step's task did not start"
            saver.delete_thread(tid)
        except BaseException as exc:  # reported below
            errors.append(exc)
        finally:
            deleted.set()

    t = threading.Thread(target=deleter)
    t.start()
    try:
        with pytest.raises(EffectCheckpointError) as caught:
            _linear(("pay", node)).compile(checkpointer=slow).invoke({"url": svc.url}, config)
    finally:
        t.join()
    assert errors == []
    assert svc.calls == 0
    assert "failed" in caught.value.reason


# ------------------------------------------------------------------ time travel


def test_a_run_from_a_checkpoint_read_from_mongodb_alone_waits_no_longer(
        redis_url: str, mongo_url: str, svc: Any, redis_client: Any) -> None:
    from langgraph_durable.testing import wait_for

    options = unique_options(hot_ttl_s=1)
    config = _config()
    with DurableSaver.from_urls(redis_url, mongo_url, **options) as saver:
        graph = _linear(("pay", _pay_node(saver))).compile(checkpointer=saver)
        graph.invoke({"url": svc.url}, config)
        first = [h.config for h in saver.list(config) if h.metadata["step"] == 0][0]
        update = graph.update_state(config, {"url": svc.url}, as_node="__start__")
        saver.flush()
        keys = saver.context.keys(config["configurable"]["thread_id"])
        wait_for(lambda: not redis_client.exists(keys.cp), 10, "the thread to leave Redis")
    assert svc.calls == 1
    # a new process; a wait for a checkpoint it cannot find would fail after 1 s
    with DurableSaver.from_urls(redis_url, mongo_url, **options,
                                effect_checkpoint_wait_s=1) as again:
        slow = slowed_puts(again, 0.3)
        graph = _linear(("pay", _pay_node(slow))).compile(checkpointer=slow)
        out = graph.invoke(None, update)  # the latest: runs from it, no fork
        assert out["stored"] == [True, True]
        out = graph.invoke(None, first)  # time travel: LangGraph forks, a new task
        assert out["stored"] == [True]  # the state of that checkpoint, and this effect
    assert svc.calls == 3


# ------------------------------------------------------------------ a tier down


def test_redis_down_while_an_effect_waits_stops_it_uncalled(
        mongo_url: str, svc: Any) -> None:
    from langgraph_durable.errors import TierUnavailableError
    from langgraph_durable.testing import redis_server

    config = _config()
    with redis_server(appendonly=True) as server:
        with DurableSaver.from_urls(server.url, mongo_url, **unique_options()) as saver:
            stopped = threading.Event()
            # the step's put is sent once Redis is stopped (not after a fixed 0.5 s, which
            # a loaded machine's stop could outlast: the put stored, the effect not waiting)
            slow = slowed_puts(saver, 0, after=stopped)
            inner = _pay_node(slow)

            def node(state: S) -> dict[str, Any]:
                if not stopped.is_set():
                    try:
                        server.stop()  # before the step's put is sent
                    finally:
                        stopped.set()
                return inner(state)

            graph = _linear(("pay", node)).compile(checkpointer=slow)
            with pytest.raises((TierUnavailableError, EffectCheckpointError)) as caught:
                graph.invoke({"url": svc.url}, config)
            # stopped while waiting: by its put's failure, or by its own look at Redis
            # (a pipeline), never at the journal's begin (which would mean it never waited)
            if isinstance(caught.value, TierUnavailableError):
                assert caught.value.operation == "pipeline", caught.value
            assert svc.calls == 0
            server.start()
            out = graph.invoke(None, config)
    assert out["stored"] == [True]
    assert svc.calls == 1


# ------------------------------------------------------------------ strict durability


def _mongo_write_of_puts_held_back(monkeypatch: Any, seconds: float) -> None:
    """Every strict put's MongoDB part starts ``seconds`` after its Redis part committed
    (sync puts: the hook waits in the put's own thread)."""
    from faults.common import tap
    from langgraph_durable.core.ops import MongoOp, Parallel
    from langgraph_durable.plans import write

    real = write.put_plan

    def held(ctx: Any, put: Any) -> Any:
        waited: list[bool] = []

        def before(op: Any) -> None:
            if not waited and isinstance(op, (MongoOp, Parallel)):
                waited.append(True)
                threading.Event().wait(seconds)

        return (yield from tap(real(ctx, put), before=before))

    monkeypatch.setattr(write, "put_plan", held)


def test_in_strict_durability_an_effect_waits_for_its_checkpoint_in_mongodb(
        redis_url: str, mongo_url: str, svc: Any, monkeypatch: Any) -> None:
    import pymongo

    # strict: a Redis that loses its data must not make the effect run again, so the
    # task's checkpoint must be in MongoDB before the effect is journaled there
    _mongo_write_of_puts_held_back(monkeypatch, 0.5)
    options = unique_options(durability="strict", flusher="off")  # its own write alone
    seen: list[bool] = []
    with pymongo.MongoClient(mongo_url) as client, \
            DurableSaver.from_urls(redis_url, mongo_url, **options) as saver:
        checkpoints = client[str(options["database"])][saver.context.collections.checkpoints]

        def pay(state: S) -> dict[str, Any]:
            def call() -> dict[str, Any]:
                conf = get_config()["configurable"]
                seen.append(checkpoints.find_one({
                    "thread_id": conf["thread_id"], "checkpoint_ns": "",
                    "checkpoint_id": conf["checkpoint_map"][""]}) is not None)
                return charge(state["url"], 5)

            return {"receipts": [effects.once("pay", call)]}

        _linear(("pay", pay)).compile(checkpointer=saver).invoke({"url": svc.url}, _config())
    assert seen == [True]
    assert svc.calls == 1


def test_in_strict_durability_mongodb_down_while_an_effect_waits_stops_it_uncalled(
        redis_url: str, svc: Any) -> None:
    from langgraph_durable.testing import mongo_server

    config = _config()
    with mongo_server() as server:
        options = unique_options(durability="strict", server_selection_timeout_s=0.5)
        with DurableSaver.from_urls(redis_url, server.url, **options) as saver:
            stopped = threading.Event()
            # the step's put is sent 0.3 s after MongoDB stopped (not 0.3 s after the
            # task started: a stop slower than that let the put store it, the effect run)
            slow = slowed_puts(saver, 0.3, after=stopped)
            inner = _pay_node(slow)

            def node(state: S) -> dict[str, Any]:
                try:
                    server.stop()  # before the step's put is sent
                finally:
                    stopped.set()
                return inner(state)

            graph = _linear(("pay", node)).compile(checkpointer=slow)
            with pytest.raises(EffectCheckpointError) as caught:
                graph.invoke({"url": svc.url}, config)
            server.start()
    assert svc.calls == 0
    assert "MongoDB" in caught.value.reason


# ------------------------------------------------------------------ functional API, mixes


@pytest.mark.parametrize("in_subgraph", [False, True], ids=["graph-node", "subgraph-node"])
def test_a_functional_task_called_from_a_node_waits_and_runs_once(
        saver: DurableSaver, svc: Any, in_subgraph: bool) -> None:
    from langgraph.func import task

    slow = slowed_puts(saver, 0.3)

    @task
    def pay_task(url: str) -> dict[str, Any]:
        return dict(effects.once("pay", lambda: {"stored": task_checkpoint_stored(slow),
                                                  **charge(url, 9)}))

    def node(state: S) -> dict[str, Any]:
        receipt = pay_task(state["url"]).result()
        interrupt("approve?")
        return {"stored": [receipt.pop("stored")], "receipts": [receipt]}

    if in_subgraph:
        graph = _linear(("sub", _linear(("node", node)).compile())).compile(checkpointer=slow)
    else:
        graph = _linear(("node", node)).compile(checkpointer=slow)
    config = _config()
    graph.invoke({"url": svc.url}, config)
    out = graph.invoke(Command(resume=True), config)
    assert out["stored"] == [True]
    assert svc.calls == 1


def test_an_entrypoint_resumed_in_a_new_saver_replays_its_tasks_effect(
        redis_url: str, mongo_url: str, svc: Any) -> None:
    from langgraph.func import entrypoint, task

    def build(saver: DurableSaver) -> Any:
        @task
        def pay_task(url: str) -> dict[str, Any]:
            return dict(effects.once("pay", lambda: charge(url, 7)))

        @entrypoint(checkpointer=saver)
        def flow(url: str) -> dict[str, Any]:
            receipt = pay_task(url).result()
            interrupt("approve?")
            return receipt

        return flow

    options, config = unique_options(), _config()
    with DurableSaver.from_urls(redis_url, mongo_url, **options) as first:
        build(slowed_puts(first, 0.3)).invoke(svc.url, config)
    with DurableSaver.from_urls(redis_url, mongo_url, **options,
                                effect_checkpoint_wait_s=1) as second:
        out = build(slowed_puts(second, 0.3)).invoke(Command(resume=True), config)
    assert out == {"id": "ch_1", "amount": 7}
    assert svc.calls == 1


async def test_a_sync_node_of_an_async_run_waits_with_once(
        asaver: DurableSaver, svc: Any) -> None:
    slow = slowed_puts(asaver, 0.3)

    def pay(state: S) -> dict[str, Any]:  # a sync node: LangGraph runs it in a thread
        receipt = dict(effects.once("pay", lambda: charge(state["url"], 4)))
        return {"receipts": [receipt]}

    def check(state: S) -> dict[str, Any]:
        return {}

    graph = _linear(("pay", pay), ("check", check)).compile(checkpointer=slow)
    config = _config()
    out = await graph.ainvoke({"url": svc.url}, config)
    assert out["receipts"] == [{"id": "ch_1", "amount": 4}]
    assert svc.calls == 1


async def test_aonce_waiting_does_not_hold_the_event_loop(
        asaver: DurableSaver, svc: Any) -> None:
    import asyncio

    # the step's put is sent once the effect waits for it and the loop ran the ticker 10
    # times meanwhile (not after a fixed 0.5 s, in which a loaded machine's loop may tick
    # fewer than 10 times of 10 ms): the wait cannot end unless the loop runs
    released = threading.Event()
    slow = slowed_puts(asaver, 0, after=released)
    started, called = asyncio.Event(), threading.Event()
    ticks: list[int] = []
    events: list[str] = []  # "P": the effect's wait polled (ctx.heads), "T": a tick
    heads = asaver.context.heads
    real_refusal = heads.refusal

    def polled(*args: Any) -> Any:  # asked once a poll, by the wait alone
        events.append("P")
        return real_refusal(*args)

    async def pay(state: S) -> dict[str, Any]:
        async def call() -> dict[str, Any]:
            called.set()
            return {"amount": 3, "ticks": len(ticks)}

        started.set()  # no await before aonce's: the loop ticks only while aonce awaits
        return {"receipts": [await effects.aonce("pay", call)]}

    async def ticker() -> None:  # ready at every turn of the loop until the effect ran
        await started.wait()
        while not called.is_set():
            ticks.append(1)
            events.append("T")
            if len(ticks) >= 10 and "P" in events:
                released.set()
            await asyncio.sleep(0)

    graph = _linear(("pay", pay)).compile(checkpointer=slow)
    heads.refusal = polled  # type: ignore[method-assign]
    t = asyncio.create_task(ticker())
    try:
        out = await graph.ainvoke({"url": svc.url}, _config())
    finally:
        t.cancel()
        heads.refusal = real_refusal  # type: ignore[method-assign]
    # the effect waited for a put held back until the ticker ran 10 times: the loop ran
    # the ticker meanwhile
    assert out["receipts"][0]["ticks"] >= 10
    # and between any two of the wait's polls: it never held the loop from one to the next
    assert "P" in events
    assert "PP" not in "".join(events), "".join(events)


def test_an_agent_with_the_model_journal_middleware_waits_and_pays_once(
        saver: DurableSaver) -> None:
    from langchain.agents import create_agent
    from langchain.agents.middleware import AgentMiddleware
    from langchain_core.messages import HumanMessage

    from langgraph_durable import ModelJournalMiddleware

    from .model_journal_support import Counting, calls

    slow = slowed_puts(saver, 0.3)
    seen: list[bool] = []

    class Review(AgentMiddleware):  # type: ignore[type-arg]
        def wrap_model_call(self, request: Any, handler: Any) -> Any:
            response = handler(request)
            interrupt({"review": [m.content for m in response.result]})
            return response

    key = f"brk-{uuid.uuid4().hex[:6]}"

    class Checking(Counting):
        def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None,
                      **kwargs: Any) -> Any:
            seen.append(task_checkpoint_stored(saver))
            return super()._generate(messages, stop, run_manager, **kwargs)

    agent = create_agent(model=Checking(key=key), tools=[], checkpointer=slow,
                         middleware=[Review(), ModelJournalMiddleware()])
    config = _config()
    agent.invoke({"messages": [HumanMessage("hi")]}, config)
    out = agent.invoke(Command(resume=True), config)
    assert out["messages"][-1].content == "answer-1"
    assert calls(key) == 1
    assert seen == [True]


def test_an_effect_in_a_subgraph_that_stores_no_checkpoint_does_not_wait(
        redis_url: str, mongo_url: str, svc: Any) -> None:
    # checkpointer=False: the subgraph's loop stores nothing (its tasks still see the
    # parent's saver); a wait would fail after 1 s (60 s by default)
    with DurableSaver.from_urls(redis_url, mongo_url, **unique_options(),
                                effect_checkpoint_wait_s=1) as saver:
        slow = slowed_puts(saver, 0.3)
        sub = _linear(("pay", _pay_node(slow))).compile(checkpointer=False)
        graph = _linear(("sub", sub)).compile(checkpointer=slow)
        out = graph.invoke({"url": svc.url}, _config())
    assert out["stored"] == [False]  # never stored
    assert svc.calls == 1


async def test_aonce_in_an_async_subgraph_that_stores_no_checkpoint_does_not_wait(
        redis_url: str, mongo_url: str) -> None:
    async with DurableSaver.from_urls(redis_url, mongo_url, **unique_options(),
                                      effect_checkpoint_wait_s=1) as saver:
        slow = slowed_puts(saver, 0.3)

        async def pay(state: S) -> dict[str, Any]:
            async def call() -> dict[str, Any]:
                return {"amount": 2}

            return {"receipts": [await effects.aonce("pay", call)]}

        sub = _linear(("pay", pay)).compile(checkpointer=False)
        graph = _linear(("sub", sub)).compile(checkpointer=slow)
        out = await graph.ainvoke({"url": "-"}, _config())
    assert out["receipts"] == [{"amount": 2}]


def test_a_subgraph_with_a_checkpointer_of_its_own_namespace_waits(
        saver: DurableSaver, svc: Any) -> None:
    slow = slowed_puts(saver, 0.3)
    sub = _linear(("pay", _pay_node(slow))).compile(checkpointer=True)
    graph = _linear(("sub", sub)).compile(checkpointer=slow)
    out = graph.invoke({"url": svc.url}, _config())
    assert out["stored"] == [True]
    assert svc.calls == 1
