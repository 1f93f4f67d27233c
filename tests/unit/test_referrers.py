"""The one list of record kinds that can name an external object (``admin/referrers.py``)
knows every stored kind: each Redis key suffix of a thread, each key of the whole prefix
and each MongoDB collection is either a referrer or listed, with its reason, as holding no
serialized value. A new kind of record fails here until it is classified, so the
collector (``gc``), ``export`` and the storage figures cannot miss it."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from langgraph_durable.admin import referrers as R
from langgraph_durable.durable.documents import Collections
from langgraph_durable.hot import keys as K
from langgraph_durable.hot.keys import ThreadKeys
from langgraph_durable.outbox import group


def test_every_redis_suffix_of_a_thread_is_a_referrer_or_holds_no_values() -> None:
    suffixes = set(ThreadKeys.__slots__[2:])  # after thread_id and tag: the stored suffixes
    referrers = {r.suffix for r in R.REFERRERS if r.suffix}
    without = set(R.REDIS_SUFFIXES_WITHOUT_VALUES)
    assert not referrers & without, "a suffix is both a referrer and value-free"
    unknown = suffixes - referrers - without
    assert not unknown, (
        f"Redis key suffixes {sorted(unknown)} of hot/keys.py are not classified: add each "
        "to admin/referrers.py REFERRERS (if it can hold a serialized value) or to "
        "REDIS_SUFFIXES_WITHOUT_VALUES with the reason")
    assert referrers | without == suffixes  # nothing listed that is not stored
    assert referrers == {"cp", "bl", "w", "it", "fx"}


def test_every_key_of_the_whole_prefix_holds_no_values_or_is_a_referrer() -> None:
    named = {name for name, fn in inspect.getmembers(K, inspect.isfunction)
             if name.endswith("_key") and fn.__module__ == K.__name__}
    named.add("dead_letter_key")
    assert callable(group.dead_letter_key)
    unknown = named - set(R.PREFIX_KEYS_WITHOUT_VALUES)
    assert not unknown, (
        f"keys {sorted(unknown)} of the prefix are not classified in admin/referrers.py: "
        "PREFIX_KEYS_WITHOUT_VALUES with the reason, or a Referrer when they can hold "
        "serialized values")
    assert named == set(R.PREFIX_KEYS_WITHOUT_VALUES)


def test_every_mongodb_collection_is_a_referrer_or_holds_no_values() -> None:
    collections = {f.name for f in dataclasses.fields(Collections)}
    referrers = {r.collection for r in R.REFERRERS}
    without = set(R.COLLECTIONS_WITHOUT_VALUES)
    assert not referrers & without
    unknown = collections - referrers - without
    assert not unknown, (
        f"MongoDB collections {sorted(unknown)} of durable/documents.py Collections are "
        "not classified: add each to admin/referrers.py REFERRERS or to "
        "COLLECTIONS_WITHOUT_VALUES with the reason")
    assert referrers | without == collections
    assert referrers == {"checkpoints", "blobs", "writes", "items", "effects"}


def test_every_reason_is_written_out() -> None:
    for table in (R.REDIS_SUFFIXES_WITHOUT_VALUES, R.PREFIX_KEYS_WITHOUT_VALUES,
                  R.COLLECTIONS_WITHOUT_VALUES):
        assert all(len(reason) > 20 for reason in table.values())


def test_the_storage_figures_cover_every_referrer_and_the_chunks() -> None:
    assert R.collections_of_threads() == (
        "checkpoints", "blobs", "writes", "items", "effects", "chunks")


def test_the_prefix_keys_are_built_for_every_name_of_the_table() -> None:
    from .stepping import context

    ctx = context()
    built = R.prefix_keys(ctx)
    assert set(built) == set(R.PREFIX_KEYS_WITHOUT_VALUES)
    assert built["dead_letter_key"] == [group.dead_letter_key(ctx)]
    assert built["outbox_key"] == list(ctx.outboxes) and all(built.values())


def test_a_referrer_of_hashes_that_are_not_a_threads_claims_its_keys(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """How a kind kept outside the threads' keys (a store's namespaces) joins the list."""
    store = R.Referrer("store item", "", "items", {"type": "extref"}, ("type", "data"),
                       lambda _f, _raw, _w: [], lambda _d: [],
                       owns_key=lambda prefix, key: key.startswith("{" + prefix + ":store:"))
    monkeypatch.setattr(R, "REFERRERS", (*R.REFERRERS, store))
    assert R.redis_referrer("p", "{p:store:ns}") == ("", store)
    assert R.redis_referrer("p", ThreadKeys("p", "t").fx)[1].name == "effect journal entry"
    assert R.redis_referrer("p", "{p:outbox}") is None
