"""Graphs and migration registries of the ``migrate-state`` tests, importable by the CLI
as ``tests.cli.statekit:MIGRATIONS`` (``--migrations``).

v1 keeps ``steps``; v2 ``plan`` and ``executed_steps``. Both run two tasks from START
side by side: ``work`` (appends to ``log``, counted in ``RUNS``) and ``ask`` (interrupts
on a thread whose id contains "ask"), so a paused thread's latest checkpoint holds a
pending write of ``work`` besides the interrupt: a resume must not run ``work`` again."""

from __future__ import annotations

import operator
from collections import Counter
from typing import Annotated, Any, TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

from langgraph_durable import StateMigration

RUNS: Counter[str] = Counter()
"""Runs of ``work`` per thread, in this process."""


class V1(TypedDict, total=False):
    steps: list[str]
    log: Annotated[list[str], operator.add]
    answer: str


class V2(TypedDict, total=False):
    plan: list[str]
    executed_steps: list[str]
    log: Annotated[list[str], operator.add]
    answer: str


def _work(state: Any, config: RunnableConfig) -> dict[str, Any]:
    RUNS[config["configurable"]["thread_id"]] += 1
    return {"log": ["work"]}


def _ask(state: Any, config: RunnableConfig) -> dict[str, Any]:
    answer = ("auto" if "ask" not in config["configurable"]["thread_id"]
              else interrupt("go on?"))
    return {"answer": answer}


def graph(schema: type, saver: Any) -> Any:
    """START -> (work, ask) -> END over ``schema`` (``V1`` or ``V2``)."""
    g = StateGraph(schema)
    g.add_node("work", _work)
    g.add_node("ask", _ask)
    g.add_edge(START, "work")
    g.add_edge(START, "ask")
    g.add_edge("work", END)
    g.add_edge("ask", END)
    return g.compile(checkpointer=saver)


def v1_to_v2(values: dict[str, Any]) -> dict[str, Any]:
    """``steps`` becomes ``plan`` (none executed yet); other channels kept. A step named
    "boom" makes it raise (a migration that fails on some threads)."""
    out = {k: v for k, v in values.items() if k != "steps"}
    if "steps" in values:
        if "boom" in values["steps"]:
            raise ValueError("cannot plan 'boom'")
        out["plan"], out["executed_steps"] = list(values["steps"]), []
    return out


def _writes(writes: list[tuple[str, str, Any]]) -> list[tuple[str, str, Any]]:
    return [(t, "plan" if c == "steps" else c, v) for t, c, v in writes]


MIGRATIONS = {1: v1_to_v2}
"""The application's registry: 1 -> 2."""

WITH_WRITES = {1: StateMigration(values=v1_to_v2, writes=_writes)}
"""The same with a hook for pending writes."""

NOT_A_REGISTRY = [v1_to_v2]


def parent_graph(schema: type, saver: Any) -> Any:
    """START -> sub -> END, ``sub`` being ``graph(schema)`` as a subgraph (its own
    checkpoint namespace)."""
    g = StateGraph(schema)
    g.add_node("sub", graph(schema, None))
    g.add_edge(START, "sub")
    g.add_edge("sub", END)
    return g.compile(checkpointer=saver)
