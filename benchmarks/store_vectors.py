"""Vector search for DurableStore: the Redis index against exact NumPy search, measured.

    python -m benchmarks.store_vectors [--items 10000] [--queries 200] [--dims 256 1536]
                                       [--exact-sizes 1000 10000 50000 100000]
                                       [--blas-threads 1]

For each ``dims``: ``items`` random unit vectors (float32, seed 0) in one namespace
prefix, ``("bench", "users", "u<i % 100>")``, written to a Redis with the query engine
(``REDIS_STACK_URL``, else a local ``RedisStackServer``) under an HNSW index and a FLAT
index (``langgraph_durable.hot.vector_index``: M 16, EF_CONSTRUCTION 200, EF_RUNTIME 64),
then ``queries`` random unit queries, each timed, under the *broad* prefix
``("bench", "users")`` (every item) and the *narrow* one ``("bench", "users", "u7")``
(1 % of them):

- HNSW with the server's hybrid policy (``auto``) and with ``BATCHES`` at each of
  ``--ef-runtimes`` (default 64, 256, 1024), FLAT with the server's: the ``knn`` plan
  for the top 10, run with ``run_sync`` on a blocking client: plan, one round trip to a
  loopback Redis, parsing;
- ``exact``: the embedded default, in the application: ``float32 matrix @ query``, then
  ``argpartition`` and a sort of the best 10 (the prefix's matrix already in memory);
- recall@10 of each index against the exact answer (mean over the queries of
  ``|index top 10 ∩ exact top 10| / 10``).

Then the exact search alone at each of ``exact-sizes`` items (p50/p99 per query), to find
the size up to which the embedded default is fast (p50 under 5 ms). Times are wall-clock
milliseconds (``time.perf_counter``) on whatever else the machine is running; the server
and this process share its cores. ``ping`` (a bare ``PING`` round trip, timed the same
way) shows what the machine adds to any round trip during the run.

NumPy's BLAS runs ``--blas-threads`` threads (default 1, through ``threadpoolctl``; 0
leaves OpenBLAS's default, one per core). On a busy 2-core machine OpenBLAS's threads make
a matrix-vector product 10 to 80 times slower than one thread (10,000 x 256: 24 ms
against 0.3 ms at p50): the embedded default should search with one BLAS thread.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import redis

from langgraph_durable.hot.vector_index import (
    VectorIndexSpec,
    ensure_index,
    index_name,
    item_id,
    knn,
    namespace_tags,
    vector_key,
)
from langgraph_durable.io.drivers import Clients, run_sync
from langgraph_durable.testing.stack import redis_stack_server

BROAD = ("bench", "users")
NARROW = ("bench", "users", "u7")
USERS = 100
K = 10


def namespace_of(i: int) -> tuple[str, ...]:
    """The namespace of item ``i``."""
    return (*BROAD, f"u{i % USERS}")


def unit_vectors(n: int, dims: int, seed: int) -> np.ndarray:
    """``n`` random unit vectors of ``dims`` float32s (normal, normalised)."""
    v = np.random.default_rng(seed).standard_normal((n, dims), dtype=np.float32)
    v /= np.linalg.norm(v, axis=1, keepdims=True)
    return v


def exact_top(matrix: np.ndarray, query: np.ndarray, k: int = K) -> np.ndarray:
    """Indexes of the ``k`` rows of ``matrix`` most similar to ``query`` (cosine: the rows
    and the query are unit vectors), best first."""
    scores = matrix @ query
    top = np.argpartition(-scores, k)[:k] if k < len(scores) else np.arange(len(scores))
    return top[np.argsort(-scores[top])]


def percentiles(ms: list[float]) -> tuple[float, float]:
    """(p50, p99) of ``ms``."""
    return float(np.percentile(ms, 50)), float(np.percentile(ms, 99))


@contextlib.contextmanager
def stack_url() -> Iterator[str]:
    """``REDIS_STACK_URL``, else a local RedisStackServer for the run."""
    if os.environ.get("REDIS_STACK_URL"):
        yield os.environ["REDIS_STACK_URL"]
        return
    with redis_stack_server() as server:
        yield server.url


def load(client: redis.Redis, spec: VectorIndexSpec, vectors: np.ndarray) -> float:
    """Write ``vectors`` as items ``k<i>`` of ``namespace_of(i)`` (pipelines of 500 HSETs; the
    commands ``upsert_vectors`` sends for one vector per item) and wait until the index
    has them all; returns the seconds it took."""
    began = time.perf_counter()
    for start in range(0, len(vectors), 500):
        pipe = client.pipeline(transaction=False)
        for i in range(start, min(start + 500, len(vectors))):
            item = item_id(namespace_of(i), f"k{i}")
            pipe.hset(vector_key(spec, item, 0), mapping={
                "item": item, "ns": namespace_tags(namespace_of(i)),
                "vec": vectors[i].tobytes(), "n": 1})  # fmt: skip
        pipe.execute()
    while True:
        info = client.execute_command("FT.INFO", index_name(spec))
        fields = info if isinstance(info, dict) else dict(zip(info[::2], info[1::2]))
        indexing = fields.get(b"indexing", fields.get("indexing"))
        if str(indexing) in ("0", "b'0'") and int(fields.get(b"num_docs", 0)) >= len(vectors):
            break
        time.sleep(0.1)
    return time.perf_counter() - began


def index_run(clients: Clients, spec: VectorIndexSpec, vectors: np.ndarray,
              queries: np.ndarray, prefix: tuple[str, ...]) -> dict[str, Any]:
    """Times and recall@10 of ``spec``'s index over ``queries`` under ``prefix``."""
    ids = {item_id(namespace_of(i), f"k{i}"): i for i in range(len(vectors))}
    rows = _rows(len(vectors), prefix)
    ms, recall = [], []
    for q in queries:
        qlist = q.tolist()
        t0 = time.perf_counter()
        found = run_sync(knn(spec, prefix, qlist, K), clients)
        ms.append((time.perf_counter() - t0) * 1000)
        got = {ids[i] for i, _ in found}
        exact = rows[exact_top(vectors[rows], q)]
        recall.append(len(got & set(exact.tolist())) / K)
    p50, p99 = percentiles(ms)
    return {"p50_ms": p50, "p99_ms": p99, "recall_at_10": float(np.mean(recall))}


def _rows(n: int, prefix: tuple[str, ...]) -> np.ndarray:
    """Indexes of the items (of ``n``) whose namespace starts with ``prefix``."""
    return np.array([i for i in range(n) if namespace_of(i)[: len(prefix)] == prefix])


def exact_run(vectors: np.ndarray, queries: np.ndarray) -> dict[str, float]:
    """Times of the exact top 10 in NumPy over ``queries``."""
    ms = []
    for q in queries:
        t0 = time.perf_counter()
        exact_top(vectors, q)
        ms.append((time.perf_counter() - t0) * 1000)
    p50, p99 = percentiles(ms)
    return {"p50_ms": p50, "p99_ms": p99}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--items", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--dims", type=int, nargs="+", default=[256, 1536])
    parser.add_argument("--exact-sizes", type=int, nargs="+",
                        default=[1_000, 10_000, 50_000, 100_000])  # fmt: skip
    parser.add_argument("--blas-threads", type=int, default=1)
    parser.add_argument("--ef-runtimes", type=int, nargs="+", default=[64, 256, 1024],
                        help="HNSW EF_RUNTIME values to time with HYBRID_POLICY BATCHES")
    args = parser.parse_args(argv)
    with contextlib.ExitStack() as stack:
        if args.blas_threads > 0:
            from threadpoolctl import threadpool_limits

            stack.enter_context(threadpool_limits(limits=args.blas_threads, user_api="blas"))
        return _run(args)


def ping_run(client: redis.Redis, n: int) -> dict[str, float]:
    """Times of ``n`` bare ``PING`` round trips."""
    ms = []
    for _ in range(n):
        t0 = time.perf_counter()
        client.ping()
        ms.append((time.perf_counter() - t0) * 1000)
    p50, p99 = percentiles(ms)
    return {"p50_ms": p50, "p99_ms": p99}


def _run(args: argparse.Namespace) -> int:
    print(f"BLAS threads: {args.blas_threads or 'OpenBLAS default'}")
    tag = os.urandom(4).hex()
    with stack_url() as url, redis.Redis.from_url(url) as client:
        clients = Clients(redis=client, db=None, scripts={})
        for dims in args.dims:
            vectors = unit_vectors(args.items, dims, seed=0)
            queries = unit_vectors(args.queries, dims, seed=1)
            print(f"dims {dims}, {args.items} items, {args.queries} queries, top {K}")
            print(f"  ping                        {_fmt(ping_run(client, args.queries))}")
            for label, prefix in (("broad", BROAD), ("narrow", NARROW)):
                subset = vectors[_rows(len(vectors), prefix)]
                print(f"  exact {label:<6}                {_fmt(exact_run(subset, queries))}")
            for algorithm in ("HNSW", "FLAT"):
                spec = VectorIndexSpec(f"vbench{tag}{dims}{algorithm}", dims=dims,
                                       algorithm=algorithm)  # type: ignore[arg-type]
                run_sync(ensure_index(spec), clients)
                try:
                    seconds = load(client, spec, vectors)
                    print(f"  {algorithm} load+index {seconds:.1f} s")
                    runs: list[tuple[str | None, int]] = [(None, spec.ef_runtime)]
                    if algorithm == "HNSW":
                        runs += [("BATCHES", ef) for ef in args.ef_runtimes]
                    for label, prefix in (("broad", BROAD), ("narrow", NARROW)):
                        for policy, ef in runs:
                            run_spec = dataclasses.replace(spec, hybrid_policy=policy,
                                                           ef_runtime=ef)  # type: ignore[arg-type]
                            result = index_run(clients, run_spec, vectors, queries, prefix)
                            name = f"{algorithm} {label} {policy or 'auto'}"
                            if policy:
                                name += f" ef {ef}"
                            print(f"  {name:<28}{_fmt(result)}")
                finally:
                    client.execute_command("FT.DROPINDEX", index_name(spec), "DD")
        for dims in args.dims:
            for n in args.exact_sizes:
                vectors = unit_vectors(n, dims, seed=2)
                queries = unit_vectors(min(args.queries, 100), dims, seed=3)
                print(f"exact dims {dims} at {n:>6} items: {_fmt(exact_run(vectors, queries))}")
                del vectors
    return 0


def _fmt(result: dict[str, float]) -> str:
    text = f"p50 {result['p50_ms']:.2f} ms  p99 {result['p99_ms']:.2f} ms"
    if "recall_at_10" in result:
        text += f"  recall@10 {result['recall_at_10']:.3f}"
    return text


if __name__ == "__main__":
    raise SystemExit(main())
