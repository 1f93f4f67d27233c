"""Two runs on one thread at once: the second is refused with ConcurrentRunError (nothing
written, the first run's messages intact) unless on_concurrent_run="fork"."""

from __future__ import annotations

import threading

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import END, START, MessagesState, StateGraph

from langgraph_durable import ConcurrentRunError, DurableSaver
from langgraph_durable.testing import unique_options

CFG = {"configurable": {"thread_id": "shared"}}


class MeetingSaver(DurableSaver):
    """Holds each run's first put until both runs have read the thread's latest checkpoint,
    as two processes starting at the same moment would."""

    barrier: threading.Barrier | None = None

    def put(self, config, checkpoint, metadata, new_versions):  # type: ignore[override]
        if self.barrier is not None and metadata.get("source") == "input":
            self.barrier.wait(timeout=10)
        return super().put(config, checkpoint, metadata, new_versions)


def slow_graph(_barrier: threading.Barrier | None = None):
    def reply(state: MessagesState) -> dict:
        return {"messages": [AIMessage(content=f"re: {state['messages'][-1].content}")]}

    g = StateGraph(MessagesState)
    g.add_node("reply", reply)
    g.add_edge(START, "reply")
    g.add_edge("reply", END)
    return g


def run_twice(redis_url: str, mongo_url: str, **options: object) -> tuple[list, list, list]:
    opts = unique_options(**options)
    barrier = threading.Barrier(2)
    a = MeetingSaver.from_urls(redis_url, mongo_url, **opts)  # two processes' savers
    b = MeetingSaver.from_urls(redis_url, mongo_url, **opts)
    with a, b:
        first = slow_graph(threading.Barrier(1)).compile(checkpointer=a)
        first.invoke({"messages": [HumanMessage(content="hello")]}, CFG)
        a.barrier = b.barrier = barrier
        results: dict[str, object] = {}

        def invoke(name: str, saver: DurableSaver) -> None:
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


def test_second_concurrent_run_is_refused_and_the_first_is_intact(redis_url, mongo_url) -> None:
    results, messages, history = run_twice(redis_url, mongo_url)
    outcomes = sorted("ok" if r == "ok" else type(r).__name__ for r in results.values())
    assert outcomes == ["ConcurrentRunError", "ok"]
    winner = next(n for n, r in results.items() if r == "ok")
    assert messages == ["hello", "re: hello", winner, f"re: {winner}"]
    loser = next(r for r in results.values() if r != "ok")
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


def test_fork_mode_keeps_both_runs_as_sibling_branches(redis_url, mongo_url) -> None:
    results, messages, history = run_twice(redis_url, mongo_url, on_concurrent_run="fork")
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
