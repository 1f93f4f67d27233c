"""``DurableStore``'s own ``ttl`` option, checked before any client is made: a value that
is not a ``TTLConfig`` raises ``ConfigurationError`` naming it, not a ``TypeError``."""

from __future__ import annotations

from typing import Any

import pytest

from langgraph_durable import ConfigurationError, DurableStore
from langgraph_durable.store import checked_ttl

UNUSED_URLS = ("redis://127.0.0.1:1/0", "mongodb://127.0.0.1:1/brk_db")  # never contacted


@pytest.mark.parametrize(("ttl", "named"), [
    (5, "ttl=5"),
    ({"default_ttl": "x"}, "default_ttl='x'"),
    ({"sweep_interval_minutes": [1]}, "sweep_interval_minutes=[1]"),
    ({"refresh_on_read": "no"}, "refresh_on_read='no'"),
    ({"omit_expired": 1}, "omit_expired=1"),
    ({"defualt_ttl": 5}, "defualt_ttl"),
])
def test_store_from_urls_names_a_bad_ttl_before_making_clients(ttl: Any, named: str) -> None:
    with pytest.raises(ConfigurationError, match="DurableStore ttl") as got:
        DurableStore.from_urls(*UNUSED_URLS, key_prefix="brk", ttl=ttl)
    assert named in str(got.value)


def test_a_ttl_config_is_kept_as_given() -> None:
    ttl = {"default_ttl": 90.0, "refresh_on_read": False, "omit_expired": False,
           "sweep_interval_minutes": 30}
    assert checked_ttl(ttl) == ttl
    assert checked_ttl(None) is None
    assert checked_ttl({}) is None
