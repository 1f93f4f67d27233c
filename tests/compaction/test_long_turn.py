"""One long agent turn (a question, then many tool rounds): compaction still bounds it.

The kept window must start on a human message, and inside one turn the only human message
is the question that opened it. These tests pin the fallback: the question stays right
after the system prompt and summary, a pair-safe tail follows, and the tool rounds in
between are folded (issue 16 review, item 1).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware.types import ModelRequest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from langgraph_durable.compaction import (
    SUMMARY_MESSAGE_ID,
    CompactionMiddleware,
    SlidingWindow,
    SummaryBuffer,
)

from ._fakes import FailingChatModel, apply, pairs_intact, summariser, ten_per_message

ROUNDS = 40


@tool
def lookup(q: str) -> str:
    """Look ``q`` up."""
    return f"found {q} " + "y" * 300


class ToolRounds(GenericFakeChatModel):
    """Agent model that calls ``lookup`` ``rounds`` times in one turn, then answers."""

    messages: Any = iter(())
    rounds: int = ROUNDS
    prompts: list[list[BaseMessage]] = []

    def bind_tools(self, tools: Any, **kwargs: Any) -> ToolRounds:
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        self.prompts.append(list(messages))
        n = len(self.prompts) - 1
        if n < self.rounds:
            call = {"name": "lookup", "args": {"q": f"q{n}"}, "id": f"call{n}"}
            reply = AIMessage("checking " + "z" * 200, tool_calls=[call], id=f"c{n}")
        else:
            reply = AIMessage("done", id="final")
        return ChatResult(generations=[ChatGeneration(message=reply)])

    async def _agenerate(self, *args: Any, **kwargs: Any) -> ChatResult:
        return self._generate(*args, **kwargs)


def run_turn(middleware: CompactionMiddleware, mode: str) -> tuple[ToolRounds, dict[str, Any]]:
    model = ToolRounds(prompts=[])
    agent = create_agent(model, [lookup], system_prompt="You are terse.",
                         middleware=[middleware], checkpointer=InMemorySaver())
    turn = {"messages": [HumanMessage("do the long task", id="h1")]}
    config: Any = {"configurable": {"thread_id": "long-turn"}, "recursion_limit": 500}
    if mode == "async":
        return model, asyncio.run(agent.ainvoke(turn, config))
    return model, agent.invoke(turn, config)


def after_system(prompt: list[BaseMessage]) -> list[BaseMessage]:
    return [m for m in prompt if m.type != "system"]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_one_long_turn_stays_within_budget(mode: str, caplog: pytest.LogCaptureFixture) -> None:
    summary_model, recorder = summariser(*[f"summary {i}" for i in range(1, 100)])
    middleware = CompactionMiddleware(summary_model, trigger=("tokens", 2000),
                                      keep=("tokens", 1000))
    with caplog.at_level(logging.WARNING, logger="langgraph_durable.compaction"):
        model, out = run_turn(middleware, mode)

    sizes = [count_tokens_approximately(p) for p in model.prompts]
    assert len(sizes) == ROUNDS + 1
    assert max(sizes) <= 2000, sizes  # was 6,514 before the fallback
    assert all(pairs_intact(p) for p in model.prompts)
    # After the system prompt and the summary, every call starts on the turn's question.
    assert all(after_system(p)[0].id == "h1" for p in model.prompts)
    assert recorder.prompts  # the tool rounds were folded into the summary
    assert out["compaction"]["pinned"] == "h1"
    assert out["compaction"]["over_budget"] is False
    assert [m.id for m in out["messages"][:2]] == [SUMMARY_MESSAGE_ID, "h1"]
    assert len(out["messages"]) < 30  # was 82: all rounds kept
    assert out["messages"][-1].id == "final"
    # The state is compacted in time, so the per-call guard never has to cut.
    assert not [r for r in caplog.records if "over budget" in r.getMessage()]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_one_long_turn_with_failing_summary_model_trims_within_budget(mode: str) -> None:
    middleware = CompactionMiddleware(FailingChatModel(), trigger=("tokens", 2000),
                                      keep=("tokens", 1000))
    model, out = run_turn(middleware, mode)
    assert max(count_tokens_approximately(p) for p in model.prompts) <= 2000
    assert all(pairs_intact(p) and after_system(p)[0].id == "h1" for p in model.prompts)
    assert out["compaction"]["fallback"] == "trim"
    assert out["compaction"]["pinned"] == "h1"
    assert out["messages"][0].id == "h1"  # no summary was written


def test_messages_trigger_fires_inside_one_turn() -> None:
    summary_model, recorder = summariser(*[f"s{i}" for i in range(1, 100)])
    middleware = CompactionMiddleware(summary_model, trigger=("messages", 10),
                                      keep=("messages", 4))
    assert middleware.max_tokens is None  # a messages-only trigger needs no token budget
    model, out = run_turn(middleware, "sync")
    assert recorder.prompts
    assert max(len(p) for p in model.prompts) <= 1 + 1 + 1 + 10  # system, summary, h1, rest
    assert all(pairs_intact(p) and after_system(p)[0].id == "h1" for p in model.prompts)
    assert out["compaction"]["pinned"] == "h1"


CALL = {"name": "f", "args": {}}


def rounds(n: int) -> list[BaseMessage]:
    out: list[BaseMessage] = [HumanMessage("q", id="h1")]
    for i in range(n):
        out += [AIMessage("", tool_calls=[{**CALL, "id": f"k{i}"}], id=f"c{i}"),
                ToolMessage("r", tool_call_id=f"k{i}", id=f"t{i}")]
    return out


def test_engine_pins_the_question_ahead_of_a_pair_safe_tail() -> None:
    history = rounds(5)  # 11 messages, 110 tokens at 10 per message
    sliding = SlidingWindow(max_tokens=60, keep_tokens=40, token_counter=ten_per_message,
                            start_on="human")
    update = sliding({"messages": history})
    assert [m.id for m in apply(history, update)] == ["h1", "c3", "t3", "c4", "t4"]
    assert update["compaction"]["pinned"] == "h1"
    assert update["compaction"]["folded"] == 6
    # Without start_on the question goes with the rest.
    plain = SlidingWindow(max_tokens=60, keep_tokens=40, token_counter=ten_per_message)
    assert [m.id for m in apply(history, plain({"messages": history}))] == [
        "c3", "t3", "c4", "t4"
    ]
    model, recorder = summariser("S")
    buffer = SummaryBuffer(model, max_tokens=60, keep_tokens=20,
                           token_counter=ten_per_message, start_on="human")
    after = apply(history, buffer({"messages": history}))
    assert [m.id for m in after] == [SUMMARY_MESSAGE_ID, "h1", "c4", "t4"]
    assert "User: q" not in recorder.texts[0]  # the pinned question is not folded
    assert buffer({"messages": after}) == {}  # idempotent


def test_guard_cuts_a_long_turn_and_logs_what_it_left_out(
    caplog: pytest.LogCaptureFixture,
) -> None:
    middleware = CompactionMiddleware(None, max_tokens=60, token_counter=ten_per_message)
    request: Any = ModelRequest(model=ToolRounds(), messages=rounds(5))
    with caplog.at_level(logging.WARNING, logger="langgraph_durable.compaction"):
        sent = middleware.fit(request)
    assert [m.id for m in sent.messages] == ["h1", "c3", "t3", "c4", "t4"]
    assert caplog.messages == [
        "model request over budget (110 > 60 tokens); left out 6 of its messages for this "
        "call only, 50 tokens sent"
    ]
    caplog.clear()
    huge: Any = ModelRequest(model=ToolRounds(), messages=[HumanMessage("q", id="h1")])
    small = CompactionMiddleware(None, max_tokens=5, token_counter=ten_per_message)
    with caplog.at_level(logging.WARNING, logger="langgraph_durable.compaction"):
        assert small.fit(huge) is huge
    assert caplog.messages == [
        "model request over budget (10 > 5 tokens) and nothing can be left out (its last "
        "message or tool-call group alone is too large); sent whole"
    ]


# -- option validation (review item 2) --------------------------------------------------

FORMS = "('tokens', n), ('messages', n), ('fraction', f)"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"trigger": 4000}, f"trigger: cannot read 4000; use {FORMS}"),
        ({"trigger": "tokens"}, f"trigger: cannot read 'tokens'; use {FORMS}"),
        ({"trigger": [4000]}, f"trigger: cannot read clause 4000; use {FORMS}"),
        ({"trigger": ("tokens",)}, "trigger: cannot read clause ('tokens',); use"),
        ({"max_tokens": 100, "keep": 50}, "keep: cannot read 50; use ('messages', n)"),
        ({"max_tokens": 100, "start_on": "humann"},
         "start_on must be one of ('human',) or None, got 'humann'"),
        ({"max_tokens": 100, "start_on": "user"},
         "got 'user' (LangChain's type of a user message is 'human')"),
        ({"max_tokens": 100, "start_on": "ai"}, "got 'ai'"),
        ({}, "needs a trigger or a token budget"),
    ],
)
def test_invalid_options_name_the_value_and_the_accepted_forms(
    kwargs: dict[str, Any], message: str
) -> None:
    summary_model, _ = summariser("s")
    with pytest.raises(ValueError) as raised:
        CompactionMiddleware(summary_model, **kwargs)
    assert message in str(raised.value)


def test_engines_validate_start_on() -> None:
    with pytest.raises(ValueError, match="start_on must be one of \\('human',\\) or None, "
                       "got 'bogus'"):
        SlidingWindow(max_tokens=100, start_on="bogus")
    model, _ = summariser("s")
    with pytest.raises(ValueError, match="got 'humann'"):
        SummaryBuffer(model, max_tokens=100, start_on="humann")
    assert SlidingWindow(max_tokens=100, start_on="human").start_on == "human"
    assert SlidingWindow(max_tokens=100, start_on=None).start_on is None


def test_messages_only_trigger_needs_no_token_budget() -> None:
    summary_model, _ = summariser("s")
    middleware = CompactionMiddleware(summary_model, trigger=("messages", 60))
    assert middleware.max_tokens is None
    assert middleware.engine.keep_last == 20  # min(20, 60 // 2), LangChain's default 20
    assert middleware.engine.trigger == [{"messages": 60}]
    short = CompactionMiddleware(summary_model, trigger=("messages", 10))
    assert short.engine.keep_last == 5
    by_tokens = CompactionMiddleware(summary_model, trigger=("messages", 60),
                                     keep=("tokens", 3000))
    assert (by_tokens.engine.keep_tokens, by_tokens.engine.keep_last) == (3000, None)
    # With no token budget the guard sends a request unchanged, however large.
    request: Any = ModelRequest(model=ToolRounds(), messages=rounds(40))
    assert middleware.fit(request) is request
    with pytest.raises(ValueError, match="max_tokens=None needs a trigger"):
        SlidingWindow(max_tokens=None, keep_last=3)
    with pytest.raises(ValueError, match="without max_tokens, pass keep_tokens or keep_last"):
        SlidingWindow(max_tokens=None, trigger=("messages", 5))
