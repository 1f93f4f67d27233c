"""Compaction and memory (issue 32 item 8): ``memory_namespace`` puts each summary, with
the messages it folded, in the graph's store, where ``store.search`` finds it; the
example ``examples/compaction_memory.py`` runs on the test's Redis and MongoDB."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import START, StateGraph

from langgraph_durable import DurableSaver, DurableStore
from langgraph_durable.compaction import SummaryBuffer, SummaryState
from langgraph_durable.testing import drop_namespace, unique_options

ROOT = Path(__file__).resolve().parent.parent.parent


def _graph(compact: SummaryBuffer) -> StateGraph[Any]:
    async def reply(state: SummaryState) -> dict[str, Any]:
        return {"messages": [AIMessage(f"ok {state['messages'][-1].content}",
                                       id=f"a-{state['messages'][-1].content}")]}

    builder = StateGraph(SummaryState)
    builder.add_node("compact", compact.as_runnable())
    builder.add_node("reply", reply)
    builder.add_edge(START, "compact")
    builder.add_edge("compact", "reply")
    return builder


def test_the_example_keeps_each_summary_where_store_search_finds_it(
        redis_url: str, mongo_url: str) -> None:
    opts = unique_options()
    prefix, database = str(opts["key_prefix"]), str(opts["database"])
    env = {**os.environ, "REDIS_URL": redis_url, "MONGODB_URL": mongo_url,
           "LGD_KEY_PREFIX": prefix, "LGD_DATABASE": database, "PYTHONPATH": str(ROOT)}
    try:
        done = subprocess.run([sys.executable, str(ROOT / "examples" / "compaction_memory.py")],
                              env=env, capture_output=True, text=True, timeout=120, cwd=ROOT)
        assert done.returncode == 0, done.stderr
        assert done.stdout.splitlines()[0] == (
            "4 messages left; summary: Ada is planning a trip to Oslo in May; she likes tea "
            "and hates early flights.")
        # the summaries, searched in this process on the same key prefix and database
        with DurableStore.from_urls(redis_url, mongo_url, key_prefix=prefix,
                                    database=database) as store:
            namespaces = store.list_namespaces(prefix=("summaries",))
            assert len(namespaces) == 1 and re.fullmatch(r"memo-[0-9a-f]{8}", namespaces[0][1])
            items = store.search(namespaces[0])
            assert sorted(i.value["summary"] for i in items) == [
                "Ada is planning a trip to Oslo in May.",
                "Ada is planning a trip to Oslo in May; she likes tea and hates early flights."]
            first = next(i for i in items if i.value["summary"].endswith("May."))
            assert first.value["thread_id"] == namespaces[0][1]
            assert first.value["messages"].startswith(
                "User: I plan a trip to Oslo\nAssistant: noted: I plan a trip to Oslo\n")
            assert len(first.value["message_ids"]) == 5
        assert sorted(line for line in done.stdout.splitlines()[1:]) == [
            "found: Ada is planning a trip to Oslo in May. | folded 5",
            "found: Ada is planning a trip to Oslo in May; she likes tea and hates early "
            "flights. | folded 4"]
    finally:
        drop_namespace(redis_url, mongo_url, prefix, database)


async def test_async_compaction_writes_under_a_namespace_function_and_survives_a_new_store(
        redis_url: str, mongo_url: str) -> None:
    opts = unique_options()

    def where(config: RunnableConfig) -> tuple[str, ...]:
        return ("users", str(config["configurable"]["user"]), "summaries")

    compact = SummaryBuffer(FakeListChatModel(responses=["the user counts to three"]),
                            max_tokens=None, trigger=("messages", 4), keep_last=1,
                            memory_namespace=where)
    config: RunnableConfig = {"configurable": {"thread_id": "t-1", "user": "ada"}}
    try:
        async with DurableSaver.from_urls(redis_url, mongo_url, **opts) as saver:
            graph = _graph(compact).compile(checkpointer=saver, store=saver.store())
            for n in ("one", "two", "three"):
                await graph.ainvoke({"messages": [HumanMessage(n, id=f"h-{n}")]}, config)
        async with DurableStore.from_urls(redis_url, mongo_url, **opts) as store:
            items = await store.asearch(("users", "ada", "summaries"))
            assert [i.value for i in items] == [{
                "summary": "the user counts to three",
                "messages": "User: one\nAssistant: ok one\nUser: two\nAssistant: ok two",
                "message_ids": ["h-one", "a-one", "h-two", "a-two"],
                "thread_id": "t-1"}]
    finally:
        drop_namespace(redis_url, mongo_url, str(opts["key_prefix"]), str(opts["database"]))


def test_a_memory_namespace_without_a_store_or_config_key_is_refused() -> None:
    compact = SummaryBuffer(FakeListChatModel(responses=["s", "s"]), max_tokens=None,
                            trigger=("messages", 2), keep_last=1,
                            memory_namespace=("summaries", "{user}"))
    graph = _graph(compact).compile()
    with pytest.raises(ValueError, match="needs a store"):
        graph.invoke({"messages": [HumanMessage("a"), AIMessage("b"), HumanMessage("c")]})
    with pytest.raises(ValueError, match="memory_namespace must be a non-empty tuple"):
        SummaryBuffer(FakeListChatModel(responses=["s"]), max_tokens=10,
                      memory_namespace=("summaries", ""))


def test_the_agent_middleware_keeps_every_summary_in_the_agents_store(
        redis_url: str, mongo_url: str) -> None:
    from langchain.agents import create_agent

    from langgraph_durable.compaction import CompactionMiddleware

    from ._fakes import ScriptedAgentModel, summariser

    summary_model, recorder = summariser(*[f"s{i}" for i in range(1, 50)])
    middleware = CompactionMiddleware(
        summary_model, trigger=("messages", 8), keep=("messages", 4), max_tokens=5000,
        memory_namespace=("agents", "{thread_id}"))
    opts = unique_options()
    config: RunnableConfig = {"configurable": {"thread_id": "agent-9"}}
    try:
        with DurableSaver.from_urls(redis_url, mongo_url, **opts) as saver:
            agent = create_agent(ScriptedAgentModel(prompts=[]), [], middleware=[middleware],
                                 checkpointer=saver, store=saver.store())
            for n in range(1, 13):
                agent.invoke({"messages": [HumanMessage(f"h{n} question", id=f"h{n}")]},
                             config)
            compactions = len(recorder.prompts)
            assert compactions >= 2
            items = saver.store().search(("agents", "agent-9"), limit=100)
            assert sorted(i.value["summary"] for i in items) == sorted(
                f"s{i}" for i in range(1, compactions + 1))
            folded = [mid for i in items for mid in i.value["message_ids"]]
            assert "h1" in folded and len(folded) == len(set(folded))
    finally:
        drop_namespace(redis_url, mongo_url, str(opts["key_prefix"]), str(opts["database"]))
    with pytest.raises(ValueError, match="needs a model"):
        CompactionMiddleware(None, trigger=("messages", 8), memory_namespace=("a",))
