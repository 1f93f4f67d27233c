"""``SharedSaver`` (issue 23 item 2): LangGraph's Agent Server with
``BG_JOB_ISOLATED_LOOPS=true`` enters the checkpointer's context manager once in its main
thread and once in each run thread (each its own event loop, stopped between runs), and
never leaves the run threads' entries. One saver then serves them all: one flusher
thread, closed (drained) when the main entry leaves."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any

import pymongo
import pytest
from langgraph.checkpoint.base import empty_checkpoint

from langgraph_durable import ConfigurationError, DurableSaver, SaverClosedError
from langgraph_durable.shared import SharedSaver
from langgraph_durable.testing import unique_options

RUN_THREADS = 4


class RunThread:
    """An Agent Server run thread: one event loop, run once per job
    (``run_until_complete``) and stopped in between (``langgraph_runtime_inmem``'s
    ``BgLoopRunner``)."""

    def __init__(self, idx: int) -> None:
        self.pool = concurrent.futures.ThreadPoolExecutor(1, f"bg-loop-{idx}")
        self.runner = asyncio.Runner()

    def run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        return self.pool.submit(self.runner.run, coro).result(timeout=60)

    def close(self) -> None:
        self.pool.submit(self.runner.close).result(timeout=60)
        self.pool.shutdown()


def _flusher_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate()
            if t.name.startswith("langgraph-durable-flusher-") and t.is_alive()}


def _checkpoint(n: int) -> dict:
    cp = empty_checkpoint()
    cp["channel_values"] = {"n": n}
    cp["channel_versions"] = {"n": f"{n:032}.0"}
    return cp


async def _put(saver: DurableSaver, thread: str, n: int) -> None:
    await saver.aput({"configurable": {"thread_id": thread, "checkpoint_ns": ""}},
                     _checkpoint(n), {"step": n}, {"n": f"{n:032}.0"})


async def test_every_loop_thread_gets_one_saver_with_one_flusher_closed_by_the_first_entry(
        redis_url: str, mongo_url: str) -> None:
    opts = unique_options()
    make_saver = SharedSaver(lambda: DurableSaver.from_urls(redis_url, mongo_url, **opts))
    before = _flusher_threads()
    runs = [RunThread(i) for i in range(RUN_THREADS)]
    try:
        main = make_saver()
        saver = await main.__aenter__()  # the server's start-up entry
        entered = [run.run(make_saver().__aenter__()) for run in runs]  # never left
        assert all(s is saver for s in entered)
        assert make_saver.opened == 1
        for i, run in enumerate(runs):
            run.run(_put(saver, f"run-{i}", i))  # each on its loop's asyncio clients
        assert len(_flusher_threads() - before) == 1
        for i in range(RUN_THREADS):
            got = await saver.aget_tuple({"configurable": {"thread_id": f"run-{i}"}})
            assert got is not None and got.checkpoint["channel_values"] == {"n": i}

        await main.__aexit__(None, None, None)  # shutdown: drains, stops, closes

        assert saver.is_closed and make_saver.saver is None
        assert _flusher_threads() - before == set()
        with pymongo.MongoClient(mongo_url) as m:
            threads = sorted(m[opts["database"]]["checkpoints"].distinct("thread_id"))
        assert threads == [f"run-{i}" for i in range(RUN_THREADS)]
        with pytest.raises(SaverClosedError):
            runs[0].run(_put(saver, "late", 9))
    finally:
        for run in runs:
            run.close()


def test_an_entry_after_the_saver_closed_opens_a_new_one(
        redis_url: str, mongo_url: str) -> None:
    opts = unique_options(flusher="off")
    make_saver = SharedSaver(lambda: DurableSaver.from_urls(redis_url, mongo_url, **opts))
    with make_saver() as first:
        with make_saver() as inner:
            assert inner is first
        assert not first.is_closed  # leaving an entry that did not open it does nothing
    with make_saver() as second:
        assert second is not first and not second.is_closed
    assert first.is_closed and second.is_closed and make_saver.opened == 2


def test_a_saver_that_fails_to_open_stays_closed_and_the_next_entry_tries_again(
        redis_url: str, mongo_url: str) -> None:
    opts = unique_options(flusher="off")
    with DurableSaver.from_urls(redis_url, mongo_url, **opts):
        pass  # binds the key prefix to opts["database"]
    database = [opts["database"] + "_other"]
    make_saver = SharedSaver(lambda: DurableSaver.from_urls(
        redis_url, mongo_url, **{**opts, "database": database[0]}))
    with pytest.raises(ConfigurationError, match=opts["key_prefix"]):
        with make_saver():
            pass
    assert make_saver.saver is None
    database[0] = opts["database"]
    with make_saver() as saver:
        assert saver.config.database == opts["database"] and make_saver.opened == 2


async def test_store_entries_share_the_saver_and_leave_it_to_its_opener(
        redis_url: str, mongo_url: str) -> None:
    opts = unique_options()
    shared = SharedSaver(lambda: DurableSaver.from_urls(redis_url, mongo_url, **opts))
    async with shared() as saver:
        before = _flusher_threads()
        async with shared.store() as store:
            assert store.runtime is saver.runtime
            await store.aput(("memories", "ada"), "k1", {"text": "likes tea"})
        assert not saver.is_closed  # leaving a store entry leaves the saver open
        async with shared.store() as again:
            item = await again.aget(("memories", "ada"), "k1")
            assert item is not None and item.value == {"text": "likes tea"}
        assert _flusher_threads() == before and shared.opened == 1
    assert saver.is_closed
    m: pymongo.MongoClient[dict[str, Any]] = pymongo.MongoClient(mongo_url)
    try:  # closing drained the outbox: the memory is in MongoDB
        docs = [d for name in m[str(opts["database"])].list_collection_names()
                for d in m[str(opts["database"])][name].find({"key": "k1"})]
        assert len(docs) == 1
    finally:
        m.close()
    async with shared.store() as store:  # a store entry alone opens (and closes) a saver
        assert shared.opened == 2
        item = await store.aget(("memories", "ada"), "k1")
        assert item is not None and item.value == {"text": "likes tea"}
    assert shared.saver is None


def test_env_saver_is_one_per_process() -> None:
    from langgraph_durable.shared import env_saver

    assert env_saver() is env_saver()
