"""Same-process A/B of the hot path, variants interleaved round robin.

    python -m benchmarks.ab_hot_path [--rounds N] [--threads T] [--steps S] [--turns K]
                                     [--calls C] [--variants a,b] [--workloads w,...]
                                     [--baseline REF] [--loop-cpu]

Two kinds of variants:

- client variants (default): one DurableSaver whose asyncio clients are switched before
  each run to the variant's Redis client and ``coalesce`` flag: script coalescing on/off
  and redis-py's reply parser (hiredis or the pure-Python one);
- ``--baseline REF``: the code as of ``REF`` against the working tree. ``langgraph_durable``
  at ``REF`` is extracted (``git archive``) into a temporary folder as the package
  ``lgd_baseline`` (its absolute imports renamed), so both run in this process on the same
  servers, each its own DurableSaver (own key prefix and database), ``base`` and ``head``.

Workloads (``--workloads``, default ``W3,W1async,lone,read``):

- ``W3``: T threads x S steps of the small loop graph, ``ainvoke`` in one event loop;
- ``W3conv``: the issue's W3, T threads x K turns of the conversation agent (per turn an
  AIMessage ~600 chars with a tool call and a ToolMessage ~1,500 chars), async nodes;
- ``W1async``: one agent thread, K turns of ``ainvoke`` (a lone call per step);
- ``W1dsync``: the same with LangGraph's ``durability="sync"`` (each put awaited);
- ``lone``: C ``aput``s of one thread in a row, no graph; ``read``: C hot ``aget_tuple``
  of the W1 thread (a large reply);
- ``W1sync``: issue 22's W1 on the sync API, one ``invoke`` of the K-turn conversation;
- ``W3sync``: T OS threads (a ``ThreadPoolExecutor``) each running the sync loop graph
  S steps (``invoke``): concurrent calls of the sync API;
- ``DOCS``: DOCS' agent loop (4 threads x 50 turns at once) and the outbox drained after
  it (``aflush``), both timed: CPU per checkpoint of writing and flushing.

Prints, per variant and workload, the median over rounds of checkpoints (or calls) per
second (wall) and of CPU milliseconds per checkpoint (process CPU, the flusher thread
included; ``--loop-cpu``: the event loop thread's only, except for ``W3sync``, which is
always the process's), and their ratios to the first variant. No variant runs twice in a
row; round 0 warms up and is not counted.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import redis.asyncio
from langchain_core.messages import AIMessage
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode
from redis._parsers import _AsyncHiredisParser, _AsyncRESP2Parser

from langgraph_durable.testing import drop_namespace, mongo_server, redis_server

from . import graphs, savers

_CPU = [time.process_time]
"""The CPU clock: the process's (flusher thread included) or, ``--loop-cpu``, the event
loop thread's only (``time.thread_time``)."""


def _cpu() -> float:
    return _CPU[0]()


CLIENT_VARIANTS = {
    "coalesce+hiredis": (True, _AsyncHiredisParser),
    "plain+hiredis": (False, _AsyncHiredisParser),
    "coalesce+python": (True, _AsyncRESP2Parser),
    "plain+python": (False, _AsyncRESP2Parser),
}
WORKLOADS = ("W3", "W3conv", "W1async", "W1dsync", "lone", "read", "W3sync", "W1sync", "DOCS")
POOL = 64
"""Connections of each asyncio pool (blocking pool: W3 has many calls in flight)."""


@dataclass
class Variant:
    """One side of the A/B: its saver, and the asyncio client and flag to run it with
    (``client`` None: the saver's own)."""

    name: str
    saver: Any
    client: Any = None
    coalesce: bool = True


def _client(url: str, parser: Any) -> Any:
    pool = redis.asyncio.BlockingConnectionPool.from_url(
        url, max_connections=POOL, timeout=30, parser_class=parser)
    return redis.asyncio.Redis(connection_pool=pool)


def _use(v: Variant) -> Any:
    # the benchmark's own saver: switch its client (a --baseline before the saver held its
    # runtime has the clients as ``_clients``)
    runtime = getattr(v.saver, "runtime", None)
    clients = runtime.clients if runtime is not None else v.saver._clients
    c = clients.for_running_loop()
    assert c is not None
    if v.client is not None:
        c.redis, c.coalesce, c._registered, c._batcher = v.client, v.coalesce, {}, None
    return c


# ------------------------------------------------------------------ the baseline package


def baseline_package(ref: str, into: str) -> Any:
    """``langgraph_durable`` as of git ``ref``, importable as ``lgd_baseline`` (extracted
    into ``into``; absolute imports of the package renamed); returns the module."""
    archive = subprocess.run(["git", "archive", ref, "langgraph_durable"],
                             capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", into], input=archive, check=True)
    root = os.path.join(into, "lgd_baseline")
    os.rename(os.path.join(into, "langgraph_durable"), root)
    pat = re.compile(r"\blanggraph_durable\b")
    for d, _, files in os.walk(root):
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(d, f)
                with open(path) as fh:
                    src = fh.read()
                with open(path, "w") as fh:
                    fh.write(pat.sub("lgd_baseline", src))
    sys.path.insert(0, into)
    return importlib.import_module("lgd_baseline")


def _open(pkg: Any, redis_url: str, mongo_url: str, ns: str) -> Any:
    """A DurableSaver of package ``pkg`` to enter with ``async with`` (write-behind, its
    flusher thread on), built as ``savers.durable_async`` builds it."""
    return savers.durable_async(redis_url, mongo_url, pkg=pkg, key_prefix=ns, database=ns)


# ------------------------------------------------------------------ workloads


def build_conversation_async(checkpointer: Any, turns: int, seed: int) -> Any:
    """``graphs.build_conversation`` with a coroutine agent node (for ``ainvoke``)."""
    script = iter(graphs._conv_script(turns, seed))
    tools = ToolNode([graphs.fetch_passage])

    async def agent(state: MessagesState) -> dict[str, list[AIMessage]]:
        return {"messages": [next(script)]}

    def more(state: MessagesState) -> str:
        return "agent" if len(state["messages"]) < 1 + 2 * turns else END

    b = StateGraph(MessagesState)
    b.add_node("agent", agent)
    b.add_node("tools", tools)
    b.add_edge(START, "agent")
    b.add_edge("agent", "tools")
    b.add_conditional_edges("tools", more, ["agent", END])
    return b.compile(checkpointer=checkpointer)


Result = tuple[float, float]


async def _timed(count: int, run: Awaitable[Any]) -> Result:
    """Checkpoints (calls) per second and CPU ms per checkpoint of awaiting ``run``."""
    c0, t0 = _cpu(), time.perf_counter()
    await run
    return count / (time.perf_counter() - t0), (_cpu() - c0) / count * 1e3


async def _w3(saver: Any, a: argparse.Namespace, tag: str) -> Result:
    g = graphs.build_loop(saver, asynchronous=True)

    async def one(i: int) -> None:
        cfg = {"configurable": {"thread_id": f"ab-w3-{tag}-{i}"},
               "recursion_limit": a.steps + 10}
        await g.ainvoke(graphs.loop_input(a.steps), cfg)

    return await _timed(a.threads * (a.steps + 2),
                        asyncio.gather(*(one(i) for i in range(a.threads))))


async def _w3conv(saver: Any, a: argparse.Namespace, tag: str) -> Result:
    async def one(i: int) -> None:
        g = build_conversation_async(saver, a.turns, i)
        cfg = {"configurable": {"thread_id": f"ab-w3c-{tag}-{i}"},
               "recursion_limit": 4 * a.turns + 10}
        await g.ainvoke(graphs.conversation_input(i), cfg)

    return await _timed(a.threads * (2 * a.turns + 2),
                        asyncio.gather(*(one(i) for i in range(a.threads))))


async def _w1(saver: Any, a: argparse.Namespace, tag: str, durability: str = "async"
              ) -> Result:
    g = graphs.build_agent(saver, a.turns, asynchronous=True)
    cfg = {"configurable": {"thread_id": f"ab-w1-{durability}-{tag}"}}

    c0, t0 = _cpu(), time.perf_counter()
    for t in range(a.turns):
        await g.ainvoke({"messages": [graphs.human(t)]}, cfg, durability=durability)
    wall, used = time.perf_counter() - t0, _cpu() - c0
    n = len([x async for x in saver.alist(cfg)])
    return n / wall, used / n * 1e3


async def _lone(saver: Any, a: argparse.Namespace, tag: str) -> Result:
    """One thread, ``calls`` puts in a row, nothing concurrent: the lone-call path."""
    cfg: dict[str, Any] = {"configurable": {"thread_id": f"ab-lone-{tag}", "checkpoint_ns": ""}}

    async def run() -> None:
        nonlocal cfg
        for i in range(a.calls):
            cp = empty_checkpoint()
            cp["channel_values"] = {"n": i}
            cp["channel_versions"] = {"n": f"{i + 1:032}.0"}
            cfg = await saver.aput(cfg, cp, {"step": i}, {"n": f"{i + 1:032}.0"})

    return await _timed(a.calls, run())


async def _read(saver: Any, a: argparse.Namespace, tag: str) -> Result:
    """``calls`` hot ``aget_tuple`` of the W1 agent thread just written (a large reply)."""
    cfg = {"configurable": {"thread_id": f"ab-w1-async-{tag}"}}

    async def run() -> None:
        for _ in range(a.calls):
            await saver.aget_tuple(cfg)

    return await _timed(a.calls, run())


def _w1sync(saver: Any, a: argparse.Namespace, tag: str) -> Result:
    """Issue 22's W1 on the sync API: one ``invoke`` of the K-turn conversation
    (``graphs.build_conversation``), run in a worker thread as a sync app would."""
    g = graphs.build_conversation(saver, a.turns)
    cfg = {"configurable": {"thread_id": f"ab-w1s-{tag}"}, "recursion_limit": 2 * a.turns + 10}
    n = 2 * a.turns + 2
    c0, t0 = time.process_time(), time.perf_counter()
    g.invoke(graphs.conversation_input(), cfg)
    return n / (time.perf_counter() - t0), (time.process_time() - c0) / n * 1e3


def _w3sync(saver: Any, a: argparse.Namespace, tag: str) -> Result:
    """``threads`` OS threads, each ``invoke``s the sync loop graph for ``steps`` steps."""
    g = graphs.build_loop(saver)

    def one(i: int) -> None:
        cfg = {"configurable": {"thread_id": f"ab-w3s-{tag}-{i}"},
               "recursion_limit": a.steps + 10}
        g.invoke(graphs.loop_input(a.steps), cfg)

    n = a.threads * (a.steps + 2)
    with ThreadPoolExecutor(a.threads) as pool:
        c0, t0 = time.process_time(), time.perf_counter()
        list(pool.map(one, range(a.threads)))
        return n / (time.perf_counter() - t0), (time.process_time() - c0) / n * 1e3


async def _docs(saver: Any, a: argparse.Namespace, tag: str) -> Result:
    """DOCS' workload (``mongo_docs.py``: 4 threads x 50 turns of the agent loop at once)
    and the drain after it (``aflush``), both timed: the process' CPU per checkpoint of
    writing and flushing it (the in-process flusher's included)."""
    threads, turns = 4, 50
    g = graphs.build_conversation(saver, turns, asynchronous=True)

    async def run() -> None:
        await asyncio.gather(*(g.ainvoke(graphs.conversation_input(i), {
            "configurable": {"thread_id": f"ab-docs-{tag}-{i}"},
            "recursion_limit": 4 * turns + 10}) for i in range(threads)))
        await saver.aflush()

    return await _timed(threads * (2 * turns + 2), run())


async def _workload(w: str, saver: Any, a: argparse.Namespace, tag: str) -> Result:
    if w == "DOCS":
        return await _docs(saver, a, tag)
    if w == "W3":
        return await _w3(saver, a, tag)
    if w == "W3conv":
        return await _w3conv(saver, a, tag)
    if w == "W1async":
        return await _w1(saver, a, tag)
    if w == "W1dsync":
        return await _w1(saver, a, tag, "sync")
    if w == "lone":
        return await _lone(saver, a, tag)
    if w == "read":
        return await _read(saver, a, tag)
    if w == "W3sync":
        return await asyncio.to_thread(_w3sync, saver, a, tag)
    if w == "W1sync":
        return await asyncio.to_thread(_w1sync, saver, a, tag)
    raise ValueError(f"unknown workload {w!r}")


# ------------------------------------------------------------------ the A/B


async def _rounds(a: argparse.Namespace, variants: list[Variant], workloads: list[str]
                  ) -> dict[tuple[str, str], list[Result]]:
    got: dict[tuple[str, str], list[Result]] = {}
    for k in range(a.rounds + 1):  # round 0 warms up and is not counted
        order = variants[k % len(variants):] + variants[:k % len(variants)]
        for w in workloads:
            if w == "read" and "W1async" not in workloads:
                continue
            for v in order:
                c = _use(v)
                r = await _workload(w, v.saver, a, f"{v.name}-{k}")
                if k:
                    got.setdefault((v.name, w), []).append(r)
                    b = c._batcher
                    if b is not None and w in ("W3", "W3conv") and b.batches:
                        got.setdefault((v.name, w + ":batch"), []).append(
                            (b.calls / b.batches, 0.0))
                        b.calls = b.batches = 0
        for v in variants:
            await v.saver.aflush()
    return got


def _print(a: argparse.Namespace, names: list[str], workloads: list[str],
           got: dict[tuple[str, str], list[Result]]) -> None:
    print(f"{a.rounds} rounds, {a.threads} threads x {a.steps} steps (W3, W3sync), "
          f"{a.turns} turns (W3conv, W1), {a.calls} calls (lone, read); medians")
    print("checkpoints (lone, read: calls) per second, CPU ms per checkpoint (per call)")
    for w in workloads:
        base: Result | None = None
        for v in names:
            runs = got.get((v, w))
            if not runs:
                continue
            cps = statistics.median(r[0] for r in runs)
            cpu = statistics.median(r[1] for r in runs)
            base = base or (cps, cpu)
            extra = ""
            batches = got.get((v, w + ":batch"))
            if batches:
                extra = f"  mean batch {statistics.median(r[0] for r in batches):.1f}"
            print(f"{w:8} {v:18} {cps:8.1f} /s ({cps / base[0]:.3f}x)  "
                  f"{cpu:6.3f} CPU ms ({cpu / base[1]:.3f}x){extra}")


async def _main(a: argparse.Namespace, redis_url: str, mongo_url: str) -> None:
    import langgraph_durable

    workloads = a.workloads.split(",")
    for w in workloads:
        if w not in WORKLOADS:
            raise SystemExit(f"unknown workload {w!r}: one of {', '.join(WORKLOADS)}")
    spaces: list[str] = []
    clients: list[Any] = []
    try:
        async with contextlib.AsyncExitStack() as stack:
            variants: list[Variant] = []
            if a.baseline:
                tmp = stack.enter_context(tempfile.TemporaryDirectory())
                pkgs = [("base", baseline_package(a.baseline, tmp)), ("head", langgraph_durable)]
                for name, pkg in pkgs:
                    ns = f"ab{name}{uuid.uuid4().hex[:8]}"
                    spaces.append(ns)
                    s = await stack.enter_async_context(_open(pkg, redis_url, mongo_url, ns))
                    variants.append(Variant(name, s))
            else:
                ns = f"ab{uuid.uuid4().hex[:8]}"
                spaces.append(ns)
                s = await stack.enter_async_context(
                    _open(langgraph_durable, redis_url, mongo_url, ns))
                for name, (coalesce, parser) in CLIENT_VARIANTS.items():
                    if a.variants is None or name in a.variants.split(","):
                        clients.append(_client(redis_url, parser))
                        variants.append(Variant(name, s, clients[-1], coalesce))
            got = await _rounds(a, variants, workloads)
    finally:
        for cl in clients:
            await cl.aclose()
        for ns in spaces:
            drop_namespace(redis_url, mongo_url, ns, ns)
    _print(a, [v.name for v in variants], workloads, got)


def main() -> None:
    """Command line: start the servers, run the A/B, print the medians."""
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--threads", type=int, default=50)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--turns", type=int, default=10)
    p.add_argument("--calls", type=int, default=200, help="calls of lone and read")
    p.add_argument("--variants", default=None, help="comma-separated subset of the client "
                   f"variants ({', '.join(CLIENT_VARIANTS)})")
    p.add_argument("--workloads", default="W3,W1async,lone,read",
                   help=f"comma-separated, of {', '.join(WORKLOADS)}")
    p.add_argument("--baseline", default=None, metavar="REF",
                   help="A/B the code at git REF (base) against the working tree (head)")
    p.add_argument("--loop-cpu", action="store_true",
                   help="CPU of the event loop thread only (not the flusher's)")
    a = p.parse_args()
    if a.loop_cpu:
        _CPU[0] = time.thread_time
    with redis_server() as r, mongo_server() as m:
        asyncio.run(_main(a, r.url, m.url))


if __name__ == "__main__":
    main()
