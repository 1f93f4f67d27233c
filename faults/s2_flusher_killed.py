"""Scenario 2: a flusher worker is SIGKILLed while it holds pending outbox entries.

The application (this process) writes with ``flusher="off"``; two standalone workers
(``python -m langgraph_durable.outbox.worker``) drain the outbox. Worker A starts on a
backlog with a small random ``--flush-batch-size``; it is frozen (SIGSTOP) at random
moments until the consumer group shows it holding pending entries (read, not acknowledged:
somewhere between its XREADGROUP and its XACK), then SIGKILLed. Worker B
(``--claim-idle-s 0.3``) starts while the application keeps writing, and must claim them.
When the outbox is empty, MongoDB must hold exactly the documents that the records in Redis
make (none missing, none extra, none different, no identity twice), and every read served
by MongoDB alone (Redis keys of the threads removed) must equal the read served hot.
"""

from __future__ import annotations

import contextlib
import os
import random
import re
import signal
import threading
import time
from typing import Any

import redis

from langgraph_durable import DurableSaver
from langgraph_durable.hot.keys import CONSUMER_GROUP
from langgraph_durable.outbox.flusher import dead_letter_key

from . import graphs
from .common import Env, cleanup, clients, names, thread_answers, worker
from .result import Result
from .tiers import compare_docs, expected_docs_from_redis, mongo_identity_duplicates, wait_for

CLAIM_IDLE_S = 0.3


def _name(c: Any) -> str:
    return c.decode() if isinstance(c, bytes) else str(c)


def _held_by(r: Any, outboxes: list[str], pid: int) -> int:
    """Entries the worker with process id ``pid`` holds pending, over every partition."""
    return sum(c["pending"] for outbox in outboxes
               for c in r.xpending(outbox, CONSUMER_GROUP).get("consumers", [])
               if f"-{pid}-" in _name(c["name"]))


def _joined(r: Any, outboxes: list[str], pid: int) -> bool:
    """Whether the worker with process id ``pid`` is a consumer of some partition."""
    for outbox in outboxes:
        with contextlib.suppress(redis.exceptions.ResponseError):  # no group there yet
            if any(f"-{pid}-" in _name(c["name"])
                   for c in r.xinfo_consumers(outbox, CONSUMER_GROUP)):
                return True
    return False


def _backlog(r: Any, outboxes: list[str]) -> int:
    return sum(r.xlen(s) for s in outboxes)


def trial(env: Env, i: int, rng: random.Random) -> dict[str, Any]:
    prefix, database = names("s2")
    threads = [f"s2-{i}-{k}" for k in range(4)]
    rec: dict[str, Any] = {"batch": rng.choice([1, 2, 3, 5, 8])}
    procs: list[Any] = []
    try:
        with DurableSaver.from_urls(env.redis_url, env.mongo_url, key_prefix=prefix,
                                    database=database, flusher="off") as app, \
                clients(env.redis_url, env.mongo_url) as (r, m):
            graph = graphs.build_flow(app)

            def produce(ts: list[str]) -> None:
                for t in ts:
                    graph.invoke(graphs.flow_input(t), {"configurable": {"thread_id": t}})

            produce(threads[:2])  # a backlog before any worker runs
            common = {"flush_interval_s": 0.05, "claim_idle_s": CLAIM_IDLE_S}
            a = worker(env.redis_url, env.mongo_url, prefix, database,
                       env.work / f"s2-{i}-a.log", flush_batch_size=rec["batch"], **common)
            procs = [a]
            boxes = app.context.outboxes  # one stream per partition (16 on a cluster)
            wait_for(lambda: _joined(r, boxes, a.pid), 30, "worker A to join the consumer group")
            time.sleep(rng.uniform(0.0, 0.05))  # let A work a while: the fault's timing
            held, deadline = 0, time.monotonic() + 20
            while time.monotonic() < deadline and _backlog(r, boxes):
                os.kill(a.pid, signal.SIGSTOP)  # freeze A, look at what it holds
                held = _held_by(r, boxes, a.pid)
                if held:
                    break
                os.kill(a.pid, signal.SIGCONT)
                time.sleep(rng.uniform(0.0005, 0.005))
            a.kill()
            a.wait(10)
            rec["killed"], rec["held"] = int(held > 0), held
            b = worker(env.redis_url, env.mongo_url, prefix, database,
                       env.work / f"s2-{i}-b.log", flush_batch_size=50, **common)
            procs.append(b)
            more = threading.Thread(target=produce, args=(threads[2:],))  # and more work
            more.start()
            more.join(120)
            wait_for(lambda: _backlog(r, boxes) == 0, 60, "the outbox to drain")
            b.send_signal(signal.SIGTERM)
            b.wait(20)
            out_b = (env.work / f"s2-{i}-b.log").read_text(errors="replace")
            got = re.search(r"(\d+) entries in (\d+) rounds", out_b)
            rec["b_entries"] = int(got.group(1)) if got else None
            rec["b_exit"] = b.returncode
            db = m[database]
            rec["dead_letters"] = r.xlen(dead_letter_key(app.context))
            want = expected_docs_from_redis(r, prefix, threads, app.context.partitions)
            rec.update(compare_docs(want, db, threads))
            rec["duplicated"] = mongo_identity_duplicates(db)
            rec["checkpoints"] = db["checkpoints"].count_documents({})
            rec["documents"] = sum(db[c].count_documents({})
                                   for c in ("checkpoints", "blobs", "writes"))
            hot = {t: thread_answers(app, t) for t in threads}
            for t in threads:
                r.delete(*app.context.keys(t).all)
            cold = {t: thread_answers(app, t) for t in threads}
            rec["read_mismatches"] = sum(hot[t][k] != cold[t].get(k) for t in threads
                                         for k in hot[t])
            ref = graphs.canonical(graph.get_state({"configurable": {"thread_id": threads[0]}})
                                   .values)
            rec["state_mismatch"] = int(ref != graphs.flow_reference(threads[0]))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        cleanup(env.redis_url, env.mongo_url, prefix, database)
    return rec


def run(env: Env, trials: int, seed: int = 2) -> Result:
    res = Result("s2", "2. flusher worker SIGKILLed mid-batch, another claims its entries")
    began = time.monotonic()
    recs = [trial(env, i, random.Random(seed * 7919 + i)) for i in range(trials)]
    res.records = recs
    res.trials = len(recs)
    res.faults = sum(r["killed"] for r in recs)
    res.acked = sum(r["checkpoints"] for r in recs)
    res.lost = sum(r["missing"] for r in recs)
    res.duplicated = sum(r["duplicated"] + r["extra"] for r in recs)
    res.mismatches = sum(r["different"] + r["read_mismatches"] + r["state_mismatch"]
                         for r in recs)
    res.measures = {
        "entries held by the killed worker": sum(r["held"] for r in recs),
        "documents compared": sum(r["documents"] for r in recs),
        "dead letters": sum(r["dead_letters"] for r in recs),
    }
    if any(r["dead_letters"] for r in recs):
        res.findings.append("entries went to the dead-letter stream")
    if any(r["b_exit"] != 0 for r in recs):
        res.findings.append("worker B did not exit 0 on SIGTERM")
    res.seconds = time.monotonic() - began
    return res
