"""Behaviour of ``SummaryBuffer`` called directly as a node (sync and async)."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from langgraph_durable.compaction import SUMMARY_MESSAGE_ID, SummaryBuffer

from ._fakes import PromptRecorder, apply, summariser, ten_per_message

SYS = SystemMessage("You are terse.", id="sys")


def convo(n: int) -> list[BaseMessage]:
    """Human/AI turns h1, a1, ..., with ids equal to their content."""
    out: list[BaseMessage] = []
    for i in range(1, n + 1):
        out += [HumanMessage(f"h{i}", id=f"h{i}"), AIMessage(f"a{i}", id=f"a{i}")]
    return out


def summary_msg(text: str) -> SystemMessage:
    return SystemMessage(f"Summary of the earlier conversation:\n{text}", id=SUMMARY_MESSAGE_ID)


def buffer(model: Any, **kwargs: Any) -> SummaryBuffer:
    options: dict[str, Any] = {"max_tokens": 60, "keep_tokens": 30}
    options.update(kwargs)
    return SummaryBuffer(model, token_counter=ten_per_message, **options)


async def run(buf: SummaryBuffer, state: dict[str, Any], mode: str) -> dict[str, Any]:
    return await buf.acall(state) if mode == "async" else buf(state)


MODES = pytest.mark.parametrize("mode", ["sync", "async"])


@MODES
async def test_within_budget_changes_nothing_and_calls_no_model(mode: str) -> None:
    model, recorder = summariser("never used")
    buf = SummaryBuffer(model, max_tokens=1000)  # default approximate counter
    assert await run(buf, {"messages": [SYS, *convo(3)]}, mode) == {}
    assert recorder.prompts == []


@MODES
async def test_first_compaction_folds_oldest_and_places_summary(mode: str) -> None:
    model, recorder = summariser("S1")
    history = [SYS, *convo(3), HumanMessage("h4", id="h4")]  # 8 messages = 80 tokens
    update = await run(buffer(model), {"messages": history}, mode)

    assert update["messages"] == [
        RemoveMessage(id=REMOVE_ALL_MESSAGES),
        SYS,
        summary_msg("S1"),
        HumanMessage("h3", id="h3"),
        AIMessage("a3", id="a3"),
        HumanMessage("h4", id="h4"),
    ]
    assert update["summary"] == "S1"
    assert update["compaction"] == {
        "strategy": "summary_buffer",
        "error": None,
        "folded": 4,
        "kept": 3,
        "tokens_before": 80,
        "tokens_after": 50,
        "over_budget": False,
    }
    assert len(recorder.prompts) == 1
    prompt = recorder.texts[0]
    assert "Previous summary:\n(none yet)" in prompt
    assert "User: h1\nAssistant: a1\nUser: h2\nAssistant: a2\n" in prompt
    assert "h3" not in prompt and "You are terse." not in prompt


@MODES
async def test_second_compaction_is_incremental_and_removes_by_id(mode: str) -> None:
    model, recorder = summariser("S1", "S2")
    buf = buffer(model)
    history = [SYS, *convo(3), HumanMessage("h4", id="h4")]
    state = {"messages": history}
    first = await run(buf, state, mode)
    history = apply(history, first) + [AIMessage("a4", id="a4"), HumanMessage("h5", id="h5")]
    second = await run(buf, {"messages": history, "summary": first["summary"]}, mode)

    assert second["messages"] == [
        RemoveMessage(id="h3"),
        RemoveMessage(id="a3"),
        summary_msg("S2"),
    ]
    assert second["summary"] == "S2"
    prompt = recorder.texts[1]
    assert "Previous summary:\nS1\n" in prompt  # the old summary is folded, never dropped
    assert "User: h3\nAssistant: a3\n" in prompt
    assert "h1" not in prompt and "a2" not in prompt  # never summarised from scratch
    assert apply(history, second) == [
        SYS,
        summary_msg("S2"),
        HumanMessage("h4", id="h4"),
        AIMessage("a4", id="a4"),
        HumanMessage("h5", id="h5"),
    ]


async def test_previous_summary_is_read_from_the_message_without_state_key() -> None:
    model, recorder = summariser("S2")
    history = [SYS, summary_msg("S1"), *convo(3)]
    update = buffer(model)({"messages": history})
    assert "Previous summary:\nS1\n" in recorder.texts[0]
    assert "Summary of the earlier conversation" not in recorder.texts[0]
    assert update["messages"][-1] == summary_msg("S2")


@MODES
async def test_running_twice_changes_nothing_the_second_time(mode: str) -> None:
    model, recorder = summariser("S1", "unexpected")
    buf = buffer(model)
    history = [SYS, *convo(4)]
    update = await run(buf, {"messages": history}, mode)
    compacted = apply(history, update)
    assert await run(buf, {"messages": compacted, "summary": update["summary"]}, mode) == {}
    assert len(recorder.prompts) == 1


def test_tool_call_pair_at_boundary_stays_whole() -> None:
    call = {"name": "search", "args": {"q": "weather"}, "id": "c1"}
    ai_call = AIMessage("", tool_calls=[call], id="ai_call")
    result = ToolMessage("sunny", tool_call_id="c1", name="search", id="t1")
    final = AIMessage("It is sunny.", id="final")
    history = [SYS, *convo(1), HumanMessage("h2", id="h2"), ai_call, result, final]
    model, recorder = summariser("S1")
    # keep_tokens=20 would cut between ai_call and its result; the boundary moves back.
    update = buffer(model, max_tokens=50, keep_tokens=20)({"messages": history})
    assert apply(history, update) == [SYS, summary_msg("S1"), ai_call, result, final]
    assert update["compaction"]["folded"] == 3
    assert "search" not in recorder.texts[0]


def test_folded_tool_pair_is_rendered_for_the_summary() -> None:
    call = {"name": "search", "args": {"q": "x"}, "id": "c1"}
    history = [
        HumanMessage("h1", id="h1"),
        AIMessage("", tool_calls=[call], id="ai_call"),
        ToolMessage("found x", tool_call_id="c1", name="search", id="t1"),
        *convo(2)[1:],
        HumanMessage("h3", id="h3"),
    ]
    model, recorder = summariser("S1")
    update = buffer(model)({"messages": history})
    assert [m.id for m in apply(history, update)] == [SUMMARY_MESSAGE_ID, "h2", "a2", "h3"]
    prompt = recorder.texts[0]
    assert 'Assistant: \n[called tool search with {"q": "x"}]' not in prompt
    assert 'Assistant: [called tool search with {"q": "x"}]\n' in prompt
    assert "Tool result (search): found x\nAssistant: a1\n" in prompt


@pytest.mark.parametrize("window", [{"keep_tokens": 20}, {"keep_last": 2}])
def test_several_tool_calls_in_one_ai_message_stay_with_all_results(
    window: dict[str, int],
) -> None:
    calls = [{"name": "lookup", "args": {"k": k}, "id": f"c{k}"} for k in (1, 2, 3)]
    ai_call = AIMessage("", tool_calls=calls, id="ai_call")
    results = [
        ToolMessage(f"v{k}", tool_call_id=f"c{k}", name="lookup", id=f"t{k}") for k in (1, 2, 3)
    ]
    final = AIMessage("done", id="final")
    history = [*convo(1), HumanMessage("h2", id="h2"), ai_call, *results, final]
    model, _ = summariser("S1")
    options: dict[str, Any] = {"max_tokens": 50, "keep_tokens": None, **window}
    update = buffer(model, **options)({"messages": history})
    assert apply(history, update) == [summary_msg("S1"), ai_call, *results, final]
    assert update["compaction"]["kept"] == 5


def test_single_message_larger_than_the_budget() -> None:
    big = HumanMessage("x" * 4000, id="big")  # 1004 approximate tokens on its own
    history = [SystemMessage("Be brief.", id="sys"), HumanMessage("hi", id="h1")]
    history += [AIMessage("hello", id="a1"), big]
    model, recorder = summariser("S1")
    buf = SummaryBuffer(model, max_tokens=200, keep_tokens=100)
    update = buf({"messages": history})
    compacted = apply(history, update)
    assert compacted == [history[0], summary_msg("S1"), big]  # the big message is kept
    assert update["compaction"] == {
        "strategy": "summary_buffer",
        "error": None,
        "folded": 2,
        "kept": 1,
        "tokens_before": 1023,
        "tokens_after": 1026,
        "over_budget": True,
    }
    assert buf({"messages": compacted, "summary": "S1"}) == {}  # nothing left to fold
    assert buf({"messages": [big]}) == {}
    assert len(recorder.prompts) == 1


def test_non_text_content_blocks() -> None:
    picture = HumanMessage(
        [
            {"type": "text", "text": "What is in this chart?"},
            {
                "type": "image",
                "source_type": "base64",
                "data": "iVBORw0KGgo",
                "mime_type": "image/png",
            },
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo"}},
        ],
        id="pic",
    )
    answer = AIMessage([{"type": "text", "text": "A rising line."}], id="ans")
    history = [picture, answer, *convo(3)]
    recorder = PromptRecorder()
    reply = AIMessage([{"type": "text", "text": "User showed a rising chart."}])
    model = GenericFakeChatModel(messages=iter([reply]), callbacks=[recorder])
    update = buffer(model, keep_tokens=20)({"messages": history})
    prompt = recorder.texts[0]
    assert "User: What is in this chart?\n[image]\n[image]\nAssistant: A rising line.\n" in prompt
    assert "iVBORw0KGgo" not in prompt
    assert update["summary"] == "User showed a rising chart."


def test_summary_moved_after_system_prompt_and_messages_without_ids() -> None:
    model, _ = summariser("S2")
    history = [SYS, *[HumanMessage(f"h{i}") for i in range(6)], summary_msg("S1")]
    update = buffer(model)({"messages": history})
    assert update["messages"][0] == RemoveMessage(id=REMOVE_ALL_MESSAGES)
    assert [m.content for m in update["messages"][1:]] == [
        "You are terse.",
        "Summary of the earlier conversation:\nS2",
        "h3",
        "h4",
        "h5",
    ]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_tokens": 0},
        {"max_tokens": 10, "keep_tokens": 11},
        {"max_tokens": 10, "keep_tokens": 5, "keep_last": 2},
        {"max_tokens": 10, "keep_last": 0},
        {"max_tokens": 10, "timeout_s": 0},
        {"max_tokens": 10, "prompt": "no placeholders"},
        {"max_tokens": 10, "summary_message": "no placeholder"},
    ],
)
def test_invalid_configuration_raises_value_error(kwargs: dict[str, Any]) -> None:
    model, _ = summariser("x")
    with pytest.raises(ValueError):
        SummaryBuffer(model, **kwargs)
