"""A Motor client (past end of life, but still in users' code) is accepted: the async API
runs on it natively. The package itself never imports Motor."""

from __future__ import annotations

import redis.asyncio
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import END, START, MessagesState, StateGraph
from motor import motor_asyncio  # a test dependency only

from langgraph_durable import DurableSaver
from langgraph_durable.testing import drop_key_prefix, unique_options


async def test_graph_runs_on_a_motor_client(redis_url: str, mongo_url: str) -> None:
    r = redis.asyncio.Redis.from_url(redis_url)
    m = motor_asyncio.AsyncIOMotorClient(mongo_url)
    saver = DurableSaver(r, m, **unique_options())
    await saver.asetup()

    def reply(state: MessagesState) -> dict:
        return {"messages": [AIMessage(content="hi")]}

    g = StateGraph(MessagesState)
    g.add_node("reply", reply)
    g.add_edge(START, "reply")
    g.add_edge("reply", END)
    graph = g.compile(checkpointer=saver)
    cfg = {"configurable": {"thread_id": "motor"}}
    await graph.ainvoke({"messages": [HumanMessage(content="hello")]}, cfg)
    await saver.aflush()
    with redis.Redis.from_url(redis_url) as sync_r:
        drop_key_prefix(sync_r, saver.config.key_prefix)
    state = await graph.aget_state(cfg)
    assert [m.content for m in state.values["messages"]] == ["hello", "hi"]
    assert saver.last_read_tier == "durable"
    assert len([s async for s in graph.aget_state_history(cfg)]) == 3
    await saver.adelete_thread("motor")
    assert await saver.aget_tuple(cfg) is None
    await saver.aclose()
    await r.aclose()
    m.close()


def test_the_package_does_not_import_motor() -> None:
    import pathlib

    root = pathlib.Path(__file__).resolve().parent.parent / "langgraph_durable"
    assert [p.name for p in root.rglob("*.py") if "import motor" in p.read_text()] == []
