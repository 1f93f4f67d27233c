"""Real LangGraph graphs and scripted runs for the graph-level equivalence tests.

A *script* is a generator that yields ``Call``s (a graph method, its arguments) and
receives each call's result, so one script drives a graph through the sync API
(``invoke``) and the async API (``ainvoke``) alike. It may also yield ``COLD``: a point
where a DurableSaver run moves everything to MongoDB and empties Redis (a no-op for
InMemorySaver and in hot runs). Builders make a fresh graph (and fresh scripted model)
for each run.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Annotated, Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.channels import DeltaChannel
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.types import Command, Send, interrupt
from typing_extensions import TypedDict

THREAD = "thread-1"
CONFIG: dict[str, Any] = {"configurable": {"thread_id": THREAD}}


@dataclass
class Call:
    """One graph method call; ``stream``/``get_state_history`` results become lists.

    ``parallel``: stream chunks of tasks running in one superstep arrive in completion
    order (thread timing, with any saver), so each run of chunks of one node is sorted.
    """

    method: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    parallel: bool = False


COLD = object()
Script = Callable[[], Generator[Any, Any, None]]


def invoke(inp: Any, config: Any = CONFIG, **kw: Any) -> Call:
    return Call("invoke", (inp, config), kw)


def stream_updates(inp: Any, config: Any = CONFIG, *, parallel: bool = False) -> Call:
    return Call("stream", (inp, config), {"stream_mode": "updates"}, parallel)


# ---------------------------------------------------------------- (1) tool-calling agent


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def multiply(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


def _call(name: str, cid: str, **args: int) -> dict[str, Any]:
    return {"name": name, "args": args, "id": cid, "type": "tool_call"}


def build_agent(checkpointer: Any) -> Any:
    """agent <-> tools (ToolNode) until the scripted model answers without tool calls."""
    model = GenericFakeChatModel(messages=iter([
        AIMessage("", id="ai-1", tool_calls=[_call("add", "c1", a=2, b=3)]),
        AIMessage("2 + 3 = 5", id="ai-2"),
        AIMessage("", id="ai-3", tool_calls=[_call("multiply", "c2", a=4, b=5),
                                             _call("add", "c3", a=1, b=1)]),
        AIMessage("20 and 2", id="ai-4"),
        AIMessage("bye", id="ai-5"),
    ]))

    tool_node = ToolNode([add, multiply])

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    def tools(state: MessagesState) -> dict[str, Any]:
        # ToolNode's ToolMessages have no id; add_messages then gives them a random one by
        # mutating the message, racing with the background put_writes that serializes it
        # (so a stored write may or may not carry the id, with any saver): name them.
        out = tool_node.invoke(state)
        return {"messages": [m.model_copy(update={"id": f"tool-{m.tool_call_id}"})
                             for m in out["messages"]]}

    b = StateGraph(MessagesState)
    b.add_node("agent", agent)
    b.add_node("tools", tools)
    b.add_edge(START, "agent")
    b.add_conditional_edges("agent", tools_condition)
    b.add_edge("tools", "agent")
    return b.compile(checkpointer=checkpointer)


def agent_script() -> Generator[Any, Any, None]:
    yield invoke({"messages": [HumanMessage("2+3?", id="h-1")]})
    yield COLD
    yield stream_updates({"messages": [HumanMessage("4*5 and 1+1?", id="h-2")]})
    yield COLD
    yield invoke({"messages": [HumanMessage("thanks", id="h-3")]})


# ---------------------------------------------------------------- (2) interrupt + resume


class ReviewState(TypedDict, total=False):
    draft: str
    log: Annotated[list[str], operator.add]


def build_review(checkpointer: Any) -> Any:
    """write -> review (interrupt: edit instruction) -> confirm (interrupt: yes/no)."""

    def write(state: ReviewState) -> dict[str, Any]:
        return {"draft": f"draft of {state['draft']}", "log": ["write"]}

    def review(state: ReviewState) -> dict[str, Any]:
        edit = interrupt({"question": "edit?", "draft": state["draft"]})
        return {"draft": f"{state['draft']} ({edit})", "log": [f"review:{edit}"]}

    def confirm(state: ReviewState) -> dict[str, Any]:
        ok = interrupt({"question": "publish?"})
        return {"log": [f"confirm:{ok}"]}

    b = StateGraph(ReviewState)
    for name, fn in (("write", write), ("review", review), ("confirm", confirm)):
        b.add_node(name, fn)
    b.add_edge(START, "write")
    b.add_edge("write", "review")
    b.add_edge("review", "confirm")
    b.add_edge("confirm", END)
    return b.compile(checkpointer=checkpointer)


def review_script() -> Generator[Any, Any, None]:
    yield invoke({"draft": "memo", "log": []})
    yield COLD
    yield Call("get_state", (CONFIG,))
    yield stream_updates(Command(resume="shorter"))
    yield COLD
    yield invoke(Command(resume=True))


# ---------------------------------------------------------------- (3) subgraph


class ChildState(TypedDict, total=False):
    topic: str
    answer: str


class OuterState(ChildState, total=False):
    notes: Annotated[list[str], operator.add]


def build_nested(checkpointer: Any) -> Any:
    """prepare -> child (subgraph: ask (interrupt) -> check) -> report."""
    sub = StateGraph(ChildState)
    sub.add_node("ask", lambda s: {"answer": interrupt({"topic": s["topic"]})})
    sub.add_node("check", lambda s: {"answer": f"{s['answer']} (checked)"})
    sub.add_edge(START, "ask")
    sub.add_edge("ask", "check")

    b = StateGraph(OuterState)
    b.add_node("prepare", lambda s: {"notes": [f"prepared {s['topic']}"]})
    b.add_node("child", sub.compile())
    b.add_node("report", lambda s: {"notes": [f"answer: {s['answer']}"]})
    b.add_edge(START, "prepare")
    b.add_edge("prepare", "child")
    b.add_edge("child", "report")
    return b.compile(checkpointer=checkpointer)


def nested_script() -> Generator[Any, Any, None]:
    yield invoke({"topic": "tides", "notes": []})
    yield COLD
    yield Call("get_state", (CONFIG,), {"subgraphs": True})
    yield stream_updates(Command(resume="moon"))


# ---------------------------------------------------------------- (4) Send fan-out


class FanState(TypedDict, total=False):
    topics: list[str]
    results: Annotated[list[str], operator.add]
    summary: str


def build_fanout(checkpointer: Any) -> Any:
    """START -(Send per topic)-> work (parallel) -> summarize."""
    b = StateGraph(FanState)
    b.add_node("work", lambda s: {"results": [f"{s['topic']}!"]})
    b.add_node("summarize", lambda s: {"summary": ", ".join(s["results"])})
    b.add_conditional_edges(START, lambda s: [Send("work", {"topic": t}) for t in s["topics"]])
    b.add_edge("work", "summarize")
    return b.compile(checkpointer=checkpointer)


def fanout_script() -> Generator[Any, Any, None]:
    yield stream_updates({"topics": ["a", "b", "c"]}, parallel=True)
    yield COLD
    yield invoke({"topics": ["d", "e"]})


# ---------------------------------------------------------------- (5) update_state + forks


class TrailState(TypedDict, total=False):
    trail: Annotated[list[str], operator.add]


def build_chain(checkpointer: Any) -> Any:
    """a -> b -> c, each appending its name to ``trail``."""
    b = StateGraph(TrailState)
    for name in "abc":
        b.add_node(name, lambda s, name=name: {"trail": [name]})
    b.add_edge(START, "a")
    b.add_edge("a", "b")
    b.add_edge("b", "c")
    return b.compile(checkpointer=checkpointer)


def fork_script() -> Generator[Any, Any, None]:
    yield invoke({"trail": ["start"]})
    history = yield Call("get_state_history", (CONFIG,))
    before_b = next(s.config for s in history if s.next == ("b",))
    yield COLD
    edited = yield Call("update_state", (before_b, {"trail": ["edited"]}), {"as_node": "a"})
    yield invoke(None, edited)  # branch 1: continue after the edit
    yield COLD
    yield invoke(None, before_b)  # branch 2: replay from the old checkpoint
    yield Call("update_state", (CONFIG, {"trail": ["note"]}))  # on the latest


# ---------------------------------------------------------------- (6) DeltaChannel


def extend(state: list[str], writes: list[list[str]]) -> list[str]:
    """Batching-invariant DeltaChannel reducer: concatenation."""
    return [*state, *(x for w in writes for x in w)]


class DeltaState(TypedDict, total=False):
    n: int
    log: Annotated[list[str], DeltaChannel(extend, snapshot_frequency=3)]


def build_delta(checkpointer: Any) -> Any:
    """step loops until n reaches a multiple of 7, appending to a DeltaChannel log."""

    def step(state: DeltaState) -> dict[str, Any]:
        n = state["n"] + 1
        return {"n": n, "log": [f"s{n}"]}

    b = StateGraph(DeltaState)
    b.add_node("step", step)
    b.add_edge(START, "step")
    b.add_conditional_edges("step", lambda s: END if s["n"] % 7 == 0 else "step")
    return b.compile(checkpointer=checkpointer)


def delta_script() -> Generator[Any, Any, None]:
    yield invoke({"n": 0, "log": ["go"]})
    yield COLD
    yield invoke({"log": ["again"]})
    yield Call("update_state", (CONFIG, {"log": ["manual"]}))


def delta_exit_script() -> Generator[Any, Any, None]:
    """durability="exit" stores a run's DeltaChannel writes under synthetic task ids."""
    yield invoke({"n": 0, "log": ["go"]}, durability="exit")
    yield COLD
    yield invoke({"log": ["again"]}, durability="exit")
    yield invoke({"log": ["more"]}, durability="async")


# ---------------------------------------------------------------- (7) durability modes


def durability_script() -> Generator[Any, Any, None]:
    yield invoke({"trail": ["sync"]}, durability="sync")
    yield invoke({"trail": ["async"]}, durability="async")
    yield COLD
    yield invoke({"trail": ["exit"]}, durability="exit")


SCENARIOS: dict[str, tuple[Callable[[Any], Any], Script]] = {
    "tool_calling_agent_over_three_turns": (build_agent, agent_script),
    "interrupt_then_two_resumes": (build_review, review_script),
    "subgraph_interrupted_then_resumed": (build_nested, nested_script),
    "send_fan_out_with_reducer": (build_fanout, fanout_script),
    "update_state_and_forks_from_old_checkpoint": (build_chain, fork_script),
    "delta_channel_with_snapshots": (build_delta, delta_script),
    "delta_channel_in_exit_durability": (build_delta, delta_exit_script),
    "durability_sync_async_exit": (build_chain, durability_script),
}


def build_answering(checkpointer: Any, mutate: Callable[[list[Any]], None] | None = None,
                    chars: int = 0) -> Any:
    """One node appending ``AIMessage("answer <n>" + "x" * chars, id="ai-<n>")`` (n = the
    number of messages so far); ``mutate`` first changes the messages in place, as user
    code may. Message histories of known ids, for the item-store tests."""

    def agent(state: MessagesState) -> dict[str, Any]:
        if mutate is not None:
            mutate(state["messages"])
        n = len(state["messages"])
        return {"messages": [AIMessage(f"answer {n}" + ("x" * chars and " " + "x" * chars),
                                       id=f"ai-{n}")]}

    b = StateGraph(MessagesState)
    b.add_node("agent", agent)
    b.add_edge(START, "agent")
    return b.compile(checkpointer=checkpointer)
