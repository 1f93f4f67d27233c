"""DurableStore's search reads O(offset + limit) documents (``plans/store_search.py``):
MongoDB in pages of the index ``ns_cseq_key``, the unflushed index merged in order (an
unflushed update keeps its place, an unflushed delete hides MongoDB's copy, an unflushed
new item takes its own place), the same pages hot and cold (Redis emptied after a
flush). Documents read are counted from the plan's own ``Find`` replies (no timing)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis
from langgraph.store.base import SearchOp

from langgraph_durable import DurableStore
from langgraph_durable.core.ops import Find
from langgraph_durable.io.drivers import execute_sync, run_with
from langgraph_durable.store.batch import batch_plan
from langgraph_durable.testing import drop_key_prefix, unique_options


def _searched(store: DurableStore, prefix: tuple[str, ...], **kw: Any
              ) -> tuple[list[tuple[tuple[str, ...], str]], int]:
    """``store.search(prefix, **kw)``'s answer as ``(namespace, key)`` pairs and the
    number of documents MongoDB returned to it (the plan run here, each ``Find``'s reply
    counted)."""
    clients = store._runtime.clients.sync
    read = [0]

    def execute(op: Any) -> Any:
        reply = execute_sync(op, clients)
        if isinstance(op, Find):
            read[0] += len(reply)
        return reply

    op = SearchOp(prefix, kw.get("filter"), kw.get("limit", 10), kw.get("offset", 0))
    now_ms = store._ctx.clock.time_ns() // 1_000_000
    [items] = run_with(batch_plan(store._ctx, store._answers, [op], [], {}, store._scorer,
                                  0, now_ms), execute)
    return [(tuple(i.namespace), i.key) for i in items], read[0]


@pytest.fixture
def opts() -> dict[str, object]:
    return unique_options()


@pytest.fixture
def store(redis_url: str, mongo_url: str, opts: dict[str, object]) -> Iterator[DurableStore]:
    with DurableStore.from_urls(redis_url, mongo_url, **opts) as s:
        yield s


def _load(store: DurableStore, namespace: tuple[str, ...], n: int, start: int = 0) -> None:
    from langgraph.store.base import PutOp

    ops = [PutOp(namespace, f"k{i:05d}", {"i": i, "kind": i % 10})
           for i in range(start, start + n)]
    for at in range(0, len(ops), 500):
        store.batch(ops[at:at + 500])


def test_a_search_with_a_limit_reads_a_bounded_number_of_documents(store) -> None:
    _load(store, ("big",), 1500)
    _load(store, ("big", "sub"), 300)
    store.flush()
    keys, read = _searched(store, ("big",), limit=5)
    assert keys == [(("big",), f"k{i:05d}") for i in range(5)]
    assert read <= 5 + 16  # the first page: limit + 16
    keys, read = _searched(store, ("big",), limit=5, offset=40)
    assert keys == [(("big",), f"k{i:05d}") for i in range(40, 45)]
    assert read <= 45 + 16
    # 1 in 10 passes: 5 matches lie in the first 50 documents, the first page is 256
    keys, read = _searched(store, ("big",), filter={"kind": 3}, limit=5)
    assert keys == [(("big",), f"k{i:05d}") for i in (3, 13, 23, 33, 43)]
    assert read <= 256
    # the pages cross into the sub-namespace (after ("big",)'s 1500 items)
    keys, read = _searched(store, ("big",), limit=3, offset=1499)
    assert keys == [(("big",), "k01499"), (("big", "sub"), "k00000"),
                    (("big", "sub"), "k00001")]
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


def test_pages_step_over_a_run_of_tombstones(store) -> None:
    """MongoDB sorts a tombstone (no ``cseq``) first in its namespace: a page ending
    among tombstones resumes by key, then on to the namespace's values and the next."""
    _load(store, ("t", "a"), 40)
    _load(store, ("t", "b"), 3)
    for i in range(40):
        store.delete(("t", "a"), f"k{i:05d}")
    store.put(("t", "a"), "k00000", {"i": 0, "kind": 0})  # a new incarnation: last
    store.flush()
    keys, read = _searched(store, ("t",), limit=2)  # pages of 18, 36, 72
    assert keys == [(("t", "a"), "k00000"), (("t", "b"), "k00000")]
    assert read <= 39 + 1 + 3 + 3  # 39 tombstones, the value, ("t", "b"), repeats
