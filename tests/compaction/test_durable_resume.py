"""A compacted thread resumes from ``DurableSaver`` after a restart (sync and async).

The first saver runs a compacting chat graph and is closed (which drains the outbox to
MongoDB). A new saver object on the same servers then resumes the thread, either with Redis
intact (the hot tier answers) or with the saver's Redis keys deleted (MongoDB answers). The
restored history, summary and report must equal what was there before the restart, and the
next compaction must continue incrementally from the restored summary.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import pytest
import redis
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from langgraph_durable import DurableSaver
from langgraph_durable.compaction import (
    SUMMARY_MESSAGE_ID,
    BaseCompactor,
    SlidingWindow,
    SummaryBuffer,
    SummaryState,
)
from langgraph_durable.testing import unique_options

from ._fakes import summariser, ten_per_message

CONFIG: RunnableConfig = {"configurable": {"thread_id": "long-chat"}}
SYS = SystemMessage("You are terse.", id="sys")


def reply(state: SummaryState) -> dict[str, Any]:
    """Answer turn n with "a<n>"; every third turn first calls a tool."""
    n = int(str(state["messages"][-1].id)[1:])
    out: list[BaseMessage] = []
    if n % 3 == 0:
        call = {"name": "lookup", "args": {"q": f"q{n}"}, "id": f"call{n}"}
        out += [
            AIMessage("", tool_calls=[call], id=f"c{n}"),
            ToolMessage(f"found {n}", tool_call_id=f"call{n}", name="lookup", id=f"t{n}"),
        ]
    return {"messages": [*out, AIMessage(f"a{n}", id=f"a{n}")]}


def chat_graph(compactor: BaseCompactor, saver: DurableSaver) -> CompiledStateGraph[Any]:
    builder = StateGraph(SummaryState)
    builder.add_node("compact", compactor.as_runnable())
    builder.add_node("chat", reply)
    builder.add_edge(START, "compact")
    builder.add_edge("compact", "chat")
    builder.add_edge("chat", END)
    return builder.compile(checkpointer=saver)


def turn(n: int) -> dict[str, Any]:
    human = HumanMessage(f"h{n}", id=f"h{n}")
    return {"messages": [SYS, human] if n == 1 else [human]}


def empty_hot_tier(redis_url: str, key_prefix: str) -> int:
    """Delete every Redis key of the saver's prefix (thread keys and outbox)."""
    client = redis.Redis.from_url(redis_url)
    try:
        keys = list(client.scan_iter(match="{" + key_prefix + ":*", count=1000))
        if keys:
            client.delete(*keys)
        return len(keys)
    finally:
        client.close()


@contextmanager
def opened(urls: tuple[str, str], options: dict[str, Any]) -> Iterator[DurableSaver]:
    with DurableSaver.from_urls(*urls, **options) as saver:
        yield saver


@asynccontextmanager
async def aopened(urls: tuple[str, str], options: dict[str, Any]) -> AsyncIterator[DurableSaver]:
    async with DurableSaver.from_urls(*urls, **options) as saver:
        yield saver


async def run_turns(graph: CompiledStateGraph[Any], turns: range, mode: str) -> None:
    for n in turns:
        if mode == "async":
            await graph.ainvoke(turn(n), CONFIG)
        else:
            graph.invoke(turn(n), CONFIG)


async def snapshot(graph: CompiledStateGraph[Any], mode: str) -> tuple[dict[str, Any], int]:
    """The thread's current values and the number of checkpoints in its history."""
    if mode == "async":
        state = await graph.aget_state(CONFIG)
        history = [s async for s in graph.aget_state_history(CONFIG)]
    else:
        state = graph.get_state(CONFIG)
        history = list(graph.get_state_history(CONFIG))
    return dict(state.values), len(history)


RESTARTS = pytest.mark.parametrize("restart", ["same_servers", "redis_emptied"])
MODES = pytest.mark.parametrize("mode", ["sync", "async"])


@RESTARTS
@MODES
async def test_summary_buffer_thread_resumes_after_restart(
    mode: str, restart: str, redis_url: str, mongo_url: str
) -> None:
    urls, options = (redis_url, mongo_url), unique_options()
    opener = aopened if mode == "async" else None

    # Process 1: 12 turns, compacted on the way; closing drains the outbox to MongoDB.
    model, recorder = summariser(*[f"summary {i}" for i in range(1, 40)])
    buf = SummaryBuffer(model, max_tokens=60, keep_tokens=30, token_counter=ten_per_message)
    if opener:
        async with opener(urls, options) as saver:
            graph = chat_graph(buf, saver)
            await run_turns(graph, range(1, 13), mode)
            before, checkpoints = await snapshot(graph, mode)
    else:
        with opened(urls, options) as saver:
            graph = chat_graph(buf, saver)
            await run_turns(graph, range(1, 13), mode)
            before, checkpoints = await snapshot(graph, mode)
    summaries = len(recorder.prompts)
    assert summaries >= 5
    assert before["summary"] == f"summary {summaries}"
    assert before["messages"][:2] == [
        SYS,
        SystemMessage(
            f"Summary of the earlier conversation:\nsummary {summaries}", id=SUMMARY_MESSAGE_ID
        ),
    ]
    assert len(before["messages"]) <= 6 + 3  # the budget (6 messages) + one tool turn

    if restart == "redis_emptied":
        assert empty_hot_tier(redis_url, options["key_prefix"]) > 0
    expected_tier = "durable" if restart == "redis_emptied" else "hot"

    # Process 2: a new saver object (new clients, new flusher) and a new summariser.
    model2, recorder2 = summariser(*[f"resumed {i}" for i in range(1, 10)])
    buf2 = SummaryBuffer(model2, max_tokens=60, keep_tokens=30, token_counter=ten_per_message)

    async def resume(saver: DurableSaver) -> None:
        graph = chat_graph(buf2, saver)
        after, restored_checkpoints = await snapshot(graph, mode)
        assert saver.last_read_tier == expected_tier
        assert after == before
        assert restored_checkpoints == checkpoints
        await run_turns(graph, range(13, 19), mode)
        final, _ = await snapshot(graph, mode)
        assert saver.last_read_tier == "hot"
        assert len(final["messages"]) <= 6 + 3
        assert final["messages"][0] == SYS
        assert final["messages"][1].id == SUMMARY_MESSAGE_ID
        assert final["messages"][-1] == AIMessage("a18", id="a18")
        assert final["summary"] == f"resumed {len(recorder2.prompts)}"

    if opener:
        async with opener(urls, options) as saver2:
            await resume(saver2)
    else:
        with opened(urls, options) as saver2:
            await resume(saver2)

    # The first compaction after the restart folded the restored summary, not nothing.
    assert recorder2.prompts, "no compaction after the restart"
    assert f"Previous summary:\nsummary {summaries}\n" in recorder2.texts[0]
    assert "h1\n" not in recorder2.texts[0]  # incremental: old turns are not re-read
    # Tool-call pairs survived both tiers whole: every tool result follows its call.
    for prompt in recorder2.texts:
        if "Tool result (lookup)" in prompt:
            assert "[called tool lookup with" in prompt


@RESTARTS
@MODES
async def test_sliding_window_thread_resumes_after_restart(
    mode: str, restart: str, redis_url: str, mongo_url: str
) -> None:
    urls, options = (redis_url, mongo_url), unique_options()
    window = SlidingWindow(max_tokens=50, token_counter=ten_per_message)
    if mode == "async":
        async with aopened(urls, options) as saver:
            graph = chat_graph(window, saver)
            await run_turns(graph, range(1, 11), mode)
            before, _ = await snapshot(graph, mode)
    else:
        with opened(urls, options) as saver:
            graph = chat_graph(window, saver)
            await run_turns(graph, range(1, 11), mode)
            before, _ = await snapshot(graph, mode)
    assert before["messages"][0] == SYS
    assert before["compaction"]["strategy"] == "sliding_window"
    if restart == "redis_emptied":
        empty_hot_tier(redis_url, options["key_prefix"])

    async def resume(saver: DurableSaver) -> None:
        graph = chat_graph(window, saver)
        after, _ = await snapshot(graph, mode)
        assert saver.last_read_tier == ("durable" if restart == "redis_emptied" else "hot")
        assert after == before
        await run_turns(graph, range(11, 14), mode)
        final, _ = await snapshot(graph, mode)
        ids = [m.id for m in final["messages"]]
        assert ids[0] == "sys" and ids[-1] == "a13"
        assert ten_per_message(final["messages"]) <= 50 + 40  # budget + one (tool) turn
        for i, message in enumerate(final["messages"]):  # no orphaned tool result
            if isinstance(message, ToolMessage):
                assert final["messages"][i - 1].tool_calls

    if mode == "async":
        async with aopened(urls, options) as saver2:
            await resume(saver2)
    else:
        with opened(urls, options) as saver2:
            await resume(saver2)
