"""Compaction inside real graphs: a StateGraph with InMemorySaver and the prebuilt agent."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

from langgraph_durable.compaction import (
    SUMMARY_MESSAGE_ID,
    BaseCompactor,
    SlidingWindow,
    SummaryAgentState,
    SummaryBuffer,
    SummaryState,
)

from ._fakes import AsyncOnlyChatModel, PromptRecorder, ToolCallingFakeChatModel, summariser
from ._fakes import ten_per_message as per_message

CONFIG: RunnableConfig = {"configurable": {"thread_id": "thread-1"}}


def chat_graph(compactor: BaseCompactor, saver: InMemorySaver) -> CompiledStateGraph[Any]:
    """START -> compact -> chat -> END, where chat answers "a<turn>"."""
    chat = FakeListChatModel(responses=[f"a{i}" for i in range(1, 31)])

    async def areply(state: SummaryState) -> dict[str, Any]:
        return {"messages": [await chat.ainvoke(state["messages"])]}

    def reply(state: SummaryState) -> dict[str, Any]:
        return {"messages": [chat.invoke(state["messages"])]}

    builder = StateGraph(SummaryState)
    builder.add_node("compact", compactor.as_runnable())
    builder.add_node("chat", reply)
    builder.add_node("achat", areply)
    builder.add_edge(START, "compact")
    builder.add_edge("compact", "chat")
    builder.add_edge("chat", END)
    return builder.compile(checkpointer=saver)


def stored_messages(saver: InMemorySaver) -> list[BaseMessage]:
    checkpoint = saver.get_tuple(CONFIG)
    assert checkpoint is not None
    return list(checkpoint.checkpoint["channel_values"]["messages"])


def first_turn(i: int) -> dict[str, Any]:
    human = HumanMessage(f"h{i}", id=f"h{i}")
    return {"messages": [SystemMessage("You are terse.", id="sys"), human] if i == 1 else [human]}


def test_checkpointed_history_stays_bounded_over_30_turns() -> None:
    model, recorder = summariser(*[f"summary {i}" for i in range(1, 28)])
    buf = SummaryBuffer(model, max_tokens=60, keep_tokens=30, token_counter=per_message)
    saver = InMemorySaver()
    graph = chat_graph(buf, saver)

    sizes = []
    for i in range(1, 31):
        graph.invoke(first_turn(i), CONFIG)
        sizes.append(len(stored_messages(saver)))

    assert sizes == [3, 5, 7] + [6] * 27  # compaction starts on turn 4, then stays at 6
    final = stored_messages(saver)
    assert [m.content for m in final] == [
        "You are terse.",
        "Summary of the earlier conversation:\nsummary 27",
        "h29",
        "a29",
        "h30",
        "a30",
    ]
    assert final[1].id == SUMMARY_MESSAGE_ID
    values = graph.get_state(CONFIG).values
    assert values["summary"] == "summary 27"
    assert values["compaction"]["folded"] == 2
    assert len(recorder.prompts) == 27
    assert "Previous summary:\nsummary 26\n" in recorder.texts[-1]
    assert "User: h28\nAssistant: a28\n" in recorder.texts[-1]


def test_summary_tokens_are_not_streamed_to_the_client() -> None:
    model, recorder = summariser("secret summary")
    buf = SummaryBuffer(model, max_tokens=20, keep_tokens=10, token_counter=per_message)
    graph = chat_graph(buf, InMemorySaver())
    history = [HumanMessage("h1", id="h1"), AIMessage("a1", id="a1"), HumanMessage("h2")]
    parts: Any = graph.stream({"messages": history}, CONFIG, stream_mode="messages")
    streamed = [(meta["langgraph_node"], type(m).__name__, m.content) for m, meta in parts]
    assert len(recorder.prompts) == 1
    # The summariser's own answer (an AIMessage) is never streamed; the node's state update
    # is, like any node output, and can be filtered by its langgraph_node metadata.
    assert streamed == [
        ("compact", "RemoveMessage", ""),
        ("compact", "SystemMessage", "Summary of the earlier conversation:\nsecret summary"),
        ("chat", "AIMessageChunk", "a"),
        ("chat", "AIMessageChunk", "1"),
    ]


async def test_async_graph_uses_ainvoke_of_the_summariser() -> None:
    model = AsyncOnlyChatModel(messages=iter(f"summary {i}" for i in range(1, 8)))
    buf = SummaryBuffer(model, max_tokens=60, keep_tokens=30, token_counter=per_message)
    saver = InMemorySaver()
    graph = chat_graph(buf, saver)
    for i in range(1, 11):
        await graph.ainvoke(first_turn(i), CONFIG)
    assert [m.content for m in stored_messages(saver)][1:] == [
        "Summary of the earlier conversation:\nsummary 7",
        "h9",
        "a9",
        "h10",
        "a10",
    ]


def test_sliding_window_node_bounds_the_checkpoint() -> None:
    saver = InMemorySaver()
    graph = chat_graph(SlidingWindow(max_tokens=50, token_counter=per_message), saver)
    for i in range(1, 31):
        graph.invoke(first_turn(i), CONFIG)
    assert [m.content for m in stored_messages(saver)] == [
        "You are terse.",
        "a28",
        "h29",
        "a29",
        "h30",
        "a30",
    ]


@tool
def lookup(q: str) -> str:
    """Look ``q`` up."""
    return f"result for {q}"


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_prebuilt_react_agent_with_pre_model_hook(mode: str) -> None:
    from langgraph.prebuilt import create_react_agent

    script: list[AIMessage] = []
    for i in range(1, 6):
        call = {"name": "lookup", "args": {"q": f"q{i}"}, "id": f"call{i}"}
        script += [AIMessage("", tool_calls=[call]), AIMessage(f"final {i}")]
    agent_seen = PromptRecorder()
    agent_model = ToolCallingFakeChatModel(messages=iter(script), callbacks=[agent_seen])
    model, recorder = summariser("summary 1", "summary 2", "summary 3", "summary 4")
    buf = SummaryBuffer(model, max_tokens=60, keep_tokens=30, token_counter=per_message)
    agent = create_react_agent(
        agent_model,
        [lookup],
        pre_model_hook=buf.as_pre_model_hook(),
        state_schema=SummaryAgentState,
        checkpointer=InMemorySaver(),
    )

    sizes = []
    for i in range(1, 6):
        turn = {"messages": [HumanMessage(f"h{i}", id=f"h{i}")]}
        if mode == "async":
            result = await agent.ainvoke(turn, CONFIG)
        else:
            result = agent.invoke(turn, CONFIG)
        sizes.append(len(result["messages"]))

    assert sizes == [4, 5, 5, 5, 5]
    assert [(m.type, m.text) for m in result["messages"]] == [
        ("system", "Summary of the earlier conversation:\nsummary 4"),
        ("human", "h5"),
        ("ai", ""),
        ("tool", "result for q5"),
        ("ai", "final 5"),
    ]
    assert result["summary"] == "summary 4"
    assert len(recorder.prompts) == 4
    # The agent model saw the summary, then the verbatim tool-call pair.
    assert [m.type for m in agent_seen.prompts[-1]] == ["system", "human", "ai", "tool"]
    assert "Tool result (lookup): result for q4" in recorder.texts[-1]
