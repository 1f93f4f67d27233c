"""Deterministic graphs the fault scenarios run, and their uninterrupted references.

``build_flow``: a multi-step workflow, ``ROUNDS`` rounds of

    plan -> worker x WORKERS (Send fan-out, one superstep) -> merge -> audit (a subgraph:
    its checkpoints live in their own checkpoint_ns) -> plan ... -> report

so a run makes ~25 ``put`` and ~30 ``put_writes`` calls over three namespaces' worth of
checkpoints, with parallel tasks whose writes are pending together. Every node is a pure
function of the state, so a run resumed after any crash must end in the same state as an
uninterrupted one. Each node may sleep ``step_s`` seconds (so kills land mid-run) and calls
``NODE_HOOK`` first (the child's "between steps" kill point).

``build_chat``: one node that answers the last user message after ``step_s`` seconds, for
concurrent runs on one thread.
"""

from __future__ import annotations

import hashlib
import json
import operator
import time
from collections.abc import Callable
from typing import Annotated, Any

from langgraph.graph import END, START, StateGraph
from langgraph.types import Send
from typing_extensions import TypedDict

ROUNDS = 3
WORKERS = 3
PAYLOAD_BYTES = 1500
"""Size of each worker's result text, so checkpoints and writes are not trivially small."""

NODE_HOOK: Callable[[str], None] | None = None
"""Called with the node name at the start of every node execution (child kill hook)."""


class Flow(TypedDict, total=False):
    topic: str
    round: int
    log: Annotated[list[str], operator.add]
    results: Annotated[list[dict[str, Any]], operator.add]
    audits: Annotated[list[str], operator.add]
    summary: dict[str, Any]


class Audit(TypedDict, total=False):
    round: int
    n: int
    audits: Annotated[list[str], operator.add]


def _digest(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


def _enter(name: str, step_s: float) -> None:
    if NODE_HOOK is not None:
        NODE_HOOK(name)
    if step_s > 0:
        time.sleep(step_s)


def build_flow(checkpointer: Any, *, step_s: float = 0.0, subgraph: bool = True) -> Any:
    """The workflow graph compiled with ``checkpointer`` (see the module docstring).
    ``subgraph=False`` runs the audit as one plain node instead (same final state, no
    checkpoints in another namespace)."""

    def plan(state: Flow) -> dict[str, Any]:
        _enter("plan", step_s)
        r = state.get("round", 0) + 1
        return {"round": r, "log": [f"plan {r} of {state['topic']}"]}

    def fan_out(state: Flow) -> list[Send]:
        return [Send("worker", {"topic": state["topic"], "round": state["round"], "w": w})
                for w in range(WORKERS)]

    def worker(arg: dict[str, Any]) -> dict[str, Any]:
        _enter("worker", step_s)
        d = _digest(arg["topic"], arg["round"], arg["w"])
        text = (d * (PAYLOAD_BYTES // len(d) + 1))[:PAYLOAD_BYTES]
        return {"results": [{"round": arg["round"], "w": arg["w"], "digest": d, "text": text}]}

    def merge(state: Flow) -> dict[str, Any]:
        _enter("merge", step_s)
        mine = [x["digest"] for x in state["results"] if x["round"] == state["round"]]
        return {"log": [f"merge {state['round']}: {len(mine)} results {_digest(mine)}"]}

    def audit_check(state: Audit) -> dict[str, Any]:
        _enter("audit_check", step_s)
        return {"audits": [f"round {state['round']} checked {state['n']}"]}

    def audit_sign(state: Audit) -> dict[str, Any]:
        _enter("audit_sign", step_s)
        return {"audits": [f"round {state['round']} signed {_digest(state['audits'])}"]}

    sub = StateGraph(Audit)
    sub.add_node("check", audit_check)
    sub.add_node("sign", audit_sign)
    sub.add_edge(START, "check")
    sub.add_edge("check", "sign")
    sub.add_edge("sign", END)

    audit_graph = sub.compile()

    def audit(state: Flow) -> dict[str, Any]:
        arg = {"round": state["round"], "audits": [],
               "n": sum(1 for x in state["results"] if x["round"] == state["round"])}
        if subgraph:  # a subgraph call: its checkpoints get their own checkpoint_ns
            return {"audits": audit_graph.invoke(arg)["audits"]}
        out = audit_check(arg)
        signed = audit_sign({"round": state["round"], "audits": out["audits"]})
        return {"audits": out["audits"] + signed["audits"]}

    def report(state: Flow) -> dict[str, Any]:
        _enter("report", step_s)
        body = {"rounds": state["round"], "results": len(state["results"]),
                "audits": state["audits"], "log": state["log"]}
        return {"summary": {**body, "digest": _digest(body, state["results"])}}

    def again(state: Flow) -> str:
        return "plan" if state["round"] < ROUNDS else "report"

    b = StateGraph(Flow)
    b.add_node("plan", plan)
    b.add_node("worker", worker)
    b.add_node("merge", merge)
    b.add_node("audit", audit)
    b.add_node("report", report)
    b.add_edge(START, "plan")
    b.add_conditional_edges("plan", fan_out, ["worker"])
    b.add_edge("worker", "merge")
    b.add_edge("merge", "audit")
    b.add_conditional_edges("audit", again, ["plan", "report"])
    b.add_edge("report", END)
    return b.compile(checkpointer=checkpointer)


def flow_input(topic: str = "tides") -> dict[str, Any]:
    return {"topic": topic, "round": 0, "log": [], "results": [], "audits": []}


def canonical(values: Any) -> str:
    """A stable text form of a state (what "final state equal" compares)."""
    return json.dumps(values, sort_keys=True, default=repr)


def flow_reference(topic: str = "tides", subgraph: bool = True) -> str:
    """Final state of an uninterrupted run on InMemorySaver (canonical form)."""
    from langgraph.checkpoint.memory import InMemorySaver

    graph = build_flow(InMemorySaver(), subgraph=subgraph)
    cfg = {"configurable": {"thread_id": "reference"}}
    graph.invoke(flow_input(topic), cfg)
    return canonical(graph.get_state(cfg).values)


def count_calls(durability: str, topic: str = "tides") -> dict[str, int]:
    """How many put / put_writes calls an uninterrupted run makes (InMemorySaver)."""
    from langgraph.checkpoint.memory import InMemorySaver

    counts = {"put": 0, "put_writes": 0}

    class Counting(InMemorySaver):
        def put(self, *a: Any, **k: Any) -> Any:
            counts["put"] += 1
            return super().put(*a, **k)

        def put_writes(self, *a: Any, **k: Any) -> Any:
            counts["put_writes"] += 1
            return super().put_writes(*a, **k)

    graph = build_flow(Counting())
    graph.invoke(flow_input(topic), {"configurable": {"thread_id": "count"}},
                 durability=durability)
    return counts


# --------------------------------------------------------------------------- chat


class Chat(TypedDict, total=False):
    messages: Annotated[list[str], operator.add]


def build_chat(checkpointer: Any, *, step_s: float = 0.0) -> Any:
    """user message in -> bot answers it (after ``step_s`` seconds)."""

    def bot(state: Chat) -> dict[str, Any]:
        if step_s > 0:
            time.sleep(step_s)
        last = state["messages"][-1]
        return {"messages": [f"bot: answered <{last}> after {len(state['messages'])} messages"]}

    b = StateGraph(Chat)
    b.add_node("bot", bot)
    b.add_edge(START, "bot")
    b.add_edge("bot", END)
    return b.compile(checkpointer=checkpointer)
