"""Issue 32's store benchmark: DurableStore against InMemoryStore and the durable peers.

    python -m benchmarks.store [--sizes 1000 10000] [--ops 2000] [--queries 20]
                               [--reps 2] [--vector-queries N]
                               [--stores inmemory,durable,durable-index,durable-hnsw,
                                         postgres,redis]
                               [--out benchmarks/results/store]

Servers: Redis and SecantusDB (``langgraph_durable.testing``), PostgreSQL
(``benchmarks/servers.py``; ``POSTGRES_URL`` to use another) and a Redis with RediSearch
and RedisJSON (``benchmarks/store_peers.py``; ``REDIS_STACK_URL`` to use another). Every
store runs in both modes: ``sync`` (one caller) and ``async`` (50 concurrent tasks for put
and get; searches one at a time). For each size, repetition and store (repetitions
interleaved round robin, the store order rotated each time), a fresh store is opened and:

1. *load* (untimed, reported): ``size`` items under ``("bench", "u<i % 100>")`` with
   ``{"text", "kind": "k<i % 10>", "n"}``, embedded when the store has a vector index, and
   ``size`` items under ``("kv<i % 100>",)`` (not embedded), in batches of 500;
2. *filtered search*: ``queries`` searches of prefix ``("bench",)`` with
   ``filter={"kind": ...}``, limit 10;
3. *vector search* (stores with an index: not PostgresStore without pgvector):
   ``--vector-queries`` (default ``queries``) searches of prefix ``("bench",)`` with a
   text query, limit 10, after a ``flush()`` for DurableStore (the steady state: items
   in MongoDB, and in the Redis index for ``durable-index`` and ``durable-hnsw``:
   DurableStore with ``vector_search="redis"`` on the Redis Stack server, a FLAT index or
   an HNSW one, not run by default); the keys found are kept, and the
   report gives each store's recall@10 against InMemoryStore's exact answer to the same
   query on the same data (same size and repetition), ties at the 10th place counted;
4. *get*: ``ops`` gets of random ``kv`` items (a get that finds nothing is counted as a
   *miss*);
5. *put*: ``ops`` puts overwriting random ``kv`` items (``index=False``).

Each op is timed (``perf_counter``, wall ms, embedding included where the store embeds
the query); ops/s is ops / the phase's wall time. The ``kv`` namespaces have one label:
langgraph-checkpoint-redis' get of a namespace with a dot (``("a", "b")``) finds nothing on
RediSearch 2.10 (its TEXT phrase query of the escaped prefix), so the get/put phase keeps
to namespaces every store answers. Writes ``report.md`` and ``results.json`` to ``--out``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import sys
import time
from collections.abc import Iterator
from typing import Any

import numpy as np

from .store_peers import StoreSpec, Urls, index_config, json_stack_url, specs

KINDS = 10
USERS = 100
TASKS = 50
WORDS = ("coffee tea hiking chess jazz python rust garden cats dogs travel paris tokyo "
         "running cycling piano guitar novels movies cooking baking yoga skiing surfing "
         "photography painting history physics poetry football tennis").split()


def item(i: int) -> dict[str, Any]:
    """Item ``i``'s value: a sentence of 6 of ``WORDS`` (seeded by ``i``), its kind, ``i``."""
    rnd = random.Random(i)
    return {"text": "user likes " + " ".join(rnd.sample(WORDS, 6)),
            "kind": f"k{i % KINDS}", "n": i}


def bench_ns(i: int) -> tuple[str, ...]:
    """The searched namespace of item ``i``."""
    return ("bench", f"u{i % USERS}")


def kv_ns(i: int) -> tuple[str, ...]:
    """The get/put namespace of item ``i``."""
    return (f"kv{i % USERS}",)


def _stats(ms: list[float], wall_s: float) -> dict[str, float]:
    return {"ops_s": len(ms) / wall_s if wall_s else 0.0,
            "p50_ms": float(np.percentile(ms, 50)), "p99_ms": float(np.percentile(ms, 99))}


def _load_ops(size: int, vectors: bool) -> list[Any]:
    from langgraph.store.base import PutOp

    ops: list[Any] = []
    for i in range(size):
        ops.append(PutOp(bench_ns(i), f"k{i}", item(i), index=None if vectors else False))
        ops.append(PutOp(kv_ns(i), f"k{i}", item(i), index=False))
    return ops


def _plan(size: int, ops: int, queries: int, seed: int,
          vector_queries: int | None = None) -> dict[str, list[Any]]:
    rnd = random.Random(seed)
    return {"get": [rnd.randrange(size) for _ in range(ops)],
            "put": [rnd.randrange(size) for _ in range(ops)],
            "filter": [f"k{rnd.randrange(KINDS)}" for _ in range(queries)],
            "vector": [" ".join(rnd.sample(WORDS, 3))
                       for _ in range(queries if vector_queries is None else vector_queries)]}


def run_sync(spec: StoreSpec, size: int, plan: dict[str, list[Any]]) -> dict[str, Any]:
    """One measurement of a sync store (see the module docstring)."""
    out: dict[str, Any] = {}
    with spec.open(index_config() if spec.vectors else None) as store:
        load = _load_ops(size, spec.vectors)
        t0 = time.perf_counter()
        for start in range(0, len(load), 500):
            store.batch(load[start:start + 500])
        out["load_s"] = time.perf_counter() - t0

        def timed(name: str, calls: list[Any]) -> Iterator[Any]:
            ms: list[float] = []
            began = time.perf_counter()
            for arg in calls:
                t = time.perf_counter()
                yield arg
                ms.append((time.perf_counter() - t) * 1000)
            out[name] = _stats(ms, time.perf_counter() - began)

        for kind in timed("filter", plan["filter"]):
            store.search(("bench",), filter={"kind": kind}, limit=10)
        if spec.vectors:
            if hasattr(store, "flush"):
                store.flush(timeout_s=600)
            found: list[list[Any]] = []
            for text in timed("vector", plan["vector"]):
                found.append([(i.key, i.score)
                              for i in store.search(("bench",), query=text, limit=10)])
            out["vector_found"] = found
        misses = 0
        for i in timed("get", plan["get"]):
            misses += store.get(kv_ns(i), f"k{i}") is None
        out["get_misses"] = misses
        for i in timed("put", plan["put"]):
            store.put(kv_ns(i), f"k{i}", {**item(i), "n": -i}, index=False)
    return out


async def _concurrent(calls: list[Any], one: Any) -> tuple[list[float], float]:
    ms: list[float] = []
    chunks = [calls[t::TASKS] for t in range(TASKS)]

    async def task(chunk: list[Any]) -> None:
        for arg in chunk:
            t = time.perf_counter()
            await one(arg)
            ms.append((time.perf_counter() - t) * 1000)

    began = time.perf_counter()
    await asyncio.gather(*(task(c) for c in chunks))
    return ms, time.perf_counter() - began


async def _serial(calls: list[Any], one: Any) -> tuple[list[float], float]:
    ms: list[float] = []
    began = time.perf_counter()
    for arg in calls:
        t = time.perf_counter()
        await one(arg)
        ms.append((time.perf_counter() - t) * 1000)
    return ms, time.perf_counter() - began


async def run_async(spec: StoreSpec, size: int, plan: dict[str, list[Any]]) -> dict[str, Any]:
    """One measurement of an async store: put/get from ``TASKS`` concurrent tasks."""
    out: dict[str, Any] = {}
    async with spec.open(index_config() if spec.vectors else None) as store:
        load = _load_ops(size, spec.vectors)
        t0 = time.perf_counter()
        for start in range(0, len(load), 500):
            await store.abatch(load[start:start + 500])
        out["load_s"] = time.perf_counter() - t0

        async def search_filter(kind: str) -> None:
            await store.asearch(("bench",), filter={"kind": kind}, limit=10)

        out["filter"] = _stats(*await _serial(plan["filter"], search_filter))
        if spec.vectors:
            if hasattr(store, "aflush"):
                await store.aflush(timeout_s=600)
            found: list[list[Any]] = []

            async def search_vector(text: str) -> None:
                found.append([(i.key, i.score) for i in await store.asearch(
                    ("bench",), query=text, limit=10)])

            out["vector"] = _stats(*await _serial(plan["vector"], search_vector))
            out["vector_found"] = found
        misses = [0]

        async def get(i: int) -> None:
            misses[0] += await store.aget(kv_ns(i), f"k{i}") is None

        out["get"] = _stats(*await _concurrent(plan["get"], get))
        out["get_misses"] = misses[0]

        async def put(i: int) -> None:
            await store.aput(kv_ns(i), f"k{i}", {**item(i), "n": -i}, index=False)

        out["put"] = _stats(*await _concurrent(plan["put"], put))
    return out


def measure(spec: StoreSpec, size: int, plan: dict[str, list[Any]]) -> dict[str, Any]:
    """One measurement of ``spec`` at ``size`` items; an error is recorded, not raised."""
    try:
        if spec.mode == "sync":
            return run_sync(spec, size, plan)
        return asyncio.run(run_async(spec, size, plan))
    except Exception as exc:  # a peer failing is a finding for the report
        return {"error": f"{type(exc).__name__}: {exc}"[:300]}


def recall_at_10(found: list[list[Any]], exact: list[list[Any]]) -> float:
    """Mean over the queries of the share of the exact top 10 (``(key, score)`` pairs)
    that ``found`` holds, ties counted: a found item whose score is within 1e-5 of the
    exact 10th score or above counts (with ties at the 10th place, which of the tied
    items make the top 10 is the order of candidates, not the search)."""
    shares = []
    for f, e in zip(found, exact):
        if not e:
            continue
        exact_scores = {k: sc for k, sc in e}
        last = min(sc for _, sc in e)
        hits = sum(1 for k, sc in f if k in exact_scores
                   or (sc is not None and sc >= last - 1e-5))
        shares.append(min(hits, len(e)) / len(e))
    return float(np.mean(shares)) if shares else float("nan")


def _log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def _stack_version(url: str) -> str:
    import redis

    with redis.Redis.from_url(url) as client:
        info = client.info("server")
        mods = client.execute_command("MODULE", "LIST")
    names = [f"{m[b'name'].decode()} {m[b'ver']}" for m in mods]
    where = "REDIS_STACK_URL" if os.environ.get("REDIS_STACK_URL") else "local"
    server = info.get("valkey_version") and f"Valkey {info['valkey_version']}"
    return f"{server or 'Redis ' + str(info.get('redis_version'))} ({where}), {', '.join(names)}"


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000])
    p.add_argument("--ops", type=int, default=2_000, help="timed gets and puts per run")
    p.add_argument("--queries", type=int, default=20,
                   help="timed searches of each kind (DurableStore: seconds each at 10,000)")
    p.add_argument("--reps", type=int, default=2)
    p.add_argument("--vector-queries", type=int, default=None,
                   help="timed vector searches per run (default --queries)")
    p.add_argument("--stores", default="inmemory,durable,durable-index,postgres,redis")
    p.add_argument("--out", default="benchmarks/results/store")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark; returns the exit status (0)."""
    args = _parse(argv)
    from langgraph_durable.testing import mongo_server, redis_server

    from .machine import describe
    from .servers import PostgresUnavailable, postgres_server
    from .store_report import write_report

    notes: list[str] = []
    load_start = " / ".join(f"{x:.2f}" for x in os.getloadavg())
    with contextlib.ExitStack() as stack:
        rs = stack.enter_context(redis_server())
        ms = stack.enter_context(mongo_server())
        pg_url = stack_url = None
        names = args.stores.split(",")
        if "postgres" in names:
            try:
                pg_url = stack.enter_context(postgres_server()).url
            except PostgresUnavailable as exc:
                notes.append(f"PostgresStore left out: {exc}")
        if "redis" in names or {"durable-index", "durable-hnsw"} & set(names):
            try:
                stack_url = stack.enter_context(json_stack_url())
            except Exception as exc:
                notes.append(f"RedisStore left out: {exc}")
        urls = Urls(rs.url, ms.url, pg_url, stack_url)
        machine = describe(rs.url, ms.url, pg_url, stack_url)
        machine["load average at start (1/5/15 min)"] = load_start
        machine.pop("Redis Stack (REDIS_STACK_URL)", None)
        if stack_url:
            machine["Redis with RediSearch + RedisJSON"] = _stack_version(stack_url)
        all_specs = specs(urls, names)
        records: list[dict[str, Any]] = []
        began = time.perf_counter()
        for size in args.sizes:
            for rep in range(args.reps):
                plan = _plan(size, args.ops, args.queries, seed=rep,
                             vector_queries=args.vector_queries)
                order = all_specs[rep % len(all_specs):] + all_specs[:rep % len(all_specs)]
                for spec in order:
                    result = measure(spec, size, plan)
                    records.append({"store": spec.name, "mode": spec.mode, "kind": spec.kind,
                                    "size": size, "rep": rep, **result})
                    _log(f"{size} rep {rep} {spec.name} {spec.mode}: "
                         + (result.get("error") or ", ".join(
                             f"{k} {v['ops_s']:.0f}/s p50 {v['p50_ms']:.2f}"
                             for k, v in result.items() if isinstance(v, dict))))
        for record in records:  # recall@10 against InMemoryStore's exact answers
            ref = next((r for r in records if r["kind"] == "reference"
                        and (r["size"], r["rep"], r["mode"]) == (record["size"], record["rep"],
                                                                 record["mode"])
                        and "vector_found" in r), None)
            if ref is not None and "vector_found" in record:
                record["recall_at_10"] = recall_at_10(record["vector_found"],
                                                      ref["vector_found"])
        machine["load average at end (1/5/15 min)"] = " / ".join(
            f"{x:.2f}" for x in os.getloadavg())
        machine["run time"] = f"{time.perf_counter() - began:.0f} s"
    params = {"sizes": args.sizes, "ops": args.ops, "queries": args.queries,
              "vector_queries": args.vector_queries or args.queries,
              "reps": args.reps, "tasks": TASKS}
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, "results.json"), "w") as fh:
        json.dump({"params": params, "machine": machine, "notes": notes,
                   "records": records}, fh, indent=1)
    write_report(os.path.join(args.out, "report.md"), records, params, machine, notes)
    _log(f"wrote {args.out}/report.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
