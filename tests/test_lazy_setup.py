"""A saver used without ``with`` (issue 21 item 2): ``checkpointer=DurableSaver.from_urls(...)``,
the ``InMemorySaver()`` habit, sets itself up on its first call, once, with the checks
entering makes; a failure reaches the caller and the next call tries again."""

from __future__ import annotations

import asyncio
import logging
import threading

import pymongo
import pytest
import redis
import redis.asyncio
from langgraph.checkpoint.base import empty_checkpoint

from langgraph_durable import ConfigurationError, DurableSaver, TierUnavailableError
from langgraph_durable.hot.keys import binding_key, prefix_pattern
from langgraph_durable.runtime.base import SaverRuntime
from langgraph_durable.testing import mongo_server, redis_server, unique_options, wait_for
from tests.cli.clikit import build_graph, first_input

INDEX_NAMES = ["_id_", "run_id", "thread_ns_checkpoint", "thread_ns_vals"]  # checkpoints


def _checkpoint(n: int) -> dict:
    cp = empty_checkpoint()
    cp["channel_values"] = {"n": n}
    cp["channel_versions"] = {"n": f"{n:032}.0"}
    return cp


def _cfg(thread: str) -> dict:
    return {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}


def _indexes(mongo_url: str, database: str) -> list[str]:
    with pymongo.MongoClient(mongo_url) as m:
        return sorted(i["name"] for i in m[database]["checkpoints"].list_indexes())


@pytest.fixture
def set_ups(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Counts the set-ups savers run (sync ``_set_up``, async ``_aset_up``), by kind."""
    seen: list[str] = []
    sync_set_up, async_set_up = SaverRuntime._set_up, SaverRuntime._aset_up

    def counting(self: SaverRuntime, strict: bool = False) -> None:
        seen.append("sync")
        sync_set_up(self, strict)

    async def acounting(self: SaverRuntime, clients: object, strict: bool = False) -> None:
        seen.append("async")
        await async_set_up(self, clients, strict)  # type: ignore[arg-type]

    monkeypatch.setattr(SaverRuntime, "_set_up", counting)
    monkeypatch.setattr(SaverRuntime, "_aset_up", acounting)
    return seen


def test_a_graph_compiled_with_a_saver_not_entered_sets_it_up_on_its_first_call(
        redis_url: str, mongo_url: str, redis_client: redis.Redis, set_ups: list[str]) -> None:
    opts = unique_options()
    saver = DurableSaver.from_urls(redis_url, mongo_url, **opts)
    try:
        assert list(redis_client.scan_iter(match=prefix_pattern(opts["key_prefix"]))) == []
        graph = build_graph(saver)
        for turn in range(3):
            graph.invoke(first_input() if turn == 0 else None, {"configurable": {
                "thread_id": "habit"}})
        assert set_ups == ["sync"]
        assert _indexes(mongo_url, opts["database"]) == INDEX_NAMES
        with pymongo.MongoClient(mongo_url) as m:
            meta = m[opts["database"]]["meta"].find_one({"_id": "schema"})
        assert meta is not None and meta["key_prefix"] == opts["key_prefix"]
        assert redis_client.hget(binding_key(opts["key_prefix"]), "database") == \
            opts["database"].encode()
        assert [g["name"] for g in redis_client.xinfo_groups(saver.context.outbox)] == \
            [b"flushers"]
        saver.flush(timeout_s=30)  # the in-process flusher started with the set-up
        assert saver.stats()["flusher"]["entries"] > 0
        cps = saver.sync_clients.db[saver.context.collections.checkpoints]
        assert cps.count_documents({"thread_id": "habit"}) == len(
            list(saver.list({"configurable": {"thread_id": "habit"}})))
        copy = saver.with_allowlist([("collections", "OrderedDict")])
        assert copy.get_tuple({"configurable": {"thread_id": "habit"}}) is not None
        with saver:  # entering a saver set up already does not set it up again
            pass
        assert set_ups == ["sync"]
    finally:
        saver.close()


def test_many_threads_calling_first_share_one_set_up(
        redis_url: str, mongo_url: str, set_ups: list[str]) -> None:
    saver = DurableSaver.from_urls(redis_url, mongo_url, **unique_options(flusher="off"))
    start = threading.Barrier(16)
    errors: list[BaseException] = []

    def first_call(i: int) -> None:
        start.wait()
        try:
            saver.put(_cfg(f"t{i}"), _checkpoint(i), {"step": i}, {"n": f"{i:032}.0"})
        except BaseException as exc:  # reported below, with the thread's number
            errors.append(exc)

    try:
        threads = [threading.Thread(target=first_call, args=(i,)) for i in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert errors == []
        assert set_ups == ["sync"]
        assert [saver.get_tuple(_cfg(f"t{i}")).checkpoint["channel_values"]  # type: ignore[union-attr]
                for i in range(16)] == [{"n": i} for i in range(16)]
    finally:
        saver.close()


async def test_many_tasks_calling_first_share_one_set_up(
        redis_url: str, mongo_url: str, set_ups: list[str]) -> None:
    # asyncio clients only: the set-up runs on their loop, behind one asyncio.Lock
    r = redis.asyncio.Redis.from_url(redis_url)
    m: pymongo.AsyncMongoClient = pymongo.AsyncMongoClient(mongo_url)
    opts = unique_options(flusher="off")
    saver = DurableSaver(r, m, **opts)
    try:
        await asyncio.gather(*(saver.aput(_cfg(f"a{i}"), _checkpoint(i), {"step": i},
                                          {"n": f"{i:032}.0"}) for i in range(16)))
        assert set_ups == ["async"]
        assert _indexes(mongo_url, opts["database"]) == INDEX_NAMES
        tuples = await asyncio.gather(*(saver.aget_tuple(_cfg(f"a{i}")) for i in range(16)))
        assert [t.checkpoint["channel_values"] for t in tuples] == [{"n": i} for i in range(16)]
        # sync clients too (from_urls): tasks wait for one set-up in a worker thread
        both = DurableSaver.from_urls(redis_url, mongo_url, **unique_options(flusher="off"))
        await asyncio.gather(*(both.aput(_cfg(f"b{i}"), _checkpoint(i), {"step": i},
                                         {"n": f"{i:032}.0"}) for i in range(16)))
        assert set_ups == ["async", "sync"]
        await both.aclose()
    finally:
        await saver.aclose()
        await r.aclose()
        await m.close()


def test_a_first_call_while_redis_is_down_raises_and_the_next_call_sets_up(
        mongo_url: str, set_ups: list[str]) -> None:
    opts = unique_options(socket_timeout_s=0.5)
    with redis_server() as rs:
        rs.stop()
        saver = DurableSaver.from_urls(rs.url, mongo_url, **opts)
        try:
            with pytest.raises(TierUnavailableError, match=r"Redis .* did not answer"):
                saver.put(_cfg("t"), _checkpoint(1), {"step": 0}, {"n": f"{1:032}.0"})
            rs.start()
            saver.put(_cfg("t"), _checkpoint(1), {"step": 0}, {"n": f"{1:032}.0"})
            assert saver.get_tuple(_cfg("t")).checkpoint["channel_values"] == {"n": 1}  # type: ignore[union-attr]
            assert set_ups == ["sync", "sync"]  # tried again, then done
            saver.get_tuple(_cfg("t"))
            assert set_ups == ["sync", "sync"]
        finally:
            saver.close()


def test_a_first_call_while_mongodb_is_down_goes_on_and_sets_mongodb_up_later(
        redis_url: str, caplog: pytest.LogCaptureFixture) -> None:
    opts = unique_options(server_selection_timeout_s=0.3)
    with mongo_server() as ms:
        ms.stop()
        saver = DurableSaver.from_urls(redis_url, ms.url, **opts)
        try:
            with caplog.at_level(logging.WARNING, "langgraph_durable"):
                saver.put(_cfg("t"), _checkpoint(1), {"step": 0}, {"n": f"{1:032}.0"})
            assert "MongoDB did not answer while the saver started" in caplog.text
            assert saver.get_tuple(_cfg("t")).checkpoint["channel_values"] == {"n": 1}  # type: ignore[union-attr]
            assert saver.last_read_tier == "hot"
            ms.start()
            wait_for(lambda: saver.runtime.deferred.done, 30, "the deferred MongoDB set-up")
            assert _indexes(ms.url, opts["database"]) == INDEX_NAMES
            saver.flush(timeout_s=30)
            with pymongo.MongoClient(ms.url) as m:
                assert m[opts["database"]]["checkpoints"].count_documents(
                    {"thread_id": "t"}) == 1
        finally:
            saver.close()


def test_check_deployment_writes_nothing_and_reads_without_setting_up(
        redis_url: str, mongo_url: str, redis_client: redis.Redis, set_ups: list[str]) -> None:
    opts = unique_options(flusher="off")  # as the CLI's read commands
    saver = DurableSaver.from_urls(redis_url, mongo_url, **opts)
    try:
        saver.check_deployment()
        assert saver.get_tuple(_cfg("t")) is None
        assert list(saver.list(None)) == []
        assert set_ups == []
        assert list(redis_client.scan_iter(match=prefix_pattern(opts["key_prefix"]))) == []
        with pymongo.MongoClient(mongo_url) as m:
            assert opts["database"] not in m.list_database_names()
    finally:
        saver.close()


def test_a_deferred_set_up_refused_by_the_owner_check_stops_the_flusher_and_the_next_call_raises(
        redis_url: str, caplog: pytest.LogCaptureFixture) -> None:
    opts = unique_options(server_selection_timeout_s=0.3)
    other = {**opts, "key_prefix": opts["key_prefix"] + "x"}
    with mongo_server() as ms:
        with DurableSaver.from_urls(redis_url, ms.url, **opts):
            pass  # the collections now hold the threads of opts' key prefix
        ms.stop()
        saver = DurableSaver.from_urls(redis_url, ms.url, **other)
        try:
            with caplog.at_level(logging.WARNING, "langgraph_durable"):
                saver.put(_cfg("t"), _checkpoint(1), {"step": 0}, {"n": f"{1:032}.0"})
                ms.start()
                deferred = saver.runtime.deferred
                wait_for(lambda: deferred.last_error is not None and "holds the threads"
                         in deferred.last_error, 30, "the deferred set-up to be refused")
            assert deferred.done is False
            wait_for(lambda: not saver.runtime.flusher.running, 30, "its flusher to stop")
            with pytest.raises(ConfigurationError, match="holds the threads of key_prefix"):
                saver.get_tuple(_cfg("t"))  # the next call sets up again: refused
            assert (f"the MongoDB set-up deferred at start was refused: MongoDB database "
                    f"{opts['database']!r} (collection_prefix '') holds the threads of "
                    f"key_prefix {opts['key_prefix']!r}, not {other['key_prefix']!r}"
                    ) in caplog.text
        finally:
            saver.close(drain_timeout_s=0)
