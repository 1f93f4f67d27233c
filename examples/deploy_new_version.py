"""Deploying a new version of your graph: a thread paused by v1 resumes under v2."""
import uuid
from typing import TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from langgraph_durable import STATE_VERSION_KEY, DurableSaver


class V1(TypedDict):  # yesterday's state
    steps: list[str]


class V2(TypedDict):  # today's: the plan and what was done of it
    plan: list[str]
    executed_steps: list[str]


def graph_v1() -> StateGraph:
    g = StateGraph(V1)
    g.add_node("plan", lambda s: {"steps": ["fetch", "report"]})
    g.add_node("review", lambda s: interrupt("approve?") and {})
    g.add_edge(START, "plan")
    g.add_edge("plan", "review")
    g.add_edge("review", END)
    return g


def graph_v2() -> StateGraph:
    g = StateGraph(V2)
    g.add_node("plan", lambda s: {"plan": ["fetch", "report"], "executed_steps": []})
    g.add_node("review", lambda s: interrupt("approve?") and {})
    g.add_node("execute", lambda s: {"executed_steps": list(s["plan"])})
    g.add_edge(START, "plan")
    g.add_edge("plan", "review")
    g.add_edge("review", "execute")
    g.add_edge("execute", END)
    return g


def migrate_v1_to_v2(values: dict) -> dict:
    """Channel values of version 1 -> version 2 (keep the keys you do not know)."""
    out = dict(values)
    if "steps" in out:
        out["plan"] = out.pop("steps")
        out["executed_steps"] = []
    return out


config = {"configurable": {"thread_id": f"deploy-{uuid.uuid4().hex[:8]}"}}

# yesterday's deploy: state version 1; the thread waits for a human over the deploy
with DurableSaver.from_conn_string(state_version=1) as saver:
    builder = graph_v1()
    builder.compile(checkpointer=saver).invoke({"steps": []}, config)

# today's deploy: version 2 and the migration from 1; the paused thread resumes under it
with DurableSaver.from_conn_string(state_version=2,
                                   state_migrations={1: migrate_v1_to_v2}) as saver:
    graph = graph_v2().compile(checkpointer=saver)
    print("before:", graph.get_state(config).values)
    print("after:", graph.invoke(Command(resume=True), config))
    print("stored as version", graph.get_state(config).metadata[STATE_VERSION_KEY])
