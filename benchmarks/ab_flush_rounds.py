"""Same-process A/B of flush rounds: the code as of ``--baseline REF`` (importable as
``lgd_baseline``, ``ab_hot_path.baseline_package``) against the working tree, on the same
servers, interleaved round robin so both see the same machine.

    python -m benchmarks.ab_flush_rounds --baseline REF [--rounds N] [--threads T]
                                         [--turns K]

Each round fills each variant's outbox (its own DurableSaver, ``flusher="off"``, own key
prefix and database) with T agent threads of K turns (``flush_rounds.fill``), then drains
it with flush rounds run inline (``flush_rounds.drain``), timing the drain only. Prints
per variant the median over rounds (round 0 warms up, not counted) of entries per second
(wall) and CPU ms per 1,000 entries (the draining thread's CPU: ``time.thread_time``,
so PyMongo's monitor threads and the servers' load stay out), and the head's ratios to the base.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import tempfile
import time
import uuid
from typing import Any

from langgraph_durable.testing import drop_namespace, mongo_server, redis_server

from . import flush_rounds
from .ab_hot_path import baseline_package


def _drain(pkg: Any, saver: Any) -> tuple[int, float, float]:
    """``flush_rounds.drain`` with ``pkg``'s plans and driver: (entries, wall s, CPU s)."""
    ctx, clients = saver._ctx, saver.runtime.clients.sync
    pkg.io.drivers.run_sync(pkg.outbox.group.ensure_group_plan(ctx), clients)
    entries = 0
    w0, c0 = time.perf_counter(), time.thread_time()
    while True:
        stats = pkg.io.drivers.run_sync(pkg.outbox.flusher.flush_batch_plan(
            ctx, "bench", block_ms=1, claim=False, own=False), clients)
        if not stats.entries:
            break
        entries += stats.entries
    return entries, time.perf_counter() - w0, time.thread_time() - c0


def _server_cpu(pids: list[int]) -> float:
    """CPU seconds (user + system) the processes ``pids`` used so far (0 when unknown)."""
    from .cpu import _procs, _tree_cpu

    return _tree_cpu(pids, _procs()) if pids else 0.0


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--baseline", required=True)
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--threads", type=int, default=30)
    p.add_argument("--turns", type=int, default=5)
    p.add_argument("--batch", type=int, default=None,
                   help="flush_batch_size (default: the config's, 500)")
    p.add_argument("--interleave", action="store_true",
                   help="fill turn by turn over the threads (each round then holds a few "
                        "entries of many threads, as a flusher beside a busy application)")
    a = p.parse_args()
    opts: dict[str, Any] = {} if a.batch is None else {"flush_batch_size": a.batch}
    import langgraph_durable as head
    import langgraph_durable.io.drivers
    import langgraph_durable.outbox.flusher
    import langgraph_durable.outbox.group  # noqa: F401
    with contextlib.ExitStack() as stack:
        base = baseline_package(a.baseline, stack.enter_context(tempfile.TemporaryDirectory()))
        import lgd_baseline.io.drivers
        import lgd_baseline.outbox.flusher
        import lgd_baseline.outbox.group  # noqa: F401
        r_url = stack.enter_context(redis_server()).url
        mongo = stack.enter_context(mongo_server())
        m_url = mongo.url
        server = [mongo._proc.pid] if getattr(mongo, "_proc", None) is not None else []
        variants = {"base": base, "head": head}
        names = {v: f"abf{v}{uuid.uuid4().hex[:6]}" for v in variants}
        rows: dict[str, list[tuple[float, float, float]]] = {v: [] for v in variants}
        savers = {v: stack.enter_context(pkg.DurableSaver.from_urls(
            r_url, m_url, key_prefix=names[v], database=names[v], flusher="off", **opts))
            for v, pkg in variants.items()}
        try:
            for r in range(a.rounds + 1):
                order = list(variants) if r % 2 == 0 else list(variants)[::-1]
                for v in order:
                    flush_rounds.fill(savers[v], a.threads, a.turns, f"{r}",
                                      interleave=a.interleave)
                    s0 = _server_cpu(server)
                    n, wall, cpu = _drain(variants[v], savers[v])
                    srv = _server_cpu(server) - s0
                    if r:
                        rows[v].append((n / wall, cpu * 1e6 / n, srv * 1e6 / n))
                    print(f"round {r} {v}: {n} entries, {n / wall:.0f}/s, "
                          f"{cpu * 1e6 / n:.1f} CPU ms per 1,000, SecantusDB "
                          f"{srv * 1e6 / n:.1f}", flush=True)
        finally:
            for s in savers.values():
                s.close()
            for v in variants:
                drop_namespace(r_url, m_url, names[v], names[v])
        med = {v: tuple(statistics.median(x[i] for x in rows[v]) for i in range(3))
               for v in variants}
        for v in variants:
            print(f"{v}: {med[v][0]:.0f} entries/s, {med[v][1]:.1f} CPU ms per 1,000 entries, "
                  f"SecantusDB {med[v][2]:.1f} CPU ms per 1,000 entries")
        print(f"head/base: throughput {med['head'][0] / med['base'][0]:.3f}x, "
              f"CPU per entry {med['head'][1] / med['base'][1]:.3f}x, SecantusDB CPU per "
              f"entry {med['head'][2] / max(med['base'][2], 1e-9):.3f}x")


if __name__ == "__main__":
    main()
