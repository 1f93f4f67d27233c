"""DurableStore's search reads O(offset + limit) documents (``plans/store_search.py``):
MongoDB in pages of the index ``ns_cseq_key``, the unflushed index merged in order (an
unflushed update keeps its place, an unflushed delete hides MongoDB's copy, an unflushed
new item takes its own place), the same pages hot and cold (Redis emptied after a
flush). Documents read are counted from the plan's own ``Find`` replies (no timing)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import redis
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.store.base import SearchOp

from langgraph_durable import DurableStore
from langgraph_durable.core.ops import Find
from langgraph_durable.io.drivers import execute_sync, run_with
from langgraph_durable.store.batch import batch_plan
from langgraph_durable.testing import drop_key_prefix, unique_options


def _searched(store: DurableStore, prefix: tuple[str, ...], *, values: bool = False,
              **kw: Any) -> tuple[list[tuple[tuple[str, ...], str]], int]:
    """``store.search(prefix, **kw)``'s answer as ``(namespace, key)`` pairs and the
    number of documents MongoDB returned to it (``values``: those holding a value), the
    plan run here, each ``Find``'s reply counted."""
    clients = store._runtime.clients.sync
    read = [0]

    def execute(op: Any) -> Any:
        reply = execute_sync(op, clients)
        if isinstance(op, Find):
            read[0] += len([d for d in reply if not values or "vb" in d])
        return reply

    query = kw.get("query")
    op = SearchOp(prefix, kw.get("filter"), kw.get("limit", 10), kw.get("offset", 0), query)
    queries = {query: np.asarray(embed([query])[0])} if query else {}
    now_ms = store._ctx.clock.time_ns() // 1_000_000
    [items] = run_with(batch_plan(store._ctx, store._answers, [op], [], queries,
                                  store._scorer, DIMS, now_ms), execute)
    return [(tuple(i.namespace), i.key) for i in items], read[0]


DIMS = 4


def embed(texts: list[str]) -> list[list[float]]:
    """A deterministic embedding: the text's number ``n`` as ``[1, n, n * n % 7, 1]``."""
    return [[1.0, float(int(t)), float(int(t) ** 2 % 7), 1.0] for t in texts]


@pytest.fixture
def opts() -> dict[str, object]:
    return unique_options()


@pytest.fixture
def store(redis_url: str, mongo_url: str, opts: dict[str, object]) -> Iterator[DurableStore]:
    with DurableStore.from_urls(redis_url, mongo_url, **opts) as s:
        yield s


def _load(store: DurableStore, namespace: tuple[str, ...], n: int, *,
          ordered: bool = True) -> None:
    """Items ``k00000``... of ``namespace``, value ``{"i": i, "kind": i % 10}``; one put
    each when ``ordered`` (search order is then key order), else in batches of 500 (the
    puts of one batch run concurrently: their order is any)."""
    from langgraph.store.base import PutOp

    ops = [PutOp(namespace, f"k{i:05d}", {"i": i, "kind": i % 10}) for i in range(n)]
    for at in range(0, len(ops), 1 if ordered else 500):
        store.batch(ops[at:at + (1 if ordered else 500)])


def test_a_search_with_a_limit_reads_a_bounded_number_of_documents(store) -> None:
    _load(store, ("big",), 1500, ordered=False)
    _load(store, ("big", "sub"), 300, ordered=False)
    store.flush()
    every = _searched(store, ("big",), limit=10**6)[0]
    assert len(every) == 1800 and every[1499:1501] == [(("big",), every[1499][1]),
                                                       (("big", "sub"), every[1500][1])]
    keys, read = _searched(store, ("big",), limit=5)
    assert keys == every[:5]
    assert read <= 5 + 16  # the first page: limit + 16
    keys, read = _searched(store, ("big",), limit=5, offset=40)
    assert keys == every[40:45]
    assert read <= 45 + 16
    # 1 in 10 passes: 5 matches lie in about 50 documents, the first page is 256
    kind3 = _searched(store, ("big",), filter={"kind": 3}, limit=10**6)[0]
    assert len(kind3) == 180
    keys, read = _searched(store, ("big",), filter={"kind": 3}, limit=5)
    assert keys == kind3[:5]
    assert read <= 256
    # the pages cross into the sub-namespace (after ("big",)'s 1500 items)
    keys, read = _searched(store, ("big",), limit=3, offset=1499)
    assert keys == every[1499:1502]
    assert read <= 1502 + 16
    # a rare match reads on until found (pages of 256, 512), each document once but
    # the last of a page (the next page resumes at its cseq, ``$gte``)
    keys, read = _searched(store, ("big", "sub"), filter={"i": 299}, limit=1)
    assert keys == [(("big", "sub"), "k00299")]
    assert read <= 300 + 2


def test_pages_are_the_same_hot_and_cold(store, redis_url, opts) -> None:
    _load(store, ("p", "a"), 30)
    _load(store, ("p", "b"), 30)
    store.delete(("p", "a"), "k00002")  # a tombstone in MongoDB, first in its namespace
    for i in range(10, 20):
        store.delete(("p", "b"), f"k{i:05d}")
    store.flush()
    hot = [store.search(("p",), limit=7, offset=o) for o in range(0, 63, 7)]
    hot_filtered = store.search(("p",), filter={"kind": 1}, limit=4, offset=1)
    with redis.Redis.from_url(redis_url) as r:
        drop_key_prefix(r, str(opts["key_prefix"]))
    cold = [store.search(("p",), limit=7, offset=o) for o in range(0, 63, 7)]
    assert [[(i.namespace, i.key) for i in page] for page in cold] == [
        [(i.namespace, i.key) for i in page] for page in hot]
    flat = [(i.namespace, i.key) for page in cold for i in page]
    assert flat == ([(("p", "a"), f"k{i:05d}") for i in range(30) if i != 2]
                    + [(("p", "b"), f"k{i:05d}") for i in range(30) if not 10 <= i < 20])
    assert [(i.namespace, i.key) for i in store.search(
        ("p",), filter={"kind": 1}, limit=4, offset=1)] == [
        (i.namespace, i.key) for i in hot_filtered] == [
        (("p", "a"), "k00011"), (("p", "a"), "k00021"), (("p", "b"), "k00001"),
        (("p", "b"), "k00021")]


def test_unflushed_records_are_merged_into_mongodbs_pages_in_order(redis_url,
                                                                   mongo_url) -> None:
    opts = unique_options(flusher="off")
    with DurableStore.from_urls(redis_url, mongo_url, **opts) as store:
        _load(store, ("m", "a"), 20)
        _load(store, ("m", "c"), 20)
    with DurableStore.from_urls(redis_url, mongo_url, **{**opts, "flusher": "auto"}) as s2:
        s2.flush()
    with DurableStore.from_urls(redis_url, mongo_url, **opts) as store:
        store.put(("m", "a"), "k00003", {"i": 3, "kind": 3, "new": True})  # keeps its place
        store.delete(("m", "a"), "k00001")  # on the first page
        store.put(("m", "b"), "x", {"i": -1, "kind": 0})  # a new namespace in the middle
        store.put(("m", "a"), "late", {"i": 99, "kind": 9})  # new: last of ("m", "a")
        expect = ([(("m", "a"), f"k{i:05d}") for i in range(20) if i != 1]
                  + [(("m", "a"), "late"), (("m", "b"), "x")]
                  + [(("m", "c"), f"k{i:05d}") for i in range(20)])
        pages = [_searched(store, ("m",), limit=5, offset=o)[0] for o in range(0, 45, 5)]
        assert [k for page in pages for k in page] == expect
        assert store.search(("m", "a"), limit=3, offset=2)[0].value == {
            "i": 3, "kind": 3, "new": True}
        keys, read = _searched(store, ("m",), limit=3)
        assert keys == expect[:3] and read <= 3 + 16
        assert _searched(store, ("m",), filter={"kind": 0}, limit=3)[0] == [
            (("m", "a"), "k00000"), (("m", "a"), "k00010"), (("m", "b"), "x")]
        assert _searched(store, ("m",), filter={"kind": 9}, limit=3)[0] == [
            (("m", "a"), "k00009"), (("m", "a"), "k00019"), (("m", "a"), "late")]


def test_pages_leave_a_run_of_tombstones_out(store) -> None:
    """A tombstone has no ``cseq``; every page asks for one, so MongoDB returns none of
    the 39 tombstones: one page holds the answer."""
    _load(store, ("t", "a"), 40)
    _load(store, ("t", "b"), 3)
    for i in range(40):
        store.delete(("t", "a"), f"k{i:05d}")
    store.put(("t", "a"), "k00000", {"i": 0, "kind": 0})  # a new incarnation: last
    store.flush()
    keys, read = _searched(store, ("t",), limit=2)
    assert keys == [(("t", "a"), "k00000"), (("t", "b"), "k00000")]
    assert read == 1 + 3  # the value and ("t", "b")'s three: the first page's all


class CountingSerde(JsonPlusSerializer):
    """LangGraph's serializer, counting the values it decodes (``loads``)."""

    loads = 0

    def loads_typed(self, data: Any) -> Any:
        self.loads += 1
        return super().loads_typed(data)


def test_a_vector_search_decodes_the_values_of_its_page_only(redis_url, mongo_url) -> None:
    from langgraph.store.base import PutOp

    opts = unique_options()
    index: Any = {"dims": DIMS, "embed": embed, "fields": ["text"]}
    serde = CountingSerde()
    with DurableStore.from_urls(redis_url, mongo_url, index=index, serde=serde,
                                **opts) as store:
        store.batch([PutOp(("v", f"u{i % 3}"), f"k{i:03d}", {"text": str(i), "kind": i % 2})
                     for i in range(300)])
        store.put(("v", "u0"), "plain", {"n": 1}, index=False)
        store.flush()
        want = [(i.namespace, i.key) for i in store.search(("v",), query="5", limit=4,
                                                             offset=2, filter={"kind": 1})]
        with redis.Redis.from_url(redis_url) as r:  # cold: values come from MongoDB
            drop_key_prefix(r, str(opts["key_prefix"]))
        serde.loads = 0
        keys, _ = _searched(store, ("v",), query="5", limit=4, offset=2, filter={"kind": 1})
        assert keys == want and len(keys) == 4
        assert serde.loads <= 16  # about 2 * (offset + limit): 1 in 2 passes the filter
        keys, _ = _searched(store, ("v", "u0"), query="5", limit=200, filter={"n": 1})
        assert keys == [(("v", "u0"), "plain")]  # unscored, after every scored one


def test_candidates_named_by_an_index_are_read_as_a_get_reads_them(redis_url,
                                                                   mongo_url) -> None:
    """The seam of a server-side vector index: its hits, ``candidate(namespace, key)``
    with a score, are paged by ``scored_plan``, values read from Redis (unflushed) or
    MongoDB (Redis emptied), an item deleted since dropped."""
    from langgraph_durable.plans.store_search import candidate, scored_plan

    opts = unique_options()
    with DurableStore.from_urls(redis_url, mongo_url, **opts) as store:
        for i in range(4):
            store.put(("c",), f"k{i}", {"i": i})
        store.delete(("c",), "k2")
        hits = [(0.2, candidate(("c",), "k0")), (0.9, candidate(("c",), "k3")),
                (0.5, candidate(("c",), "k2")), (0.4, candidate(("c",), "k1"))]

        def page(limit: int, offset: int) -> list[tuple[float | None, str, Any]]:
            now_ms = store._ctx.clock.time_ns() // 1_000_000
            got = run_with(scored_plan(store._ctx, hits, now_ms, lambda r: True, limit,
                                       offset, 1), lambda op: execute_sync(
                op, store._runtime.clients.sync))
            return [(s, r.key, store._answers.value(r)) for s, r in got]

        assert page(2, 0) == [(0.9, "k3", {"i": 3}), (0.4, "k1", {"i": 1})]
        store.flush()
        with redis.Redis.from_url(redis_url) as r:
            drop_key_prefix(r, str(opts["key_prefix"]))
        assert page(5, 1) == [(0.4, "k1", {"i": 1}), (0.2, "k0", {"i": 0})]


@pytest.mark.parametrize("api", ["sync", "async"])
def test_an_embedder_giving_wrong_vectors_is_refused_before_anything_is_written(
        redis_url, mongo_url, api) -> None:
    # stored, a 5-number vector under dims=4 made every search of its namespace fail with
    # NumPy's reshape error; too few vectors left an item unindexed without a word
    def bad_embed(texts: list[str]) -> list[list[float]]:
        if texts == ["short"]:
            return [[1.0] * 5]
        if texts == ["a", "b"]:
            return [[1.0] * DIMS]
        return embed(texts)

    index: Any = {"dims": DIMS, "embed": bad_embed, "fields": ["text"]}
    with DurableStore.from_urls(redis_url, mongo_url, index=index,
                                **unique_options()) as store:
        def run(ops: list[Any]) -> Any:
            if api == "sync":
                return store.batch(ops)
            import asyncio
            return asyncio.run(store.abatch(ops))

        from langgraph.store.base import PutOp
        with pytest.raises(ValueError) as got:
            run([PutOp(("v",), "k", {"text": "short"})])
        assert str(got.value) == (
            "DurableStore index: the embedder returned 5 numbers for the text at 'text' of "
            "store item 'k' of namespace ('v',); the index has dims=4")
        with pytest.raises(ValueError) as got:
            run([PutOp(("v",), "a", {"text": "a"}), PutOp(("v",), "b", {"text": "b"})])
        assert str(got.value) == (
            "DurableStore index: the embedder returned 1 embeddings for 2 texts")
        with pytest.raises(ValueError) as got:
            run([SearchOp(("v",), None, 10, 0, "short")])
        assert str(got.value) == (
            "DurableStore index: the embedder returned 5 numbers for the search query "
            "'short'; the index has dims=4")
        run([PutOp(("v",), "ok", {"text": "3"})])
        assert [i.key for i in store.search(("v",), query="3")] == ["ok"]  # none written
