"""An effect waits for its task's checkpoint: under LangGraph's default durability
("async") a step's checkpoint is stored while the step's tasks already run. ``once``,
``aonce`` and journaled model calls call their function only once that checkpoint is
stored, so a crash cannot lose the task their journal entry belongs to (the crash test,
``test_effects_crash.py``, shows the effect repeated otherwise). The puts are made late on
purpose (``effects_support.slowed_puts``) so every task starts before its checkpoint is
stored."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langgraph.config import get_config
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from langgraph_durable import DurableSaver, effects, journaled
from langgraph_durable.errors import EffectCheckpointError
from langgraph_durable.testing import unique_options

from .effects_support import charge, slowed_puts, task_checkpoint_stored
from .model_journal_support import Counting, calls


class S(TypedDict, total=False):
    url: str
    stored: bool
    receipt: Any


def _pay_graph(saver: DurableSaver, gave_up: threading.Event | None = None) -> Any:
    """One node paying through ``once``; ``gave_up`` is set when ``once`` raised
    ``EffectCheckpointError`` (it stopped waiting for the task's checkpoint)."""
    def pay(state: S) -> dict[str, Any]:
        def call() -> dict[str, Any]:
            return {"stored": task_checkpoint_stored(saver), **charge(state["url"], 5)}

        try:
            receipt = effects.once("pay", call)
        except EffectCheckpointError:
            if gave_up is not None:
                gave_up.set()
            raise
        return {"stored": receipt.pop("stored"), "receipt": receipt}

    g = StateGraph(S)
    g.add_node("pay", pay)
    g.add_edge(START, "pay")
    g.add_edge("pay", END)
    return g.compile(checkpointer=saver)


def _config() -> dict[str, Any]:
    return {"configurable": {"thread_id": f"wait-{uuid.uuid4().hex[:8]}"}}


def test_once_calls_its_function_only_after_the_tasks_checkpoint_is_stored(
        saver: DurableSaver, svc: Any) -> None:
    graph = _pay_graph(slowed_puts(saver, 0.3))
    out = graph.invoke({"url": svc.url}, _config())
    assert out["stored"] is True
    assert out["receipt"] == {"id": "ch_1", "amount": 5}
    assert svc.calls == 1


async def test_aonce_calls_its_function_only_after_the_tasks_checkpoint_is_stored(
        asaver: DurableSaver, svc: Any) -> None:
    async def pay(state: S) -> dict[str, Any]:
        async def call() -> dict[str, Any]:
            conf = get_config()["configurable"]
            found = await asaver.aget_tuple({"configurable": {
                "thread_id": conf["thread_id"], "checkpoint_ns": "",
                "checkpoint_id": conf["checkpoint_map"][""]}})
            return {"stored": found is not None, "amount": 6}

        return await effects.aonce("pay", call)

    g = StateGraph(S)
    g.add_node("pay", pay)
    g.add_edge(START, "pay")
    g.add_edge("pay", END)
    graph = g.compile(checkpointer=slowed_puts(asaver, 0.3))
    out = await graph.ainvoke({"url": svc.url}, _config())
    assert out["stored"] is True


def test_a_journaled_model_call_waits_for_its_tasks_checkpoint(saver: DurableSaver) -> None:
    key = f"k-{uuid.uuid4().hex[:6]}"
    seen: list[bool] = []

    class Checking(Counting):
        def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None,
                      **kwargs: Any) -> Any:
            seen.append(task_checkpoint_stored(saver))
            return super()._generate(messages, stop, run_manager, **kwargs)

    model = journaled(Checking(key=key))

    class M(TypedDict, total=False):
        answer: str

    def ask(state: M) -> dict[str, Any]:
        return {"answer": model.invoke([HumanMessage("hi")]).content}

    g = StateGraph(M)
    g.add_node("ask", ask)
    g.add_edge(START, "ask")
    g.add_edge("ask", END)
    out = g.compile(checkpointer=slowed_puts(saver, 0.3)).invoke({}, _config())
    assert out["answer"] == "answer-1"
    assert seen == [True]
    assert calls(key) == 1


def test_with_durability_exit_an_effect_does_not_wait_for_a_checkpoint(
        redis_url: str, mongo_url: str, svc: Any) -> None:
    # a wait would time out after 0.05 s: "exit" stores no checkpoint before the run ends
    with DurableSaver.from_urls(redis_url, mongo_url, **unique_options(),
                                effect_checkpoint_wait_s=0.05) as saver:
        out = _pay_graph(saver).invoke({"url": svc.url}, _config(), durability="exit")
    assert out["receipt"] == {"id": "ch_1", "amount": 5}
    assert out["stored"] is False  # the task's checkpoint is stored when the run ends
    assert svc.calls == 1


def test_a_checkpoint_not_stored_in_time_stops_the_effect_uncalled(
        redis_url: str, mongo_url: str, svc: Any) -> None:
    config = _config()
    gave_up = threading.Event()
    with DurableSaver.from_urls(redis_url, mongo_url, **unique_options(),
                                effect_checkpoint_wait_s=0.1) as saver:
        # the step's put is sent once the effect gave up waiting (not 1 s after the task
        # started, which a loaded machine's task could start after: the effect called)
        with pytest.raises(EffectCheckpointError) as caught:
            _pay_graph(slowed_puts(saver, 0, after=gave_up), gave_up).invoke(
                {"url": svc.url}, config)
        assert gave_up.is_set()
        exc = caught.value
        assert svc.calls == 0
        assert (exc.thread_id, exc.checkpoint_ns, exc.effect) == (
            config["configurable"]["thread_id"], "", "pay")
        assert exc.reason == "it was not stored within effect_checkpoint_wait_s=0.1 s"
        assert exc.checkpoint_id in str(exc) and "nothing was called" in str(exc)
        # the late put did store it: the step runs again, and the effect with it, once
        out = _pay_graph(saver).invoke(None, config)
    assert out["receipt"] == {"id": "ch_1", "amount": 5}
    assert svc.calls == 1


def test_a_failed_put_of_the_tasks_checkpoint_stops_the_effect_uncalled(
        saver: DurableSaver, svc: Any) -> None:
    with pytest.raises(EffectCheckpointError) as caught:
        _pay_graph(slowed_puts(saver, 0.2, fail=True)).invoke({"url": svc.url}, _config())
    assert svc.calls == 0
    assert caught.value.reason.startswith(
        f"its put of checkpoint {caught.value.checkpoint_id!r} failed: InvalidIdentifierError: ")
    assert "contains a NUL character" in caught.value.reason


def test_an_effect_of_a_functional_task_waits_and_goes_with_its_callers_checkpoint(
        saver: DurableSaver, svc: Any) -> None:
    from langgraph.func import entrypoint, task

    from langgraph_durable.plans.effect_journal import journal_plan

    @task
    def pay(url: str) -> dict[str, Any]:
        return effects.once("pay", lambda: {"stored": task_checkpoint_stored(saver),
                                            **charge(url, 8)})

    @entrypoint(checkpointer=slowed_puts(saver, 0.3))
    def flow(url: str) -> dict[str, Any]:
        return pay(url).result()

    config = _config()
    tid = config["configurable"]["thread_id"]
    assert flow.invoke(svc.url, config) == {"stored": True, "id": "ch_1", "amount": 8}
    docs = saver.run(journal_plan(saver.context, tid))
    # the @task runs in the entrypoint's loop: its effect belongs to a checkpoint of
    # namespace "" (the one its task runs from), not to the entrypoint task's namespace
    assert [(d["name"], d["checkpoint_ns"]) for d in docs] == [("pay", "")]
    ids = [c.config["configurable"]["checkpoint_id"] for c in saver.list(config)]
    assert docs[0]["checkpoint_id"] in ids
    saver.prune([tid], strategy="keep_latest")  # removes the checkpoint the task ran from
    assert docs[0]["checkpoint_id"] not in [
        c.config["configurable"]["checkpoint_id"] for c in saver.list(config)]
    assert saver.run(journal_plan(saver.context, tid)) == []
