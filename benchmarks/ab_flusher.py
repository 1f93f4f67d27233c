"""Where the flusher runs, A/B in one run: W3 (many threads in one event loop, async) with
``flusher="auto"`` (a thread in the app), ``"process"`` (a supervised child) and
``"off"`` (nothing flushes during the run), interleaved round robin.

    python -m benchmarks.ab_flusher [--rounds N] [--threads T] [--steps S]

One saver per variant (``from_urls``, its own key prefix and database), all in one event
loop. Prints per variant the medians over rounds of: checkpoints per second (wall, the
run), the app process's CPU ms per checkpoint over the run and the ``aflush()`` that
drains what it left (``time.process_time``: its flusher thread included with ``auto``;
``run only``: without the drain), the flusher child's CPU ms per checkpoint over both
(``/proc``; ``process`` only) and the seconds the drain took; ratios to ``auto``.
Servers: REDIS_URL / MONGODB_URL if set, else local ones started for the run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import statistics
import time
import uuid

from langgraph_durable import DurableSaver
from langgraph_durable.testing import drop_namespace, mongo_server, redis_server

from . import graphs

VARIANTS = ("auto", "process", "off")
_TICK = os.sysconf("SC_CLK_TCK")


def _child_cpu_s(pid: int | None) -> float:
    """User + system CPU seconds of process ``pid`` so far (0 without one)."""
    if not pid:
        return 0.0
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


async def _w3(saver: DurableSaver, threads: int, steps: int, tag: str) -> dict[str, float]:
    g = graphs.build_loop(saver, asynchronous=True)
    pid = (await saver.astats())["flusher"] or {}
    child = pid.get("pid") if pid.get("pid") != os.getpid() else None

    async def one(i: int) -> None:
        cfg = {"configurable": {"thread_id": f"abf-{tag}-{i}"}, "recursion_limit": steps + 10}
        await g.ainvoke(graphs.loop_input(steps), cfg)

    k0, c0, t0 = _child_cpu_s(child), time.process_time(), time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(threads)))
    wall, cpu_run = time.perf_counter() - t0, time.process_time() - c0
    n = threads * (steps + 2)
    d0 = time.perf_counter()
    if saver.config.flusher != "off":
        await saver.aflush(timeout_s=120)
    cpu, kid = time.process_time() - c0, _child_cpu_s(child) - k0
    return {"cps": n / wall, "app_cpu_ms": cpu / n * 1e3, "run_cpu_ms": cpu_run / n * 1e3,
            "child_cpu_ms": kid / n * 1e3, "drain_s": time.perf_counter() - d0}


async def _main(a: argparse.Namespace, redis_url: str, mongo_url: str) -> None:
    tags = {v: f"abf{uuid.uuid4().hex[:8]}" for v in VARIANTS}
    got: dict[str, list[dict[str, float]]] = {v: [] for v in VARIANTS}
    try:
        async with contextlib.AsyncExitStack() as stack:
            savers = {v: await stack.enter_async_context(DurableSaver.from_urls(
                redis_url, mongo_url, key_prefix=tags[v], database=tags[v], flusher=v))
                for v in VARIANTS}
            for k in range(a.rounds + 1):  # round 0 warms up and is not counted
                order = VARIANTS[k % 3:] + VARIANTS[:k % 3]
                for v in order:
                    r = await _w3(savers[v], a.threads, a.steps, f"{v}-{k}")
                    if k:
                        got[v].append(r)
                        print(f"round {k} {v:8} {r['cps']:7.1f} cp/s  app {r['app_cpu_ms']:.3f}"
                              f" CPU ms/cp (run only {r['run_cpu_ms']:.3f})  child "
                              f"{r['child_cpu_ms']:.3f}  drain {r['drain_s']:.2f} s",
                              flush=True)
    finally:
        for t in tags.values():
            drop_namespace(redis_url, mongo_url, t, t)
    print(f"{a.rounds} rounds, W3 {a.threads} threads x {a.steps} steps; medians, ratio to "
          "auto")
    base: dict[str, float] = {}
    for v in VARIANTS:
        med = {m: statistics.median(r[m] for r in got[v]) for m in got[v][0]}
        base = base or med
        print(f"{v:8} {med['cps']:7.1f} cp/s ({med['cps'] / base['cps']:.3f}x)  app "
              f"{med['app_cpu_ms']:.3f} CPU ms/cp ({med['app_cpu_ms'] / base['app_cpu_ms']:.3f}x)"
              f" run only {med['run_cpu_ms']:.3f}  child {med['child_cpu_ms']:.3f} CPU ms/cp"
              f"  drain after {med['drain_s']:.2f} s")


def main() -> None:
    """Command line: start the servers (unless given), run the A/B, print the medians."""
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--threads", type=int, default=50)
    p.add_argument("--steps", type=int, default=10)
    a = p.parse_args()
    with contextlib.ExitStack() as stack:
        r_url = os.environ.get("REDIS_URL") or stack.enter_context(redis_server()).url
        m_url = os.environ.get("MONGODB_URL") or stack.enter_context(mongo_server()).url
        asyncio.run(_main(a, r_url, m_url))


if __name__ == "__main__":
    main()
