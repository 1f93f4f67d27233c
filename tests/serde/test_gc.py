"""Garbage collection with an injected clock (no sleeps)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import numpy as np
import pandas as pd
import pytest

from langgraph_durable.serde import (
    BlobNotFoundError,
    BlobStore,
    ExternalRefSerializer,
    acollect_garbage,
    collect_garbage,
    collect_refs,
    refs_in,
)


def _write_three(serde: ExternalRefSerializer) -> list[tuple[str, bytes]]:
    return [
        serde.dumps_typed(pd.DataFrame({"a": [1, 2]})),
        serde.dumps_typed({"arr": np.arange(3)}),
        serde.dumps_typed(pd.Series([1.5], name="s")),
    ]


def _newest(store: BlobStore) -> datetime:
    return max(info.last_modified for info in store.list_keys())


def test_collects_only_unreferenced_blobs_older_than_grace(serde: ExternalRefSerializer) -> None:
    store = serde.store
    typed = _write_three(serde)
    keep = refs_in(*typed[0])
    later = _newest(store) + timedelta(hours=2)
    report = collect_garbage(store, keep, grace_period_s=3600, now=later)
    assert sorted(report.deleted) == sorted(collect_refs(typed[1:]))
    assert (report.scanned, report.kept_referenced, report.kept_recent) == (3, 1, 0)
    assert report.bytes_deleted > 0 and report.cutoff == later - timedelta(hours=1)
    assert {i.key for i in store.list_keys()} == keep
    pd.testing.assert_frame_equal(serde.loads_typed(typed[0]), pd.DataFrame({"a": [1, 2]}))
    with pytest.raises(BlobNotFoundError):
        serde.loads_typed(typed[1])


def test_recent_blobs_survive_the_grace_period(serde: ExternalRefSerializer) -> None:
    _write_three(serde)
    just_after = _newest(serde.store) + timedelta(seconds=10)
    report = collect_garbage(serde.store, set(), grace_period_s=3600, now=just_after)
    assert report.deleted == [] and report.kept_recent == 3
    assert len(list(serde.store.list_keys())) == 3
    # with no grace period the same blobs go
    report = collect_garbage(serde.store, set(), grace_period_s=0, now=just_after)
    assert len(report.deleted) == 3


def test_dry_run_foreign_keys_and_clock_forms(serde: ExternalRefSerializer) -> None:
    store = serde.store
    _write_three(serde)
    store.put_if_absent("README.txt", b"not ours")
    later = _newest(store) + timedelta(days=1)
    dry = collect_garbage(store, set(), now=later.timestamp(), dry_run=True)
    assert dry.dry_run and len(dry.deleted) == 3 and dry.ignored_foreign == 1
    assert len(list(store.list_keys())) == 4
    naive = later.astimezone(timezone.utc).replace(tzinfo=None)
    report = collect_garbage(store, set(), now=naive)
    assert len(report.deleted) == 3 and store.exists("README.txt")
    everything = collect_garbage(store, set(), now=later, key_pattern=None)
    assert everything.deleted == ["README.txt"]


def test_negative_grace_period_is_refused(serde: ExternalRefSerializer) -> None:
    with pytest.raises(ValueError):
        collect_garbage(serde.store, set(), grace_period_s=-1)


async def test_async_collect(serde: ExternalRefSerializer) -> None:
    typed = _write_three(serde)
    later = _newest(serde.store) + timedelta(hours=2)
    report = await acollect_garbage(serde.store, collect_refs(typed[:2]), now=later)
    assert report.deleted == sorted(refs_in(*typed[2]))


class _StaleListing:
    """A store whose listing is three hours out of date (the blob was re-used since)."""

    def __init__(self, store: BlobStore) -> None:
        self.store = store
        self.deleted: list[str] = []

    def list_keys(self):  # type: ignore[no-untyped-def]
        for info in self.store.list_keys():
            yield info._replace(last_modified=info.last_modified - timedelta(hours=3))

    def stat(self, key: str):  # type: ignore[no-untyped-def]
        return self.store.stat(key)  # type: ignore[attr-defined]

    def delete(self, key: str) -> None:
        self.deleted.append(key)
        self.store.delete(key)


def test_a_blob_refreshed_after_the_listing_is_kept(serde: ExternalRefSerializer) -> None:
    _write_three(serde)
    stale = _StaleListing(serde.store)
    report = collect_garbage(stale, set())  # type: ignore[arg-type]
    assert report.deleted == [] and stale.deleted == [] and report.kept_recent == 3
    assert len(list(serde.store.list_keys())) == 3
