"""Scenario 3: MongoDB is down (its process stopped) while graphs keep running.

The saver runs in this process with its in-process flusher, ``max_outbox=MAX_OUTBOX`` and
``on_outbox_full`` = ``raise`` or ``block`` (``outbox_full_timeout_s=BLOCK_S``). With
MongoDB up, ``THREADS`` workflow threads run to a breakpoint (``interrupt_before``) and are
flushed. Then MongoDB is stopped and every thread is resumed: puts must keep succeeding
from Redis while fewer than ``max_outbox`` entries wait; past the bound each put must fail
with ``OutboxFullError`` (at once, or after blocking ``BLOCK_S``), writing nothing: never a
silent drop. The outbox length is sampled all along (it must never pass the bound). Before
the old threads resume, ``NEW_THREADS`` brand-new threads are started and run to the end
while MongoDB is down: Redis's thread registry answers "no such thread" for them, so they
must not raise ``TierUnavailableError``. MongoDB is restarted on the same port and data
folder; the backlog must drain (time measured), the failed threads (old and new) resume to
the same final state as InMemorySaver's, every acknowledged checkpoint is in MongoDB, and
with Redis emptied MongoDB alone gives the new threads' final states.

With ``store`` (default), the memory store too (``store_faults.mongo_down``): puts and
deletes of store items while MongoDB is down (deletes of flushed items among them; past
``max_outbox`` refused with ``OutboxFullError``), then MongoDB restarted: every
acknowledged put is in MongoDB with its last value, no acknowledged delete undone.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from langgraph_durable import DurableSaver, OutboxFullError, TierUnavailableError
from langgraph_durable.testing import mongo_server

from . import graphs, store_faults
from .common import Env, cleanup, clients, names
from .result import Result
from .tiers import drop_prefix, mongo_has, redis_has, wait_for

THREADS = 6
NEW_THREADS = 2
MAX_OUTBOX = 120
BLOCK_S = 0.5


class Recording(DurableSaver):
    """Notes every checkpoint a put acknowledged and every put that raised."""

    acked: list[tuple[str, str, str]]
    refused: list[tuple[str, str, str, float, str]]

    def put(self, config: Any, checkpoint: Any, metadata: Any, new_versions: Any) -> Any:
        t0 = time.monotonic()
        try:
            out = super().put(config, checkpoint, metadata, new_versions)
        except Exception as exc:
            c = config["configurable"]
            self.refused.append((str(c["thread_id"]), c.get("checkpoint_ns") or "",
                                 checkpoint["id"], time.monotonic() - t0, type(exc).__name__))
            raise
        c = out["configurable"]
        self.acked.append((c["thread_id"], c["checkpoint_ns"], c["checkpoint_id"]))
        return out


def trial(env: Env, policy: str) -> dict[str, Any]:
    prefix, database = names("s3")
    rec: dict[str, Any] = {"policy": policy}
    with mongo_server() as ms:
        opts = {"key_prefix": prefix, "database": database, "max_outbox": MAX_OUTBOX,
                "on_outbox_full": policy, "outbox_full_timeout_s": BLOCK_S,
                "server_selection_timeout_s": 1.0}
        saver = Recording.from_urls(env.redis_url, ms.url, **opts)
        saver.acked, saver.refused = [], []
        threads = [f"s3-{policy}-{k}" for k in range(THREADS)]
        cfgs = {t: {"configurable": {"thread_id": t}} for t in threads}
        with saver, clients(env.redis_url, ms.url) as (r, m):
            graph = graphs.build_flow(saver, subgraph=False)
            for t in threads:
                graph.invoke(graphs.flow_input(t), cfgs[t], interrupt_before=["merge"])
            saver.flush()
            before_outage = len(saver.acked)
            samples: list[int] = []
            stop = threading.Event()

            def sample() -> None:
                while not stop.is_set():
                    samples.append(r.xlen(saver.context.outbox))
                    time.sleep(0.002)

            sampler = threading.Thread(target=sample, daemon=True)
            sampler.start()
            ms.stop()
            # brand-new threads, started while MongoDB is down (a run takes ~35 entries:
            # both fit below the bound, the old threads' resumes then reach it)
            fresh = [f"s3-{policy}-new-{k}" for k in range(NEW_THREADS)]
            new_outcomes: dict[str, str] = {}
            for t in fresh:
                cfgs[t] = {"configurable": {"thread_id": t}}
                try:
                    graph.invoke(graphs.flow_input(t), cfgs[t])
                    new_outcomes[t] = "finished"
                except OutboxFullError:
                    new_outcomes[t] = "OutboxFullError"
                except TierUnavailableError:
                    new_outcomes[t] = "TierUnavailableError"
            rec["new_outcomes"] = sorted(new_outcomes.values())
            rec["new_started"] = len({a[0] for a in saver.acked if a[0] in new_outcomes})
            outcomes: dict[str, str] = {}
            for t in threads:
                try:
                    graph.invoke(None, cfgs[t])
                    outcomes[t] = "finished"
                except OutboxFullError:
                    outcomes[t] = "OutboxFullError"
                except TierUnavailableError:
                    outcomes[t] = "TierUnavailableError"
            rec["acked_during_outage"] = len(saver.acked) - before_outage
            rec["outcomes"] = sorted(outcomes.values())
            # nothing acknowledged is missing from Redis; nothing refused was written
            rec["dropped"] = redis_has(r, prefix, saver.acked[before_outage:]).count(False)
            rec["refused"] = len(saver.refused)
            rec["refused_but_stored"] = sum(redis_has(r, prefix, [x[:3] for x in saver.refused]))
            rec["refused_by"] = sorted({x[4] for x in saver.refused})
            rec["block_s"] = max((x[3] for x in saver.refused), default=0.0)
            t0 = time.monotonic()
            ms.start()
            restarted = time.monotonic()
            wait_for(lambda: r.xlen(saver.context.outbox) == 0, 90, "the backlog to drain")
            rec["drain_s"] = time.monotonic() - restarted
            rec["restart_s"] = restarted - t0
            stop.set()
            sampler.join()
            rec["max_backlog"] = max(samples)
            # the failed runs resume (a saver with the default bound: a burst of puts from
            # 6 threads can outrun the flusher past max_outbox=120, and "raise" says so)
            mismatches = 0
            with Recording.from_urls(env.redis_url, ms.url, key_prefix=prefix,
                                     database=database) as again:
                again.acked, again.refused = saver.acked, saver.refused
                graph = graphs.build_flow(again, subgraph=False)
                for t in threads + fresh:
                    state = graph.get_state(cfgs[t])
                    if state.tasks:
                        graph.invoke(None, cfgs[t])
                    elif not state.values:  # a new thread refused at its first put
                        graph.invoke(graphs.flow_input(t), cfgs[t])
                    final = graphs.canonical(graph.get_state(cfgs[t]).values)
                    mismatches += int(final != graphs.flow_reference(t, subgraph=False))
                again.flush()
            rec["mismatches"] = mismatches
            rec["acked"] = len(saver.acked)
            rec["lost"] = mongo_has(m[database], saver.acked).count(False)
            # the new threads from MongoDB alone (every Redis key of the prefix gone)
            drop_prefix(r, prefix)
            with DurableSaver.from_urls(env.redis_url, ms.url, key_prefix=prefix,
                                        database=database) as alone:
                graph = graphs.build_flow(alone, subgraph=False)
                rec["mismatches_mongo_alone"] = sum(
                    int(graphs.canonical(graph.get_state(cfgs[t]).values)
                        != graphs.flow_reference(t, subgraph=False)) for t in fresh)
        cleanup(env.redis_url, ms.url, prefix, database)
    return rec


def subgraph_step_while_down(env: Env) -> dict[str, Any]:
    """A hot thread whose next step enters a subgraph, run while MongoDB is down: the
    subgraph's first ``get_tuple`` is for a checkpoint_ns Redis has never seen."""
    prefix, database = names("s3sub")
    rec: dict[str, Any] = {}
    with mongo_server() as ms:
        with DurableSaver.from_urls(env.redis_url, ms.url, key_prefix=prefix,
                                    database=database, server_selection_timeout_s=1.0) as s:
            graph = graphs.build_flow(s)
            cfg = {"configurable": {"thread_id": "s3-sub"}}
            graph.invoke(graphs.flow_input(), cfg, interrupt_before=["audit"])
            s.flush()
            ms.stop()
            t0 = time.monotonic()
            try:
                graph.invoke(None, cfg)
                rec["outcome"] = "finished"
            except Exception as exc:
                rec["outcome"] = f"{type(exc).__name__}: {str(exc)[:90]}"
            rec["elapsed_s"] = time.monotonic() - t0
            ms.start()
            if graph.get_state(cfg).tasks:
                graph.invoke(None, cfg)
            rec["mismatch"] = int(graphs.canonical(graph.get_state(cfg).values)
                                  != graphs.flow_reference())
        cleanup(env.redis_url, ms.url, prefix, database)
    return rec


def stop_mid_flush(env: Env, stops: int, options: dict[str, Any] | None = None
                   ) -> dict[str, Any]:
    """MongoDB stopped while a child process's in-process flusher is busy (a backlog,
    ``flush_batch_size=1``), restarted, drained: acknowledged checkpoints whose entries
    left the outbox but whose documents MongoDB does not have after the restart. The child
    logs every flusher write and MongoDB's answer, so a loss can be attributed."""
    from .s7_shutdown import sigterm

    out = {"stops": 0, "acked": 0, "lost": 0, "stops_losing": 0, "lost_in_redis": 0,
           "lost_acknowledged_by_mongo": 0}
    for k in range(stops):
        rec = sigterm(env, 200 + k, "flag", mongo_down=True, drain_s=2.0, freeze=False,
                      trace=True, options=options)
        out["stops"] += 1
        out["acked"] += rec["acked"]
        out["lost"] += rec["lost"]
        out["stops_losing"] += int(rec["lost"] > 0)
        out["lost_in_redis"] += rec.get("lost_in_redis", 0)
        out["lost_acknowledged_by_mongo"] += rec.get("lost_acknowledged_by_mongo", 0)
    return out


def run(env: Env, trials_per_policy: int = 1, subgraph_probe: bool = True,
        mid_flush_stops: int = 0, store: bool = True) -> Result:
    res = Result("s3", "3. MongoDB stopped while graphs run, then restarted")
    began = time.monotonic()
    recs = [trial(env, p) for p in ("raise", "block") for _ in range(trials_per_policy)]
    sub = subgraph_step_while_down(env) if subgraph_probe else {"outcome": "-",
                                                                  "mismatch": 0}
    res.measures["subgraph step while down"] = sub["outcome"].split(":")[0]
    if sub["outcome"] not in ("finished", "-"):
        res.findings.append(
            f"a hot thread cannot take a subgraph step while MongoDB is down: "
            f"{sub['outcome'].split(':')[0]} after {sub['elapsed_s']:.1f} s (the subgraph's "
            "first get_tuple, for a checkpoint_ns Redis has not seen, goes to MongoDB)")
    res.records = recs
    res.trials = len(recs)
    res.faults = len(recs)
    res.acked = sum(r["acked"] for r in recs)
    res.lost = sum(r["lost"] + r["dropped"] for r in recs)
    res.mismatches = sum(r["mismatches"] + r["mismatches_mongo_alone"] for r in recs)
    res.measures.update({
        "max_outbox": MAX_OUTBOX,
        "new threads started while down": (
            f"{sum(r['new_started'] for r in recs)} of {NEW_THREADS * len(recs)}"),
        "max backlog (XLEN)": max(r["max_backlog"] for r in recs),
        "puts acked while down": sum(r["acked_during_outage"] for r in recs),
        "puts refused (OutboxFullError)": sum(r["refused"] for r in recs),
        "longest block s": max(r["block_s"] for r in recs),
        "drain after restart s (max)": max(r["drain_s"] for r in recs),
    })
    res.mismatches += sub["mismatch"]
    if store:  # the memory store's puts and deletes while MongoDB is down
        st = store_faults.mongo_down(env)
        res.trials += 1
        res.faults += 1
        store_faults.report(res, [st])
        res.measures["store ops refused while down (OutboxFullError)"] = st["refused"]
    if mid_flush_stops:
        mf = stop_mid_flush(env, mid_flush_stops)
        res.measures["stops mid-flush losing acked docs"] = (
            f"{mf['stops_losing']} of {mf['stops']} ({mf['lost']} checkpoints)")
        res.acked += mf["acked"]
        res.lost += mf["lost"]
        if mf["lost"]:
            res.findings.append(
                f"MongoDB stopped while the flusher was busy: in {mf['stops_losing']} of "
                f"{mf['stops']} stops, {mf['lost']} acknowledged checkpoints left the outbox "
                f"but were not in MongoDB after the restart ({mf['lost_in_redis']} still in "
                f"Redis, until hot_ttl_s; MongoDB had acknowledged "
                f"{mf['lost_acknowledged_by_mongo']} of their upserts to the flusher). "
                "SecantusDB lost writes it acknowledged; the flusher deletes entries on a w:1 "
                "acknowledgment, which real MongoDB can also lose (crash within the journal "
                "commit interval, replica-set rollback)")
    for r in recs:
        if r["max_backlog"] > MAX_OUTBOX:
            res.findings.append(f"outbox grew to {r['max_backlog']} > max_outbox {MAX_OUTBOX}")
        if r["refused_but_stored"]:
            res.findings.append(f"{r['refused_but_stored']} puts raised but were stored")
        if r["refused_by"] not in ([], ["OutboxFullError"]):
            res.findings.append(f"puts refused by {r['refused_by']}, not OutboxFullError")
        if not r["refused"]:
            res.findings.append(f"policy {r['policy']}: the bound was never reached")
        if "TierUnavailableError" in r["new_outcomes"] or r["new_started"] < NEW_THREADS:
            res.findings.append(
                f"policy {r['policy']}: a new thread could not start while MongoDB was down "
                f"({r['new_outcomes']}, {r['new_started']} of {NEW_THREADS} started)")
    res.seconds = time.monotonic() - began
    return res
