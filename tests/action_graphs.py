"""Graphs the action tests name by ``MODULE:ATTR`` (``--graph``), compiled without a
checkpointer: the dashboard and the CLI run them with their own saver."""

from __future__ import annotations

import operator
import threading
from typing import Annotated, Any

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt
from typing_extensions import TypedDict

from .cli.clikit import build_graph


class State(TypedDict, total=False):
    count: int
    answers: Annotated[list, operator.add]


approval = build_graph(None, ask=True)
"""START -> a -> b -> c -> ask (interrupts with {"question": "publish?", ...}) -> END."""

FAILING: set[str] = set()
"""Thread ids whose ``flaky`` node still fails; a failure removes the id (the next try
passes)."""
_lock = threading.Lock()


def _flaky(state: State, config: RunnableConfig) -> dict[str, Any]:
    thread = config["configurable"]["thread_id"]
    with _lock:
        if thread in FAILING:
            FAILING.discard(thread)
            raise RuntimeError(f"flaky failed on {thread}")
    return {"count": state.get("count", 0) + 10}


def _start(state: State) -> dict[str, Any]:
    return {"count": state.get("count", 0) + 1}


def _flaky_graph() -> Any:
    g = StateGraph(State)
    g.add_node("start", _start)
    g.add_node("flaky", _flaky)
    g.add_edge(START, "start")
    g.add_edge("start", "flaky")
    g.add_edge("flaky", END)
    return g.compile()


flaky = _flaky_graph()
"""START -> start (count + 1) -> flaky (fails once for a thread in FAILING; count + 10)."""


def _asker(name: str) -> Any:
    def ask(state: State) -> dict[str, Any]:
        return {"answers": [f"{name}={interrupt({'ask': name})}"]}
    return ask


def two_asks() -> Any:
    """A factory (called by --graph): START -> (left, right), each interrupting."""
    g = StateGraph(State)
    g.add_node("left", _asker("left"))
    g.add_node("right", _asker("right"))
    g.add_edge(START, "left")
    g.add_edge(START, "right")
    g.add_edge("left", END)
    g.add_edge("right", END)
    return g.compile()


GATE = threading.Event()
"""``gated``'s ``hold`` node waits for this (30 s at most)."""


def _hold(state: State) -> dict[str, Any]:
    if not GATE.wait(30):
        raise TimeoutError("the test did not open the gate")
    return {"count": state.get("count", 0) + 100}


def _gated_graph() -> Any:
    g = StateGraph(State)
    g.add_node("start", _start)
    g.add_node("hold", _hold)
    g.add_edge(START, "start")
    g.add_edge("start", "hold")
    g.add_edge("hold", END)
    return g.compile()


gated = _gated_graph()
"""START -> start (count + 1) -> hold (waits for GATE; count + 100)."""


APPROVAL_SCHEMA = {"type": "object", "required": ["approved"],
                   "properties": {"approved": {"type": "boolean"}}}
"""The JSON Schema ``schemed``'s interrupt asks its answer to match."""


def _schemed_ask(state: State) -> dict[str, Any]:
    answer = interrupt({"ask": "approve?"}, response_schema=APPROVAL_SCHEMA)
    return {"answers": [answer]}


def _schemed_graph() -> Any:
    g = StateGraph(State)
    g.add_node("ask", _schemed_ask)
    g.add_edge(START, "ask")
    g.add_edge("ask", END)
    return g.compile()


schemed = _schemed_graph()
"""START -> ask (interrupts with a response_schema: {"approved": bool} required)."""
