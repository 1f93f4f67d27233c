"""Helpers of the CLI tests: ``Cli`` invokes ``langgraph-durable`` (typer's CliRunner)
against the real servers with a key prefix and database of its own; ``build_graph``
builds a small LangGraph."""

from __future__ import annotations

import json
import operator
from collections.abc import Callable
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import interrupt
from typer.testing import CliRunner

from langgraph_durable import DurableSaver
from langgraph_durable.cli import app
from langgraph_durable.testing import unique_options


class State(TypedDict):
    messages: Annotated[list, add_messages]
    notes: dict
    count: int
    log: Annotated[list, operator.add]


def _node(name: str) -> Callable[[State], dict[str, Any]]:
    def run(state: State) -> dict[str, Any]:
        n = state["count"] + 1
        return {"messages": [AIMessage(f"{name} says {n}", id=f"{name}-{n}")],
                "notes": {**state["notes"], name: n}, "count": n, "log": [name]}
    return run


def _ask(state: State) -> dict[str, Any]:
    answer = interrupt({"question": "publish?", "count": state["count"]})
    return {"notes": {**state["notes"], "answer": answer}, "log": ["ask"]}


def build_graph(saver: Any, *, ask: bool = False) -> Any:
    """START -> a -> b -> c (-> ask, which interrupts) -> END."""
    g = StateGraph(State)
    names = ["a", "b", "c"]
    for name in names:
        g.add_node(name, _node(name))
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    g.add_edge("b", "c")
    if ask:
        g.add_node("ask", _ask)
        g.add_edge("c", "ask")
        g.add_edge("ask", END)
    else:
        g.add_edge("c", END)
    return g.compile(checkpointer=saver)


def first_input() -> dict[str, Any]:
    return {"messages": [HumanMessage("hello", id="h-0")], "notes": {}, "count": 0, "log": []}


class Cli:
    """Runs the CLI with this test's servers and options."""

    def __init__(self, redis_url: str, mongo_url: str) -> None:
        self.opts = unique_options()
        self.redis_url, self.mongo_url = redis_url, mongo_url
        self.env = {"REDIS_URL": redis_url, "MONGODB_URL": mongo_url, "COLUMNS": "250",
                    "LGD_KEY_PREFIX": self.opts["key_prefix"],
                    "LGD_DATABASE": self.opts["database"]}

    def __call__(self, *args: str, input: str | None = None, code: int = 0) -> Any:
        result = CliRunner().invoke(app, list(args), env=self.env, input=input)
        assert result.exit_code == code, (result.exit_code, result.output, result.exception)
        return result

    def json(self, *args: str) -> Any:
        return json.loads(self(*args, "--json").stdout)

    def saver(self, **options: Any) -> DurableSaver:
        return DurableSaver.from_urls(self.redis_url, self.mongo_url,
                                      **{**self.opts, **options})
