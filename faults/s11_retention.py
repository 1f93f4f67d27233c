"""Scenario 11: the retention sweep (``ttl=``), and its sweeper SIGKILLed mid-sweep.

The application (this process, ``flusher="off"``) writes threads of four kinds: *expired*
(their TTL set to 0 once flushed), *pinned* (expired too, then pinned), *asking* (a run
waiting for the answer to an interrupt, expired too) and *live* (60 minutes left); plus
items of the memory store, and the same thread ids under another key prefix and database
(no policy). A flusher worker with the policy (``LGD_TTL``) records the activity, then
sweeps: the scenario lets the sweep start (the lease's ``next_at``) and SIGKILLs the
worker once part of the expired threads are gone. Then every thread must be, for every
reader, either whole (every read equal to the reads before) or gone (no checkpoint in any
read); a second worker takes the lease once the killed one's lapses (``lease_s``, 3 s
here) and finishes: every expired thread gone from both tiers, and nothing else changed
(pinned, asking and live threads, the store's items, the other prefix).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

from langgraph_durable import DurableSaver
from langgraph_durable.durable import retention_docs as R

from . import graphs
from .common import ROOT, Env, cleanup, clients, names, thread_answers
from .result import Result
from .tiers import wait_for

LEASE_S = 3.0
POLICY = {"strategy": "delete", "default_ttl": 60, "sweep_interval_minutes": 0.005,
          "lease_s": LEASE_S}
"""Sweeps 0.3 s apart (the worker looks that often); 60 minutes for live threads; a killed
sweeper replaced 3 s after its last renewal."""


class _Asking(TypedDict, total=False):
    topic: str
    answer: str


def build_asking(checkpointer: Any) -> Any:
    """START -> ask (interrupts: "publish?") -> END."""
    def ask(state: _Asking) -> dict[str, Any]:
        return {"answer": interrupt({"question": "publish?", "topic": state["topic"]})}

    b = StateGraph(_Asking)
    b.add_node("ask", ask)
    b.add_edge(START, "ask")
    b.add_edge("ask", END)
    return b.compile(checkpointer=checkpointer)


def _worker(env: Env, prefix: str, database: str, log: Path) -> subprocess.Popen:
    """A flusher worker with the retention policy (``LGD_TTL``): it flushes and sweeps."""
    argv = [sys.executable, "-m", "langgraph_durable.outbox.worker", "--redis-url",
            env.redis_url, "--mongo-url", env.mongo_url, "--key-prefix", prefix,
            "--database", database]
    with open(log, "ab") as f:
        return subprocess.Popen(argv, cwd=str(ROOT), stdin=subprocess.DEVNULL, stdout=f,
                                stderr=subprocess.STDOUT,
                                env={**os.environ, "PYTHONPATH": str(ROOT),
                                     "LGD_TTL": json.dumps(POLICY)})


def _kill(p: subprocess.Popen) -> None:
    if p.poll() is None:
        p.kill()
    p.wait()


def _gone(answers: dict[str, Any]) -> bool:
    return answers == {"list": []}


def trial(env: Env, i: int, rng: random.Random, *, expired: int, pinned: int, asking: int,
          live: int) -> dict[str, Any]:
    """One trial; returns its figures."""
    prefix, database = names("s11")
    other_prefix, other_db = names("s11o")
    rec: dict[str, Any] = {"expired": expired, "mismatches": [], "half_deleted": 0}
    kinds = {"exp": expired, "pin": pinned, "ask": asking, "live": live}
    ids = {k: [f"{k}-{j}" for j in range(n)] for k, n in kinds.items()}
    workers: list[subprocess.Popen] = []
    opts = dict(key_prefix=prefix, database=database, flusher="off", ttl=POLICY)
    try:
        with DurableSaver.from_urls(env.redis_url, env.mongo_url, **opts) as s, \
                DurableSaver.from_urls(env.redis_url, env.mongo_url, key_prefix=other_prefix,
                                       database=other_db) as other, \
                clients(env.redis_url, env.mongo_url) as (_r, m):
            db = m[database]
            # no sweep before the scenario says so (the lease's next_at far ahead)
            db[s.context.collections.meta].insert_one(
                {"_id": R.LEASE_ID, "until": 0, "next_at": 2**62})
            store = s.store()
            store.put(("users", "u1"), "k1", {"likes": "tea"})
            flow, ask_graph = graphs.build_flow(s, subgraph=False), build_asking(s)
            flow_other = graphs.build_flow(other, subgraph=False)
            for kind in ("exp", "pin", "live"):
                for tid in ids[kind]:
                    flow.invoke(graphs.flow_input(tid), {"configurable": {"thread_id": tid}})
            for tid in ids["ask"]:
                ask_graph.invoke({"topic": tid}, {"configurable": {"thread_id": tid}})
            for tid in ids["exp"][:5]:  # the same thread ids under another prefix
                flow_other.invoke(graphs.flow_input(tid), {"configurable": {"thread_id": tid}})
            workers.append(_worker(env, prefix, database, env.work / f"s11-{i}-a.log"))
            s.flush(timeout_s=120)
            other_before = {t: thread_answers(other, t) for t in ids["exp"][:5]}
            for tid in ids["exp"] + ids["pin"] + ids["ask"]:
                s.set_thread_ttl(tid, 0)
            for tid in ids["pin"]:
                s.pin_thread(tid)
            before = {t: thread_answers(s, t) for k in kinds for t in ids[k]}
            item_before = store.get(("users", "u1"), "k1")
            # the sweep starts at the worker's next look; kill it part-way
            retention = db[s.context.collections.retention]
            left = lambda: retention.count_documents(  # noqa: E731
                {"_id": {"$in": ids["exp"]}})
            kill_at = rng.randint(max(1, expired // 5), max(1, expired * 3 // 4))
            t0 = time.monotonic()
            db[s.context.collections.meta].update_one({"_id": R.LEASE_ID},
                                                      {"$set": {"next_at": 0}})
            wait_for(lambda: expired - left() >= kill_at, 120, "the sweep to get going")
            _kill(workers[0])
            rec["deleted_before_kill"] = expired - left()
            rec["sweep_s_per_thread"] = (time.monotonic() - t0) / max(1, rec[
                "deleted_before_kill"])
            # every thread whole or gone, for every reader
            for kind in kinds:
                for tid in ids[kind]:
                    now = thread_answers(s, tid)
                    if now != before[tid] and not (kind == "exp" and _gone(now)):
                        rec["mismatches"].append(f"after the kill: {tid}")
                        if kind == "exp":
                            rec["half_deleted"] += 1
            # the next sweeper finishes once the killed one's lease lapses
            t1 = time.monotonic()
            workers.append(_worker(env, prefix, database, env.work / f"s11-{i}-b.log"))
            wait_for(lambda: left() == 0, LEASE_S + 120, "the next sweep to finish")
            rec["finished_after_s"] = time.monotonic() - t1
            for tid in ids["exp"]:
                if not _gone(thread_answers(s, tid)):
                    rec["mismatches"].append(f"not swept: {tid}")
                if db[s.context.collections.checkpoints].count_documents({"thread_id": tid}):
                    rec["mismatches"].append(f"left in MongoDB: {tid}")
            for kind in ("pin", "ask", "live"):
                for tid in ids[kind]:
                    if thread_answers(s, tid) != before[tid]:
                        rec["mismatches"].append(f"changed: {tid}")
            rec["kept"] = sum(len(ids[k]) for k in ("pin", "ask", "live"))
            held = retention.count_documents({"_id": {"$in": ids["ask"]},
                                              "held": R.HELD_INTERRUPT})
            if held != asking:
                rec["mismatches"].append(f"{asking - held} asking threads not held")
            if store.get(("users", "u1"), "k1") != item_before:
                rec["mismatches"].append("the store's item changed")
            if {t: thread_answers(other, t) for t in ids["exp"][:5]} != other_before:
                rec["mismatches"].append("another key prefix's threads changed")
            store.close()
    finally:
        for w in workers:
            _kill(w)
        cleanup(env.redis_url, env.mongo_url, prefix, database)
        cleanup(env.redis_url, env.mongo_url, other_prefix, other_db)
    return rec


def run(env: Env, trials: int = 2, expired: int = 120, pinned: int = 10, asking: int = 10,
        live: int = 20, seed: int | None = None) -> Result:
    """The scenario: ``trials`` trials of ``expired`` + ``pinned`` + ``asking`` + ``live``
    threads each."""
    res = Result("s11", "11. retention sweep (ttl): expired threads go, pinned, "
                 "unanswered-interrupt and live ones stay; sweeper SIGKILLed mid-sweep")
    rng = random.Random(seed)
    began = time.monotonic()
    per_thread, finished = [], []
    for i in range(trials):
        rec = trial(env, i, rng, expired=expired, pinned=pinned, asking=asking, live=live)
        res.records.append(rec)
        res.trials += 1
        res.faults += 1
        res.add("mismatches", len(rec["mismatches"]))
        res.findings += rec["mismatches"][:5]
        per_thread.append(rec["sweep_s_per_thread"])
        finished.append(rec["finished_after_s"])
        res.measures["threads swept"] = res.measures.get("threads swept", 0) + expired
        res.measures["kept"] = res.measures.get("kept", 0) + rec["kept"]
        res.measures["deleted before the kill"] = res.measures.get(
            "deleted before the kill", 0) + rec["deleted_before_kill"]
        res.measures["half-deleted seen"] = res.measures.get(
            "half-deleted seen", 0) + rec["half_deleted"]
    res.measures["sweep s per thread"] = max(per_thread)
    res.measures[f"next sweep done after s (lease {LEASE_S:g} s)"] = max(finished)
    res.seconds = time.monotonic() - began
    return res
