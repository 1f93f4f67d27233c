"""DurableStore under a burst of gathered asyncio calls (LangGraph's own
``test_large_batches_async`` gathers 5,000 and 60,000): every call completes on a small
Redis pool, because the calls of a loop turn share one pipeline, at most
``ScriptBatcher.max_in_flight`` pipelines are on the wire at once, and at most
``MAX_ASYNC_BATCHES`` calls of a store run at once, identical searches waiting for their
turn sharing one run (``io/coalesce.py``, ``store/admission.py``)."""

from __future__ import annotations

import asyncio

import pymongo
import pytest
import redis.asyncio

from langgraph_durable import DurableSaver, DurableStore
from langgraph_durable.store import admission
from langgraph_durable.testing import unique_options

N = 2500


def _ns(i: int) -> tuple[str, ...]:
    return ("burst", f"u{i % 10}")


async def test_5000_gathered_puts_and_gets_on_a_two_connection_pool_all_complete(
        redis_url: str, mongo_url: str) -> None:
    """On a pool of 2 connections whose wait gives up at once (before, the reads of
    concurrent searches each took a connection of their own and failed with
    ``TierUnavailableError``: "No connection available")."""
    pool = redis.asyncio.BlockingConnectionPool.from_url(redis_url, max_connections=2,
                                                         timeout=0.001)
    r = redis.asyncio.Redis(connection_pool=pool)
    m = pymongo.AsyncMongoClient(mongo_url)
    saver = DurableSaver(r, m, **unique_options(flusher="off"))
    async with saver, saver.store() as store:
        calls = [store.aput(_ns(i), f"k{i}", {"n": i}) for i in range(N)]
        calls += [store.aget(_ns(i), f"k{i}") for i in range(N)]
        calls += [store.asearch(("burst", "u0"), limit=1000) for _ in range(20)]
        calls += [store.alist_namespaces(prefix=("burst",)) for _ in range(20)]
        got = await asyncio.gather(*calls)
        assert got[:N] == [None] * N
        for i, item in enumerate(got[N:2 * N]):  # concurrent with its put: before or after
            assert item is None or item.value == {"n": i}
        for found in got[2 * N:2 * N + 20]:
            assert {x.key for x in found} <= {f"k{i}" for i in range(0, N, 10)}
        for names in got[2 * N + 20:]:
            assert set(names) <= {_ns(i) for i in range(10)}

        items = await asyncio.gather(*(store.aget(_ns(i), f"k{i}") for i in range(N)))
        assert [item.value if item else None for item in items] == [{"n": i} for i in range(N)]
        found = await store.asearch(("burst", "u0"), limit=1000)
        assert sorted(x.key for x in found) == sorted(f"k{i}" for i in range(0, N, 10))
        assert sorted(await store.alist_namespaces(prefix=("burst",))) == [
            ("burst", f"u{k}") for k in range(10)]

        clients = store.runtime.clients.for_running_loop()
        assert clients is not None
        batcher = clients.batcher()
        assert batcher.max_in_flight == 1  # half the pool of 2
        assert batcher.peak_in_flight == 1
        assert batcher.calls >= 3 * N  # every put and get (twice) went through it
    await r.aclose()
    await m.close()


async def test_gathered_deletes_and_overwrites_leave_the_last_write_of_each_caller(
        redis_url: str, mongo_url: str) -> None:
    opts = unique_options(redis_max_connections=2)
    async with DurableStore.from_urls(redis_url, mongo_url, **opts) as store:
        await asyncio.gather(*(store.aput(_ns(i), f"k{i}", {"n": i}) for i in range(500)))

        async def rewrite(i: int) -> None:  # one caller's sequence: its order holds
            await store.aput(_ns(i), f"k{i}", {"n": -i})
            if i % 2:
                await store.adelete(_ns(i), f"k{i}")

        await asyncio.gather(*(rewrite(i) for i in range(500)))
        items = await asyncio.gather(*(store.aget(_ns(i), f"k{i}") for i in range(500)))
        assert [item.value if item else None for item in items] == [
            None if i % 2 else {"n": -i} for i in range(500)]
        await store.aflush()
        items = await asyncio.gather(*(store.aget(_ns(i), f"k{i}") for i in range(500)))
        assert sum(item is not None for item in items) == 250


async def test_identical_searches_waiting_for_their_turn_share_one_run_each_its_own_copy(
        redis_url: str, mongo_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(admission, "MAX_ASYNC_BATCHES", 1)  # one call at a time
    async with DurableStore.from_urls(redis_url, mongo_url, **unique_options()) as store:
        for i in range(3):
            await store.aput(("shared", f"u{i}"), "k", {"n": i})
        runs = []
        run = store._abatch

        async def counted(ops):  # type: ignore[no-untyped-def]
            runs.append(type(ops[0]).__name__)
            return await run(ops)

        monkeypatch.setattr(store, "_abatch", counted)
        calls = [store.asearch(("shared",)) for _ in range(50)]
        calls += [store.alist_namespaces(prefix=("shared",)) for _ in range(50)]
        calls += [store.aget(("shared", "u1"), "k") for _ in range(10)]  # never shared
        got = await asyncio.gather(*calls)
        assert all(sorted(x.value["n"] for x in found) == [0, 1, 2] for found in got[:50])
        assert all(names == [("shared", f"u{i}") for i in range(3)] for names in got[50:100])
        assert all(item.value == {"n": 1} for item in got[100:])
        assert len({id(found) for found in got[:50]}) == 50  # each caller its own copy
        assert runs.count("SearchOp") <= 2 and runs.count("ListNamespacesOp") <= 2
        assert runs.count("GetOp") == 10
