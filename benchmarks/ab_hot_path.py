"""Same-process A/B of the asyncio hot path: script coalescing on/off and redis-py's reply
parser (hiredis or the pure-Python one), on W3 (many threads in one event loop), W1
async (one agent thread: a lone call per step), ``lone`` (puts of one thread in a row,
no graph) and ``read`` (hot ``aget_tuple`` of the W1 thread), interleaved round robin.

    python -m benchmarks.ab_hot_path [--rounds N] [--threads T] [--steps S] [--turns K]
                                     [--calls C] [--variants a,b]

One DurableSaver (write-behind, its flusher thread on) on servers of its own; before each
run its asyncio clients are switched to the variant's Redis client and ``coalesce`` flag.
Prints, per variant and workload, the median over rounds of checkpoints per second
(wall) and of process CPU milliseconds per checkpoint (the flusher thread included;
``--loop-cpu``: the event loop thread's only), and
their ratios to the first variant. No variant runs twice in a row.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid
from typing import Any

import redis.asyncio
from langgraph.checkpoint.base import empty_checkpoint
from redis._parsers import _AsyncHiredisParser, _AsyncRESP2Parser

from langgraph_durable import DurableSaver
from langgraph_durable.testing import drop_namespace, mongo_server, redis_server

from . import graphs
from .savers import durable_async

_CPU = [time.process_time]
"""The CPU clock: the process's (flusher thread included) or, ``--loop-cpu``, the event
loop thread's only (``time.thread_time``)."""


def _cpu() -> float:
    return _CPU[0]()


VARIANTS = {
    "coalesce+hiredis": (True, _AsyncHiredisParser),
    "plain+hiredis": (False, _AsyncHiredisParser),
    "coalesce+python": (True, _AsyncRESP2Parser),
    "plain+python": (False, _AsyncRESP2Parser),
}


def _client(url: str, parser: Any) -> Any:
    pool = redis.asyncio.BlockingConnectionPool.from_url(
        url, max_connections=64, timeout=30, parser_class=parser)
    return redis.asyncio.Redis(connection_pool=pool)


def _use(saver: DurableSaver, client: Any, coalesce: bool) -> Any:
    c = saver._clients.for_running_loop()  # the benchmark's own saver: switch its client
    assert c is not None
    c.redis, c.coalesce, c._registered, c._batcher = client, coalesce, {}, None
    return c


async def _w3(saver: DurableSaver, threads: int, steps: int, tag: str) -> tuple[float, float]:
    g = graphs.build_loop(saver, asynchronous=True)

    async def one(i: int) -> None:
        cfg = {"configurable": {"thread_id": f"ab-w3-{tag}-{i}"}, "recursion_limit": steps + 10}
        await g.ainvoke(graphs.loop_input(steps), cfg)

    c0, t0 = _cpu(), time.perf_counter()
    await asyncio.gather(*(one(i) for i in range(threads)))
    n = threads * (steps + 2)
    return n / (time.perf_counter() - t0), (_cpu() - c0) / n * 1e3


async def _w1(saver: DurableSaver, turns: int, tag: str) -> tuple[float, float]:
    g = graphs.build_agent(saver, turns, asynchronous=True)
    cfg = {"configurable": {"thread_id": f"ab-w1-{tag}"}}
    c0, t0 = _cpu(), time.perf_counter()
    for t in range(turns):
        await g.ainvoke({"messages": [graphs.human(t)]}, cfg)
    n = len([x async for x in saver.alist(cfg)])
    return n / (time.perf_counter() - t0), (_cpu() - c0) / n * 1e3


async def _lone(saver: DurableSaver, calls: int, tag: str) -> tuple[float, float]:
    """One thread, ``calls`` puts in a row, nothing concurrent: the lone-call path."""
    cfg: dict[str, Any] = {"configurable": {"thread_id": f"ab-lone-{tag}", "checkpoint_ns": ""}}
    c0, t0 = _cpu(), time.perf_counter()
    for i in range(calls):
        cp = empty_checkpoint()
        cp["channel_values"] = {"n": i}
        cp["channel_versions"] = {"n": f"{i + 1:032}.0"}
        cfg = await saver.aput(cfg, cp, {"step": i}, {"n": f"{i + 1:032}.0"})
    return calls / (time.perf_counter() - t0), (_cpu() - c0) / calls * 1e3


async def _read(saver: DurableSaver, calls: int, tag: str) -> tuple[float, float]:
    """``calls`` hot ``aget_tuple`` of the W1 agent thread just written (a large reply)."""
    cfg = {"configurable": {"thread_id": f"ab-w1-{tag}"}}
    c0, t0 = _cpu(), time.perf_counter()
    for _ in range(calls):
        await saver.aget_tuple(cfg)
    return calls / (time.perf_counter() - t0), (_cpu() - c0) / calls * 1e3


async def _main(a: argparse.Namespace, redis_url: str, mongo_url: str) -> None:
    ns = f"ab{uuid.uuid4().hex[:8]}"
    names = [v for v in VARIANTS if a.variants is None or v in a.variants.split(",")]
    clients = {v: _client(redis_url, VARIANTS[v][1]) for v in names}
    got: dict[tuple[str, str], list[tuple[float, float]]] = {}
    try:
        async with durable_async(redis_url, mongo_url, key_prefix=ns, database=ns) as s:
            for k in range(a.rounds + 1):  # round 0 warms up and is not counted
                order = names[k % len(names):] + names[:k % len(names)]
                for v in order:
                    c = _use(s, clients[v], VARIANTS[v][0])
                    w3 = await _w3(s, a.threads, a.steps, f"{v}-{k}")
                    b = c._batcher
                    if b is not None and k:
                        got.setdefault((v, "batch"), []).append((b.calls / b.batches, 0.0))
                    w1 = await _w1(s, a.turns, f"{v}-{k}")
                    rd = await _read(s, a.calls, f"{v}-{k}")
                    lone = await _lone(s, a.calls, f"{v}-{k}")
                    if k:
                        for w, r in (("W3", w3), ("W1async", w1), ("lone", lone), ("read", rd)):
                            got.setdefault((v, w), []).append(r)
                await s.aflush()
    finally:
        for cl in clients.values():
            await cl.aclose()
        drop_namespace(redis_url, mongo_url, ns, ns)
    print(f"{a.rounds} rounds, W3 {a.threads} threads x {a.steps} steps, W1 async {a.turns} "
          "turns; medians")
    print("W3/W1async: checkpoints per second and CPU ms per checkpoint; lone (aput in a "
          "row) and read (hot aget_tuple): calls per second and CPU ms per call")
    for w in ("W3", "W1async", "lone", "read"):
        base = None
        for v in names:
            runs = got[(v, w)]
            cps = statistics.median(r[0] for r in runs)
            cpu = statistics.median(r[1] for r in runs)
            base = base or (cps, cpu)
            extra = ""
            if w == "W3" and (v, "batch") in got:
                extra = f"  mean batch {statistics.median(r[0] for r in got[(v, 'batch')]):.1f}"
            print(f"{w:8} {v:18} {cps:8.1f} /s ({cps / base[0]:.3f}x)  "
                  f"{cpu:6.3f} CPU ms ({cpu / base[1]:.3f}x){extra}")


def main() -> None:
    """Command line: start the servers, run the A/B, print the medians."""
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--threads", type=int, default=50)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--turns", type=int, default=10)
    p.add_argument("--calls", type=int, default=200, help="calls of lone and read")
    p.add_argument("--variants", default=None, help="comma-separated subset of VARIANTS")
    p.add_argument("--loop-cpu", action="store_true",
                   help="CPU of the event loop thread only (not the flusher's)")
    a = p.parse_args()
    if a.loop_cpu:
        _CPU[0] = time.thread_time
    with redis_server() as r, mongo_server() as m:
        asyncio.run(_main(a, r.url, m.url))


if __name__ == "__main__":
    main()
