"""``DurableStore``'s own ``ttl`` option, checked before any client is made: a value that
is not a ``TTLConfig`` raises ``ConfigurationError`` naming it, not a ``TypeError``."""

from __future__ import annotations

import sys
from typing import Any

import pytest
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.store.base import PutOp

from langgraph_durable import ConfigurationError, DurableStore
from langgraph_durable.errors import SerializationError
from langgraph_durable.store import checked_ttl
from langgraph_durable.store.batch import MAX_ITEM_BYTES, MAX_TTL_MINUTES, check_op, prepare_put
from langgraph_durable.store.embedding import index_config

UNUSED_URLS = ("redis://127.0.0.1:1/0", "mongodb://127.0.0.1:1/brk_db")  # never contacted


@pytest.mark.parametrize(("ttl", "named"), [
    (5, "ttl=5"),
    ({"default_ttl": "x"}, "default_ttl='x'"),
    ({"sweep_interval_minutes": [1]}, "sweep_interval_minutes=[1]"),
    ({"refresh_on_read": "no"}, "refresh_on_read='no'"),
    ({"omit_expired": 1}, "omit_expired=1"),
    ({"defualt_ttl": 5}, "defualt_ttl"),
    ({"default_ttl": -5}, "default_ttl=-5 is not a number of minutes from 0 to "
     "1,000,000,000"),
    ({"default_ttl": float("inf")}, "default_ttl=inf"),
    ({"default_ttl": 2e11}, "default_ttl=200000000000.0"),
    ({"sweep_interval_minutes": 0}, "sweep_interval_minutes=0 is not a number of "
     "minutes over 0"),
    ({"sweep_interval_minutes": -1}, "sweep_interval_minutes=-1"),
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


@pytest.mark.parametrize(("ttl", "problem"), [
    (sys.maxsize, "is not a number of minutes from 0 to 1,000,000,000 (None: no expiry)"),
    (-5, "is not a number of minutes from 0 to 1,000,000,000 (None: no expiry)"),
    (float("nan"), "is not a number of minutes from 0 to 1,000,000,000 (None: no expiry)"),
    (float("inf"), "is not a number of minutes from 0 to 1,000,000,000 (None: no expiry)"),
    ("5", "is not a number of minutes (None: no expiry)"),
    (True, "is not a number of minutes (None: no expiry)"),
])
def test_a_put_with_a_ttl_the_record_cannot_hold_is_refused_before_anything_is_written(
        ttl: Any, problem: str) -> None:
    # a TTL of sys.maxsize minutes overflowed the record's 16-digit expiry and made the
    # item, and every search and listing reaching it, unreadable
    op = PutOp(("b",), "forever", {"x": 1}, ttl=ttl)
    with pytest.raises(ValueError) as got:
        check_op(op)
    assert str(got.value) == f"store item 'forever' of namespace ('b',): ttl={ttl!r} {problem}"


def test_the_longest_ttl_and_no_ttl_are_taken() -> None:
    # taken, and the expiry each gives (ms after now_ms; 0 and None: none)
    serde, now_ms = JsonPlusSerializer(), 1_000
    expiries = []
    for ttl in (MAX_TTL_MINUTES, 0.5, 0, None):
        op = PutOp(("b",), "k", {"x": 1}, ttl=ttl)
        check_op(op)
        expiries.append(prepare_put(op, serde, now_ms).expires_ms)
    assert expiries == [now_ms + MAX_TTL_MINUTES * 60_000, now_ms + 30_000, 0, 0]
    assert expiries[0] < 10**16  # fits the record's 16-digit expiry


def test_an_item_over_the_document_limit_is_refused_naming_it_and_its_size() -> None:
    # taken by Redis, it was dead-lettered by the flusher (over MongoDB's 16 MiB) and lost
    # with Redis's data
    serde = JsonPlusSerializer()
    big = PutOp(("v",), "big", {"d": "x" * 17_000_000})
    with pytest.raises(SerializationError) as got:
        prepare_put(big, serde, 0)
    size = len(serde.dumps_typed({"d": "x" * 17_000_000})[1]) + 2 * len("v") + len("big")
    assert str(got.value).startswith(
        f"store item 'big' of namespace ('v',) is {size:,} bytes serialized (value, "
        f"embeddings, namespace and key), over {MAX_ITEM_BYTES:,}: ")
    fits = PutOp(("v",), "fits", {"d": "x" * 16_000_000})
    assert prepare_put(fits, serde, 0).key == "fits"


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"saver": "str"}, "DurableStore(saver): a DurableSaver, not 'str'"),
    ({"saver": "s", "index": 5}, "DurableStore(saver): a DurableSaver, not 's'"),
])
def test_a_store_of_something_else_than_a_saver_is_a_configuration_error(
        kwargs: Any, message: str) -> None:
    with pytest.raises(ConfigurationError) as got:
        DurableStore(**kwargs)
    assert str(got.value) == message


@pytest.mark.parametrize(("index", "message"), [
    (5, "DurableStore index=5: an IndexConfig mapping with 'dims' and 'embed'"),
    ({"dims": 4}, "DurableStore index={'dims': 4}: an IndexConfig mapping with 'dims' and "
     "'embed'"),
    ({"dims": "x", "embed": len}, "DurableStore index: dims='x' (a whole number over 0)"),
    ({"dims": 2.5, "embed": len}, "DurableStore index: dims=2.5 (a whole number over 0)"),
    ({"dims": -3, "embed": len}, "DurableStore index: dims=-3 (a whole number over 0)"),
])
def test_a_bad_index_is_a_configuration_error_naming_it(index: Any, message: str) -> None:
    with pytest.raises(ConfigurationError) as got:
        index_config(index)
    assert str(got.value) == message
    import numpy as np

    index_config({"dims": np.int64(4), "embed": lambda texts: [[0.0] * 4 for _ in texts]})
