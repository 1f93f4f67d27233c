"""``SlidingWindow``: model-free trimming with the same guarantees."""

from __future__ import annotations

import pytest
from langchain_core.messages import (
    AIMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)

from langgraph_durable.compaction import SUMMARY_MESSAGE_ID, SlidingWindow

from ._fakes import apply, ten_per_message

SYS = SystemMessage("You are terse.", id="sys")
CALL = AIMessage("", tool_calls=[{"name": "f", "args": {}, "id": "c1"}], id="call")
RESULT = ToolMessage("42", tool_call_id="c1", name="f", id="t1")


def test_within_budget_changes_nothing() -> None:
    window = SlidingWindow(max_tokens=40, token_counter=ten_per_message)
    assert window({"messages": [SYS, HumanMessage("h1", id="h1")]}) == {}


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_trims_oldest_keeps_system_prompt_and_tool_pair(mode: str) -> None:
    history = [
        SYS,
        HumanMessage("h1", id="h1"),
        AIMessage("a1", id="a1"),
        HumanMessage("h2", id="h2"),
        CALL,
        RESULT,
        AIMessage("answer", id="a2"),
    ]
    window = SlidingWindow(max_tokens=50, keep_tokens=20, token_counter=ten_per_message)
    state = {"messages": history}
    update = await window.acall(state) if mode == "async" else window(state)

    assert update["messages"] == [
        RemoveMessage(id="h1"),
        RemoveMessage(id="a1"),
        RemoveMessage(id="h2"),
    ]
    assert update["compaction"] == {
        "strategy": "sliding_window",
        "error": None,
        "folded": 3,
        "kept": 3,
        "tokens_before": 70,
        "tokens_after": 40,
        "over_budget": False,
    }
    trimmed = apply(history, update)
    assert trimmed == [SYS, CALL, RESULT, AIMessage("answer", id="a2")]
    assert window({"messages": trimmed}) == {}  # idempotent


def test_existing_summary_message_is_kept() -> None:
    summary = SystemMessage("Summary of the earlier conversation:\nS1", id=SUMMARY_MESSAGE_ID)
    history = [SYS, summary, *[HumanMessage(f"h{i}", id=f"h{i}") for i in range(5)]]
    window = SlidingWindow(max_tokens=50, keep_last=2, token_counter=ten_per_message)
    trimmed = apply(history, window({"messages": history}))
    assert [m.id for m in trimmed] == ["sys", SUMMARY_MESSAGE_ID, "h3", "h4"]
