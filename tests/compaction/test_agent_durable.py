"""A ``create_agent`` agent with ``CompactionMiddleware`` on ``DurableSaver``: 200 turns with
tool calls, a restart half-way (new saver, agent, middleware and summariser on the same
servers), every model call within budget, and the full transcript afterwards, hot and cold.
"""

from __future__ import annotations

from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool

from langgraph_durable import DurableSaver
from langgraph_durable.compaction import (
    SUMMARY_MESSAGE_ID,
    CompactionMiddleware,
    atranscript,
    transcript,
)
from langgraph_durable.testing import unique_options

from ._fakes import ScriptedAgentModel, pairs_intact, starts_on_human_turn, summariser
from .test_durable_resume import empty_hot_tier

CONFIG: RunnableConfig = {"configurable": {"thread_id": "agent-200"}}
BUDGET = 600
TURNS, RESTART_AT = 200, 100


@tool
def lookup(q: str) -> str:
    """Look ``q`` up."""
    return f"found {q} " + "y" * 300


def build(saver: DurableSaver, tag: str) -> tuple[Any, ScriptedAgentModel, Any]:
    model = ScriptedAgentModel(prompts=[])
    summary_model, recorder = summariser(*[f"{tag} summary {i}" for i in range(1, 200)])
    middleware = CompactionMiddleware(
        summary_model, trigger=("tokens", BUDGET), keep=("tokens", BUDGET // 2),
        start_on="human",
    )
    agent = create_agent(model, [lookup], system_prompt="You are terse. " * 10,
                         middleware=[middleware], checkpointer=saver)
    return agent, model, recorder


def turn(n: int) -> dict[str, Any]:
    return {"messages": [HumanMessage(f"h{n} question", id=f"h{n}")]}


def expected_keys() -> list[str]:
    """The whole conversation: per turn h<n>, [c<n>, its tool results], a<n>."""
    keys: list[str] = []
    for n in range(1, TURNS + 1):
        keys.append(f"h{n}")
        if n % 3 == 0:
            keys += [f"c{n}", f"tool:call{n}"] + ([f"tool:call{n}b"] if n % 6 == 0 else [])
        keys.append(f"a{n}")
    return keys


def keys_of(messages: list[BaseMessage]) -> list[str]:
    return [f"tool:{m.tool_call_id}" if isinstance(m, ToolMessage) else str(m.id)
            for m in messages]


def check_prompts(model: ScriptedAgentModel) -> None:
    sizes = [count_tokens_approximately(p) for p in model.prompts]
    assert max(sizes) <= BUDGET, max(sizes)
    assert all(pairs_intact(p) for p in model.prompts)
    assert all(starts_on_human_turn(p) for p in model.prompts)


async def test_200_turns_restart_and_transcript_hot_and_cold(
    redis_url: str, mongo_url: str
) -> None:
    options = unique_options()

    # Process 1: turns 1-100, sync API; closing the saver drains the outbox to MongoDB.
    with DurableSaver.from_urls(redis_url, mongo_url, **options) as saver:
        agent, model, recorder = build(saver, "first")
        for n in range(1, RESTART_AT + 1):
            agent.invoke(turn(n), CONFIG)
        before = agent.get_state(CONFIG).values
    check_prompts(model)
    assert len(recorder.prompts) >= 10
    assert before["messages"][0].id == SUMMARY_MESSAGE_ID

    # Process 2: new saver object, agent, middleware (reserve_tokens not learnt yet) and
    # summariser resume the thread with the async API.
    async with DurableSaver.from_urls(redis_url, mongo_url, **options) as saver:
        agent, model2, recorder2 = build(saver, "second")
        assert (await agent.aget_state(CONFIG)).values == before
        for n in range(RESTART_AT + 1, TURNS + 1):
            await agent.ainvoke(turn(n), CONFIG)
        after = (await agent.aget_state(CONFIG)).values
        hot = await atranscript(saver, CONFIG)
        assert saver.last_read_tier == "hot"
    check_prompts(model2)
    assert model2.prompts[0][-1].id == f"h{RESTART_AT + 1}"
    # The first summary after the restart extends the restored one.
    assert f"Previous summary:\n{before['summary']}\n" in recorder2.texts[0]
    assert after["summary"] == f"second summary {len(recorder2.prompts)}"
    assert len(recorder.prompts) + len(recorder2.prompts) >= 20
    assert count_tokens_approximately(after["messages"]) <= BUDGET

    # Nothing lost: the transcript is the whole conversation, in order, each message once.
    assert keys_of(hot) == expected_keys()
    assert all(m.id != SUMMARY_MESSAGE_ID for m in hot)
    assert hot[-1].content == after["messages"][-1].content

    # Cold: the thread's Redis keys are gone, MongoDB serves the same transcript (``list``
    # reads both tiers; Redis holds nothing of the thread any more).
    assert empty_hot_tier(redis_url, options["key_prefix"]) > 0
    with DurableSaver.from_urls(redis_url, mongo_url, **options) as saver:
        assert saver.get_tuple(CONFIG) is not None
        assert saver.last_read_tier == "durable"
        cold = transcript(saver, CONFIG)
        with_summaries = transcript(saver, CONFIG, include_summaries=True)
    assert cold == hot
    summaries = [m for m in with_summaries if m.id == SUMMARY_MESSAGE_ID]
    assert len(summaries) == 1 and summaries[0].content.endswith(after["summary"])
