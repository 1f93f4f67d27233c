"""The drivers on a real Redis: script refusals become ``ScriptRefused``, and the SHA1
EVALSHA sends is that of the final Lua source."""

from __future__ import annotations

import asyncio
import hashlib
import uuid

import pytest
import redis
import redis.asyncio
import redis.exceptions
from langgraph.checkpoint.base import empty_checkpoint

from langgraph_durable import DurableSaver
from langgraph_durable.core.ops import Script
from langgraph_durable.errors import ScriptRefused
from langgraph_durable.hot.scripts import SCRIPTS
from langgraph_durable.io.drivers import Clients, execute_async, execute_sync
from langgraph_durable.testing import unique_options

_REFUSING = "if ARGV[1] == 'x' then return redis.error_reply('STALE_HEAD ' .. KEYS[1]) end\n" \
            "if ARGV[1] == 'y' then return redis.error_reply('WHATEVER 1') end\n" \
            "return redis.error_reply('OUTBOX_FULL')"


def _op(arg: str, key: str) -> Script[object]:
    return Script("refusing", [key], [arg], refusals=frozenset({"STALE_HEAD", "OUTBOX_FULL"}))


@pytest.mark.parametrize("coalesce", [True, False], ids=["batched", "alone"])
def test_a_sync_script_refusal_is_raised_as_script_refused_with_code_and_detail(
        redis_url: str, coalesce: bool) -> None:
    r = redis.Redis.from_url(redis_url)
    key = f"refusal:{uuid.uuid4().hex}"
    clients = Clients(redis=r, db=None, scripts={"refusing": _REFUSING}, coalesce=coalesce)
    with pytest.raises(ScriptRefused) as err:
        execute_sync(_op("x", key), clients)
    assert (err.value.script, err.value.code, err.value.detail) == (
        "refusing", "STALE_HEAD", key)
    with pytest.raises(ScriptRefused) as err:
        execute_sync(_op("z", key), clients)
    assert (err.value.code, err.value.detail) == ("OUTBOX_FULL", "")
    # a code the operation does not declare stays the client's error
    with pytest.raises(redis.exceptions.ResponseError, match="^WHATEVER 1$"):
        execute_sync(_op("y", key), clients)
    r.close()


async def test_async_script_refusals_of_one_batch_are_each_raised_as_script_refused(
        redis_url: str) -> None:
    r = redis.asyncio.Redis.from_url(redis_url)
    clients = Clients(redis=r, db=None, scripts={"refusing": _REFUSING})
    got = await asyncio.gather(*(execute_async(_op("x", f"k{i}"), clients) for i in range(3)),
                               return_exceptions=True)
    assert [(type(g), getattr(g, "detail", None)) for g in got] == [
        (ScriptRefused, f"k{i}") for i in range(3)]
    assert clients.batcher().batches == 1
    await r.aclose()


def test_the_sha1_evalsha_sends_is_that_of_the_final_source(
        redis_url: str, mongo_url: str, redis_client: redis.Redis) -> None:
    with DurableSaver.from_urls(redis_url, mongo_url, **unique_options(flusher="off")) as s:
        s.put({"configurable": {"thread_id": "t", "checkpoint_ns": ""}}, empty_checkpoint(),
              {"step": -1}, {})
        for name, src in SCRIPTS.items():
            sha = hashlib.sha1(src.encode()).hexdigest()
            assert s.sync_clients.script(name).sha == sha, name
        assert redis_client.script_exists(
            hashlib.sha1(SCRIPTS["put"].encode()).hexdigest()) == [True]
