"""The graph of the Agent Server example: a two-node loop that counts to ``goal`` and
asks (``interrupt()``) when the count reaches ``ask_at``. No LLM, no network.

Input ``{"goal": 5, "ask_at": 2}``: ``count`` adds one, ``check`` interrupts at 2 with
``{"question": ..., "count": 2}``; resume with ``Command(resume=<answer>)`` (the SDK's
``command={"resume": ...}``) and it counts on to 5. ``log`` records every step.

The ``memory`` graph keeps memories in the store of ``langgraph.json`` (``DurableStore``):
input ``{"user": "ada", "remember": "likes tea"}`` puts one under ``("memories", "ada")``;
any run, in any thread, returns every memory of that user as ``found``.
"""

from __future__ import annotations

import operator
import uuid
from typing import Annotated, Any

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import interrupt
from typing_extensions import TypedDict


class Counter(TypedDict, total=False):
    """The state: the count so far, where to stop, where to ask, and what happened."""

    count: int
    goal: int
    ask_at: int
    log: Annotated[list[str], operator.add]


def count(state: Counter) -> dict[str, Any]:
    """Add one to ``count``."""
    n = state.get("count", 0) + 1
    return {"count": n, "log": [f"count {n}"]}


def check(state: Counter) -> dict[str, Any]:
    """Ask (``interrupt``) when the count reaches ``ask_at``; record the answer."""
    n = state["count"]
    if n == state.get("ask_at"):
        answer = interrupt({"question": f"the count is {n}: go on?", "count": n})
        return {"log": [f"asked at {n}: {answer}"]}
    return {}


def next_step(state: Counter) -> str:
    """Back to ``count`` until ``goal`` (default 3) is reached."""
    return END if state["count"] >= state.get("goal", 3) else "count"


builder = StateGraph(Counter)
builder.add_node("count", count)
builder.add_node("check", check)
builder.add_edge(START, "count")
builder.add_edge("count", "check")
builder.add_conditional_edges("check", next_step, ["count", END])
graph = builder.compile()  # the Agent Server gives it the checkpointer of langgraph.json


class Memo(TypedDict, total=False):
    """The state of the ``memory`` graph: whose memories, one to keep, and what was found."""

    user: str
    remember: str
    found: list[str]


async def memorize(state: Memo, runtime: Runtime[Any]) -> dict[str, Any]:
    """Put ``remember`` (if given) in the store under ``("memories", user)``; then search
    that namespace (in any thread) and return every memory's text as ``found``."""
    store = runtime.store
    assert store is not None, "the Agent Server gives the graph the store of langgraph.json"
    namespace = ("memories", state["user"])
    if state.get("remember"):
        await store.aput(namespace, str(uuid.uuid4()), {"text": state["remember"]})
    items = await store.asearch(namespace, limit=100)
    return {"found": sorted(item.value["text"] for item in items)}


memory_builder = StateGraph(Memo)
memory_builder.add_node("memorize", memorize)
memory_builder.add_edge(START, "memorize")
memory = memory_builder.compile()  # and the store of langgraph.json
