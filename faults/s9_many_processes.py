"""Scenario 9: many application processes and standalone flusher workers, one of each
SIGKILLed mid-run and restarted.

``apps`` application processes (``faults/many_child.py`` mode ``app``, ``flusher="off"``)
run the workflow graph on ``threads`` threads between them (each its own share,
``concurrency`` Python threads each), logging every acknowledged checkpoint to an fsynced
log; ``workers`` flusher workers (``langgraph_durable.outbox.worker``, mode ``flusher``)
drain every outbox partition. When the first application process has acknowledged
``kill_at`` of its expected checkpoints, it and the first worker are SIGKILLed together;
both are restarted (the new application process picks up the same threads where they
stand: runs cut mid-way are resumed with ``invoke(None)``). Once every process has ended
and the outbox is empty (entries are deleted when acknowledged), the workers get SIGTERM,
then:

- lost: acknowledged checkpoints (from every log) that MongoDB does not hold;
- duplicated: MongoDB documents whose identity another document has too;
- mismatches: threads whose final state, read from MongoDB alone (the trial's Redis keys
  removed), differs from an uninterrupted InMemorySaver run of the same input, or that
  still have tasks to run, plus threads some process reported an error for.

``step_s``: seconds each node sleeps (a paced load, below what the workers absorb).

Measured: the put -> MongoDB lag of every checkpoint upsert (p50 / p99 / max, from the
workers' pymongo command listener), and with ``scaling`` the checkpoints per second of
``n`` application processes (no kills, no ack log) for each ``n``, the same total work.

On a single Redis the outbox has ``partitions`` streams; on a Redis Cluster
(``redis+cluster://`` URL) the default 16.
"""

from __future__ import annotations

import json
import signal
import time
from typing import Any

from langgraph_durable import DurableSaver

from . import graphs
from .common import Child, Env, cleanup, clients, names
from .many_child import topic_of
from .result import Result
from .tiers import AckLog, drop_prefix, mongo_has, mongo_identity_duplicates, wait_for

OPTIONS: dict[str, Any] = {}  # claim_idle_s: the default 5 s (see run())
WORKER_OPTIONS = {"flush_interval_s": 0.05}


def is_cluster_url(url: str) -> bool:
    return url.startswith("redis+cluster://")


def partition_options(env: Env, partitions: int) -> dict[str, Any]:
    """``outbox_partitions`` for a single Redis; a cluster keeps its default (16)."""
    return {} if is_cluster_url(env.redis_url) else {"outbox_partitions": partitions}


class Trial:
    """The processes of one run (one key prefix and database) and what they wrote."""

    def __init__(self, env: Env, tag: str, partitions: int) -> None:
        self.env, self.tag = env, tag
        self.prefix, self.database = names("s9")
        self.options = {**OPTIONS, **partition_options(env, partitions)}
        self.apps: list[Child] = []
        self.workers: list[Child] = []
        self.lag_files: list[str] = []
        self.acks: list[str] = []

    def worker(self, name: str) -> Child:
        lags = str(self.env.work / f"{self.tag}-{name}.lags")
        self.lag_files.append(lags)
        argv = ["--redis-url", self.env.redis_url, "--mongo-url", self.env.mongo_url,
                "--key-prefix", self.prefix, "--database", self.database]
        for k, v in {**WORKER_OPTIONS, **partition_options(self.env, self.options.get(
                "outbox_partitions", 0))}.items():
            argv += [f"--{k.replace('_', '-')}", str(v)]
        w = Child({"mode": "flusher", "argv": argv, "lags": lags}, self.env.work,
                  f"{self.tag}-{name}", module="faults.many_child")
        self.workers.append(w)
        return w

    def app(self, name: str, threads: list[str], *, concurrency: int, log: bool,
            start_at: float = 0.0, step_s: float = 0.0) -> Child:
        ack = str(self.env.work / f"{self.tag}-{name}.ack") if log else None
        if ack:
            self.acks.append(ack)
        a = Child({"mode": "app", "redis": self.env.redis_url, "mongo": self.env.mongo_url,
                   "prefix": self.prefix, "database": self.database, "threads": threads,
                   "concurrency": concurrency, "ack": ack, "start_at": start_at,
                   "step_s": step_s,
                   "options": {**self.options, "flusher": "off"}}, self.env.work,
                  f"{self.tag}-{name}", module="faults.many_child")
        self.apps.append(a)
        return a

    def saver(self) -> DurableSaver:
        return DurableSaver.from_urls(self.env.redis_url, self.env.mongo_url,
                                      key_prefix=self.prefix, database=self.database,
                                      flusher="off", **self.options)

    def drain(self, saver: DurableSaver, timeout_s: float = 120) -> None:
        """Wait until every outbox partition is empty, then stop the workers (SIGTERM)."""
        r = saver.sync_clients.redis
        wait_for(lambda: sum(r.xlen(s) for s in saver.context.outboxes) == 0, timeout_s,
                 "every outbox partition to drain")
        for w in self.workers:
            if w.proc.poll() is None:
                w.proc.send_signal(signal.SIGTERM)
        for w in self.workers:
            w.wait(30)

    def lags(self) -> list[float]:
        out: list[float] = []
        for path in self.lag_files:
            try:
                with open(path, encoding="utf-8") as f:
                    out += [float(x) for x in f if x.strip()]
            except FileNotFoundError:
                pass
        return out

    def stop_all(self) -> None:
        for p in self.apps + self.workers:
            if p.proc.poll() is None:
                p.kill()
                p.proc.wait()

    def cleanup(self) -> None:
        self.stop_all()
        cleanup(self.env.redis_url, self.env.mongo_url, self.prefix, self.database)


def pct(values: list[float], q: float) -> float | None:
    if not values:
        return None
    s = sorted(values)
    return s[min(len(s) - 1, int(q * len(s)))]


def split(threads: list[str], n: int) -> list[list[str]]:
    return [threads[i::n] for i in range(n)]


def _acked(path: str) -> list[dict[str, Any]]:
    return [a for a in AckLog.read(path) if a["k"] == "cp"]


def kill_trial(env: Env, *, threads: int, apps: int, workers: int, concurrency: int,
               kill_at: float, partitions: int, timeout_s: float, step_s: float = 0.0
               ) -> dict[str, Any]:
    # its own file names (acknowledgement logs, lags): 9 and 9p share the run's work folder
    tr = Trial(env, "s9p" if step_s else "s9", partitions)
    names_ = [f"s9-{k}" for k in range(threads)]
    shares = split(names_, apps)
    puts_per_run = graphs.count_calls("async")["put"]
    rec: dict[str, Any] = {"threads": threads, "apps": apps, "workers": workers,
                           "cluster": is_cluster_url(env.redis_url)}
    try:
        for k in range(workers):
            tr.worker(f"w{k}")
        began = time.monotonic()
        first = [tr.app(f"a{k}", share, concurrency=concurrency, log=True, step_s=step_s)
                 for k, share in enumerate(shares)]
        victim, ack0 = first[0], tr.acks[0]
        goal = int(kill_at * len(shares[0]) * puts_per_run)
        wait_for(lambda: len(_acked(ack0)) >= goal or victim.proc.poll() is not None,
                 timeout_s, "the first application process to reach its kill point")
        victim.kill()
        tr.workers[0].kill()
        victim.proc.wait()
        tr.workers[0].proc.wait()
        rec["killed"] = int(victim.proc.returncode == -9) + int(
            tr.workers[0].proc.returncode == -9)
        rec["acked_before_kill"] = len(_acked(ack0))
        tr.worker("w0-restarted")
        tr.app("a0-restarted", shares[0], concurrency=concurrency, log=True, step_s=step_s)
        outs = []
        for a in tr.apps[1:]:
            if a.wait(timeout_s) != 0:
                raise RuntimeError(f"application process failed:\n{a.tail()}")
            outs.append(a.out())
        rec["run_s"] = time.monotonic() - began
        rec["errors"] = [e for o in outs for e in o["errors"]]
        rec["resumed"] = outs[-1]["actions"].get("resume", 0)
        with tr.saver() as reader, clients(env.redis_url, env.mongo_url) as (r, m):
            tr.drain(reader)
            rec["drain_s"] = time.monotonic() - began - rec["run_s"]
            acked = [a for path in tr.acks for a in _acked(path)]
            cps = [(a["t"], a["ns"], a["id"]) for a in acked]
            rec["acked"] = len(cps)
            rec["acked_distinct"] = len(set(cps))
            db = m[tr.database]
            rec["lost"] = mongo_has(db, cps).count(False)
            rec["duplicated"] = mongo_identity_duplicates(db)
            rec["mongo_checkpoints"] = db["checkpoints"].count_documents({})
            done = {a["t"] for path in tr.acks for a in AckLog.read(path) if a["k"] == "done"}
            rec["unfinished"] = len(set(names_) - done)
            drop_prefix(r, tr.prefix)  # MongoDB alone answers from here
            graph = graphs.build_flow(reader)
            refs = {t: graphs.flow_reference(t) for t in {topic_of(x) for x in names_}}
            bad = 0
            for t in names_:
                snap = graph.get_state({"configurable": {"thread_id": t}})
                bad += int(graphs.canonical(snap.values) != refs[topic_of(t)]
                           or bool(snap.next))
            rec["state_mismatches"] = bad
        lags = tr.lags()
        rec.update(lag_n=len(lags), lag_p50_s=pct(lags, 0.5), lag_p99_s=pct(lags, 0.99),
                   lag_max_s=max(lags) if lags else None)
        rec["cps_per_s"] = rec["acked_distinct"] / rec["run_s"]
        # what the workers and MongoDB absorbed, start to empty outbox
        rec["mongo_cps_per_s"] = rec["mongo_checkpoints"] / (rec["run_s"] + rec["drain_s"])
    finally:
        tr.cleanup()
    return rec


def throughput(env: Env, n_apps: int, *, threads: int, workers: int, concurrency: int,
               partitions: int, timeout_s: float) -> dict[str, Any]:
    """Checkpoints per second of ``n_apps`` application processes sharing ``threads``
    threads (no kills, no ack log); the processes start together (a wall-clock barrier)."""
    tr = Trial(env, f"s9tp{n_apps}", partitions)
    try:
        for k in range(workers):
            tr.worker(f"w{k}")
        start_at = time.time() + 5.0  # after every child imported and connected
        for k, share in enumerate(split([f"tp-{i}" for i in range(threads)], n_apps)):
            tr.app(f"a{k}", share, concurrency=concurrency, log=False, start_at=start_at)
        outs = []
        for a in tr.apps:
            if a.wait(timeout_s) != 0:
                raise RuntimeError(f"application process failed:\n{a.tail()}")
            outs.append(a.out())
        window = max(o["ended"] for o in outs) - min(o["began"] for o in outs)
        puts = sum(o["puts"] for o in outs)
        with tr.saver() as reader:
            tr.drain(reader)
        lags = tr.lags()
        return {"apps": n_apps, "checkpoints": puts, "seconds": window,
                "cps": puts / window, "errors": sum(len(o["errors"]) for o in outs),
                "lag_p99_s": pct(lags, 0.99)}
    finally:
        tr.cleanup()


def run(env: Env, threads: int = 200, apps: int = 4, workers: int = 2, concurrency: int = 4,
        kill_at: float = 0.35, partitions: int = 4, scaling: tuple[int, ...] = (),
        scaling_threads: int = 60, timeout_s: float = 600, step_s: float = 0.0) -> Result:
    where = "Redis Cluster" if is_cluster_url(env.redis_url) else \
        f"single Redis, {partitions} partitions"
    paced = f", paced: nodes sleep {step_s} s" if step_s else ""
    res = Result("s9p" if step_s else "s9",
                 f"9{'p' if step_s else ''}. {apps} app processes + {workers} flusher workers, "
                 f"one of each SIGKILLed and restarted ({where}{paced})")
    began = time.monotonic()
    rec = kill_trial(env, threads=threads, apps=apps, workers=workers,
                     concurrency=concurrency, kill_at=kill_at, partitions=partitions,
                     timeout_s=timeout_s, step_s=step_s)
    res.records = [rec]
    res.trials = 1
    res.faults = rec["killed"]
    res.acked = rec["acked_distinct"]
    res.lost = rec["lost"]
    res.duplicated = rec["duplicated"] + (rec["acked"] - rec["acked_distinct"])
    res.mismatches = rec["state_mismatches"] + len(rec["errors"]) + rec["unfinished"]
    res.measures = {
        "threads": threads, "threads resumed after the kill": rec["resumed"],
        "checkpoints in MongoDB": rec["mongo_checkpoints"],
        "flush lag p50 / p99 / max (s)": "/".join(
            f"{x:.3f}" if x is not None else "-"
            for x in (rec["lag_p50_s"], rec["lag_p99_s"], rec["lag_max_s"])),
        "checkpoints/s (with the kill)": round(rec["cps_per_s"], 1),
        "checkpoints/s into MongoDB (start to empty outbox)": round(rec["mongo_cps_per_s"], 1),
    }
    if rec["errors"]:
        res.findings.append(f"{len(rec['errors'])} thread runs raised: {rec['errors'][:3]}")
    if rec["killed"] != 2:
        res.findings.append("the kill landed after the process had ended (no fault)")
    for n in scaling:
        tp = throughput(env, n, threads=scaling_threads, workers=workers,
                        concurrency=concurrency, partitions=partitions, timeout_s=timeout_s)
        res.records.append(tp)
        res.measures[f"checkpoints/s with {n} app processes"] = round(tp["cps"], 1)
        if tp["errors"]:
            res.findings.append(f"throughput run with {n} processes: {tp['errors']} errors")
    if scaling:
        res.notes.append(
            f"throughput: the same {scaling_threads} threads split over 1, 2, 4 processes "
            f"({concurrency} Python threads each, {workers} workers), no kills, no ack log; "
            "records: " + json.dumps([{k: (round(v, 3) if isinstance(v, float) else v)
                                       for k, v in r.items()} for r in res.records[1:]]))
    shown = {k: v for k, v in rec.items() if k != "errors"}
    res.notes.append(f"kill trial: {json.dumps(shown, default=str)}")
    res.seconds = time.monotonic() - began
    return res
