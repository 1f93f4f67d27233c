"""``setup()`` in both forms (issue 23 item 2): a plain call outside an event loop sets the
saver up before returning, and inside a running loop ``await saver.setup()`` (the pattern
of LangGraph's Agent Server docs) sets it up without blocking the loop and raises its
errors to the awaiter; a call in a loop that is not awaited still sets the saver up."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable

import pytest
import redis

from langgraph_durable import ConfigurationError, DurableSaver
from langgraph_durable.hot.keys import binding_key
from langgraph_durable.testing import unique_options


async def _await(awaitable: Awaitable[None]) -> None:
    return await awaitable


def _bound_database(client: redis.Redis, key_prefix: str) -> bytes | None:
    found = client.hget(binding_key(key_prefix), "database")
    return found if found is None else bytes(found)


def test_setup_outside_an_event_loop_sets_up_before_returning_a_done_awaitable(
        redis_url: str, mongo_url: str, redis_client: redis.Redis) -> None:
    opts = unique_options()
    saver = DurableSaver.from_urls(redis_url, mongo_url, flusher="off", **opts)
    try:
        done = saver.setup()
        assert _bound_database(redis_client, opts["key_prefix"]) == opts["database"].encode()
        assert asyncio.run(_await(done)) is None  # awaiting it later waits for nothing
    finally:
        saver.close()


async def test_await_setup_inside_a_running_loop_sets_the_saver_up(
        redis_url: str, mongo_url: str, redis_client: redis.Redis) -> None:
    opts = unique_options()
    saver = DurableSaver.from_urls(redis_url, mongo_url, flusher="off", **opts)
    try:
        assert _bound_database(redis_client, opts["key_prefix"]) is None
        pending = saver.setup()
        assert isinstance(pending, asyncio.Future)
        assert await pending is None
        assert _bound_database(redis_client, opts["key_prefix"]) == opts["database"].encode()
    finally:
        await saver.aclose()


async def test_await_setup_raises_a_binding_to_another_database_to_the_awaiter(
        redis_url: str, mongo_url: str) -> None:
    opts = unique_options()
    with DurableSaver.from_urls(redis_url, mongo_url, flusher="off", **opts):
        pass
    other = DurableSaver.from_urls(redis_url, mongo_url, flusher="off",
                                   key_prefix=opts["key_prefix"],
                                   database=opts["database"] + "_other")
    try:
        with pytest.raises(ConfigurationError, match=opts["key_prefix"]):
            await other.setup()
    finally:
        await other.aclose()


async def test_setup_called_in_a_loop_and_not_awaited_still_sets_the_saver_up(
        redis_url: str, mongo_url: str, redis_client: redis.Redis) -> None:
    opts = unique_options()
    saver = DurableSaver.from_urls(redis_url, mongo_url, flusher="off", **opts)
    try:
        saver.setup()  # a sync habit inside async code: the set-up runs as a task
        deadline = asyncio.get_running_loop().time() + 20
        while _bound_database(redis_client, opts["key_prefix"]) is None:
            assert asyncio.get_running_loop().time() < deadline, "no set-up within 20 s"
            await asyncio.sleep(0.01)  # the loop runs the set-up's task meanwhile
        assert _bound_database(redis_client, opts["key_prefix"]) == opts["database"].encode()
        assert await saver.aget_tuple({"configurable": {"thread_id": "nobody"}}) is None
    finally:
        await saver.aclose()


async def test_await_setup_works_with_asyncio_clients_only(
        redis_url: str, mongo_url: str, redis_client: redis.Redis) -> None:
    import pymongo
    import redis.asyncio

    opts = unique_options()
    r = redis.asyncio.Redis.from_url(redis_url)
    m = pymongo.AsyncMongoClient(mongo_url)
    saver = DurableSaver(async_redis=r, async_mongo=m, flusher="off", **opts)
    try:
        await saver.setup()
        assert _bound_database(redis_client, opts["key_prefix"]) == opts["database"].encode()
    finally:
        await saver.aclose()
        await r.aclose()
        await m.close()


async def test_a_setup_not_awaited_that_fails_is_raised_by_the_next_call(
        redis_url: str, mongo_url: str) -> None:
    opts = unique_options()
    with DurableSaver.from_urls(redis_url, mongo_url, flusher="off", **opts):
        pass
    other = DurableSaver.from_urls(redis_url, mongo_url, flusher="off",
                                   key_prefix=opts["key_prefix"],
                                   database=opts["database"] + "_other")
    try:
        pending = other.setup()  # not awaited by the code under test
        with pytest.raises(ConfigurationError, match=opts["key_prefix"]):
            await other.aget_tuple({"configurable": {"thread_id": "t"}})
        with pytest.raises(ConfigurationError):
            await pending  # the set-up's own error, kept for whoever awaits it
    finally:
        await other.aclose()
