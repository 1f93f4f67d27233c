"""Writes notebooks/time_travel.ipynb from the cell sources below.

Run it after editing the cells: ``.venv/bin/python scripts/nb_time_travel.py``.
tests/test_notebooks.py executes the written notebook top to bottom against real servers.
"""

from __future__ import annotations

from nbkit import SERVERS, cli_helper, write

NAME = "time_travel"

CELLS = [
    ("md", """# Time travel: history, diff and fork

Every super-step of a LangGraph thread is a checkpoint; `DurableSaver` keeps them all (in
Redis while hot, in MongoDB for good). This notebook walks a trip-planning thread's
history, compares two checkpoints with `langgraph-durable diff`, and forks the thread at an
earlier checkpoint into a new thread that takes another turn, leaving the original intact.

The servers come from `langgraph_durable.testing`: `REDIS_URL` / `MONGODB_URL` when set,
otherwise local `redis-server` and SecantusDB processes on free ports."""),
    ("code", """%matplotlib inline
import os, subprocess, sys, uuid
from contextlib import ExitStack

from langgraph_durable.testing import mongo_server, redis_server

""" + SERVERS + """
options = {"key_prefix": "nbtt" + uuid.uuid4().hex[:6],
           "database": "nb_time_travel_" + uuid.uuid4().hex[:6]}
""" + cli_helper(140)),
    ("md", """## A trip planner

A deterministic "planner" node answers each request and records decisions in a `plan`
dict, so the diffs below are about messages *and* keys."""),
    ("code", """from typing import Annotated, TypedDict

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

DECISIONS = {
    "lisbon": {"city": "Lisbon", "nights": 3},
    "sintra": {"day_trip": "Sintra"},
    "cheaper": {"hotel": "guesthouse", "budget_eur": 450},
    "train": {"transport": "train"},
    "porto": {"city": "Porto", "day_trip": "Douro valley"},
}


class Trip(TypedDict):
    messages: Annotated[list, add_messages]
    plan: dict


def planner(state: Trip):
    request = state["messages"][-1].content
    key = next(k for k in DECISIONS if k in request.lower())
    plan = {**state.get("plan", {}), **DECISIONS[key]}
    turn = sum(isinstance(m, HumanMessage) for m in state["messages"])
    reply = AIMessage(f"Updated the plan: {', '.join(f'{k}={v}' for k, v in plan.items())}",
                      id=f"ai-{turn}-{key}")
    return {"messages": [reply], "plan": plan}


builder = StateGraph(Trip)
builder.add_node("planner", planner)
builder.add_edge(START, "planner")
builder.add_edge("planner", END)"""),
    ("code", """from langgraph_durable import DurableSaver

config = {"configurable": {"thread_id": "trip-1"}}
requests = ["Plan three nights in Lisbon", "Add a day in Sintra", "Make it cheaper",
            "Go everywhere by train"]
with DurableSaver.from_urls(redis_srv.url, mongo_srv.url, **options) as saver:
    graph = builder.compile(checkpointer=saver)
    for i, text in enumerate(requests):
        graph.invoke({"messages": [HumanMessage(text, id=f"human-{i + 1}")]}, config)
    history = list(graph.get_state_history(config))
for snap in history:
    print(snap.metadata["step"], snap.metadata["source"], len(snap.values.get("messages", [])),
          "messages", snap.values.get("plan"))"""),
    ("md", """## The history, from the store

`langgraph-durable history` lists the checkpoints, newest first (`--limit`/`--before` page
through long threads):"""),
    ("code", """cli("history", "trip-1", "--limit", "6");"""),
    ("md", """## What changed between two checkpoints

From the end of the first turn to the end of the third: two requests and two answers were
added to `messages`; `plan` gained `day_trip`, `hotel` and `budget_eur`."""),
    ("code", """by_step = {s.metadata["step"]: s.config["configurable"]["checkpoint_id"]
           for s in history}
after_turn = {1: by_step[1], 2: by_step[4], 3: by_step[7], 4: by_step[10]}
cli("diff", "trip-1", after_turn[1], after_turn[3]);"""),
    ("md", """## Fork: a new thread from the end of turn 2

`langgraph-durable fork` writes a new thread whose latest checkpoint holds exactly the
state of the chosen checkpoint (metadata `source="fork"`). The new thread then takes a
different third turn; the original thread is unchanged."""),
    ("code", """cli("fork", "trip-1", "--checkpoint", after_turn[2], "--to", "trip-1-porto")
with DurableSaver.from_urls(redis_srv.url, mongo_srv.url, **options) as saver:
    graph = builder.compile(checkpointer=saver)
    alt = {"configurable": {"thread_id": "trip-1-porto"}}
    graph.invoke({"messages": [HumanMessage("Switch to Porto instead", id="human-3b")]}, alt)
    fork_history = list(graph.get_state_history(alt))
    original = graph.get_state(config).values["plan"]
print("original:", original)
print("fork:    ", fork_history[0].values["plan"])
assert original["city"] == "Lisbon" and fork_history[0].values["plan"]["city"] == "Porto"
cli("threads");"""),
    ("md", """## Both timelines

One lane per thread, one dot per checkpoint (colour: its `source`; size: messages in the
state). The fork starts from turn 2's state and goes its own way."""),
    ("code", """import matplotlib.pyplot as plt
from matplotlib.lines import Line2D

colors = {"input": "tab:green", "loop": "tab:blue", "fork": "tab:red"}
fig, ax = plt.subplots(figsize=(9, 2.8))
for y, (name, snaps) in enumerate([("trip-1-porto", fork_history), ("trip-1", history)]):
    pts = sorted((s.metadata["step"], s) for s in snaps)
    ax.plot([x for x, _ in pts], [y] * len(pts), color="lightgray", zorder=1)
    for x, snap in pts:
        ax.scatter(x, y, s=40 + 30 * len(snap.values.get("messages", [])),
                   color=colors[snap.metadata["source"]], zorder=2)
    plan = pts[-1][1].values["plan"]
    ax.text(pts[-1][0] + 0.6, y, f"{name}: {plan['city']}, {plan.get('day_trip')}",
            va="center")
fork_step = fork_history[-1].metadata["step"]
ax.annotate("", xy=(fork_step, 0.12), xytext=(fork_step, 0.88),
            arrowprops={"arrowstyle": "->", "color": "tab:red"})
ax.set_yticks([])
ax.set_ylim(-0.6, 1.6)
ax.set_xlim(-1.5, 15)
ax.set_xlabel("step")
ax.legend(handles=[Line2D([], [], marker="o", linestyle="", color=c, label=k)
                   for k, c in colors.items()], loc="upper left", ncol=3, fontsize=8)
ax.set_title("trip-1 and its fork at the end of turn 2")
plt.tight_layout()
plt.show()"""),
    ("code", """cli("delete", "trip-1", "trip-1-porto", "--yes")
from langgraph_durable.testing import drop_namespace

drop_namespace(redis_srv.url, mongo_srv.url, options["key_prefix"], options["database"])
servers.close()"""),
]




if __name__ == "__main__":
    print(write(NAME, CELLS))
