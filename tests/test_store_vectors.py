"""DurableStore's semantic search through the Redis Query Engine (``vector_search``),
chosen at set-up: the same answers as the exact path on the same data (unflushed, flushed,
partly flushed, after Redis lost its data), read-your-writes over the index, and the
refusals. Real servers only: the query engine is RediSearch in the Stack server of
``langgraph_durable.testing.stack`` (``redis_stack_url``); ``redis_url`` is Debian's
Redis 7.0 without it; MongoDB is the session's SecantusDB."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import AsyncIterator, Iterator
from typing import Any

import numpy as np
import pytest
import redis

from langgraph_durable import ConfigurationError, DurableStore
from langgraph_durable.plans import store_search as Q
from langgraph_durable.plans.store_vectors import state_key
from langgraph_durable.testing import drop_key_prefix, drop_namespace, unique_options

DIMS = 16
WORDS = ["tea", "coffee", "rain", "sun", "cat", "dog", "jazz", "rock", "code", "bread"]


def embed(texts: list[str]) -> list[list[float]]:
    """A deterministic embedding: each word of the text adds its own random direction."""
    out = []
    for text in texts:
        v = np.zeros(DIMS)
        for word in text.split():
            seed = int.from_bytes(hashlib.sha256(word.encode()).digest()[:4], "big")
            v += np.random.default_rng(seed).standard_normal(DIMS)
        out.append(v.tolist())
    return out


INDEX = {"dims": DIMS, "embed": embed, "fields": ["text"]}


def _drop_all(redis_url: str, mongo_url: str, opts: dict[str, Any]) -> None:
    prefix = str(opts["key_prefix"])
    with redis.Redis.from_url(redis_url) as r:  # the index, its hashes and state
        try:
            r.execute_command("FT.DROPINDEX", f"{prefix}:vidx", "DD")
        except redis.ResponseError:
            pass
        stale = list(r.scan_iter(match=f"{prefix}:*", count=1000))
        if stale:
            r.delete(*stale)
    drop_namespace(redis_url, mongo_url, prefix, str(opts["database"]))


@pytest.fixture(params=["FLAT", "HNSW"])
def stores(request: pytest.FixtureRequest, redis_stack_url: str, redis_url: str,
           mongo_url: str) -> Iterator[tuple[DurableStore, DurableStore, dict[str, Any]]]:
    """A store on the Redis index (FLAT, HNSW) and one searching exactly, each its own
    data."""
    ro, eo = unique_options(vector_algorithm=request.param), unique_options()
    try:
        with DurableStore.from_urls(redis_stack_url, mongo_url, index=INDEX,  # type: ignore[arg-type]
                                    vector_search="redis", **ro) as indexed, \
                DurableStore.from_urls(redis_url, mongo_url, index=INDEX,  # type: ignore[arg-type]
                                       vector_search="exact", **eo) as exact:
            yield indexed, exact, ro
    finally:
        _drop_all(redis_stack_url, mongo_url, ro)
        drop_namespace(redis_url, mongo_url, str(eo["key_prefix"]), str(eo["database"]))


def _fill(store: DurableStore, n: int = 60) -> None:
    rng = np.random.default_rng(3)
    for i in range(n):
        ns = ("users", f"u{i % 3}") if i % 5 else ("users", f"u{i % 3}", "deep")
        text = " ".join(rng.choice(WORDS, size=3))
        index: Any = False if i % 11 == 0 else None  # some items have no vectors
        store.put(ns, f"k{i}", {"text": text, "n": i, "kind": "odd" if i % 2 else "even"},
                  index=index)
    store.delete(("users", "u1"), "k1")
    store.delete(("users", "u2"), "k20")


SEARCHES: list[dict[str, Any]] = [
    {"namespace_prefix": ("users",), "query": "tea rain", "limit": 10},
    {"namespace_prefix": ("users",), "query": "jazz", "limit": 5, "offset": 3},
    {"namespace_prefix": ("users", "u1"), "query": "cat dog", "limit": 10},
    {"namespace_prefix": ("users", "u2"), "query": "code", "limit": 40},  # past the scored
    {"namespace_prefix": (), "query": "bread sun", "limit": 7},
    {"namespace_prefix": ("users",), "query": "coffee", "filter": {"kind": "odd"},
     "limit": 6},
    {"namespace_prefix": ("users",), "query": "rock", "filter": {"n": {"$gte": 50}},
     "limit": 4},
    {"namespace_prefix": ("users", "u0", "deep"), "query": "tea", "limit": 3},
    {"namespace_prefix": ("nobody",), "query": "tea", "limit": 3},
]


def _answers(store: DurableStore) -> list[list[tuple[tuple[str, ...], str, float | None]]]:
    out = []
    for s in SEARCHES:
        args = dict(s)
        found = store.search(args.pop("namespace_prefix"), **args)
        out.append([(tuple(i.namespace), i.key,
                     None if i.score is None else round(i.score, 4)) for i in found])
    return out


def _indexed_answers(store: DurableStore, monkeypatch: pytest.MonkeyPatch
                     ) -> list[list[tuple[tuple[str, ...], str, float | None]]]:
    """``_answers`` with the exact path's read of every candidate made to fail: the
    index answered."""
    def exact_path(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the search took the exact path")

    with monkeypatch.context() as m:
        m.setattr(Q, "candidates_plan", exact_path)
        return _answers(store)


def test_the_redis_index_gives_the_exact_paths_answers_unflushed_flushed_and_mixed(
    stores: tuple[DurableStore, DurableStore, dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    indexed, exact, _ = stores
    assert (indexed.vector_search, exact.vector_search) == ("redis", "exact")
    _fill(indexed)
    _fill(exact)
    expected = _answers(exact)
    assert any(len(a) >= 5 for a in expected) and expected[-1] == []
    assert _indexed_answers(indexed, monkeypatch) == expected  # unflushed: the overlay
    indexed.flush()
    exact.flush()
    assert _indexed_answers(indexed, monkeypatch) == expected  # flushed: the index
    for store in (indexed, exact):  # mixed: updates, deletes and new items unflushed
        store.put(("users", "u0"), "k3", {"text": "jazz jazz tea", "n": 3, "kind": "odd"})
        store.put(("users", "u1"), "k4", {"text": "code", "n": 4, "kind": "even"},
                  index=False)
        store.delete(("users", "u2"), "k2")
        store.put(("users", "u9"), "new", {"text": "rain rain", "n": 99, "kind": "odd"})
    assert _indexed_answers(indexed, monkeypatch) == _answers(exact)


def test_a_search_sees_unflushed_puts_and_deletes_over_the_index(
    stores: tuple[DurableStore, DurableStore, dict[str, Any]]
) -> None:
    indexed, _, _ = stores
    indexed.put(("a",), "tea", {"text": "tea tea"})
    indexed.put(("a",), "sun", {"text": "sun"})
    indexed.flush()
    assert [i.key for i in indexed.search(("a",), query="tea", limit=1)] == ["tea"]
    indexed.put(("a",), "tea", {"text": "sun sun"})  # now far from "tea"; not flushed
    indexed.put(("a",), "rain", {"text": "tea rain"})
    assert [i.key for i in indexed.search(("a",), query="tea", limit=1)] == ["rain"]
    indexed.delete(("a",), "rain")
    assert [i.key for i in indexed.search(("a",), query="tea", limit=3)] == ["sun", "tea"] \
        or [i.key for i in indexed.search(("a",), query="tea", limit=3)] == ["tea", "sun"]
    assert "rain" not in [i.key for i in indexed.search(("a",), query="tea", limit=3)]
    indexed.flush()
    assert [i.key for i in indexed.search(("a",), query="tea rain", limit=3)] in (
        ["sun", "tea"], ["tea", "sun"])


def test_redis_emptied_after_a_flush_is_rebuilt_from_mongodb_with_the_same_answers(
    stores: tuple[DurableStore, DurableStore, dict[str, Any]], redis_stack_url: str
) -> None:
    indexed, exact, opts = stores
    _fill(indexed)
    _fill(exact)
    indexed.flush()
    expected = _answers(exact)
    prefix = str(opts["key_prefix"])
    with redis.Redis.from_url(redis_stack_url) as r:
        assert r.get(state_key(prefix)) is not None
        drop_key_prefix(r, prefix)
        r.delete(*r.scan_iter(match=f"{prefix}:*", count=1000))  # hashes and state
        assert r.get(state_key(prefix)) is None
        assert _answers(indexed) == expected  # the first search rebuilt the index
        assert b'"ready": true' in r.get(state_key(prefix))
        assert len(list(r.scan_iter(match=f"{prefix}:vec:*", count=1000))) > 40
    assert indexed.rebuild_vector_index() > 40
    assert _answers(indexed) == expected


def test_vector_search_redis_is_refused_on_a_redis_without_the_query_engine(
    redis_url: str, mongo_url: str
) -> None:
    opts = unique_options()
    try:
        store = DurableStore.from_urls(redis_url, mongo_url, index=INDEX,  # type: ignore[arg-type]
                                       vector_search="redis", **opts)
        with pytest.raises(ConfigurationError, match=r"vector_search='redis': Redis .* has "
                           r"no query engine \(FT._LIST"):
            store.__enter__()
    finally:
        drop_namespace(redis_url, mongo_url, str(opts["key_prefix"]), str(opts["database"]))


def test_auto_picks_the_index_where_the_query_engine_is_and_logs_it(
    redis_url: str, redis_stack_url: str, mongo_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="langgraph_durable.store")
    for url, path in ((redis_url, "exact"), (redis_stack_url, "redis")):
        opts = unique_options()
        try:
            with DurableStore.from_urls(url, mongo_url, index=INDEX, **opts) as store:  # type: ignore[arg-type]
                assert store.vector_search == path
            with DurableStore.from_urls(url, mongo_url, **opts) as plain:
                assert plain.vector_search == "none"  # no index: no semantic search
        finally:
            _drop_all(url, mongo_url, opts)
    assert "vector_search='auto' searches in the Redis Query Engine (FLAT index" in caplog.text
    assert "vector_search='auto' searches in the application (exact, NumPy)" in caplog.text


def test_vector_search_mongodb_is_refused_saying_what_the_server_answered(
    redis_url: str, mongo_url: str
) -> None:
    opts = unique_options()
    try:
        store = DurableStore.from_urls(redis_url, mongo_url, index=INDEX,  # type: ignore[arg-type]
                                       vector_search="mongodb", **opts)
        with pytest.raises(ConfigurationError, match=r"vector_search='mongodb': MongoDB .*"
                           r"\$vectorSearch"):
            store.__enter__()
    finally:
        drop_namespace(redis_url, mongo_url, str(opts["key_prefix"]), str(opts["database"]))


def test_an_unknown_vector_search_is_refused_at_once(redis_url: str, mongo_url: str) -> None:
    with pytest.raises(ConfigurationError, match="vector_search"):
        DurableStore.from_urls(redis_url, mongo_url, index=INDEX,  # type: ignore[arg-type]
                               vector_search="faiss", **unique_options())


@pytest.fixture
async def astore(redis_stack_url: str, mongo_url: str) -> AsyncIterator[DurableStore]:
    opts = unique_options()
    try:
        async with DurableStore.from_urls(redis_stack_url, mongo_url, index=INDEX,  # type: ignore[arg-type]
                                          vector_search="redis", **opts) as store:
            yield store
    finally:
        _drop_all(redis_stack_url, mongo_url, opts)


async def test_the_async_api_searches_through_the_index(astore: DurableStore) -> None:
    assert astore.vector_search == "redis"
    await astore.setup()  # in a running loop: a future of the set-up
    await astore.asetup()
    await astore.aput(("a",), "tea", {"text": "tea tea"})
    await astore.aput(("a",), "sun", {"text": "sun"})
    await astore.aflush()
    await astore.aput(("a",), "rain", {"text": "rain tea"})
    found = await astore.asearch(("a",), query="tea", limit=2)
    assert [i.key for i in found] == ["tea", "rain"]
    assert await astore.arebuild_vector_index() == 2


def test_status_reports_the_redis_vector_index(
    stores: tuple[DurableStore, DurableStore, dict[str, Any]], redis_stack_url: str,
    mongo_url: str
) -> None:
    from .cli.clikit import Cli

    indexed, _, opts = stores
    _fill(indexed, 12)
    indexed.flush()
    cli = Cli(redis_stack_url, mongo_url)
    cli.env.update(LGD_KEY_PREFIX=str(opts["key_prefix"]), LGD_DATABASE=str(opts["database"]))
    algorithm = str(opts["vector_algorithm"])
    assert cli.json("status")["store"]["vector_index"] == {
        "algorithm": algorithm, "dims": DIMS, "metric": "COSINE", "ready": True,
        "vectors": 9}  # 12 items, 1 without vectors, 2 deleted
    assert (f"vector search in Redis ({algorithm} index, {DIMS} dims, COSINE, ready, 9 "
            "vectors)") in " ".join(cli("status").stdout.split())
    with redis.Redis.from_url(redis_stack_url) as r:  # Redis lost the index's keys
        r.delete(*r.scan_iter(match=f"{opts['key_prefix']}:*", count=1000))
    assert cli.json("status")["store"]["vector_index"] is None
    assert "--dims" in cli("store", "reindex", "--yes", code=1).output
    cli("store", "reindex", "--yes", "--dims", str(DIMS), "--algorithm", algorithm)
    assert cli.json("status")["store"]["vector_index"]["vectors"] == 9
