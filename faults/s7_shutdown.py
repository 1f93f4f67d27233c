"""Scenario 7: graceful shutdown and idle lag.

a. SIGTERM to a process that runs graphs with the saver in a ``with`` block and a slow
   in-process flusher (``flush_batch_size=1``, so a backlog builds up). Variants: no SIGTERM
   handler (Python's default: the process ends at once); a handler that sets a flag, so the
   loop ends after the current run and the ``with`` block closes the saver (which drains
   the outbox); a handler that calls ``sys.exit`` (an exception raised wherever the main
   thread happens to be). Measured: backlog at SIGTERM, outbox left at exit, seconds to
   exit, hangs; every acknowledged checkpoint must reach MongoDB (at exit, or from the next
   flusher).
b. The same, MongoDB down at SIGTERM: the exit must be bounded by the drain timeout
   (``close(drain_timeout_s=...)``), and what is left stays in the outbox for later.
   MongoDB is stopped while the child is frozen (SIGSTOP): SecantusDB can acknowledge a
   write that arrives while it shuts down and then not have it after the restart (seen in
   about 1 stop in 15 with a busy flusher; see ``s3_mongo_down.stop_mid_flush``); that is
   measured in scenario 3, not here.
c. Idle lag: a burst of graph writes, then nothing; everything must reach MongoDB within a
   bound (polled with a deadline; the measured lag is reported).
"""

from __future__ import annotations

import signal
import time
from typing import Any

from langgraph_durable import DurableSaver
from langgraph_durable.durable import documents
from langgraph_durable.outbox.flusher import dead_letter_key
from langgraph_durable.testing import mongo_server

from . import graphs
from .common import Child, Env, cleanup, clients, names
from .result import Result
from .tiers import AckLog, mongo_has, redis_has, wait_for

BACKLOG = 150
IDLE_BOUND_S = 5.0


def sigterm(env: Env, i: int, handler: str, *, mongo_down: bool = False,
            drain_s: float | None = None, exit_timeout_s: float = 40, freeze: bool = True,
            trace: bool = False, options: dict[str, Any] | None = None) -> dict[str, Any]:
    """One SIGTERM trial. ``freeze=False`` stops MongoDB while the child's flusher is busy;
    ``trace`` has the child log each MongoDB write of its flusher and the answer;
    ``options`` are more DurableSaver options for the child."""
    prefix, database = names("s7")
    ack = str(env.work / f"s7-{i}-{prefix}.ack")
    rec: dict[str, Any] = {"handler": handler, "mongo_down": mongo_down, "drain_s": drain_s}
    with mongo_server() as own:
        mongo_url = own.url if mongo_down else env.mongo_url
        spec: dict[str, Any] = {
            "mode": "shutdown", "redis": env.redis_url, "mongo": mongo_url, "prefix": prefix,
            "database": database, "handler": handler, "backlog": BACKLOG, "ack": ack,
            "options": {"flush_batch_size": 1, "server_selection_timeout_s": 1.0,
                        **(options or {})}}
        if drain_s is not None:
            spec["drain_s"] = drain_s
        child = Child(spec, env.work, f"s7-{i}-{prefix}",
                      env={"FAULTS_TRACE_FLUSH": "1"} if trace else None)
        try:
            wait_for(lambda: any(a["k"] == "ready" for a in AckLog.read(ack))
                     or child.proc.poll() is not None, 120, "a backlog in the child")
            with clients(env.redis_url, mongo_url) as (r, _m):
                outbox = "{" + prefix + ":outbox}"
                if mongo_down and freeze:  # the child frozen: no MongoDB write in flight
                    child.proc.send_signal(signal.SIGSTOP)  # while SecantusDB shuts down
                    time.sleep(0.05)  # a write sent before the freeze is answered first
                    own.stop()
                    child.proc.send_signal(signal.SIGCONT)
                elif mongo_down:
                    own.stop()
                rec["backlog_at_sigterm"] = r.xlen(outbox)
                t0 = time.monotonic()
                child.proc.send_signal(signal.SIGTERM)
                try:
                    rec["exit_code"] = child.wait(exit_timeout_s)
                    rec["hung"] = False
                except RuntimeError:  # did not exit: killed (SIGKILL) after a stack dump
                    rec["exit_code"], rec["hung"] = None, True
                    rec["hang_log"] = child.tail(4000)
                rec["exit_s"] = time.monotonic() - t0
                rec["left_at_exit"] = r.xlen(outbox)
                log = AckLog.read(ack)
                rec["closed_logged"] = any(a["k"] == "closed" for a in log)
                cps = [(a["t"], a["ns"], a["id"]) for a in log if a["k"] == "cp"]
                rec["acked"] = len(cps)
                if mongo_down:
                    own.start()
                with clients(env.redis_url, mongo_url) as (_r, m):
                    rec["missing_at_exit"] = mongo_has(m[database], cps).count(False)
                    # the next flusher (any process) takes what was left
                    with DurableSaver.from_urls(env.redis_url, mongo_url, key_prefix=prefix,
                                                database=database, claim_idle_s=0.5) as s:
                        s.flush(timeout_s=120)
                    lost = [c for c, ok in zip(cps, mongo_has(m[database], cps)) if not ok]
                    rec["lost"] = len(lost)
                    if lost:  # what is known of them, for the report
                        rec["lost_ids"] = lost[:5]
                        rec["lost_in_redis"] = redis_has(r, prefix, lost).count(True)
                        rec["dead_letters"] = r.xlen(dead_letter_key(s.context))
                        rec["dead"] = [str(d) for d in r.xrange(dead_letter_key(s.context),
                                                                 count=3)]
                        rec["outbox_after"] = r.xlen(outbox)
                        t0_, ns0, cid0 = lost[0]
                        keys = s.context.keys(t0_)
                        rec["meta"] = {k.decode(): v.decode() for k, v in r.hgetall(keys.meta)
                                       .items()}
                        db = m[database]
                        rec["lost_blobs_writes_in_mongo"] = [
                            db["writes"].count_documents({"thread_id": t0_, "checkpoint_id": cid0}),
                            db["checkpoints"].count_documents({"thread_id": t0_})]
                        rec["acked_order"] = [k for k, c in enumerate(cps) if c in lost]
                        ids = {documents.doc_id(*c) for c in lost}  # did MongoDB acknowledge them?
                        rec["lost_acknowledged_by_mongo"] = len(ids & {
                            x for a in log if a["k"] == "mongo" and a["col"] == "checkpoints"
                            and (a.get("res") or {}).get("upserted_count") for x in a["ids"]})
                        rec["child_tail"] = child.tail(2500)
        finally:
            child.kill()
            cleanup(env.redis_url, mongo_url, prefix, database)
    return rec


def idle_lag(env: Env, bursts: int = 5) -> dict[str, Any]:
    prefix, database = names("s7i")
    lags = []

    class Acks(DurableSaver):
        acked: list[tuple[str, str, str]] = []

        def put(self, *a: Any, **k: Any) -> Any:
            out = super().put(*a, **k)
            c = out["configurable"]
            self.acked.append((c["thread_id"], c["checkpoint_ns"], c["checkpoint_id"]))
            self.last = time.monotonic()
            return out

    with Acks.from_urls(env.redis_url, env.mongo_url, key_prefix=prefix,
                        database=database) as saver, \
            clients(env.redis_url, env.mongo_url) as (r, m):
        graph = graphs.build_flow(saver)
        db = m[database]
        for b in range(bursts):
            saver.acked = []
            graph.invoke(graphs.flow_input(), {"configurable": {"thread_id": f"idle-{b}"}})
            last = saver.last
            wait_for(lambda: r.xlen(saver.context.outbox) == 0 and all(mongo_has(db, saver.acked)),
                     IDLE_BOUND_S, "an idle saver's writes to reach MongoDB", pause_s=0.002)
            lags.append(time.monotonic() - last)
            time.sleep(0.3)  # idle between bursts (the condition under test, not a wait)
        stats = saver.stats()
    cleanup(env.redis_url, env.mongo_url, prefix, database)
    return {"lags": lags, "stats_lag_max_s": (stats.get("flusher") or {}).get("lag_max_s")}


def run(env: Env, trials: int = 1, with_default_drain: bool = False,
        sys_exit_trials: int = 0) -> Result:
    res = Result("s7", "7. SIGTERM with a backlog; MongoDB down at SIGTERM; idle lag")
    began = time.monotonic()
    recs = []
    for i in range(trials):
        recs.append(sigterm(env, 3 * i, "none"))
        recs.append(sigterm(env, 3 * i + 1, "flag"))
        recs.append(sigterm(env, 3 * i + 2, "flag", mongo_down=True, drain_s=2.0))
    exits = [sigterm(env, 100 + k, "exit", exit_timeout_s=15) for k in range(sys_exit_trials)]
    if with_default_drain:  # the `with` block: close() with its close_drain_timeout_s
        recs.append(sigterm(env, 99, "flag", mongo_down=True))
    idle = idle_lag(env)
    res.records = [*recs, idle]
    res.trials = len(recs) + 1
    res.faults = len(recs)
    res.acked = sum(r["acked"] for r in recs)
    res.lost = sum(r["lost"] for r in recs)
    none = [r for r in recs if r["handler"] == "none"]
    drained = [r for r in recs if r["handler"] == "flag" and not r["mongo_down"]]
    down = [r for r in recs if r["mongo_down"]]
    res.measures = {
        "backlog at SIGTERM": max(r["backlog_at_sigterm"] for r in recs),
        "no handler: left in outbox at exit": max(r["left_at_exit"] for r in none),
        "handler: left at exit": max(r["left_at_exit"] for r in drained),
        "handler: exit s": round(max(r["exit_s"] for r in drained), 2),
        "MongoDB down, drain 2 s: exit s": round(max(r["exit_s"] for r in down
                                                    if r["drain_s"]), 2),
        "idle lag max s": round(max(idle["lags"]), 3),
    }
    if with_default_drain:
        d = recs[-1]
        res.measures["MongoDB down, with-block close(): exit s"] = round(d["exit_s"], 1)
        res.notes.append(
            f"with MongoDB down, leaving the `with` block took {d['exit_s']:.0f} s "
            "(close() waits close_drain_timeout_s, then leaves the rest in Redis)")
    if any(r["left_at_exit"] or r["hung"] for r in drained):
        res.findings.append("a SIGTERM handler that closes the saver left entries in the outbox")
    if exits:
        hung = [r for r in exits if r["hung"]]
        res.measures["sys.exit handler: hung at exit"] = f"{len(hung)} of {len(exits)}"
        res.lost = (res.lost or 0) + sum(r["lost"] for r in exits)
        res.notes.append(
            f"sys.exit() from a SIGTERM handler: the process hung at interpreter exit in "
            f"{len(hung)} of {len(exits)} trials" + (
                " (threading._shutdown waiting for a worker of LangGraph's ThreadPoolExecutor "
                "that the exception, raised inside executor.submit, left unregistered)"
                if hung else "") + "; safe: a handler that only sets a flag")
    if any(r["left_at_exit"] == 0 for r in none):
        res.notes.append("(a no-handler trial happened to find the outbox empty)")
    res.notes.append(
        "without a SIGTERM handler the process ends at once (Python's default action): the "
        "`with` block never closes the saver and up to "
        f"{max(r['left_at_exit'] for r in none)} acknowledged entries stay in the outbox "
        "until another flusher takes them (nothing is lost: they are in Redis); the package "
        "installs no handler")
    res.seconds = time.monotonic() - began
    return res
