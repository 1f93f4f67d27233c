"""Scenario 1: the application process is killed (SIGKILL) at random points of a run.

Each trial runs the workflow graph (``graphs.build_flow``) in a child process that records
every acknowledged ``put`` (checkpoint id) and ``put_writes`` to an fsynced log and is
killed at one random point: before / during / after the N-th ``put`` or ``put_writes``,
at the start of the N-th node (between steps), at a point of the N-th in-process flush
round, or at a random time. Then:

1. right after the kill: every acknowledged checkpoint and write is in Redis or MongoDB
   (raw look at both tiers);
2. in about a third of the trials, the outbox is drained by another process and Redis is
   emptied of the trial's keys, so the resume is served by MongoDB alone ("cold");
3. a new process resumes the thread; its final state must equal an uninterrupted
   InMemorySaver run's; it closes its saver, which drains the outbox;
4. every acknowledged checkpoint and write is then in MongoDB; no checkpoint is listed
   twice and no MongoDB identity is stored twice.

With ``store_trials``, as many trials of the memory store's form
(``store_faults.app_killed_trial``): a child process puts and deletes store items and is
killed before, during or after one of them, in a flusher round or at a random time; every
acknowledged put must then be there with its last value and no acknowledged delete undone
(counted in ``lost`` and ``resurrected``).
"""

from __future__ import annotations

import random
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from langgraph_durable import DurableSaver
from langgraph_durable.hot.keys import ThreadKeys

from . import graphs, store_faults
from .common import Child, Env, cleanup, clients, names, partitions_of
from .result import Result
from .tiers import (
    AckLog,
    drop_prefix,
    mongo_has,
    mongo_identity_duplicates,
    mongo_writes,
    redis_has,
    redis_writes,
    wait_for,
)

STEP_S = 0.02
OPTIONS = {"claim_idle_s": 0.5}
FLUSH_POINTS = ["before_mongo", "mid_mongo", "before_ack", "after_ack"]


def choose_kill(i: int, rng: random.Random, calls: dict[str, int], run_s: float
                ) -> dict[str, Any]:
    """Trial ``i``'s kill point: the kinds take turns (so a short run covers each), the
    position within a kind is random."""
    kind = ["put", "put_writes", "node", "flush", "time"][i % 5]
    if kind in ("put", "put_writes"):
        return {"kind": "call", "method": kind, "n": rng.randint(1, calls[kind]),
                "pos": rng.choice(["before", "during", "after"])}
    if kind == "node":
        nodes = graphs.ROUNDS * (graphs.WORKERS + 5) + 1  # node executions in a run
        return {"kind": "node", "n": rng.randint(1, nodes)}
    if kind == "flush":
        return {"kind": "flush", "n": rng.randint(1, 5), "point": rng.choice(FLUSH_POINTS)}
    return {"kind": "time", "delay_s": rng.uniform(0.0, run_s)}


def _label(kill: dict[str, Any]) -> str:
    if kill["kind"] == "call":
        return f"{kill['pos']}-{kill['method']}"
    if kill["kind"] == "flush":
        return f"flush-{kill['point']}"
    return kill["kind"]


def trial(env: Env, i: int, rng: random.Random, ref: str, calls: dict[str, dict[str, int]],
          run_s: float, *, kill: dict[str, Any] | None = None, cold: bool | None = None
          ) -> dict[str, Any]:
    """One trial; ``kill`` and ``cold`` fix what is otherwise drawn from ``rng``."""
    prefix, database = names("s1")
    thread = f"s1-thread-{i}"
    durability = rng.choice(["sync", "async"])
    kill = kill or choose_kill(i, rng, calls[durability], run_s)
    cold = rng.random() < 0.33 if cold is None else cold
    ack = str(env.work / f"s1-{i}.ack")
    base = {"redis": env.redis_url, "mongo": env.mongo_url, "prefix": prefix,
            "database": database, "thread": thread, "durability": durability,
            "options": OPTIONS}
    rec: dict[str, Any] = {"kill": _label(kill), "durability": durability, "cold": cold}
    try:
        run = Child({**base, "mode": "flow-run", "ack": ack, "kill": kill, "step_s": STEP_S},
                    env.work, f"s1-{i}-run")
        if kill["kind"] == "time":
            wait_for(lambda: any(a["k"] == "start" for a in AckLog.read(ack)), 30,
                     "the child to start its run")
            time.sleep(kill["delay_s"])  # the fault's timing, not an assertion
            run.kill()
        code = run.wait(120)
        rec["killed"] = code == -9
        if code not in (0, -9):
            raise RuntimeError(f"the run child failed (exit {code}):\n{run.tail()}")
        log = AckLog.read(ack)
        cps = [(a["t"], a["ns"], a["id"]) for a in log if a["k"] == "cp"]
        ws = {(a["t"], a["ns"], a["id"], a["task"], x) for a in log if a["k"] == "w"
              for x in a["idx"]}
        rec["acked"], rec["acked_writes"] = len(cps), len(ws)
        rec["at"] = next((a["at"] for a in log if a["k"] == "kill"), None)
        parts = partitions_of(env.redis_url, OPTIONS)  # names the thread's Redis keys
        with clients(env.redis_url, env.mongo_url) as (r, m):
            db = m[database]
            hot, durable = redis_has(r, prefix, cps, parts), mongo_has(db, cps)
            after_kill = [a or b for a, b in zip(hot, durable)]
            rec["lost_after_kill"] = after_kill.count(False)
            have_w = redis_writes(r, prefix, [thread], parts) | mongo_writes(db, [thread])
            rec["lost_writes_after_kill"] = len(ws - have_w)
            if cold:  # another process drains the outbox, then Redis forgets the trial
                with DurableSaver.from_urls(env.redis_url, env.mongo_url, key_prefix=prefix,
                                            database=database, **OPTIONS) as s:
                    s.flush(timeout_s=60)
                drop_prefix(r, prefix)
            resume = Child({**base, "mode": "flow-resume"}, env.work, f"s1-{i}-resume")
            if resume.wait(120) != 0:
                raise RuntimeError(f"the resume child failed:\n{resume.tail()}")
            out = resume.out()
            rec.update(tier=out["tier"], action=out["action"])
            rec["mismatch"] = int(out["values"] != ref or bool(out["next"]))
            durable = mongo_has(db, cps)
            rec["lost_after_flush"] = durable.count(False)
            rec["lost"] = sum(not (a and b) for a, b in zip(after_kill, durable))
            lost_w = ws - have_w
            rec["lost_writes"] = len(lost_w | (ws - mongo_writes(db, [thread])))
            rec["duplicated"] = out["listed_twice"] + mongo_identity_duplicates(db)
            # everything is in MongoDB now: the thread's hot keys must have their TTL
            rec["no_ttl"] = int(r.ttl(ThreadKeys(prefix, thread, parts).cp) == -1)
    finally:
        cleanup(env.redis_url, env.mongo_url, prefix, database)
    return rec


def run(env: Env, trials: int, seed: int = 1, parallel: int = 2, store_trials: int = 0
        ) -> Result:
    res = Result("s1", "1. application SIGKILLed at random points, resumed in a new process")
    began = time.monotonic()
    ref = graphs.flow_reference()
    calls = {d: graphs.count_calls(d) for d in ("sync", "async")}
    # calibration: one uninterrupted run in a child must equal the reference
    prefix, database = names("s1cal")
    try:
        t0 = time.monotonic()
        cal = Child({"mode": "flow-run", "redis": env.redis_url, "mongo": env.mongo_url,
                     "prefix": prefix, "database": database, "thread": "cal",
                     "ack": str(env.work / "s1-cal.ack"), "step_s": STEP_S,
                     "options": OPTIONS}, env.work, "s1-cal")
        cal.wait(120)
        marks = {a["k"]: a.get("t") for a in AckLog.read(str(env.work / "s1-cal.ack"))}
        run_s = marks["end"] - marks["start"] if "end" in marks else time.monotonic() - t0
        if cal.out()["values"] != ref:
            res.findings.append("an uninterrupted DurableSaver run differs from InMemorySaver")
    finally:
        cleanup(env.redis_url, env.mongo_url, prefix, database)
    rngs = [random.Random(seed * 100_003 + i) for i in range(trials)]
    with ThreadPoolExecutor(max_workers=parallel) as pool:
        recs = list(pool.map(lambda i: trial(env, i, rngs[i], ref, calls, run_s),
                             range(trials)))
    res.trials = len(recs)
    res.faults = sum(r["killed"] for r in recs)
    res.acked = sum(r["acked"] for r in recs)
    res.lost = sum(r["lost"] for r in recs)
    res.duplicated = sum(r["duplicated"] for r in recs)
    res.mismatches = sum(r["mismatch"] for r in recs)
    lost_w = sum(r["lost_writes"] for r in recs)
    no_ttl = sum(r["no_ttl"] for r in recs)
    if no_ttl:
        at = sorted({r["at"] or f"{r['kill']} (random time)" for r in recs if r["no_ttl"]})
        res.findings.append(
            f"{no_ttl} threads keep their Redis keys forever (no hot_ttl_s TTL) although "
            f"everything reached MongoDB; kill points: {', '.join(at)}")
    kinds: dict[str, int] = {}
    for r in recs:
        if r["killed"]:
            kinds[r["kill"]] = kinds.get(r["kill"], 0) + 1
    res.measures = {
        "writes acked": sum(r["acked_writes"] for r in recs), "writes lost": lost_w,
        "lost right after the kill": sum(r["lost_after_kill"] for r in recs),
        "not in MongoDB after the drain": sum(r["lost_after_flush"] for r in recs),
        "cold resumes": sum(r["cold"] for r in recs),
        "resumed from durable tier": sum(r["tier"] == "durable" for r in recs),
        "hot keys left without TTL": no_ttl,
    }
    res.notes.append("kills by point: " + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items())))
    if lost_w:
        res.findings.append(f"{lost_w} acknowledged writes lost")
    res.records = recs
    if store_trials:
        srngs = [random.Random(seed * 200_003 + i) for i in range(store_trials)]
        with ThreadPoolExecutor(max_workers=parallel) as pool:
            srecs = list(pool.map(lambda i: store_faults.app_killed_trial(
                env, i, srngs[i], options=OPTIONS), range(store_trials)))
        res.trials += len(srecs)
        res.faults += sum(r["killed"] for r in srecs)
        store_faults.report(res, srecs)
        res.measures["store kills"] = sum(r["killed"] for r in srecs)
        res.records = recs + [{"store": True, **r} for r in srecs]
    res.seconds = time.monotonic() - began
    return res
