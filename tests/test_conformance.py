"""LangGraph's public conformance suite (langgraph-checkpoint-conformance) against
DurableSaver: all 8 capabilities, in four setups, through the async API and (by a
thin adapter) through the sync API; on one Redis, on a 3 + 3 Redis Cluster
(``redis+cluster://``) and on a Sentinel-managed primary (``redis+sentinel://``)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.report import ProgressCallbacks

from langgraph_durable import DurableSaver
from langgraph_durable.io.clients import redis_from_url
from langgraph_durable.testing import drop_key_prefix, unique_options

EXPECTED_TESTS = 81


class SyncDriven(DurableSaver):
    """Routes each async method of the suite to the sync method (in a worker thread),
    so the suite exercises the sync API."""

    async def aput(self, *a: Any, **k: Any) -> Any:
        return await asyncio.to_thread(self.put, *a, **k)

    async def aput_writes(self, *a: Any, **k: Any) -> Any:
        return await asyncio.to_thread(self.put_writes, *a, **k)

    async def aget_tuple(self, *a: Any, **k: Any) -> Any:
        return await asyncio.to_thread(self.get_tuple, *a, **k)

    async def alist(self, *a: Any, **k: Any) -> Any:  # type: ignore[override]
        for item in await asyncio.to_thread(lambda: list(self.list(*a, **k))):
            yield item

    async def adelete_thread(self, *a: Any, **k: Any) -> Any:
        return await asyncio.to_thread(self.delete_thread, *a, **k)

    async def adelete_for_runs(self, *a: Any, **k: Any) -> Any:
        return await asyncio.to_thread(self.delete_for_runs, *a, **k)

    async def acopy_thread(self, *a: Any, **k: Any) -> Any:
        return await asyncio.to_thread(self.copy_thread, *a, **k)

    async def aprune(self, *a: Any, **k: Any) -> Any:
        return await asyncio.to_thread(self.prune, *a, **k)


class ColdReads(DurableSaver):
    """Before every read: flush to MongoDB, then delete its Redis keys (its key prefix
    only), so every answer comes from MongoDB alone."""

    redis_url: str = ""

    async def _cold(self) -> None:
        await self.aflush()
        with redis_from_url(self.redis_url, self.config, asyncio=False) as client:
            drop_key_prefix(client, self.config.key_prefix)

    async def aget_tuple(self, *a: Any, **k: Any) -> Any:
        await self._cold()
        return await super().aget_tuple(*a, **k)

    async def alist(self, *a: Any, **k: Any) -> Any:  # type: ignore[override]
        await self._cold()
        async for item in super().alist(*a, **k):
            yield item


SETUPS = {
    "async": (DurableSaver, {}),
    "sync": (SyncDriven, {}),
    "cold_reads": (ColdReads, {}),
    "interleaved_flushes": (DurableSaver, {"flush_interval_s": 0.001, "flush_batch_size": 1}),
}


REDIS_FIXTURES = {"one": "redis_url", "cluster": "redis_cluster_url",
                  "sentinel": "redis_sentinel_url"}
"""Which Redis each run uses: the session fixture giving its URL."""
RUNS = [(r, s) for r in ("one", "cluster") for s in SETUPS] + [
    ("sentinel", "async"), ("sentinel", "sync")]  # one primary: the other two add nothing


@pytest.mark.parametrize(("redis_kind", "setup"), RUNS)
async def test_conformance_suite_passes_all_81_tests(redis_kind: str, setup: str,
                                                      request: pytest.FixtureRequest,
                                                      mongo_url: str) -> None:
    cls, options = SETUPS[setup]
    redis_url = request.getfixturevalue(REDIS_FIXTURES[redis_kind])

    @checkpointer_test(name=f"DurableSaver[{redis_kind}-{setup}]")
    async def factory() -> Any:
        saver = cls.from_urls(redis_url, mongo_url, **unique_options(**options))
        if isinstance(saver, ColdReads):
            saver.redis_url = redis_url
        async with saver:
            yield saver

    report = await validate(factory, progress=ProgressCallbacks.quiet())
    failures = {
        cap: [f for f in res.failures] for cap, res in report.results.items() if res.failures
    }
    assert failures == {}
    detected = {cap for cap, res in report.results.items() if res.detected}
    assert detected == {"put", "put_writes", "get_tuple", "list", "delete_thread",
                        "delete_for_runs", "copy_thread", "prune"}
    passed = sum(res.tests_passed for res in report.results.values())
    assert passed == EXPECTED_TESTS
