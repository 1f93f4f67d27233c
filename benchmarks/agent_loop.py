"""W1 and W3 (issue 22): the agent loop (``graphs.build_conversation``) one thread at a
time (W1: one ``invoke`` of ``w1_turns`` turns; sync, async, async with LangGraph's
``durability="sync"``) and many threads at once (W3: ``w3_threads`` concurrent runs of
``w3_turns`` turns, and the sweep over ``w3_sweep``). Each function runs one repetition
against one saver spec and returns a flat dict of metrics; ``run.py`` interleaves them.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from . import cpu, graphs
from .savers import SaverSpec
from .workloads import Params, pct, thread_cfg

# ---------------------------------------------------------------- W1: agent loop


def conversation_checkpoints(turns: int) -> int:
    """Checkpoints (= super-steps, the input one included) one run of the
    ``turns``-turn agent loop makes: the input, ``__start__``, agent and tools per turn."""
    return 2 * turns + 2


def _w1_metrics(wall: float, drain_s: float, steps: int, used: dict[str, float]
                ) -> dict[str, Any]:
    return {"wall_s": wall, "step_ms": wall / steps * 1e3, "settle_s": drain_s,
            "steps": steps, **used}


def w1_sync(spec: SaverSpec, p: Params, turns: int | None = None) -> dict[str, Any]:
    """One ``invoke`` of the ``turns``-turn (default ``w1_turns``) agent loop
    (``graphs.build_conversation``) on one thread, sync API; wall time over its
    checkpoints, then the drain (untimed)."""
    turns = p.w1_turns if turns is None else turns
    with spec.open_sync() as h:
        g = graphs.build_conversation(h.saver, turns)
        cfg = {**thread_cfg("w1"), "recursion_limit": 2 * turns + 10}
        c0 = cpu.snapshot()
        t0 = time.perf_counter()
        g.invoke(graphs.conversation_input(), cfg)
        wall = time.perf_counter() - t0
        a = time.perf_counter()
        spec.drain(h)
        drain_s = time.perf_counter() - a
        used = cpu.delta(c0, cpu.snapshot())
    return _w1_metrics(wall, drain_s, conversation_checkpoints(turns), used)


async def _w1_async(spec: SaverSpec, turns: int, durability: str | None) -> dict[str, Any]:
    async with spec.open_async() as h:
        g = graphs.build_conversation(h.saver, turns, asynchronous=True)
        cfg = {**thread_cfg("w1a"), "recursion_limit": 2 * turns + 10}
        kw = {} if durability is None else {"durability": durability}
        c0 = cpu.snapshot()
        t0 = time.perf_counter()
        await g.ainvoke(graphs.conversation_input(), cfg, **kw)
        wall = time.perf_counter() - t0
        a = time.perf_counter()
        await asyncio.to_thread(spec.drain, h)
        drain_s = time.perf_counter() - a
        used = cpu.delta(c0, cpu.snapshot())
    return _w1_metrics(wall, drain_s, conversation_checkpoints(turns), used)


def warm_up(spec: SaverSpec, turns: int = 2) -> None:
    """Run a short agent loop once per API on a fresh namespace of ``spec``, untimed, so
    that the first measured run pays no first-call costs (imports, compiled regexes, the
    scripts' first load, connection set-up)."""
    with spec.open_sync() as h:
        cfg = {**thread_cfg("warm"), "recursion_limit": 2 * turns + 10}
        graphs.build_conversation(h.saver, turns).invoke(graphs.conversation_input(), cfg)
        spec.drain(h)

    async def go() -> None:
        async with spec.open_async() as h:
            cfg = {**thread_cfg("warma"), "recursion_limit": 2 * turns + 10}
            await graphs.build_conversation(h.saver, turns, asynchronous=True).ainvoke(
                graphs.conversation_input(), cfg)
            await asyncio.to_thread(spec.drain, h)

    asyncio.run(go())


def w1_async(spec: SaverSpec, p: Params, durability: str | None = None,
             turns: int | None = None) -> dict[str, Any]:
    """W1 with ``ainvoke`` (the agent node a coroutine); ``durability``: LangGraph's
    ``durability`` argument (``"sync"``: each checkpoint is written before the next
    super-step starts; ``None``: its default, ``"async"``); ``turns``: default
    ``w1_turns``."""
    return asyncio.run(_w1_async(spec, p.w1_turns if turns is None else turns, durability))


# ---------------------------------------------------------------- W3: concurrency


async def _w3(spec: SaverSpec, p: Params, threads: int) -> dict[str, Any]:
    async with spec.open_async() as h:
        g = graphs.build_conversation(h.saver, p.w3_turns, asynchronous=True)
        lat: list[float] = []
        count = 0

        async def one(i: int) -> None:
            nonlocal count
            cfg = {**thread_cfg(f"w3-{i}"), "recursion_limit": 2 * p.w3_turns + 10}
            last = time.perf_counter()
            async for _ in g.astream(graphs.conversation_input(), cfg,
                                     stream_mode="updates"):
                now = time.perf_counter()
                lat.append(now - last)
                last = now
                count += 1

        c0 = cpu.snapshot()
        t0 = time.perf_counter()
        await asyncio.gather(*(one(i) for i in range(threads)))
        wall = time.perf_counter() - t0
        await asyncio.to_thread(spec.drain, h)
        used = cpu.delta(c0, cpu.snapshot())
    checkpoints = threads * conversation_checkpoints(p.w3_turns)
    return {"wall_s": wall, "cps": checkpoints / wall, "cp_ms": wall / checkpoints * 1e3,
            "p50_ms": pct(lat, 0.5) * 1e3, "p99_ms": pct(lat, 0.99) * 1e3,
            "steps_seen": count, "checkpoints": checkpoints, "threads": threads,
            "turns": p.w3_turns, **used}


def w3(spec: SaverSpec, p: Params, threads: int | None = None) -> dict[str, Any]:
    """``threads`` (default ``w3_threads``) threads, each one ``ainvoke``-like run
    (``astream``) of the ``w3_turns``-turn agent loop, all at once (``asyncio.gather``)
    on one saver: checkpoints per second of wall time, the wall time per checkpoint
    (``cp_ms``) and the time between a thread's consecutive super-steps (p50, p99)."""
    return asyncio.run(_w3(spec, p, p.w3_threads if threads is None else threads))
