"""A Redis that may evict keys (``maxmemory-policy`` other than ``noeviction``) is said
at set-up: the hot tier trusts what Redis holds, so an evicted unflushed checkpoint or
outbox entry would be lost without a word."""

from __future__ import annotations

import logging

import pytest
import redis

from langgraph_durable import DurableSaver
from langgraph_durable.testing import redis_server, unique_options


def _eviction_warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.levelno == logging.WARNING and "maxmemory-policy" in r.getMessage()]


def test_setup_warns_once_naming_the_policy_when_redis_may_evict_keys(
        mongo_url: str, caplog: pytest.LogCaptureFixture) -> None:
    options = unique_options()
    with redis_server() as rs:
        with redis.Redis.from_url(rs.url) as r:
            r.config_set("maxmemory-policy", "allkeys-lru")
        with caplog.at_level(logging.WARNING, logger="langgraph_durable"):
            with DurableSaver.from_urls(rs.url, mongo_url, **options) as saver:
                saver.setup()  # a second set-up does not say it again
    (warning,) = _eviction_warnings(caplog)
    assert "maxmemory-policy allkeys-lru" in warning
    assert f"key prefix {options['key_prefix']!r}" in warning
    assert "noeviction" in warning


async def test_setup_with_noeviction_says_nothing_of_eviction(
        redis_url: str, mongo_url: str, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="langgraph_durable"):
        async with DurableSaver.from_urls(redis_url, mongo_url, **unique_options()):
            pass
    assert _eviction_warnings(caplog) == []
