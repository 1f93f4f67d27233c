"""Checkpoint ids that do not increase (issue 21 item 5).

LangGraph makes a checkpoint's id from the host's clock, so a run whose host is behind
another's makes ids below the thread's newest. InMemorySaver stores them all and answers
the largest id as the latest. DurableSaver does the same: its concurrent-run check
compares with the head the thread last wrote (meta ``h<ns>``), not with the largest id,
and it logs a warning naming the thread, both ids and "clock skew".
"""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.base import id as lg_id
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph

from langgraph_durable import DurableSaver
from langgraph_durable.testing import unique_options

IDS = ["2", "10", "3"]
"""Put in this order, each the child of the one before. Ids compare as strings (as
InMemorySaver's ``max`` does): "10" is below "2", and "3" is the largest."""


def cfg(checkpoint_id: str | None = None, ns: str = "") -> dict[str, Any]:
    conf: dict[str, Any] = {"thread_id": "skew", "checkpoint_ns": ns}
    if checkpoint_id is not None:
        conf["checkpoint_id"] = checkpoint_id
    return {"configurable": conf}


def checkpoint(cid: str, n: int) -> Any:
    cp = empty_checkpoint()
    cp["id"] = cid
    cp["channel_values"] = {"v": n}
    cp["channel_versions"] = {"v": f"{n + 1:032}.0"}
    return cp


def view(tuples: Any) -> list[tuple[Any, ...]]:
    return [(t.config["configurable"]["checkpoint_id"],
             (t.parent_config or {}).get("configurable", {}).get("checkpoint_id"),
             t.checkpoint["channel_values"], t.metadata["step"], t.pending_writes)
            for t in tuples]


def play(saver: Any) -> dict[str, Any]:
    """The ids "2", "10", "3" as a chain (each put's parent the one before), a pending
    write on "10"; then every read InMemorySaver answers."""
    config = cfg()
    for n, cid in enumerate(IDS):
        config = saver.put(config, checkpoint(cid, n), {"step": n, "source": "loop"},
                           {"v": f"{n + 1:032}.0"})
    saver.put_writes(cfg("10"), [("v", "w")], "task-1")
    return {"latest": view([saver.get_tuple(cfg())]),
            "each": view(saver.get_tuple(cfg(c)) for c in IDS),
            "list": view(saver.list(cfg())),
            "before": view(saver.list(cfg(), before=cfg("3"))),
            "limit": view(saver.list(cfg(), limit=1))}


async def aplay(saver: DurableSaver) -> dict[str, Any]:
    config = cfg()
    for n, cid in enumerate(IDS):
        config = await saver.aput(config, checkpoint(cid, n), {"step": n, "source": "loop"},
                                  {"v": f"{n + 1:032}.0"})
    await saver.aput_writes(cfg("10"), [("v", "w")], "task-1")
    return {"latest": view([await saver.aget_tuple(cfg())]),
            "each": view([await saver.aget_tuple(cfg(c)) for c in IDS]),
            "list": view([t async for t in saver.alist(cfg())]),
            "before": view([t async for t in saver.alist(cfg(), before=cfg("3"))]),
            "limit": view([t async for t in saver.alist(cfg(), limit=1)])}


def test_ids_that_do_not_increase_are_stored_and_read_as_in_memory_saver(
    saver, redis_client
) -> None:
    want = play(InMemorySaver())
    assert want["latest"][0][0] == "3"  # the largest id, though "10" was put after "2"
    assert play(saver) == want
    saver.flush()
    redis_client.delete(*saver.context.keys("skew").all)  # MongoDB alone
    got = {"latest": view([saver.get_tuple(cfg())]),
           "each": view(saver.get_tuple(cfg(c)) for c in IDS),
           "list": view(saver.list(cfg())),
           "before": view(saver.list(cfg(), before=cfg("3"))),
           "limit": view(saver.list(cfg(), limit=1))}
    assert got == want


async def test_ids_that_do_not_increase_through_the_async_api(asaver) -> None:
    assert await aplay(asaver) == play(InMemorySaver())


def test_a_put_below_the_newest_id_logs_clock_skew_naming_thread_and_ids(
    saver, caplog
) -> None:
    with caplog.at_level(logging.WARNING, logger="langgraph_durable.saver"):
        first = saver.put(cfg(), checkpoint("2", 0), {"step": 0}, {"v": f"{1:032}.0"})
        assert caplog.records == []  # an id above everything: nothing to say
        saver.put(first, checkpoint("10", 1), {"step": 1}, {"v": f"{2:032}.0"})
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 1, warned
    assert "thread 'skew'" in warned[0] and "'10'" in warned[0] and "'2'" in warned[0]
    assert "clock skew" in warned[0]


def _two_node_graph() -> Any:
    def think(state: MessagesState) -> dict:
        return {"messages": [AIMessage(content=f"thinking about {state['messages'][-1].content}")]}

    def reply(state: MessagesState) -> dict:
        return {"messages": [AIMessage(content="done")]}

    g = StateGraph(MessagesState)
    g.add_node("think", think)
    g.add_node("reply", reply)
    g.add_edge(START, "think")
    g.add_edge("think", "reply")
    g.add_edge("reply", END)
    return g


class _Behind:
    """``time`` for LangGraph's id module as on a host whose clock is ``seconds`` behind."""

    def __init__(self, seconds: float) -> None:
        self.offset_ns = int(seconds * 1e9)

    def time_ns(self) -> int:
        return time.time_ns() - self.offset_ns


def test_a_host_whose_clock_is_5_s_behind_runs_its_turn_as_in_memory_saver(
    redis_url, mongo_url, monkeypatch
) -> None:
    """Host A runs a turn; host B, 5 s behind, runs the next one on the same thread: every
    checkpoint of B's turn has an id below A's last. It used to raise ConcurrentRunError
    mid-turn (its second put found A's larger id as the head)."""
    turn = {"configurable": {"thread_id": "skew"}}
    opts = unique_options()

    def run(checkpointer: Any, saver_b: Any = None) -> list[str]:
        graph_a = _two_node_graph().compile(checkpointer=checkpointer)
        graph_a.invoke({"messages": [HumanMessage(content="one")]}, turn)
        with monkeypatch.context() as m:
            m.setattr(lg_id, "time", _Behind(5))
            m.setattr(lg_id, "_last_v6_timestamp", None)
            graph_b = _two_node_graph().compile(checkpointer=saver_b or checkpointer)
            out = graph_b.invoke({"messages": [HumanMessage(content="two")]}, turn)
        return [msg.content for msg in out["messages"]]

    want = run(InMemorySaver())
    with DurableSaver.from_urls(redis_url, mongo_url, **opts) as a, \
            DurableSaver.from_urls(redis_url, mongo_url, **opts) as b:
        assert run(a, b) == want == ["one", "thinking about one", "done", "two",
                                     "thinking about two", "done"]
        # as InMemorySaver: the latest is the largest id (A's last), B's turn in history
        history = list(a.list(turn))
        assert a.get_tuple(turn).config == history[0].config
        assert len(history) == 8


def test_a_head_removed_by_delete_for_runs_leaves_the_next_put_unrefused(saver) -> None:
    """The head PUT last wrote is removed with its run: the run that reads the thread's
    latest (the checkpoint before it) and builds on it is no concurrent run."""
    c1 = saver.put(cfg(), checkpoint("1ef1", 0), {"step": 0, "run_id": "keep"},
                   {"v": f"{1:032}.0"})
    saver.put(c1, checkpoint("1ef2", 1), {"step": 1, "run_id": "doomed"}, {"v": f"{2:032}.0"})
    saver.delete_for_runs(["doomed"])
    latest = saver.get_tuple(cfg())
    assert latest is not None and latest.config == c1
    c3 = saver.put(c1, checkpoint("1ef3", 2), {"step": 2, "run_id": "keep"},
                   {"v": f"{3:032}.0"})
    assert [t.config for t in saver.list(cfg())] == [c3, c1]


@pytest.mark.parametrize("ns", ["", "sub:1"])
def test_each_namespace_keeps_its_own_head(saver, ns: str) -> None:
    """Non-increasing ids in one namespace while the other goes on: no refusal."""
    root = saver.put(cfg(), checkpoint("5", 0), {"step": 0}, {"v": f"{1:032}.0"})
    inner = {"configurable": {"thread_id": "skew", "checkpoint_ns": "sub:1",
                              "checkpoint_map": {"": "5"}}}
    inner = saver.put(inner, checkpoint("9", 0), {"step": 0}, {"v": f"{1:032}.0"})
    parent = root if ns == "" else inner
    child = saver.put(parent, checkpoint("4", 1), {"step": 1}, {"v": f"{2:032}.0"})
    again = saver.put(child, checkpoint("3", 2), {"step": 2}, {"v": f"{3:032}.0"})
    assert saver.get_tuple(again).parent_config == child
    want = "5" if ns == "" else "9"
    assert saver.get_tuple(cfg(ns=ns)).config["configurable"]["checkpoint_id"] == want
