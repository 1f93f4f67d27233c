"""Scenario 4: Redis fails.

a. Fail fast: with Redis hung (its process stopped with SIGSTOP: connections open, nothing
   answers) and with Redis dead (SIGKILL: connections refused), every saver call and a
   graph step must raise ``TierUnavailableError`` naming the server, within 3x the
   configured ``socket_timeout_s`` (a bound on hanging, not a speed test).
b. Crash with AOF: a graph writes with ``flusher="off"`` (everything acknowledged lives in
   Redis only) while Redis (``appendonly yes``) is SIGKILLed at a random moment, then
   restarted on the same data folder. Every acknowledged checkpoint must be back; the thread
   resumes to InMemorySaver's final state; a flush then puts everything in MongoDB. Half the
   trials run with the default ``appendfsync everysec``, half with ``appendfsync always``
   (set with CONFIG SET; ``langgraph_durable.testing`` takes no server options).
c. Redis emptied after a flush (the saver's keys deleted): every read (latest of each
   namespace, ``list``,
   ``get_tuple`` of each checkpoint, graph state and history) served by MongoDB alone must
   equal the answer given before; an interrupted thread resumes from MongoDB alone.
d. With ``store`` (default), the memory store's Redis keys deleted after a flush
   (``store_faults.redis_lost``): every acknowledged put read back from MongoDB alone with
   its last value, no acknowledged delete undone; then puts and deletes of items only
   MongoDB holds, a flush, the keys deleted again, checked again. And Redis (AOF,
   ``appendfsync always``) SIGKILLed while a store with ``flusher="off"`` writes
   (``store_faults.redis_killed``): the same after the restart and a drain.
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from typing import Any

from langgraph.checkpoint.base import empty_checkpoint

from langgraph_durable import DurableSaver, TierUnavailableError
from langgraph_durable.testing import redis_server

from . import graphs, store_faults
from .common import Env, cleanup, clients, names, thread_answers
from .result import Result
from .tiers import drop_prefix, mongo_has, redis_has, wait_for

TIMEOUT_S = 0.5


class Recording(DurableSaver):
    acked: list[tuple[str, str, str]]

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        out = super().put(config, checkpoint, metadata, new_versions)
        c = out["configurable"]
        self.acked.append((c["thread_id"], c["checkpoint_ns"], c["checkpoint_id"]))
        return out


def _calls(saver: DurableSaver, cfg: dict[str, Any]) -> dict[str, Any]:
    """One of each kind of saver call (and a graph step), on a thread Redis knows."""
    graph = graphs.build_flow(saver, subgraph=False)
    tid = cfg["configurable"]["thread_id"]
    return {
        "put": lambda: saver.put({"configurable": {"thread_id": tid, "checkpoint_ns": ""}},
                                 empty_checkpoint(), {"step": 99}, {}),
        "put_writes": lambda: saver.put_writes(cfg, [("log", ["x"])], "task-x"),
        "get_tuple": lambda: saver.get_tuple({"configurable": {"thread_id": tid}}),
        "list": lambda: list(saver.list({"configurable": {"thread_id": tid}}, limit=2)),
        "flush": lambda: saver.flush(timeout_s=5),
        "delete_thread": lambda: saver.delete_thread("nobody"),
        "graph step": lambda: graph.invoke(None, {"configurable": {"thread_id": tid}}),
    }


def fail_fast(env: Env) -> dict[str, Any]:
    prefix, database = names("s4a")
    rec: dict[str, Any] = {"calls": 0, "slow": [], "wrong": [], "max_s": 0.0}
    with redis_server(appendonly=True) as rs:
        with DurableSaver.from_urls(rs.url, env.mongo_url, key_prefix=prefix,
                                    database=database, socket_timeout_s=TIMEOUT_S) as saver:
            graph = graphs.build_flow(saver, subgraph=False)
            cfg = {"configurable": {"thread_id": "s4-ff"}}
            graph.invoke(graphs.flow_input(), cfg, interrupt_before=["merge"])
            cfg = saver.get_tuple(cfg).config
            bound = 3 * TIMEOUT_S
            for mode in ("hung", "dead"):
                pid = rs._proc.pid if rs._proc else None
                if mode == "hung":
                    os.kill(pid, signal.SIGSTOP)
                else:
                    rs.kill()
                for name, call in _calls(saver, cfg).items():
                    t0 = time.monotonic()
                    try:
                        call()
                        err = None
                    except Exception as exc:
                        err = exc
                    took = time.monotonic() - t0
                    rec["calls"] += 1
                    rec["max_s"] = max(rec["max_s"], took)
                    if took > bound:
                        rec["slow"].append(f"{mode} {name} {took:.2f} s")
                    if not isinstance(err, TierUnavailableError) or \
                            f":{rs.port}" not in str(err):
                        rec["wrong"].append(f"{mode} {name}: {type(err).__name__}: {err}")
                if mode == "hung":
                    os.kill(pid, signal.SIGCONT)
                    # did Redis, once awake, still run the put the caller saw time out?
                    def committed() -> bool:
                        t = saver.get_tuple({"configurable": {"thread_id": "s4-ff"}})
                        return bool(t and t.metadata.get("step") == 99)
                    try:
                        rec["timed_out_put_committed"] = wait_for(committed, 2.0, "the put")
                    except TimeoutError:
                        rec["timed_out_put_committed"] = False
            rs.start()
            if graph.get_state(cfg).tasks:
                graph.invoke(None, cfg)
        cleanup(rs.url, env.mongo_url, prefix, database)
    return rec


def aof_crash(env: Env, rng: random.Random, fsync: str, appendonly: bool = True
              ) -> dict[str, Any]:
    prefix, database = names("s4b")
    rec: dict[str, Any] = {"fsync": fsync if appendonly else "no AOF"}
    with redis_server(appendonly=appendonly) as rs, clients(rs.url, env.mongo_url) as (r, m):
        if appendonly:
            r.config_set("appendfsync", fsync)
        saver = Recording.from_urls(rs.url, env.mongo_url, key_prefix=prefix, database=database,
                                    flusher="off", socket_timeout_s=1.0)
        saver.acked = []
        saver.setup()
        graph = graphs.build_flow(saver, step_s=0.01)
        cfg = {"configurable": {"thread_id": "s4-aof"}}
        failed: list[BaseException] = []

        def go() -> None:
            try:
                graph.invoke(graphs.flow_input(), cfg)
            except BaseException as exc:  # the kill makes it fail: expected
                failed.append(exc)

        runner = threading.Thread(target=go)
        runner.start()
        time.sleep(rng.uniform(0.02, 0.4))  # the fault's timing
        rs.kill()
        runner.join(30)
        acked = list(saver.acked)
        rs.start()
        rec["acked"] = len(acked)
        rec["killed_mid_run"] = bool(failed)
        has = redis_has(r, prefix, acked)
        rec["lost"] = has.count(False)
        # what Redis may lose with appendfsync everysec: it postpones the AOF write (up to
        # 2 s) while a slow background fsync runs, so only the newest acknowledged writes
        rec["lost_only_newest"] = has == sorted(has, reverse=True)
        rec["lost_last_put"] = int(bool(acked) and not redis_has(r, prefix, acked[-1:])[0])
        mismatch = 0
        if appendonly:
            snap = graph.get_state(cfg)
            if not snap.metadata:
                graph.invoke(graphs.flow_input(), cfg)
            elif snap.tasks:
                graph.invoke(None, cfg)
            mismatch = int(graphs.canonical(graph.get_state(cfg).values)
                           != graphs.flow_reference())
            with DurableSaver.from_urls(rs.url, env.mongo_url, key_prefix=prefix,
                                        database=database) as flusher:
                flusher.flush(timeout_s=30)
            rec["not_in_mongo"] = mongo_has(m[database], saver.acked).count(False)
        rec["mismatch"] = mismatch
        saver.close()
        cleanup(rs.url, env.mongo_url, prefix, database)
    return rec


def emptied(env: Env) -> dict[str, Any]:
    prefix, database = names("s4c")
    rec: dict[str, Any] = {}
    threads = ["s4-a", "s4-b", "s4-c"]
    with redis_server() as rs, clients(rs.url, env.mongo_url) as (r, _m):
        with DurableSaver.from_urls(rs.url, env.mongo_url, key_prefix=prefix,
                                    database=database) as saver:
            graph = graphs.build_flow(saver)
            for t in threads[:2]:
                graph.invoke(graphs.flow_input(t), {"configurable": {"thread_id": t}})
            paused = {"configurable": {"thread_id": threads[2]}}
            graph.invoke(graphs.flow_input(threads[2]), paused, interrupt_before=["audit"])
            saver.flush()

            def answers() -> dict[str, Any]:
                out: dict[str, Any] = {}
                for t in threads:
                    out.update({f"{t} {k}": v for k, v in thread_answers(saver, t).items()})
                    c = {"configurable": {"thread_id": t}}
                    out[f"{t} state"] = graphs.canonical(graph.get_state(c).values)
                    out[f"{t} history"] = [
                        graphs.canonical([s.values, s.next, s.metadata, s.config])
                        for s in graph.get_state_history(c)]
                return out

            before = answers()
            drop_prefix(r, prefix)  # Redis lost, for this saver (nothing else deleted)
            after = answers()
            rec["reads"] = len(before)
            rec["mismatches"] = sum(before[k] != after.get(k) for k in before)
            rec["tier"] = saver.last_read_tier
            graph.invoke(None, paused)  # resume from MongoDB alone
            rec["resume_mismatch"] = int(graphs.canonical(graph.get_state(paused).values)
                                         != graphs.flow_reference(threads[2]))
        cleanup(rs.url, env.mongo_url, prefix, database)
    return rec


def run(env: Env, aof_trials: int = 4, seed: int = 4, no_aof_trial: bool = False,
        store: bool = True) -> Result:
    res = Result("s4", "4. Redis hung / killed (AOF) / emptied")
    began = time.monotonic()
    rng = random.Random(seed)
    ff = fail_fast(env)
    aof = [aof_crash(env, rng, "everysec" if i % 2 == 0 else "always")
           for i in range(aof_trials)]
    cold = emptied(env)
    res.records = [ff, *aof, cold]
    res.trials = 1 + len(aof) + 1
    res.faults = 2 + len(aof) + 1
    res.acked = sum(a["acked"] for a in aof)
    res.lost = sum(a["lost"] + a.get("not_in_mongo", 0) for a in aof)
    res.mismatches = sum(a["mismatch"] for a in aof) + cold["mismatches"] + \
        cold["resume_mismatch"]
    res.measures = {
        "calls while down": ff["calls"],
        "slowest failure s": round(ff["max_s"], 3),
        "bound s": 3 * TIMEOUT_S,
        "reads compared after the keys were deleted": cold["reads"],
        "AOF kills mid-run": sum(a["killed_mid_run"] for a in aof),
    }
    for k in ("everysec", "always"):
        got = [a for a in aof if a["fsync"] == k]
        if got:
            res.measures[f"lost with appendfsync {k}"] = f"{sum(a['lost'] for a in got)} of " \
                f"{sum(a['acked'] for a in got)}"
    if store:  # the memory store: Redis emptied after a flush, twice; Redis (AOF) killed
        st = [store_faults.redis_lost(env, seed=seed), store_faults.redis_killed(env, seed)]
        res.trials += 2
        res.faults += 3
        store_faults.report(res, st)
        res.records += [{"store": True, **x} for x in st]
    if no_aof_trial:
        na = aof_crash(env, rng, "-", appendonly=False)
        res.notes.append(
            f"without AOF (not a supported setup: README asks for appendonly yes), a Redis "
            f"SIGKILL lost {na['lost']} of {na['acked']} acknowledged, unflushed checkpoints")
    res.findings += [f"slow to fail: {s}" for s in ff["slow"]]
    res.findings += [f"not TierUnavailableError naming the server: {w}" for w in ff["wrong"]]
    if ff.get("timed_out_put_committed"):
        res.notes.append("a put that raised TierUnavailableError on a hung Redis was committed "
                         "when Redis woke up (an ambiguous outcome, as for any timeout: the "
                         "caller was told it failed; the checkpoint exists, unacknowledged)")
    res.seconds = time.monotonic() - began
    return res
