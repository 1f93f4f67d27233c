"""Shared fixtures: savers on the real servers of ``langgraph_durable.testing``.

Every saver gets its own key prefix and MongoDB database (``testing.unique_options``), so
tests never see each other's data and need no FLUSHALL between them. Shared helpers live
in ``langgraph_durable.testing`` (``unique_options``, ``wait_for``), imported from there,
never from a conftest.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
import redis

from langgraph_durable import DurableSaver
from langgraph_durable.testing import unique_options


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
