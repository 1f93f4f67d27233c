"""The thread page's retention line: the policy, the thread's expiry, its own TTL, pinned
and held threads (HTML and ``/api/thread``), served by uvicorn, read over HTTP."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint

from langgraph_durable import DurableSaver
from langgraph_durable.dashboard import create_app
from langgraph_durable.testing import unique_options

from .test_dashboard import Served

POLICY = {"strategy": "keep_latest", "default_ttl": 90, "sweep_interval_minutes": 30}


def _get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=30) as r:
        return r.read().decode()


@pytest.fixture
def served(redis_url: str, mongo_url: str) -> Iterator[tuple[DurableSaver, str]]:
    with DurableSaver.from_urls(redis_url, mongo_url, **unique_options(ttl=POLICY)) as s:
        for tid, extra in (("plain", {}), ("own", {"lgd_ttl_minutes": 15})):
            cfg: Any = {"configurable": {"thread_id": tid, "checkpoint_ns": "", **extra}}
            s.put(cfg, empty_checkpoint(), {"step": -1, "source": "input"}, {})
        s.flush()
        app = Served(create_app(s, poll_s=0.2, index_ttl_s=0))
        yield s, app.url
        app.close()


def test_the_thread_page_shows_the_policy_and_the_expiry(
        served: tuple[DurableSaver, str]) -> None:
    saver, url = served
    facts = saver.thread_retention("plain")
    assert facts is not None and facts.expires_ms is not None
    data = json.loads(_get(url + "api/thread?thread_id=plain"))["retention"]
    assert data["policy"] == {"strategy": "keep_latest", "default_ttl": 90.0,
                              "sweep_interval_minutes": 30.0}
    assert (data["recorded"], data["pinned"], data["ttl"], data["held"]) == (
        True, False, None, None)
    assert 89 <= data["minutes_left"] <= 90
    html = _get(url + "thread?thread_id=plain")
    assert "keep_latest after 90 min idle, swept every 30 min" in html
    assert 'id="retention-expires"' in html and "(in 9" in html  # in 90 (or 89) min
    own = _get(url + "thread?thread_id=own")
    assert "keep_latest after 15 min idle (its own TTL)" in own
    saver.pin_thread("own")
    assert 'id="retention-pinned">pinned</strong>: never swept' in _get(
        url + "thread?thread_id=own")
