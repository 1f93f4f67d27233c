"""The thread summary (issue 36 item 3; durable/summaries.py, plans/summaries.py): the
flusher keeps one document per thread equal to what the dashboard computes from the
thread's latest checkpoint, deletes keep it true, the rebuild command sets it for data
written without one, and the thread list reads pages of it (with threads not flushed yet
merged from Redis) in a fixed number of MongoDB commands."""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from typing import Annotated, Any

import pytest
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.checkpoint.base.id import uuid6
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import interrupt
from typing_extensions import TypedDict

from langgraph_durable import DurableSaver
from langgraph_durable.durable import summaries as S
from langgraph_durable.inspection import lookup, timeline
from langgraph_durable.plans import summaries as P


class State(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    n: int


def _reply(state: State) -> dict[str, Any]:
    return {"messages": [AIMessage(f"answer to {state['messages'][-1].content}")]}


def _ask(state: State) -> dict[str, Any]:
    ok = interrupt({"question": "approve?"})
    return {"messages": [AIMessage(f"approved: {ok}")]}


def _fail(state: State) -> dict[str, Any]:
    raise RuntimeError("the tool broke")


def graph(saver: DurableSaver, node: Any, name: str = "chat") -> Any:
    g = StateGraph(State)
    g.add_node("reply", _reply)
    g.add_node("second", node)
    g.add_edge(START, "reply")
    g.add_edge("reply", "second")
    g.add_edge("second", END)
    return g.compile(checkpointer=saver, name=name)


def _cfg(tid: str) -> dict[str, Any]:
    return {"configurable": {"thread_id": tid}}


def run(saver: DurableSaver, tid: str, node: Any, text: str, **md: Any) -> None:
    cfg = {"configurable": {"thread_id": tid}, "metadata": md}
    try:
        graph(saver, node).invoke({"messages": [HumanMessage(text)]}, cfg)
    except RuntimeError:
        pass


def waiting(saver: DurableSaver, tid: str, age_s: float, source: str = "loop") -> None:
    """A checkpoint with a node to run (``next`` = reply) made ``age_s`` seconds ago by
    ``source`` (``loop``: a run; ``update``: ``update_state``)."""
    run(saver, tid, _reply, "hello there")
    tup = saver.get_tuple(_cfg(tid))
    cp = dict(tup.checkpoint)
    cp["ts"] = (datetime.datetime.now(datetime.timezone.utc)
                - datetime.timedelta(seconds=age_s)).isoformat()
    cp["id"] = str(uuid6())
    cp["updated_channels"] = ["branch:to:reply"]
    md = {**tup.metadata, "source": source, "step": 7}
    saver.put(tup.config, cp, md, {})


def truth(saver: DurableSaver, tid: str) -> dict[str, Any]:
    """What the dashboard computes from the thread's latest checkpoint."""
    (tup,) = lookup.outline(saver, tid, "", limit=1)
    st = timeline.status(tup)
    return {"status": st["status"], "step": tup.metadata.get("step"),
            "last": timeline.last_nodes(tup.checkpoint), "next": st["next"],
            "cid": tup.config["configurable"]["checkpoint_id"]}


def summary(saver: DurableSaver, tid: str) -> dict[str, Any] | None:
    doc = saver.sync_clients.db[saver.context.collections.threads].find_one(
        {"_id": S.summary_id(tid)})
    if doc is None:
        return None
    return P.with_status(doc, datetime.datetime.now(datetime.timezone.utc),
                         timeline.RUNNING_WINDOW_S)


def same(saver: DurableSaver, tid: str) -> dict[str, Any]:
    doc = summary(saver, tid)
    assert doc is not None, tid
    want = truth(saver, tid)
    assert {k: doc[k] for k in ("status", "step", "last", "next", "cid")} == want, tid
    return doc


@pytest.fixture
def threads(saver: DurableSaver) -> Iterator[DurableSaver]:
    run(saver, "t-done", _reply, "what is the weather", team="red")
    run(saver, "t-ask", _ask, "please deploy", team="blue")
    run(saver, "t-fail", _fail, "break it", team="red")
    waiting(saver, "t-stalled", 3600)
    waiting(saver, "t-running", 0)
    waiting(saver, "t-ready", 0, "update")
    saver.flush()
    yield saver


def test_the_flusher_keeps_a_summary_equal_to_the_dashboards_status(threads: Any) -> None:
    saver = threads
    statuses = {t: same(saver, t)["status"] for t in
                ("t-done", "t-ask", "t-fail", "t-stalled", "t-running", "t-ready")}
    assert statuses == {"t-done": "done", "t-ask": "interrupted", "t-fail": "error",
                        "t-stalled": "stalled", "t-running": "running", "t-ready": "ready"}
    done, ask, fail = (summary(saver, t) for t in ("t-done", "t-ask", "t-fail"))
    assert done is not None and ask is not None and fail is not None
    assert done["title"] == "what is the weather"
    assert done["messages"] == 3  # the human message and two answers
    assert "answer to what is the weather" in done["text"]
    assert done["graph"] is None and done["md"]["team"] == "red"
    assert ask["interrupts"] == 1 and ask["errors"] == 0
    assert fail["errors"] == 1 and fail["error"] == "RuntimeError('the tool broke')"


def test_the_summary_follows_a_thread_across_rounds_and_a_recopy(threads: Any) -> None:
    saver = threads
    g = graph(saver, _ask)
    from langgraph.types import Command
    g.invoke(Command(resume=True), _cfg("t-ask"))
    saver.flush()
    doc = same(saver, "t-ask")
    assert doc["status"] == "done" and doc["interrupts"] == 0
    assert doc["messages"] == 3 and doc["title"] == "please deploy"
    rev = doc["rev"]
    # a replayed round (every document again) changes nothing
    P_ctx = saver.context
    saver.run(P.refresh_plan(P_ctx, ["t-ask"]))
    assert summary(saver, "t-ask")["rev"] == rev
    # an older checkpoint's facts never move it back
    old = S.Facts(cid="0" * 8, ts=None, next=["x"])
    saver.run(P.upkeep_plan(P_ctx, {"t-ask": old}))
    assert summary(saver, "t-ask")["cid"] == doc["cid"]


def test_deletes_and_copies_keep_the_summary_true(threads: Any) -> None:
    saver = threads
    saver.delete_thread("t-done")
    assert summary(saver, "t-done") is None
    saver.copy_thread("t-ask", "t-ask-copy")
    saver.flush()
    assert same(saver, "t-ask-copy")["status"] == "interrupted"
    saver.prune(["t-fail"], strategy="keep_latest")
    assert same(saver, "t-fail")["status"] == "error"
