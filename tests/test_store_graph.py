"""DurableStore beside DurableSaver in a graph: ``compile(checkpointer=saver,
store=saver.store())``; a node of one thread writes memories through ``get_store()``,
a node of another thread reads them; the store shares the saver's runtime."""

from __future__ import annotations

from typing import TypedDict

import pymongo
import pytest
from langgraph.config import get_store
from langgraph.graph import END, START, StateGraph

from langgraph_durable import DurableSaver, DurableStore
from langgraph_durable.testing import unique_options


class State(TypedDict, total=False):
    user: str
    fact: str
    recalled: list[str]


def remember(state: State) -> State:
    store = get_store()
    if state.get("fact"):
        n = len(store.search(("memories", state["user"])))
        store.put(("memories", state["user"]), f"m{n}", {"fact": state["fact"]})
    recalled = [i.value["fact"] for i in store.search(("memories", state["user"]))]
    return {"recalled": recalled}


def _graph():
    builder = StateGraph(State)
    builder.add_node("remember", remember)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", END)
    return builder


def test_memories_written_in_one_thread_are_read_in_another(redis_url, mongo_url) -> None:
    opts = unique_options()
    with DurableSaver.from_urls(redis_url, mongo_url, **opts) as saver:
        store = saver.store()
        assert store.runtime is saver.runtime  # one set of clients, one outbox, one flusher
        graph = _graph().compile(checkpointer=saver, store=store)
        graph.invoke({"user": "ann", "fact": "likes tea"},
                     {"configurable": {"thread_id": "t1"}})
        graph.invoke({"user": "ann", "fact": "has a cat"},
                     {"configurable": {"thread_id": "t1"}})
        out = graph.invoke({"user": "ann"}, {"configurable": {"thread_id": "t2"}})
        assert out["recalled"] == ["likes tea", "has a cat"]
        store.close()  # leaves the saver running
        saver.flush()
        with pymongo.MongoClient(mongo_url) as m:
            db = m[str(opts["database"])]
            assert sorted(d["key"] for d in db["store"].find({"namespace": ["memories", "ann"]})) \
                == ["m0", "m1"]
            assert db["checkpoints"].count_documents({"thread_id": "t2"}) >= 1


async def test_async_graph_with_a_store_made_from_the_saver(redis_url, mongo_url) -> None:
    async with DurableSaver.from_urls(redis_url, mongo_url, **unique_options()) as saver:
        async with DurableStore(saver) as store:
            graph = _graph().compile(checkpointer=saver, store=store)
            await graph.ainvoke({"user": "bo", "fact": "runs"},
                                {"configurable": {"thread_id": "a1"}})
            out = await graph.ainvoke({"user": "bo"}, {"configurable": {"thread_id": "a2"}})
            assert out["recalled"] == ["runs"]
        assert not saver.is_closed
        got = await saver.store().aget(("memories", "bo"), "m0")
        assert got is not None and got.value == {"fact": "runs"}


def test_an_external_ref_serializer_is_refused(saver, tmp_path) -> None:
    from langgraph_durable import ConfigurationError
    from langgraph_durable.serde.external import ExternalRefSerializer
    from langgraph_durable.serde.stores import LocalBlobStore

    serde = ExternalRefSerializer(store=LocalBlobStore(tmp_path))
    with pytest.raises(ConfigurationError, match="gc"):
        saver.store(serde=serde)
