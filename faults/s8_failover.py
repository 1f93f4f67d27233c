"""Scenario 8: the Redis primary fails over (Redis Cluster and Sentinel), with
``redis_min_replicas`` 0 and 1.

A writer (a thread of the runner) puts checkpoints on 8 threads in a loop (each put's parent
is the thread's last acknowledged checkpoint) with ``flusher="off"`` (the worst case: MongoDB
holds nothing of the run, so everything acknowledged lives in Redis only) and records every
acknowledged checkpoint id in an fsynced log (``tiers.AckLog``) as the put returns. Mid-run
the primary is SIGKILLed: on the cluster the primary owning the slots of half the threads'
outbox partitions, on Sentinel the one primary. A replica is promoted (cluster failover after
``cluster-node-timeout``; Sentinel after ``down-after-milliseconds``), the clients follow
(the cluster client reloads its slot map, Sentinel's ``master_for`` asks the sentinels) and
the writer continues for a second. Then a new saver flushes the outbox to MongoDB and every
acknowledged checkpoint is looked up (``get_tuple`` by id: Redis, then MongoDB): one found in
neither tier is lost.

Two forms of the fault:

* ``plain``: only the SIGKILL. On loopback a replica receives the replication stream as
  fast as the client its reply, so even without ``WAIT`` little or nothing is lost.
* ``cut``: first the replica is cut off from the primary (frozen with SIGSTOP and its
  replication link closed with ``CLIENT KILL TYPE replica``, as in a network partition that
  leaves clients reaching the primary), writes go on for ``cut_s`` seconds, then the primary
  is SIGKILLed and the replica resumed and promoted. Whatever was acknowledged after the cut
  reached no replica: with ``redis_min_replicas=0`` it is lost; with 1 such puts raise
  ``ReplicationTimeoutError`` instead of being acknowledged.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

import redis
from langgraph.checkpoint.base import empty_checkpoint
from redis.crc import key_slot

from langgraph_durable import DurableSaver
from langgraph_durable.testing.cluster import redis_cluster, redis_sentinel

from .common import Env, names
from .result import Result
from .tiers import AckLog, wait_for

THREADS = 8
WAIT_TIMEOUT_S = 0.2


def _slot_owner(rows: list[dict[str, Any]], slot: int) -> dict[str, Any]:
    return next(r for r in rows if "master" in r["flags"] and any(
        int(a) <= slot <= int(b) for a, b in (s.split("-") for s in r["slots"])))


@contextlib.contextmanager
def _deployment(kind: str) -> Iterator[Any]:
    with (redis_cluster() if kind == "cluster" else redis_sentinel()) as setup:
        yield setup


def _victims(kind: str, setup: Any) -> tuple[Any, Any]:
    """``(primary, its replica)`` processes: the primary to kill and the replica promoted."""
    if kind == "sentinel":
        port = setup.master_port()
        primary = next(n for n in setup.data_nodes if n.port == port)
        return primary, next(n for n in setup.data_nodes if n.port != port)
    rows = setup.cluster_nodes()
    primary = setup.masters()[0]
    pid = next(r["id"] for r in rows if r["port"] == primary.port)
    rport = next(r["port"] for r in rows if r["master_id"] == pid)
    return primary, next(n for n in setup.nodes if n.port == rport)


def _threads(kind: str, setup: Any, saver: DurableSaver, primary_port: int) -> list[str]:
    """8 thread ids; on the cluster half of them in slots of the primary to be killed."""
    if kind == "sentinel":
        return [f"fo-{i}" for i in range(THREADS)]
    rows = setup.cluster_nodes()
    on, off = [], []
    i = 0
    while len(on) < THREADS // 2 or len(off) < THREADS // 2:
        tid = f"fo-{i}"
        i += 1
        owner = _slot_owner(rows, int(key_slot(saver._ctx.keys(tid).cp.encode())))
        (on if owner["port"] == primary_port else off).append(tid)
    return on[:THREADS // 2] + off[:THREADS // 2]


class _Writer(threading.Thread):
    """Puts checkpoints on ``threads`` round-robin until ``stop``; logs each acknowledged
    one; a put that raises (failover under way, WAIT short) is not acknowledged."""

    def __init__(self, saver: DurableSaver, threads: list[str], log: AckLog) -> None:
        super().__init__(daemon=True)
        self.saver, self.threads, self.log = saver, threads, log
        self.stop = threading.Event()
        self.acked = 0
        self.refused: dict[str, int] = {}
        self.heads: dict[str, str | None] = dict.fromkeys(threads)

    def run(self) -> None:
        step = 0
        while not self.stop.is_set():
            step += 1
            for tid in self.threads:
                conf: dict[str, Any] = {"thread_id": tid, "checkpoint_ns": ""}
                if self.heads[tid]:
                    conf["checkpoint_id"] = self.heads[tid]
                cp = empty_checkpoint()
                cp["channel_values"] = {"v": step}
                cp["channel_versions"] = {"v": str(step)}
                try:
                    got = self.saver.put({"configurable": conf}, cp, {"step": step},
                                         {"v": str(step)})
                except Exception as exc:  # not acknowledged: counted by kind
                    name = type(exc).__name__
                    self.refused[name] = self.refused.get(name, 0) + 1
                    continue
                cid = got["configurable"]["checkpoint_id"]
                self.log.append(thread=tid, checkpoint_id=cid)
                self.heads[tid] = cid
                self.acked += 1
            time.sleep(0.002)


def trial(env: Env, kind: str, form: str, min_replicas: int, *, cut_s: float = 0.5,
          after_s: float = 1.0) -> dict[str, Any]:
    """One failover; returns ``{"acked", "lost", "refused", "failover_s", ...}``."""
    prefix, db = names("fo")
    opts: dict[str, Any] = dict(key_prefix=prefix, database=db, flusher="off",
                                on_concurrent_run="fork", redis_min_replicas=min_replicas,
                                redis_wait_timeout_s=WAIT_TIMEOUT_S, socket_timeout_s=2.0)
    log_path = str(env.work / f"s8-{kind}-{form}-{min_replicas}-{prefix}.jsonl")
    with _deployment(kind) as setup:
        primary, replica = _victims(kind, setup)
        saver = DurableSaver.from_urls(setup.url, env.mongo_url, **opts)
        threads = _threads(kind, setup, saver, primary.port)
        writer = _Writer(saver, threads, AckLog(log_path))
        writer.start()
        wait_for(lambda: writer.acked >= 200, 30, "200 acknowledged puts")
        frozen = False
        if form == "cut":
            os.kill(replica._proc.pid, signal.SIGSTOP)
            frozen = True
            with redis.Redis("127.0.0.1", primary.port) as r:
                r.execute_command("CLIENT", "KILL", "TYPE", "replica")
            time.sleep(cut_s)  # writes go on with the replica cut off
        acked_at_kill = writer.acked
        killed_at = time.monotonic()
        primary.kill()
        if frozen:
            os.kill(replica._proc.pid, signal.SIGCONT)
        if kind == "sentinel":
            wait_for(lambda: _quiet(lambda: setup.master_port() == replica.port), 60,
                     "replica promoted by the sentinels")
        else:
            wait_for(lambda: _quiet(lambda: replica.port in [
                r["port"] for r in setup.cluster_nodes() if "master" in r["flags"]
                and r["slots"]]), 60, "replica promoted by the cluster")
        failover_s = time.monotonic() - killed_at
        promoted_acked = writer.acked
        time.sleep(after_s)  # the writer continues on the new primary
        writer.stop.set()
        writer.join(30)
        saver.close()
        acks = AckLog.read(log_path)
        with DurableSaver.from_urls(setup.url, env.mongo_url,
                                    **{**opts, "flusher": "auto", "redis_min_replicas": 0}
                                    ) as check:
            check.flush(60)
            lost = [a for a in acks if check.get_tuple({"configurable": {
                "thread_id": a["thread"], "checkpoint_ns": "",
                "checkpoint_id": a["checkpoint_id"]}}) is None]
        with contextlib.suppress(Exception):
            import pymongo

            with pymongo.MongoClient(env.mongo_url) as m:
                m.drop_database(db)
    return {"kind": kind, "form": form, "min_replicas": min_replicas, "acked": len(acks),
            "lost": len(lost), "acked_before_kill": acked_at_kill,
            "acked_after_promotion": writer.acked - promoted_acked,
            "refused": writer.refused, "failover_s": round(failover_s, 2),
            "lost_ids": [a["checkpoint_id"] for a in lost][:20]}


def _quiet(pred: Any) -> bool:
    try:
        return bool(pred())
    except (redis.RedisError, OSError, KeyError, StopIteration):
        return False


def run(env: Env, trials: int = 1, forms: tuple[str, ...] = ("plain", "cut"),
        kinds: tuple[str, ...] = ("cluster", "sentinel")) -> Result:
    """``trials`` failovers per deployment kind, form and ``redis_min_replicas`` (0, 1)."""
    res = Result("s8", "8. Redis primary SIGKILLed and failed over (cluster, Sentinel), "
                       "redis_min_replicas 0 and 1")
    began = time.monotonic()
    lost_by: dict[str, list[int]] = {}
    for kind in kinds:
        for form in forms:
            for n in (0, 1):
                for _ in range(trials):
                    rec = trial(env, kind, form, n)
                    env.log(str(rec))
                    res.records.append(rec)
                    res.trials += 1
                    res.faults += 1
                    res.add("acked", rec["acked"])
                    key = f"{kind} {form} min_replicas={n}"
                    agg = lost_by.setdefault(key, [0, 0])
                    agg[0] += rec["lost"]
                    agg[1] += rec["acked"]
                    if n >= 1 and rec["lost"]:
                        res.findings.append(f"{key}: {rec['lost']} acknowledged checkpoints "
                                            "lost despite WAIT")
    res.lost = sum(v[0] for k, v in lost_by.items() if "min_replicas=1" in k)
    res.measures = {k: f"{v[0]} of {v[1]} lost" for k, v in lost_by.items()}
    res.notes.append("lost with min_replicas=0 is the expected cost of asynchronous "
                     "replication (counted in the measures, not as a failure)")
    res.seconds = time.monotonic() - began
    return res
