"""Writes notebooks/crash_and_resume.ipynb from the cell sources below.

Run it after editing the cells: ``.venv/bin/python scripts/nb_crash_and_resume.py``.
tests/test_notebooks.py executes the written notebook top to bottom against real servers.
"""

from __future__ import annotations

from nbkit import SERVERS, write

NAME = "crash_and_resume"

CELLS = [
    ("md", """# Crash and resume: SIGKILL a run, resume it in a new process

A six-node LangGraph pipeline runs in a **child process** with `DurableSaver`. We kill that
process with SIGKILL in the middle of its fourth node, look at what the store holds (with
the `langgraph-durable` CLI), resume the thread in a **second process**, and check from an
execution log that no completed node ran twice and that the result equals an uninterrupted
run. `make demo` (`examples/crash_demo.py`) does the same with a bigger agent.

The servers come from `langgraph_durable.testing`: `REDIS_URL` / `MONGODB_URL` when set,
otherwise local `redis-server` and SecantusDB processes on free ports."""),
    ("code", """%matplotlib inline
import json, os, shutil, subprocess, sys, tempfile, time, uuid
from contextlib import ExitStack
from pathlib import Path

from langgraph_durable.testing import mongo_server, redis_server

""" + SERVERS + """
prefix, database = "nbcrash" + uuid.uuid4().hex[:6], "nb_crash_" + uuid.uuid4().hex[:6]
work = Path(tempfile.mkdtemp(prefix="lgd-nb-crash-"))
print(redis_srv.url, mongo_srv.url, prefix, database)"""),
    ("md", """## The child program

Each node sleeps `NB_STEP_S` seconds and appends `start`/`end` events with its process id
to a JSON Lines log, so re-runs can be counted across processes. `durability="sync"`: a
step's checkpoint is stored before the next step starts."""),
    ("code", '''CHILD = r"""
import json, operator, os, sys, time
from typing import Annotated, TypedDict

from langgraph.graph import END, START, StateGraph

from langgraph_durable import DurableSaver

WORDS = "The quick brown fox jumps over the lazy dog while the fox naps".split()


class State(TypedDict):
    text: list
    done: Annotated[list, operator.add]
    result: dict


def log(node, event):
    with open(os.environ["NB_LOG"], "a") as f:
        f.write(json.dumps({"node": node, "pid": os.getpid(), "event": event,
                            "t": time.time()}) + "\\n")


STEPS = {
    "fetch": lambda s: {"text": WORDS},
    "clean": lambda s: {"text": [w.lower() for w in s["text"] if len(w) > 2]},
    "count": lambda s: {"result": {w: s["text"].count(w) for w in sorted(set(s["text"]))}},
    "rank": lambda s: {"result": dict(sorted(s["result"].items(), key=lambda kv: -kv[1]))},
    "top": lambda s: {"result": dict(list(s["result"].items())[:3])},
    "report": lambda s: {"result": {**s["result"], "report": " > ".join(s["result"])}},
}


def node(name):
    def run(state):
        log(name, "start")
        time.sleep(float(os.environ.get("NB_STEP_S", "0")))
        out = STEPS[name](state)
        log(name, "end")
        return {**out, "done": [name]}
    return run


def build(saver):
    g = StateGraph(State)
    names = list(STEPS)
    for n in names:
        g.add_node(n, node(n))
    g.add_edge(START, names[0])
    for a, b in zip(names, names[1:]):
        g.add_edge(a, b)
    g.add_edge(names[-1], END)
    return g.compile(checkpointer=saver)


if __name__ == "__main__":
    mode, redis_url, mongo_url, prefix, database = sys.argv[1:6]
    config = {"configurable": {"thread_id": "pipeline-1"}}
    start = {"text": [], "done": [], "result": {}} if mode == "run" else None
    with DurableSaver.from_urls(redis_url, mongo_url, key_prefix=prefix, database=database,
                                claim_idle_s=1.0) as saver:
        final = build(saver).invoke(start, config, durability="sync")
        print(json.dumps({"result": final["result"], "tier": saver.last_read_tier}))
"""
child = work / "pipeline_child.py"
child.write_text(CHILD)
log_path = work / "executions.jsonl"
env = {**os.environ, "NB_LOG": str(log_path), "NB_STEP_S": "0.5"}
argv = [str(child), redis_srv.url, mongo_srv.url, prefix, database]'''),
    ("md", "## Run it and kill it with SIGKILL in the middle of its fourth node"),
    ("code", """def events():
    if not log_path.exists():
        return []
    return [json.loads(line) for line in log_path.read_text().splitlines()]

first = subprocess.Popen([sys.executable, argv[0], "run", *argv[1:]], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
deadline = time.monotonic() + 60
while sum(e["event"] == "end" and e["pid"] == first.pid for e in events()) < 3:
    assert first.poll() is None and time.monotonic() < deadline, first.stderr.read()
    time.sleep(0.01)
time.sleep(0.25)            # halfway into the fourth node
first.kill()                # SIGKILL: no cleanup, no flush, nothing
first.wait()
killed_at = time.time()
print("first process", first.pid, "exit code", first.returncode)"""),
    ("md", """## What the store holds now

`langgraph-durable` reads both tiers: the thread's checkpoints (three completed steps), and
the outbox. Entries the dead process had read but not acknowledged stay *pending* with its
consumer until another flusher claims them (`claim_idle_s`)."""),
    ("code", """cli_env = {**os.environ, "REDIS_URL": redis_srv.url, "MONGODB_URL": mongo_srv.url,
           "LGD_KEY_PREFIX": prefix, "LGD_DATABASE": database, "COLUMNS": "140"}

def cli(*args):
    out = subprocess.run([sys.executable, "-m", "langgraph_durable.cli", *args], env=cli_env,
                         capture_output=True, text=True)
    print(out.stdout + out.stderr, end="")
    return out

cli("history", "pipeline-1")
cli("status");"""),
    ("md", "## Resume in a fresh process"),
    ("code", """second = subprocess.run([sys.executable, argv[0], "resume", *argv[1:]], env=env,
                        capture_output=True, text=True, timeout=120)
assert second.returncode == 0, second.stderr
resumed = json.loads(second.stdout.splitlines()[-1])
print("resumed result:", resumed["result"])
print("state served by the", resumed["tier"], "tier")"""),
    ("md", """## Check: nothing acknowledged ran twice, same result as an uninterrupted run

The reference runs the same graph in this process with `InMemorySaver` and no delays."""),
    ("code", """import importlib.util
from langgraph.checkpoint.memory import InMemorySaver

spec = importlib.util.spec_from_file_location("pipeline_child", child)
pipeline = importlib.util.module_from_spec(spec)
spec.loader.exec_module(pipeline)
os.environ["NB_LOG"] = str(work / "reference.jsonl")
reference = pipeline.build(InMemorySaver()).invoke(
    {"text": [], "done": [], "result": {}}, {"configurable": {"thread_id": "ref"}})

runs = {}
for e in events():
    runs.setdefault(e["node"], []).append((e["pid"], e["event"]))
completed_first = [n for n, ev in runs.items() if (first.pid, "end") in ev]
ran_twice = [n for n in completed_first if any(p != first.pid for p, _ in runs[n])]
interrupted = [n for n, ev in runs.items() if (first.pid, "start") in ev
               and (first.pid, "end") not in ev]
print("completed before the kill:", completed_first)
print("interrupted by the kill:  ", interrupted, "(re-runs, as it should)")
print("completed nodes run again:", ran_twice)
print("result equals reference:  ", resumed["result"] == reference["result"])
assert not ran_twice and resumed["result"] == reference["result"]"""),
    ("md", "## Timeline\n\nEach bar is one node execution; the red line is the SIGKILL."),
    ("code", """import matplotlib.pyplot as plt

nodes = list(pipeline.STEPS)
t0 = min(e["t"] for e in events())
fig, ax = plt.subplots(figsize=(9, 3.2))
starts = {}
for e in events():
    key = (e["node"], e["pid"])
    if e["event"] == "start":
        starts[key] = e["t"]
for key, began in starts.items():
    node, pid = key
    ended = next((e["t"] for e in events() if (e["node"], e["pid"]) == key
                  and e["event"] == "end"), killed_at)
    color = "tab:blue" if pid == first.pid else "tab:orange"
    ax.barh(nodes.index(node), ended - began, left=began - t0, color=color, alpha=0.85)
ax.axvline(killed_at - t0, color="red", linestyle="--", label="SIGKILL")
ax.set_yticks(range(len(nodes)), nodes)
ax.invert_yaxis()
ax.set_xlabel("seconds since the first node started")
from matplotlib.patches import Patch
ax.legend(handles=[Patch(color="tab:blue", label=f"1st process (pid {first.pid})"),
                   Patch(color="tab:orange", label="2nd process (resumed)"),
                   ax.get_lines()[0]], loc="upper right", fontsize=8)
ax.set_title("node executions across the crash")
plt.tight_layout()
plt.show()"""),
    ("code", """cli("delete", "pipeline-1", "--yes")
from langgraph_durable.testing import drop_namespace

drop_namespace(redis_srv.url, mongo_srv.url, prefix, database)  # this notebook's only
servers.close()
shutil.rmtree(work)  # the child program and its logs"""),
]




if __name__ == "__main__":
    print(write(NAME, CELLS))
