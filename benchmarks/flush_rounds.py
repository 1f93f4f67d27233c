"""Cost of the flusher per outbox entry: fill the outbox with real agent checkpoints (a
saver with ``flusher="off"``), then drain it with flush rounds run inline, timing the
rounds only (wall seconds and this process's CPU seconds).

    python -m benchmarks.flush_rounds [THREADS] [TURNS] [REPEATS] [--spy RAW_OUT]

Prints entries/s and CPU ms per 1,000 entries for each repeat, then the median.
Servers: REDIS_URL / MONGODB_URL if set, else local ones started for the run.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import sys
import time
import uuid
from typing import Any

from langgraph_durable import DurableSaver
from langgraph_durable.io.drivers import run_sync
from langgraph_durable.outbox.flusher import flush_batch_plan
from langgraph_durable.outbox.group import ensure_group_plan
from langgraph_durable.testing import drop_namespace, mongo_server, redis_server

from . import graphs
from .profile_target import sampled

PY_SPY = "/work/main/.venv/bin/py-spy"


def fill(saver: DurableSaver, threads: int, turns: int, tag: str, *,
         interleave: bool = False) -> int:
    """Run the agent graph on ``threads`` new threads of ``turns`` turns (thread after
    thread, or with ``interleave`` turn after turn over all the threads); returns the
    outbox length after."""
    agents = [graphs.build_agent(saver, turns, seed=k) for k in range(threads)]
    cfgs = [{"configurable": {"thread_id": f"fr-{tag}-{k}"}} for k in range(threads)]
    order = ([(k, t) for t in range(turns) for k in range(threads)] if interleave
             else [(k, t) for k in range(threads) for t in range(turns)])
    for k, t in order:
        agents[k].invoke({"messages": [graphs.human(t, k)]}, cfgs[k])
    return int(saver.stats()["outbox_length"])


def drain(saver: DurableSaver) -> tuple[int, float, float, int]:
    """Flush rounds until the outbox is empty: (entries, wall s, CPU s, rounds)."""
    ctx, clients = saver._ctx, saver.runtime.clients.sync
    assert clients is not None
    run_sync(ensure_group_plan(ctx), clients)
    entries = rounds = 0
    w0, c0 = time.perf_counter(), time.process_time()
    while True:
        stats = run_sync(flush_batch_plan(ctx, "bench", block_ms=1, claim=False,
                                          own=False), clients)
        if not stats.entries:
            break
        entries += stats.entries
        rounds += 1
    return entries, time.perf_counter() - w0, time.process_time() - c0, rounds


def main(argv: list[str]) -> None:
    raw_out = None
    if "--spy" in argv:
        i = argv.index("--spy")
        raw_out = argv[i + 1]
        argv = argv[:i] + argv[i + 2:]
    threads, turns, repeats = (int(a) for a in (argv + ["40", "5", "3"][len(argv):])[:3])
    with contextlib.ExitStack() as stack:
        r_url = os.environ.get("REDIS_URL") or stack.enter_context(redis_server()).url
        m_url = os.environ.get("MONGODB_URL") or stack.enter_context(mongo_server()).url
        ns = f"fr{uuid.uuid4().hex[:8]}"
        rows: list[tuple[float, float]] = []
        opts: dict[str, Any] = {"key_prefix": ns, "database": ns, "flusher": "off"}
        try:
            with DurableSaver.from_urls(r_url, m_url, **opts) as saver:
                for rep in range(repeats):
                    n = fill(saver, threads, turns, f"{rep}")
                    spy = (sampled(raw_out, PY_SPY, 250) if raw_out and rep == repeats - 1
                           else contextlib.nullcontext())
                    with spy:
                        entries, wall, cpu, rounds = drain(saver)
                    assert entries >= n, (entries, n)
                    rows.append((entries / wall, cpu * 1e6 / entries))
                    print(f"repeat {rep}: {entries} entries in {rounds} rounds, "
                          f"{entries / wall:.0f} entries/s, {cpu * 1e6 / entries:.1f} CPU ms "
                          f"per 1,000 entries", flush=True)
        finally:
            drop_namespace(r_url, m_url, ns, ns)
        print(f"median: {statistics.median(r[0] for r in rows):.0f} entries/s, "
              f"{statistics.median(r[1] for r in rows):.1f} CPU ms per 1,000 entries")


if __name__ == "__main__":
    main(sys.argv[1:])
