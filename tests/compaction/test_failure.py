"""Failure handling of ``SummaryBuffer``: errors and timeouts trim the history to the budget
(``on_failure="trim"``, the default) or leave it untouched (``on_failure="keep"``)."""

from __future__ import annotations

import logging
import threading
from typing import Any, cast

import pytest
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
)
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph

from langgraph_durable.compaction import SummaryBuffer, SummaryState

from ._fakes import BlockingChatModel, FailingChatModel, summariser, ten_per_message

SECRET = "my card number is 4111"
HISTORY: list[BaseMessage] = [
    SystemMessage("You are terse.", id="sys"),
    HumanMessage(SECRET, id="h1"),
    AIMessage("noted", id="a1"),
    HumanMessage("h2", id="h2"),
    AIMessage("a2", id="a2"),
    HumanMessage("h3", id="h3"),
    AIMessage("a3", id="a3"),
    HumanMessage("h4", id="h4"),
]


def expected_report(error: str) -> dict[str, Any]:
    """The report when the history is left untouched (``on_failure="keep"``)."""
    return {
        "strategy": "summary_buffer",
        "error": error,
        "fallback": "keep",
        "folded": 0,
        "kept": 7,
        "pending": 4,
        "tokens_before": 80,
        "tokens_after": 80,
        "over_budget": True,
    }


def trimmed_update(error: str) -> dict[str, Any]:
    """The update of the trim fallback: the 4 oldest messages go, the summary window stays."""
    return {
        "messages": [RemoveMessage(id=i) for i in ("h1", "a1", "h2", "a2")],
        "compaction": {
            "strategy": "summary_buffer",
            "error": error,
            "fallback": "trim",
            "folded": 4,
            "kept": 3,
            "tokens_before": 80,
            "tokens_after": 40,
            "over_budget": False,
        },
    }


def buffer(model: Any, **kwargs: Any) -> SummaryBuffer:
    return SummaryBuffer(
        model, max_tokens=60, keep_tokens=30, token_counter=ten_per_message, **kwargs
    )


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_model_error_trims_to_the_budget_by_default(
    mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    buf = buffer(FailingChatModel())
    caplog.set_level(logging.INFO, logger="langgraph_durable.compaction")
    state = {"messages": list(HISTORY)}
    update = await buf.acall(state) if mode == "async" else buf(state)
    assert update == trimmed_update("RuntimeError: provider down")
    assert [r.levelname for r in caplog.records] == ["WARNING", "INFO"]
    for record in caplog.records:  # no message content at INFO and above
        assert SECRET not in record.getMessage()


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_model_error_with_keep_leaves_history_untouched_and_is_reported(
    mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    buf = buffer(FailingChatModel(), on_failure="keep")
    caplog.set_level(logging.DEBUG, logger="langgraph_durable.compaction")
    state = {"messages": list(HISTORY)}
    update = await buf.acall(state) if mode == "async" else buf(state)

    assert update == {"compaction": expected_report("RuntimeError: provider down")}
    warnings = [r for r in caplog.records if r.levelno >= logging.INFO]
    assert [r.levelname for r in warnings] == ["WARNING"]
    assert warnings[0].name == "langgraph_durable.compaction"
    assert "RuntimeError" in warnings[0].getMessage()
    for record in warnings:  # no message content at INFO and above
        assert SECRET not in record.getMessage() and "noted" not in record.getMessage()


def test_empty_summary_counts_as_failure() -> None:
    model, _ = summariser("   ")
    update = buffer(model)({"messages": list(HISTORY)})
    assert update == trimmed_update("ValueError: summary model returned no text")


def test_sync_timeout_trims_to_the_budget() -> None:
    gate = threading.Event()
    try:
        update = buffer(BlockingChatModel(gate=gate), timeout_s=0.05)({"messages": HISTORY})
    finally:
        gate.set()  # release the abandoned worker thread
    assert update == trimmed_update("TimeoutError: no summary within 0.05 s")


async def test_async_timeout_leaves_history_untouched() -> None:
    buf = buffer(BlockingChatModel(gate=threading.Event()), timeout_s=0.05, on_failure="keep")
    update = await buf.acall({"messages": HISTORY})
    assert update == {"compaction": expected_report("TimeoutError: no summary within 0.05 s")}


def test_graph_continues_after_a_failed_compaction() -> None:
    buf = buffer(FailingChatModel(), on_failure="keep")
    chat = FakeListChatModel(responses=["a4"])

    def reply(state: SummaryState) -> dict[str, Any]:
        return {"messages": [chat.invoke(state["messages"])]}

    builder = StateGraph(SummaryState)
    builder.add_node("compact", buf.as_runnable())
    builder.add_node("chat", reply)
    builder.add_edge(START, "compact")
    builder.add_edge("compact", "chat")
    builder.add_edge("chat", END)
    graph = builder.compile(checkpointer=InMemorySaver())
    config: RunnableConfig = {"configurable": {"thread_id": "t"}}
    state: SummaryState = {"messages": cast(Any, list(HISTORY))}
    result = graph.invoke(state, config)

    assert [m.content for m in result["messages"]] == [m.content for m in HISTORY] + ["a4"]
    assert result["compaction"] == expected_report("RuntimeError: provider down")
    assert "summary" not in result
