"""Two runs on one thread at once: the second is refused with ConcurrentRunError (nothing
written, the first run's messages intact) unless on_concurrent_run="fork"; from two
processes (two savers) and from one (one saver serving two requests: threads or asyncio
tasks)."""

from __future__ import annotations

import asyncio
import contextvars
import threading

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.base import create_checkpoint, empty_checkpoint
from langgraph.graph import END, START, MessagesState, StateGraph

from langgraph_durable import ConcurrentRunError, DurableSaver
from langgraph_durable.testing import unique_options

CFG = {"configurable": {"thread_id": "shared"}}


RUN = contextvars.ContextVar("run", default="")
"""Which run a put belongs to ("A" or "B"): set where the run starts, seen by its puts
(LangGraph's executors copy the context)."""


class MeetingSaver(DurableSaver):
    """Holds each run's first put until both runs have read the thread's latest checkpoint,
    as two processes starting at the same moment would; then run B's until run A's is
    stored, so B's put is the stale one."""

    barrier: threading.Barrier | None = None
    a_stored = threading.Event()

    def put(self, config, checkpoint, metadata, new_versions):  # type: ignore[override]
        if self.barrier is None or metadata.get("source") != "input":
            return super().put(config, checkpoint, metadata, new_versions)
        self.barrier.wait(timeout=10)
        if RUN.get() == "B":
            self.a_stored.wait(timeout=10)
        try:
            return super().put(config, checkpoint, metadata, new_versions)
        finally:
            if RUN.get() == "A":
                self.a_stored.set()


def slow_graph(_barrier: threading.Barrier | None = None):
    def reply(state: MessagesState) -> dict:
        return {"messages": [AIMessage(content=f"re: {state['messages'][-1].content}")]}

    g = StateGraph(MessagesState)
    g.add_node("reply", reply)
    g.add_edge(START, "reply")
    g.add_edge("reply", END)
    return g


def assert_not_forked(history: list) -> None:
    """No two checkpoints of ``history`` share a parent: nothing of the refused run was
    written (its input checkpoint would be a sibling of the winner's)."""
    parents = [t.parent_config["configurable"]["checkpoint_id"] for t in history
               if t.parent_config]
    assert len(parents) == len(set(parents)), parents


def run_twice(redis_url: str, mongo_url: str, one_saver: bool = False,
              **options: object) -> tuple[list, list, list]:
    opts = unique_options(**options)
    barrier = threading.Barrier(2)
    a = MeetingSaver.from_urls(redis_url, mongo_url, **opts)  # two processes' savers ...
    b = a if one_saver else MeetingSaver.from_urls(redis_url, mongo_url, **opts)
    with a, b:  # ... or one process' (entered twice: closed once)
        first = slow_graph(threading.Barrier(1)).compile(checkpointer=a)
        first.invoke({"messages": [HumanMessage(content="hello")]}, CFG)
        a.barrier = b.barrier = barrier
        a.a_stored = b.a_stored = threading.Event()
        results: dict[str, object] = {}

        def invoke(name: str, saver: DurableSaver) -> None:
            RUN.set(name)
            graph = slow_graph(barrier).compile(checkpointer=saver)
            try:
                graph.invoke({"messages": [HumanMessage(content=name)]}, CFG,
                             durability="sync")
                results[name] = "ok"
            except ConcurrentRunError as exc:
                results[name] = exc

        threads = [threading.Thread(target=invoke, args=(n, s)) for n, s in (("A", a), ("B", b))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
        a.barrier = b.barrier = None
        state = slow_graph(barrier).compile(checkpointer=a).get_state(CFG)
        history = list(a.list(CFG))
    return results, [m.content for m in state.values["messages"]], history


@pytest.mark.parametrize("one_saver", [False, True], ids=["two-processes", "one-process"])
def test_second_concurrent_run_is_refused_and_the_first_is_intact(redis_url, mongo_url,
                                                                  one_saver) -> None:
    results, messages, history = run_twice(redis_url, mongo_url, one_saver)
    assert results["A"] == "ok"
    assert isinstance(results["B"], ConcurrentRunError)
    assert messages == ["hello", "re: hello", "A", "re: A"]
    assert_not_forked(history)
    loser = results["B"]
    assert "thread 'shared' (ns '') was extended by another run" in str(loser)
    # it names the head when the loser tried to write: one of the winner's checkpoints
    # (its input one, or a later one if the winner was faster)
    named = str(loser).split("its latest checkpoint is now '", 1)[1].split("'", 1)[0]
    winners = {t.config["configurable"]["checkpoint_id"] for t in history
               if t.metadata["step"] >= 2}
    assert named in winners, (named, winners)


def test_the_refused_run_can_reload_and_retry(redis_url, mongo_url) -> None:
    opts = unique_options()
    with DurableSaver.from_urls(redis_url, mongo_url, **opts) as a, \
            DurableSaver.from_urls(redis_url, mongo_url, **opts) as b:
        graph_a = slow_graph(threading.Barrier(1)).compile(checkpointer=a)
        graph_b = slow_graph(threading.Barrier(1)).compile(checkpointer=b)
        graph_a.invoke({"messages": [HumanMessage(content="1")]}, CFG)
        b.get_tuple(CFG)  # B reads the latest ...
        graph_a.invoke({"messages": [HumanMessage(content="2")]}, CFG)  # ... A moves on
        latest = b.get_tuple(CFG)  # reloading makes B current again
        assert [m.content for m in latest.checkpoint["channel_values"]["messages"]] == \
            ["1", "re: 1", "2", "re: 2"]
        graph_b.invoke({"messages": [HumanMessage(content="3")]}, CFG)
        assert [m.content for m in graph_b.get_state(CFG).values["messages"]][-2:] == \
            ["3", "re: 3"]


@pytest.mark.parametrize("one_saver", [False, True], ids=["two-processes", "one-process"])
def test_fork_mode_keeps_both_runs_as_sibling_branches(redis_url, mongo_url, one_saver) -> None:
    results, messages, history = run_twice(redis_url, mongo_url, one_saver,
                                           on_concurrent_run="fork")
    assert results == {"A": "ok", "B": "ok"}
    assert len(messages) == 4  # the latest state shows one run only ...
    parents = [t.parent_config["configurable"]["checkpoint_id"] for t in history
               if t.parent_config and t.metadata["source"] == "input"]
    # ... but both runs' input checkpoints hang off the same parent in the history
    assert len(parents) == 2 and parents[0] == parents[1]


def test_explicit_forks_from_an_old_checkpoint_are_never_refused(saver) -> None:
    graph = slow_graph(threading.Barrier(1)).compile(checkpointer=saver)
    graph.invoke({"messages": [HumanMessage(content="1")]}, CFG)
    old = list(graph.get_state_history(CFG))[-1].config
    graph.invoke({"messages": [HumanMessage(content="2")]}, CFG)
    graph.invoke({"messages": [HumanMessage(content="fork")]}, old)
    graph.update_state(old, {"messages": [HumanMessage(content="edit")]})
    assert [m.content for m in graph.get_state(CFG).values["messages"]] == ["edit"]


@pytest.mark.parametrize("mode", ["raise", "fork"])
def test_mode_is_validated(mode: str) -> None:
    from langgraph_durable import DurableConfig

    assert DurableConfig(on_concurrent_run=mode).on_concurrent_run == mode
    with pytest.raises(ValueError):
        DurableConfig(on_concurrent_run="ignore")


async def test_two_asyncio_tasks_of_one_saver_on_one_thread_the_second_is_refused(
        asaver: DurableSaver) -> None:
    """As two requests of one asyncio server: each task's run reads the latest checkpoint
    before either writes (each holds its input checkpoint's put until both read)."""
    graph = slow_graph().compile(checkpointer=asaver)
    await graph.ainvoke({"messages": [HumanMessage(content="hello")]}, CFG)
    read: list[str] = []
    both_read, a_stored = asyncio.Event(), asyncio.Event()
    aput = asaver.aput

    async def meeting_aput(config, checkpoint, metadata, new_versions):  # type: ignore[no-untyped-def]
        if metadata.get("source") != "input":
            return await aput(config, checkpoint, metadata, new_versions)
        read.append(config["configurable"]["checkpoint_id"])
        if len(read) == 2:
            both_read.set()
        await asyncio.wait_for(both_read.wait(), 10)
        if RUN.get() == "B":
            await asyncio.wait_for(a_stored.wait(), 10)
        try:
            return await aput(config, checkpoint, metadata, new_versions)
        finally:
            if RUN.get() == "A":
                a_stored.set()

    asaver.aput = meeting_aput  # type: ignore[method-assign]

    async def run(name: str) -> object:
        RUN.set(name)
        try:
            await graph.ainvoke({"messages": [HumanMessage(content=name)]}, CFG,
                                durability="sync")
            return "ok"
        except ConcurrentRunError as exc:
            return exc

    results = dict(zip("AB", await asyncio.gather(run("A"), run("B"))))
    del asaver.aput
    assert read[0] == read[1]  # both runs started from the same checkpoint
    assert results["A"] == "ok"
    assert isinstance(results["B"], ConcurrentRunError)
    state = await graph.aget_state(CFG)
    assert [m.content for m in state.values["messages"]] == ["hello", "re: hello", "A", "re: A"]
    assert_not_forked([t async for t in asaver.alist(CFG)])


def test_the_saver_api_from_two_threads_of_one_process_refuses_the_stale_put(
        saver: DurableSaver) -> None:
    """Two callers of one saver, each in its own thread, read the latest checkpoint; the
    first puts a child of it; the second's put of another child is refused. One caller
    that reads twice in one thread is one run: its puts are forks it asked for."""
    cfg = {"configurable": {"thread_id": "api", "checkpoint_ns": ""}}
    base = empty_checkpoint()
    saver.put(cfg, base, {"source": "input", "step": -1}, {})
    both_read = threading.Barrier(2)
    a_stored = threading.Event()
    out: dict[str, object] = {}

    def caller(name: str) -> None:
        tup = saver.get_tuple(cfg)
        assert tup is not None
        both_read.wait(10)
        if name == "B":
            a_stored.wait(10)
        try:
            saver.put(tup.config, create_checkpoint(tup.checkpoint, None, 0),
                      {"source": "loop", "step": 0}, {})
            out[name] = "ok"
        except ConcurrentRunError as exc:
            out[name] = exc
        if name == "A":
            a_stored.set()

    threads = [threading.Thread(target=caller, args=(n,)) for n in "AB"]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert out["A"] == "ok"
    assert isinstance(out["B"], ConcurrentRunError)
    latest = saver.get_tuple(cfg)
    assert latest is not None and latest.parent_config is not None
    assert latest.parent_config["configurable"]["checkpoint_id"] == base["id"]
    assert len(list(saver.list(cfg))) == 2  # the base and A's child: nothing of B's
