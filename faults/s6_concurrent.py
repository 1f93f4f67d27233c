"""Scenario 6: two processes invoke the same thread_id at the same moment.

The thread holds one finished exchange. Two child processes, each with its own
DurableSaver, wait for a shared wall-clock instant and send one user message each on that
thread; the bot node takes ``STEP_S`` seconds, so both runs read the same latest checkpoint
before either writes. Half the trials start from a cold thread (its Redis keys gone, as
after the hot window), so the runs read the latest checkpoint from MongoDB.

Recorded, for ``on_concurrent_run="raise"`` (the default) and ``"fork"``: which runs
failed and how, whether the latest state holds both users' messages, whether a message is
missing from it without any error, whether the history forked, and whether the refused
run left anything behind. The same race on InMemorySaver (two threads in one process) is
run for comparison.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from langgraph.checkpoint.memory import InMemorySaver

from langgraph_durable import DurableSaver

from . import graphs
from .common import Child, Env, cleanup, names
from .result import Result

STEP_S = 0.8


def _outcome(saver: Any, graph: Any, thread: str, a: str, b: str) -> dict[str, Any]:
    """What the thread shows after the race."""
    cfg = {"configurable": {"thread_id": thread}}
    latest = graph.get_state(cfg).values["messages"]
    history = list(saver.list(cfg))
    parents: dict[str | None, int] = {}
    for t in history:
        p = (t.parent_config or {}).get("configurable", {}).get("checkpoint_id")
        parents[p] = parents.get(p, 0) + 1
    seen = [m for t in history for m in t.checkpoint["channel_values"].get("messages", [])]
    return {
        "both_in_latest": a in latest and b in latest,
        "missing_from_latest": [m for m in (a, b) if m not in latest],
        "forks": sum(1 for n in parents.values() if n > 1),
        "both_in_history": a in seen and b in seen,
        "history_messages": sorted(set(seen)),
        "checkpoints": len(history),
    }


def trial(env: Env, i: int, rule: str, cold: bool) -> dict[str, Any]:
    prefix, database = names("s6")
    thread = f"s6-{i}"
    a, b = f"user A says hi ({i})", f"user B says hello ({i})"
    opts = {"on_concurrent_run": rule}
    try:
        with DurableSaver.from_urls(env.redis_url, env.mongo_url, key_prefix=prefix,
                                    database=database, **opts) as saver:
            graph = graphs.build_chat(saver)
            graph.invoke({"messages": ["user 0: first message"]},
                         {"configurable": {"thread_id": thread}})
            saver.flush()
            if cold:
                saver.sync_clients.redis.delete(*saver.context.keys(thread).all)
            start_at = time.time() + 4.0  # both children are up and connected by then
            base = {"mode": "chat", "redis": env.redis_url, "mongo": env.mongo_url,
                    "prefix": prefix, "database": database, "thread": thread,
                    "step_s": STEP_S, "start_at": start_at, "options": opts}
            kids = [Child({**base, "message": m}, env.work, f"s6-{i}-{k}")
                    for k, m in (("a", a), ("b", b))]
            for k in kids:
                if k.wait(60) != 0:
                    raise RuntimeError(f"chat child failed:\n{k.tail()}")
            outs = [k.out() for k in kids]
            saver.flush()
            rec = _outcome(saver, graph, thread, a, b)
            rec.update(rule=rule, cold=cold)
            rec["overlapped"] = outs[0]["began"] < outs[1]["ended"] and \
                outs[1]["began"] < outs[0]["ended"]
            rec["errors"] = [o["error"] for o in outs if "error" in o]
            refused = [m for m, o in zip((a, b), outs) if "error" in o]
            # silently lost: a run that returned normally, whose message is not in the latest
            rec["silent"] = [m for m in rec["missing_from_latest"] if m not in refused]
            rec["refused_in_history"] = sum(m in rec["history_messages"] for m in refused)
    finally:
        cleanup(env.redis_url, env.mongo_url, prefix, database)
    return rec


def in_memory() -> dict[str, Any]:
    """The same race on InMemorySaver: two threads of one process."""
    saver = InMemorySaver()
    graph = graphs.build_chat(saver, step_s=STEP_S / 4)
    cfg = {"configurable": {"thread_id": "mem"}}
    graph.invoke({"messages": ["user 0: first message"]}, cfg)
    a, b = "user A says hi", "user B says hello"
    go = threading.Barrier(2)

    def send(m: str) -> None:
        go.wait()
        graph.invoke({"messages": [m]}, cfg)

    ts = [threading.Thread(target=send, args=(m,)) for m in (a, b)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    return _outcome(saver, graph, "mem", a, b)


def run(env: Env, trials_per_rule: int) -> Result:
    res = Result("s6", "6. two processes invoke one thread_id at once")
    began = time.monotonic()
    recs = [trial(env, i, rule, cold=i % 2 == 1)
            for rule in ("raise", "fork") for i in range(trials_per_rule)]
    res.records = recs
    res.trials = len(recs)
    res.faults = sum(r["overlapped"] for r in recs)
    for rule in ("raise", "fork"):
        rs = [r for r in recs if r["rule"] == rule]
        errs = [e.split(":")[0] for r in rs for e in r["errors"]]
        res.measures[f"{rule}: runs refused"] = f"{len(errs)} of {2 * len(rs)} " + (
            f"({', '.join(sorted(set(errs)))})" if errs else "")
        res.measures[f"{rule}: message silently missing from latest"] = sum(
            len(r["silent"]) for r in rs)
        res.measures[f"{rule}: forked histories"] = sum(r["forks"] > 0 for r in rs)
    raise_recs = [r for r in recs if r["rule"] == "raise"]
    res.mismatches = sum(len(r["silent"]) for r in raise_recs)
    if any(len(r["errors"]) != 1 for r in raise_recs if r["overlapped"]):
        res.findings.append("with on_concurrent_run='raise', overlapping runs did not end "
                            "with exactly one ConcurrentRunError")
    if any(r["refused_in_history"] for r in raise_recs):
        res.findings.append("a refused run's message is stored in the history")
    named = [e for r in raise_recs for e in r["errors"] if "latest checkpoint is now ''" in e]
    if named:
        res.findings.append(
            f"ConcurrentRunError names the new head as '' ({len(named)} of "
            f"{sum(len(r['errors']) for r in raise_recs)}) instead of its checkpoint_id: "
            "the head member 'ns NUL id' does not survive the Redis error reply")
    mem = in_memory()
    res.notes.append(
        f"InMemorySaver, same race in one process (two threads): message missing from "
        f"latest {len(mem['missing_from_latest'])}, forks {mem['forks']}, both in history "
        f"{mem['both_in_history']}; DurableSaver with on_concurrent_run='fork' behaves "
        f"the same, 'raise' (default) refuses the second run loudly")
    res.seconds = time.monotonic() - began
    return res
