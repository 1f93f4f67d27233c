"""Shared fixtures: savers on the real servers of ``langgraph_durable.testing``.

Every saver gets its own key prefix and MongoDB database, so tests never see each
other's data and need no FLUSHALL between them.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator

import pytest
import redis

from langgraph_durable import DurableSaver


def unique_options(**options: object) -> dict:
    """Options giving a saver a key prefix and database no other test uses."""
    tag = uuid.uuid4().hex[:10]
    return {"key_prefix": f"t{tag}", "database": f"lgd_{tag}", **options}


@pytest.fixture
def saver(redis_url: str, mongo_url: str) -> Iterator[DurableSaver]:
    """A sync-constructed saver (sync clients; async methods work too)."""
    with DurableSaver.from_urls(redis_url, mongo_url, **unique_options()) as s:
        yield s


@pytest.fixture
async def asaver(redis_url: str, mongo_url: str) -> AsyncIterator[DurableSaver]:
    """A saver entered with ``async with`` (asyncio clients for this event loop)."""
    async with DurableSaver.from_urls(redis_url, mongo_url, **unique_options()) as s:
        yield s


@pytest.fixture
def redis_client(redis_url: str) -> Iterator[redis.Redis]:
    """A plain Redis client, to look at or damage what the saver stored."""
    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()
