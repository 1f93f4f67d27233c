"""The thread summary (issue 36 item 3; durable/summary_docs.py, plans/summary_upkeep.py): the
flusher keeps one document per thread equal to what the dashboard computes from the
thread's latest checkpoint, deletes keep it true, the rebuild command sets it for data
written without one, and the thread list reads pages of it (with threads not flushed yet
merged from Redis) in a fixed number of MongoDB commands."""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from typing import Annotated, Any

import pymongo
import pytest
import redis
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.base.id import uuid6
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import interrupt
from typing_extensions import TypedDict

from langgraph_durable import DurableSaver
from langgraph_durable.cli import thread_pages
from langgraph_durable.dashboard import listing
from langgraph_durable.durable import summary_docs as S
from langgraph_durable.inspection import lookup, timeline
from langgraph_durable.plans import summary_upkeep as P
from langgraph_durable.plans import thread_list as L
from langgraph_durable.testing import MongoCommandCounter, unique_options

from .test_tool_safety import payload


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
    return L.with_status(doc, datetime.datetime.now(datetime.timezone.utc),
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


def test_the_rebuild_writes_the_summaries_of_data_written_without_them(
        threads: Any) -> None:
    saver = threads
    col = saver.sync_clients.db[saver.context.collections.threads]
    col.delete_many({})  # as written by a release without summaries
    done, last = thread_pages.rebuild(saver, None, batch=2, limit=4)  # stopped after 4
    assert (done, last) == (4, "t-ready")  # thread_id order
    assert col.count_documents({}) == 4
    done, last = thread_pages.rebuild(saver, last, batch=2)  # resumed
    assert (done, last) == (2, "t-stalled")
    for tid in ("t-ask", "t-done", "t-fail", "t-ready", "t-running", "t-stalled"):
        same(saver, tid)
    assert thread_pages.rebuild(saver, None)[0] == 6  # again: changes nothing
    assert {d["rev"] for d in col.find()} == {1}


def _list(saver: DurableSaver, **args: Any) -> dict[str, Any]:
    return listing.thread_list(saver, listing.ListArgs(**args),
                               running_window_s=timeline.RUNNING_WINDOW_S)


def test_the_list_filters_by_status_metadata_and_text_with_true_counts(
        threads: Any) -> None:
    saver = threads
    everything = _list(saver)
    assert [r["thread_id"] for r in everything["rows"]][:1] == ["t-ready"]  # newest first
    assert everything["counts"] == {"running": 1, "stalled": 1, "interrupted": 1,
                                    "error": 1, "done": 1, "ready": 1}
    assert everything["total"] == 6 and everything["attention"] == 3
    truth_by = {t: truth(saver, t)["status"] for t in
                ("t-done", "t-ask", "t-fail", "t-stalled", "t-running", "t-ready")}
    assert {r["thread_id"]: r["status"] for r in everything["rows"]} == truth_by
    assert [r["thread_id"] for r in _list(saver, status="error")["rows"]] == ["t-fail"]
    assert _list(saver, status="error")["rows"][0]["detail"] == (
        "RuntimeError('the tool broke')")
    assert _list(saver, status="interrupted")["rows"][0]["detail"] == "1 interrupt pending"
    attention = _list(saver, status="attention")
    assert [r["thread_id"] for r in attention["rows"]] == ["t-stalled", "t-ask", "t-fail"]
    red = _list(saver, where=("team=red",))
    assert sorted(r["thread_id"] for r in red["rows"]) == ["t-done", "t-fail"]
    assert red["counts"]["done"] == 1 and red["counts"]["interrupted"] == 0
    assert [r["thread_id"] for r in _list(saver, where=("team=red",), status="done")[
        "rows"]] == ["t-done"]
    assert [r["thread_id"] for r in _list(saver, search="DEPLOY")["rows"]] == ["t-ask"]
    assert [r["thread_id"] for r in _list(saver, search="answer to what")["rows"]] == [
        "t-done"]
    assert _list(saver, search="no such words")["rows"] == []
    assert [r["thread_id"] for r in _list(saver, q="STALL")["rows"]] == ["t-stalled"]
    with pytest.raises(ValueError, match="key=value"):
        _list(saver, where=("team",))
    # the app's census picks the same pages and counts as MongoDB's filters and $group
    census = L.Census()
    for args in ({}, {"status": "attention"}, {"status": "done"}, {"q": "t-"},
                 {"q": "ASK", "status": "interrupted"}, {"status": "running"}):
        by_census = listing.thread_list(saver, listing.ListArgs(**args), census=census,
                                        running_window_s=timeline.RUNNING_WINDOW_S)
        by_mongodb = _list(saver, **args)
        for key in ("total", "counts"):
            assert by_census[key] == by_mongodb[key], (args, key)
        assert ([r["thread_id"] for r in by_census["rows"]]
                == [r["thread_id"] for r in by_mongodb["rows"]]), args


def test_the_list_merges_threads_not_flushed_yet_from_redis(
        redis_url: str, mongo_url: str) -> None:
    opts = unique_options()
    with DurableSaver.from_urls(redis_url, mongo_url, **opts) as s:
        run(s, "flushed", _reply, "first")
        s.flush()
    with DurableSaver.from_urls(redis_url, mongo_url, **{**opts, "flusher": "off"}) as s:
        run(s, "hot-only", _ask, "waiting in redis")  # no flusher: only in Redis
        run(s, "flushed", _fail, "again")  # newer than its summary in MongoDB
        page = _list(s)
        assert {r["thread_id"]: r["status"] for r in page["rows"]} == {
            "hot-only": "interrupted", "flushed": "error"}
        assert page["unflushed"] == 2 and page["total"] == 2
        assert page["counts"]["interrupted"] == 1 and page["counts"]["done"] == 0
        assert [r["thread_id"] for r in _list(s, status="interrupted")["rows"]] == [
            "hot-only"]
        assert summary(s, "hot-only") is None  # nothing written by reading




def test_a_page_costs_the_same_few_commands_whatever_its_rows(
        redis_url: str, mongo_url: str) -> None:
    listener = MongoCommandCounter()
    r = redis.Redis.from_url(redis_url)
    m = pymongo.MongoClient(mongo_url, event_listeners=[listener], tz_aware=True)
    try:
        saver = DurableSaver(r, m, **unique_options())
        saver.setup()
        counts = []
        for n in (3, 30):
            for i in range(n - len(counts) * 3):
                run(saver, f"c-{n}-{i}", _reply, f"question {i}")
            saver.flush()
            listener.names.clear()
            page = _list(saver)
            counts.append(list(listener.names))
            assert len(page["rows"]) == (3 if n == 3 else 30)
        # without a census: the matching summaries' few fields, then the page by _id
        assert counts[0] == counts[1] == ["find", "find"]
        feed = listing.ListFeed(saver, 1.0)
        assert feed._look() is True  # the first look reads every summary
        listener.names.clear()
        assert feed._look() is False  # nothing changed since
        assert listener.names == ["find"]
        listener.names.clear()
        page = listing.thread_list(saver, listing.ListArgs(), census=feed.census,
                                   running_window_s=timeline.RUNNING_WINDOW_S)
        assert listener.names == ["find", "find"]  # what changed, the page: no scan
        assert page["total"] == 30 and page["counts"]["done"] == 30
        run(saver, "c-new", _reply, "one more")
        saver.flush()
        listener.names.clear()
        assert feed._look() is True
        assert listener.names == ["find"]  # what changed: one indexed find
        saver.close()
    finally:
        r.close()
        m.close()


def test_delete_for_runs_sets_the_summary_back_to_the_run_before(
        redis_url: str, mongo_url: str) -> None:
    with DurableSaver.from_urls(redis_url, mongo_url, **unique_options()) as saver:
        g = graph(saver, _reply)
        g.invoke({"messages": [HumanMessage("first question")]},
                 {"configurable": {"thread_id": "runs", "run_id": "run-1"}})
        before = truth(saver, "runs")
        g = graph(saver, _ask)
        g.invoke({"messages": [HumanMessage("second question")]},
                 {"configurable": {"thread_id": "runs", "run_id": "run-2"}})
        saver.flush()
        assert same(saver, "runs")["status"] == "interrupted"
        saver.delete_for_runs(["run-2"])
        doc = same(saver, "runs")
        assert (doc["cid"], doc["status"]) == (before["cid"], "done")
        assert doc["title"] == "first question" and doc["messages"] == 3


def _node_interrupt(state: State) -> dict[str, Any]:
    import warnings

    from langgraph.errors import NodeInterrupt

    with warnings.catch_warnings():  # deprecated since LangGraph 1.0, still raised by nodes
        warnings.simplefilter("ignore")
        raise NodeInterrupt("approve?")


def test_an_interrupt_written_as_a_list_is_summarized_and_deletes_keep_it_true(
        redis_url: str, mongo_url: str) -> None:
    """``NodeInterrupt`` and a ``RemoteGraph`` subgraph write their interrupts as a list
    (``interrupt()`` as a tuple), which the saver stores as a manifest of items: the
    summary read it with the serializer, which raised, so the thread stayed ``stale``,
    and a ``delete_for_runs`` left it on the deleted checkpoint (found by a helper)."""
    with DurableSaver.from_urls(redis_url, mongo_url, **unique_options()) as saver:
        graph(saver, _node_interrupt).invoke(
            {"messages": [HumanMessage("first question")]},
            {"configurable": {"thread_id": "listed", "run_id": "run-1"}})
        saver.flush()
        asked = same(saver, "listed")
        assert (asked["status"], asked["interrupts"], "stale" in asked) == (
            "interrupted", 1, False)
        cfg = saver.get_tuple(_cfg("listed")).config
        cp = empty_checkpoint()
        saver.put(cfg, cp, {"step": 9, "source": "update", "run_id": "run-2"}, {})
        saver.flush()
        assert same(saver, "listed")["cid"] == cp["id"]
        saver.delete_for_runs(["run-2"])
        doc = same(saver, "listed")
        assert (doc["cid"], doc["status"], doc["interrupts"]) == (
            asked["cid"], "interrupted", 1)


def test_the_flusher_never_revives_a_type_a_stored_value_names(
        saver: DurableSaver, tmp_path: Any) -> None:
    marker = tmp_path / "ran"
    evil = payload(marker)  # decoded permissively, it runs os.system("touch <marker>")
    cp = empty_checkpoint()
    cp["channel_values"] = {"messages": [HumanMessage("hi", id="h-1"), evil]}
    cp["channel_versions"] = {"messages": "1".zfill(32) + ".0"}
    cp["updated_channels"] = ["messages", "branch:to:agent"]  # type: ignore[typeddict-unknown-key]
    cfg = saver.put(_cfg("evil"), cp, {"step": 1, "source": "loop"}, cp["channel_versions"])
    saver.put_writes(cfg, [("__error__", evil)], "task-1")
    saver.flush()
    doc = summary(saver, "evil")
    assert doc is not None and not marker.exists()
    assert (doc["status"], doc["title"], doc["messages"]) == ("error", "hi", 2)
