"""Scratch measurement (not a test): what retention by policy costs the flusher and the
sweep.

``python -m benchmarks.retention_timing [THREADS] [STEPS] [ROUNDS]`` starts its own
servers, and per round, for a saver without and one with ``ttl=`` (alternating, each its
own key prefix and database): writes THREADS threads x STEPS checkpoints (each with a
pending write) with ``flusher="off"``, then times one in-process flusher draining the
outbox (``flush()``: the rounds, plus the retention collection's query and bulk write per
round with a policy). Then times one ``sweep()`` deleting every thread of the last saver
with a policy (all set due with ``set_thread_ttl(id, 0)``). Prints medians.
"""

from __future__ import annotations

import statistics
import sys
import time
import uuid
from typing import Any

from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.base.id import uuid6

from langgraph_durable import DurableSaver
from langgraph_durable.testing import mongo_server, redis_server

POLICY = {"strategy": "delete", "default_ttl": 60, "sweep_interval_minutes": 600}


def fill(saver: DurableSaver, threads: int, steps: int) -> None:
    for t in range(threads):
        cfg: Any = {"configurable": {"thread_id": f"t{t}", "checkpoint_ns": ""}}
        for i in range(steps):
            cp = empty_checkpoint()
            cp["id"] = str(uuid6())
            cp["channel_values"] = {"count": i}
            cp["channel_versions"] = {"count": f"{i + 1:032}.0"}
            cfg = saver.put(cfg, cp, {"step": i}, {"count": f"{i + 1:032}.0"})
            saver.put_writes(cfg, [("count", i + 1)], f"task-{i}")


def one(rs: Any, ms: Any, threads: int, steps: int, ttl: bool) -> tuple[float, Any]:
    tag = uuid.uuid4().hex[:8]
    opts: dict[str, Any] = {"key_prefix": f"rt{tag}", "database": f"ret_{tag}"}
    if ttl:
        opts["ttl"] = POLICY
    with DurableSaver.from_urls(rs.url, ms.url, flusher="off", **opts) as app:
        fill(app, threads, steps)
    saver = DurableSaver.from_urls(rs.url, ms.url, **opts)
    t0 = time.perf_counter()
    saver.setup()
    saver.flush(timeout_s=600)
    return time.perf_counter() - t0, saver


def main() -> None:
    threads = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    with redis_server() as rs, mongo_server() as ms:
        times: dict[bool, list[float]] = {False: [], True: []}
        last = None
        for r in range(rounds):
            for ttl in ((False, True) if r % 2 == 0 else (True, False)):
                dt, saver = one(rs, ms, threads, steps, ttl)
                times[ttl].append(dt)
                if last is not None:
                    last.close()
                last = saver
        entries = threads * steps * 2
        for ttl in (False, True):
            med = statistics.median(times[ttl])
            print(f"flush of {entries} entries ({threads} threads), ttl={'on' if ttl else 'off'}:"
                  f" median {med:.2f} s ({entries / med:.0f} entries/s) over {rounds} rounds")
        assert last is not None
        if last.config.ttl is None:  # the last round ended without a policy: one more
            last.close()
            _dt, last = one(rs, ms, threads, steps, True)
        for t in range(threads):
            last.set_thread_ttl(f"t{t}", 0)
        t0 = time.perf_counter()
        report = last.sweep()
        dt = time.perf_counter() - t0
        print(f"sweep deleting {len(report.deleted)} threads of {steps} checkpoints: "
              f"{dt:.2f} s ({dt / max(1, len(report.deleted)) * 1000:.0f} ms per thread)")
        last.close()


if __name__ == "__main__":
    main()
