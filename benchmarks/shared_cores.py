"""What the servers' CPU on the shared cores costs the application, measured.

    python -m benchmarks.shared_cores [--rounds N] [--turns K]

On this project's machine (2 cores) the benchmark process shares its cores with
redis-server and SecantusDB, a MongoDB-wire server written in Python. DurableSaver's
flusher makes SecantusDB busy during a run; InMemorySaver and LangGraph alone make nothing
else busy. This script separates that effect from the saver's own cost:

1. it runs issue 22's W1 (one sync ``invoke`` of the K-turn conversation,
   ``graphs.build_conversation``) with DurableSaver and records the CPU seconds the two
   servers used per wall second of the run: their *duty*;
2. it runs the same W1 with InMemorySaver alone, and with a *burner* beside it: a second
   process that keeps one core busy for that duty (busy for ``duty`` of every 10 ms,
   asleep the rest), interleaved round robin with DurableSaver (its flusher on, and with
   ``flusher="off"``: nothing reaches MongoDB during the run, drained afterwards).

It prints the medians (ms per super-step) and the ratios: DurableSaver against
InMemorySaver alone (the benchmark's ratio) and against InMemorySaver beside the burner
(the ratio if both paid the same tax on the shared cores). The burner is plain Python
arithmetic, not SecantusDB's work, so this is an estimate of the effect, not a replay.
Servers: local ones started for the run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlparse

from langgraph.checkpoint.memory import InMemorySaver

from langgraph_durable import DurableSaver
from langgraph_durable.testing import drop_namespace, mongo_server, redis_server

from . import cpu, graphs

BURNER = """
import sys, time
duty, period = float(sys.argv[1]), 0.01
while True:
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < duty * period:
        pass
    time.sleep(period * (1 - duty))
"""


@contextlib.contextmanager
def burner(duty: float) -> Iterator[None]:
    """A process keeping one core busy ``duty`` (0-1) of the time while the block runs."""
    if duty <= 0:
        yield
        return
    proc = subprocess.Popen([sys.executable, "-c", BURNER, f"{min(duty, 1.0):.3f}"])
    time.sleep(0.2)
    try:
        yield
    finally:
        proc.kill()
        proc.wait()


def w1(saver: object, turns: int, tag: str) -> float:
    """Wall ms per super-step of one sync ``invoke`` of the conversation."""
    g = graphs.build_conversation(saver, turns)
    cfg = {"configurable": {"thread_id": f"cores-{tag}"}, "recursion_limit": 2 * turns + 10}
    t0 = time.perf_counter()
    g.invoke(graphs.conversation_input(), cfg)
    return (time.perf_counter() - t0) / (2 * turns + 2) * 1e3


def w3(make: Callable[[], Any], threads: int, turns: int, tag: str) -> float:
    """Checkpoints per second of issue 22's W3: ``threads`` conversations of ``turns``
    turns at once, ``ainvoke`` in one event loop, on a saver ``make()`` builds (entered
    with ``async with`` when it is a DurableSaver; leaving it, untimed, drains)."""

    async def go() -> float:
        saver = make()
        ctx = saver if isinstance(saver, DurableSaver) else contextlib.nullcontext(saver)
        async with ctx as s:
            g = graphs.build_conversation(s, turns, asynchronous=True)
            t0 = time.perf_counter()
            await asyncio.gather(*(g.ainvoke(
                graphs.conversation_input(i),
                {"configurable": {"thread_id": f"cores-{tag}-{i}"},
                 "recursion_limit": 2 * turns + 10}) for i in range(threads)))
            return threads * (2 * turns + 2) / (time.perf_counter() - t0)

    return asyncio.run(go())


def _w1_round(d: Any, off: Any, mem: Any, a: argparse.Namespace, k: int,
              duty_of: Callable[[Callable[[], float]], tuple[float, float]],
              burn: float | None) -> list[tuple[str, float]]:
    v, duty = duty_of(lambda: w1(d, a.turns, f"d{k}"))
    d.flush()
    runs = [("DurableSaver", v), ("DurableSaver flusher=off", w1(off, a.turns, f"o{k}")),
            ("InMemorySaver", w1(mem, a.turns, f"m{k}"))]
    with burner(duty if burn is None else burn):
        runs.append(("InMemorySaver + burner", w1(mem, a.turns, f"b{k}")))
    runs.append(("duty", duty))
    return runs


def _w3_round(redis_url: str, mongo_url: str, ns: str, a: argparse.Namespace, k: int,
              duty_of: Callable[[Callable[[], float]], tuple[float, float]],
              burn: float | None) -> list[tuple[str, float]]:
    def durable(flusher: str) -> Callable[[], DurableSaver]:
        return lambda: DurableSaver.from_urls(redis_url, mongo_url, key_prefix=ns + flusher,
                                              database=ns + flusher, flusher=flusher)

    v, duty = duty_of(lambda: w3(durable("auto"), a.threads, 10, f"d{k}"))
    runs = [("DurableSaver", v),
            ("DurableSaver flusher=off", w3(durable("off"), a.threads, 10, f"o{k}")),
            ("InMemorySaver", w3(InMemorySaver, a.threads, 10, f"m{k}"))]
    with burner(duty if burn is None else burn):
        runs.append(("InMemorySaver + burner", w3(InMemorySaver, a.threads, 10, f"b{k}")))
    runs.append(("duty", duty))
    for f in ("auto", "off"):
        drop_namespace(redis_url, mongo_url, ns + f, ns + f)
    return runs


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--turns", type=int, default=100, help="W1's turns (W3: 10)")
    p.add_argument("--threads", type=int, default=50, help="W3's concurrent threads")
    p.add_argument("--workload", choices=("w1", "w3"), default="w1")
    a = p.parse_args()
    with redis_server() as rs, mongo_server() as ms:
        cpu.find_servers(urlparse(rs.url).port, urlparse(ms.url).port, None)
        ns = f"cores{uuid.uuid4().hex[:6]}"

        def duty_of(run: Callable[[], float]) -> tuple[float, float]:
            c0, t0 = cpu.snapshot(), time.perf_counter()
            v = run()
            wall, c1 = time.perf_counter() - t0, cpu.snapshot()
            return v, sum(c1[n] - c0[n] for n in cpu.SERVERS) / wall

        got: dict[str, list[float]] = {}
        unit = "ms/step" if a.workload == "w1" else "cp/s"
        with DurableSaver.from_urls(rs.url, ms.url, key_prefix=ns, database=ns) as d, \
                DurableSaver.from_urls(rs.url, ms.url, key_prefix=ns + "o", database=ns + "o",
                                       flusher="off") as off:
            mem = InMemorySaver()
            for s in (d, off, mem):  # warm up: imports, scripts, first calls
                w1(s, 2, f"warm-{id(s)}")
            d.flush()
            for k in range(a.rounds + 1):  # round 0 warms up
                burn = statistics.median(got["duty"]) if got.get("duty") else None
                if a.workload == "w1":
                    runs = _w1_round(d, off, mem, a, k, duty_of, burn)
                else:
                    runs = _w3_round(rs.url, ms.url, f"{ns}r{k}", a, k, duty_of, burn)
                if k:
                    for name, v in runs:
                        got.setdefault(name, []).append(v)
        for name in (ns, ns + "o"):
            drop_namespace(rs.url, ms.url, name, name)
    duties = got.pop("duty")
    med = {n: statistics.median(v) for n, v in got.items()}
    what = (f"W1 sync, {a.turns} turns" if a.workload == "w1"
            else f"W3, {a.threads} threads x 10 turns, async")
    print(f"{a.rounds} rounds, {what}; servers' CPU per wall second of DurableSaver's run "
          f"(duty): median {statistics.median(duties):.2f} ({min(duties):.2f}-{max(duties):.2f})")
    for n, v in med.items():
        print(f"  {n:28s} {v:7.2f} {unit}  (per round {', '.join(f'{x:.2f}' for x in got[n])})")
    m, b = med["InMemorySaver"], med["InMemorySaver + burner"]
    slow = b / m if a.workload == "w1" else m / b
    print(f"  InMemorySaver slowed by the burner: {slow:.2f}x")
    for n in ("DurableSaver", "DurableSaver flusher=off"):
        r1, r2 = med[n] / m, med[n] / b
        word = "time" if a.workload == "w1" else "throughput"
        print(f"  {n} {word} / InMemorySaver's: {r1:.2f}x; / InMemorySaver + burner's: "
              f"{r2:.2f}x")


if __name__ == "__main__":
    main()
