"""``CompactionMiddleware`` in ``langchain.agents.create_agent``: options and the fallback."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from langgraph_durable.compaction import (
    SUMMARY_MESSAGE_ID,
    CompactionMiddleware,
    SlidingWindow,
    SummaryBuffer,
)

from ._fakes import (
    BlockingChatModel,
    FailingChatModel,
    ScriptedAgentModel,
    apply,
    pairs_intact,
    starts_on_human_turn,
    summariser,
    ten_per_message,
)

CONFIG: RunnableConfig = {"configurable": {"thread_id": "agent-1"}}
SYSTEM = "You are a terse assistant. " * 8  # ~55 tokens outside the state


@tool
def lookup(q: str) -> str:
    """Look ``q`` up."""
    return f"found {q} " + "y" * 300


async def converse(
    middleware: CompactionMiddleware, turns: int, mode: str = "sync"
) -> tuple[ScriptedAgentModel, dict[str, Any]]:
    model = ScriptedAgentModel(prompts=[])
    agent = create_agent(
        model, [lookup], system_prompt=SYSTEM, middleware=[middleware],
        checkpointer=InMemorySaver(),
    )
    out: dict[str, Any] = {}
    for n in range(1, turns + 1):
        turn = {"messages": [HumanMessage(f"h{n} question", id=f"h{n}")]}
        out = await agent.ainvoke(turn, CONFIG) if mode == "async" else agent.invoke(turn, CONFIG)
    return model, out


def await_sync(coro: Any) -> Any:
    """Run a ``converse`` coroutine from a sync test."""
    return asyncio.run(coro)


def assert_every_call_fits(model: ScriptedAgentModel, budget: int) -> None:
    sizes = [count_tokens_approximately(p) for p in model.prompts]
    assert max(sizes) <= budget, sizes
    assert all(pairs_intact(p) for p in model.prompts)
    assert all(starts_on_human_turn(p) for p in model.prompts)


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_summaries_keep_every_model_call_within_budget(mode: str) -> None:
    summary_model, recorder = summariser(*[f"summary {i}" for i in range(1, 100)])
    middleware = CompactionMiddleware(summary_model, trigger=("tokens", 600), keep=("tokens", 300))
    model, out = await converse(middleware, 40, mode)

    assert_every_call_fits(model, 600)
    assert len(recorder.prompts) >= 5
    assert out["messages"][0].id == SUMMARY_MESSAGE_ID
    assert out["summary"] == f"summary {len(recorder.prompts)}"
    assert out["compaction"]["error"] is None
    # Incremental: each prompt folds the previous summary in, never the whole history.
    assert f"Previous summary:\nsummary {len(recorder.prompts) - 1}\n" in recorder.texts[-1]
    assert "h1 question" not in recorder.texts[-1]
    # The system prompt lives outside the state; the middleware learnt its size.
    assert middleware.engine.reserve_tokens == count_tokens_approximately([SystemMessage(SYSTEM)])


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_failing_summary_model_falls_back_to_trimming(mode: str) -> None:
    middleware = CompactionMiddleware(
        FailingChatModel(), trigger=("tokens", 600), keep=("tokens", 300)
    )
    model, out = await converse(middleware, 40, mode)

    assert_every_call_fits(model, 600)
    report = out["compaction"]
    assert report["error"] == "RuntimeError: provider down"
    assert report["fallback"] == "trim"
    assert report["over_budget"] is False
    assert "summary" not in out
    assert out["messages"][0].type == "human"  # trimmed; no summary message was made


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_hanging_summary_model_times_out_and_falls_back(mode: str) -> None:
    gate = threading.Event()
    middleware = CompactionMiddleware(
        BlockingChatModel(gate=gate), trigger=("tokens", 600), keep=("tokens", 300),
        timeout_s=0.05,
    )
    try:
        model, out = await converse(middleware, 25, mode)
    finally:
        gate.set()  # release the abandoned worker threads of the sync path
    assert_every_call_fits(model, 600)
    assert out["compaction"]["error"] == "TimeoutError: no summary within 0.05 s"
    assert out["compaction"]["fallback"] == "trim"


def test_summary_model_recovering_after_failures_summarises_again() -> None:
    flaky = FakeListChatModel(responses=["back"])
    calls = {"n": 0}
    original = flaky._call

    def sometimes(*args: Any, **kwargs: Any) -> str:
        calls["n"] += 1
        if calls["n"] <= 2:
            raise RuntimeError("provider down")
        return original(*args, **kwargs)

    object.__setattr__(flaky, "_call", sometimes)
    middleware = CompactionMiddleware(flaky, trigger=("tokens", 600), keep=("tokens", 300))
    model, out = await_sync(converse(middleware, 40))
    assert calls["n"] >= 3
    assert out["summary"] == "back"
    assert_every_call_fits(model, 600)


def test_sliding_middleware_without_model() -> None:
    middleware = CompactionMiddleware(None, max_tokens=500, keep=("messages", 6))
    assert isinstance(middleware.engine, SlidingWindow)
    model, out = await_sync(converse(middleware, 30))
    assert_every_call_fits(model, 500)
    assert out["compaction"]["strategy"] == "sliding_window"


def test_trigger_by_messages_and_keep_by_messages() -> None:
    summary_model, recorder = summariser(*[f"s{i}" for i in range(1, 50)])
    middleware = CompactionMiddleware(
        summary_model, trigger=("messages", 8), keep=("messages", 4), max_tokens=5000
    )
    _, out = await_sync(converse(middleware, 12))
    assert recorder.prompts  # compacted long before 5000 tokens
    conversation = [m for m in out["messages"] if m.type != "system"]
    assert len(conversation) < 8 + 4  # at most the trigger plus the turn that followed
    assert conversation[0].type == "human"


def test_fraction_of_the_model_profile() -> None:
    summary_model, _ = summariser("s")
    summary_model.profile = {"max_input_tokens": 2000}
    middleware = CompactionMiddleware(summary_model, trigger=("fraction", 0.3),
                                      keep=("fraction", 0.1))
    assert middleware.max_tokens == 600
    assert middleware.engine.keep_tokens == 200
    both = CompactionMiddleware(summary_model, trigger={"tokens": 900, "messages": 20})
    assert both.engine.trigger == [{"tokens": 900, "messages": 20}]
    assert both.max_tokens == 900


@pytest.mark.parametrize(
    "kwargs",
    [
        {},  # no budget at all
        {"trigger": ("fraction", 0.5)},  # no profile
        {"trigger": ("tokens", 0)},
        {"trigger": ("words", 10)},
        {"trigger": {"messages": 1.5}},
        {"max_tokens": 100, "keep": ("tokens", 200)},
        {"max_tokens": 100, "summary_prompt": "only {messages}"},
    ],
)
def test_invalid_options_raise_value_error(kwargs: dict[str, Any]) -> None:
    summary_model, _ = summariser("s")
    with pytest.raises(ValueError):
        CompactionMiddleware(summary_model, **kwargs)


CALL = {"name": "f", "args": {}, "id": "c1"}


def test_start_on_human_with_keep_last_two() -> None:
    # The case: keep_last=2 used to leave [system, AI(tool_calls), Tool], no human.
    history = [
        SystemMessage("sys", id="sys"),
        HumanMessage("h1", id="h1"),
        AIMessage("a1", id="a1"),
        HumanMessage("h2", id="h2"),
        AIMessage("", tool_calls=[CALL], id="call"),
        ToolMessage("42", tool_call_id="c1", id="t1"),
    ]
    old = SlidingWindow(max_tokens=40, keep_last=2, token_counter=ten_per_message)
    assert [m.id for m in apply(history, old({"messages": history}))] == ["sys", "call", "t1"]
    new = SlidingWindow(max_tokens=40, keep_last=2, token_counter=ten_per_message,
                        start_on="human")
    assert [m.id for m in apply(history, new({"messages": history}))] == [
        "sys", "h2", "call", "t1"
    ]
    model, _ = summariser("S")
    buf = SummaryBuffer(model, max_tokens=40, keep_last=3, token_counter=ten_per_message,
                        start_on="human")
    after = apply(history, buf({"messages": history}))
    assert [m.id for m in after] == ["sys", SUMMARY_MESSAGE_ID, "h2", "call", "t1"]
