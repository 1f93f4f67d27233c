"""A DurableSaver workload run alone, sampled by py-spy from its start to its end only
(no imports, server set-up or drain in the samples); used by ``benchmarks.profiling``.

    python -m benchmarks.profile_target w1|w3|w3conv REDIS_URL MONGO_URL RAW_OUT PY_SPY RATE N [M]

``w1``: N turns of the ReAct agent on 3 threads in a row; ``w3``: N threads of M steps of
the small loop graph at once; ``w3conv``: the benchmark's W3, N threads of the M-turn agent
loop (``graphs.build_conversation``) at once, ``W3CONV_ROUNDS`` times in a row (the
printed wall is one round's median). ``BENCH_SPY_CPU``: run py-spy on that
CPU (``taskset -c``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator

from langgraph_durable import DurableSaver

from . import graphs

W1_RUNS = 3
"""W1 is profiled over this many agent threads in a row (more samples at 100 Hz)."""
W3CONV_ROUNDS = 5
"""``w3conv`` is profiled over this many W3 runs in a row (fresh threads each; one run of
50 x 10 turns is ~1 s of samples, too few to rank 15 frames)."""


@contextlib.contextmanager
def sampled(raw_out: str, py_spy: str, rate: int) -> Iterator[None]:
    """py-spy samples this process (every thread, GIL holders only) inside the block."""
    cmd = [py_spy, "record", "--pid", str(os.getpid()), "--format", "raw", "--threads",
           "--full-filenames", "--gil", "--rate", str(rate), "-o", raw_out]
    if os.environ.get("BENCH_SPY_CPU"):
        cmd = ["taskset", "-c", os.environ["BENCH_SPY_CPU"], *cmd]
    spy = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    time.sleep(1.0)  # let it attach
    if spy.poll() is not None:
        raise RuntimeError(f"py-spy exited: {spy.stderr.read().decode()[-500:]}")
    try:
        yield
    finally:
        spy.send_signal(signal.SIGINT)
        spy.wait(60)


def main(argv: list[str]) -> None:
    which, redis_url, mongo_url, raw_out, py_spy = argv[:5]
    rate, size = int(argv[5]), int(argv[6])
    ns = f"prof{uuid.uuid4().hex[:8]}"
    if which == "w1":
        with DurableSaver.from_urls(redis_url, mongo_url, key_prefix=ns, database=ns) as s:
            runs = [(graphs.build_agent(s, size), {"configurable": {"thread_id": f"prof-w1-{k}"}})
                    for k in range(W1_RUNS)]
            for g, cfg in runs:  # warm up (first turn, imports)
                g.invoke({"messages": [graphs.human(0)]}, cfg)
            with sampled(raw_out, py_spy, rate):
                t0 = time.perf_counter()
                for g, cfg in runs:  # W1_RUNS agent threads one after the other
                    for t in range(1, size):
                        g.invoke({"messages": [graphs.human(t)]}, cfg)
                print(f"wall_s={(time.perf_counter() - t0) / W1_RUNS:.3f}", flush=True)
    elif which == "w3conv":
        turns = int(argv[7]) if len(argv) > 7 else 10
        asyncio.run(_w3conv(redis_url, mongo_url, ns, size, turns, raw_out, py_spy, rate))
    else:
        steps = int(argv[7]) if len(argv) > 7 else 20
        asyncio.run(_w3(redis_url, mongo_url, ns, size, steps, raw_out, py_spy, rate))
    import pymongo
    import redis

    with pymongo.MongoClient(mongo_url) as c:
        c.drop_database(ns)
    with redis.Redis.from_url(redis_url) as r:
        keys = list(r.scan_iter(match="{" + ns + ":*", count=1000))
        for i in range(0, len(keys), 500):
            r.delete(*keys[i:i + 500])


async def _w3(redis_url: str, mongo_url: str, ns: str, threads: int, steps: int,
              raw_out: str, py_spy: str, rate: int) -> None:
    from .savers import durable_async

    async with durable_async(redis_url, mongo_url, key_prefix=ns, database=ns) as s:
        g = graphs.build_loop(s, asynchronous=True)

        async def one(i: int, tag: str) -> None:
            cfg = {"configurable": {"thread_id": f"prof-w3-{tag}{i}"},
                   "recursion_limit": steps + 10}
            await g.ainvoke(graphs.loop_input(steps), cfg)

        await asyncio.gather(*(one(i, "warm") for i in range(4)))
        with sampled(raw_out, py_spy, rate):
            t0 = time.perf_counter()
            await asyncio.gather(*(one(i, "") for i in range(threads)))
            print(f"wall_s={time.perf_counter() - t0:.3f}", flush=True)


async def _w3conv(redis_url: str, mongo_url: str, ns: str, threads: int, turns: int,
                  raw_out: str, py_spy: str, rate: int) -> None:
    """The benchmark's W3 (``agent_loop.w3``): ``threads`` runs of the ``turns``-turn agent
    loop at once on one DurableSaver (write-behind, its flusher thread in the process)."""
    from .savers import durable_async

    async with durable_async(redis_url, mongo_url, key_prefix=ns, database=ns) as s:
        g = graphs.build_conversation(s, turns, asynchronous=True)

        async def one(i: int, tag: str) -> None:
            cfg = {"configurable": {"thread_id": f"prof-w3c-{tag}{i}"},
                   "recursion_limit": 2 * turns + 10}
            await g.ainvoke(graphs.conversation_input(i), cfg)

        await asyncio.gather(*(one(i, "warm") for i in range(4)))
        walls = []
        with sampled(raw_out, py_spy, rate):
            for k in range(W3CONV_ROUNDS):
                t0 = time.perf_counter()
                await asyncio.gather(*(one(i, f"r{k}-") for i in range(threads)))
                walls.append(time.perf_counter() - t0)
        print(f"wall_s={sorted(walls)[len(walls) // 2]:.3f}", flush=True)
        await s.aflush(120)


if __name__ == "__main__":
    main(sys.argv[1:])
