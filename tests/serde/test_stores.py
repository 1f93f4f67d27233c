"""Blob stores against a real S3 server (moto) and a local folder."""

from __future__ import annotations

import os
import threading
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from botocore.exceptions import ClientError

from langgraph_durable.serde import (
    BlobInfo,
    BlobNotFoundError,
    BlobStore,
    BlobStoreError,
    LocalBlobStore,
    S3BlobStore,
)

from ._helpers import bucket_objects


def test_protocol_basics(store: BlobStore) -> None:
    assert isinstance(store, BlobStore)
    assert store.put_if_absent("k-one.bin", b"abc") is True
    assert store.put_if_absent("k-one.bin", b"abc") is False
    assert store.get("k-one.bin") == b"abc"
    assert store.exists("k-one.bin") and not store.exists("k-two.bin")
    (info,) = store.list_keys()
    assert isinstance(info, BlobInfo) and (info.key, info.size) == ("k-one.bin", 3)
    assert info.last_modified.tzinfo is not None and info.last_modified.utcoffset() == timedelta(0)
    assert abs(info.last_modified - datetime.now(timezone.utc)) < timedelta(minutes=5)
    store.delete("k-one.bin")
    store.delete("k-one.bin")  # idempotent
    assert not store.exists("k-one.bin") and list(store.list_keys()) == []
    with pytest.raises(BlobNotFoundError) as info_err:
        store.get("k-one.bin")
    assert info_err.value.key == "k-one.bin" and info_err.value.store == store.name


def test_large_blob_round_trip(store: BlobStore) -> None:
    data = os.urandom(3 * 1024 * 1024)
    assert store.put_if_absent("big.bin", data) and not store.put_if_absent("big.bin", data)
    assert store.get("big.bin") == data


async def test_async_methods(store: BlobStore) -> None:
    assert await store.aput_if_absent("a-key.bin", b"1") is True
    assert await store.aput_if_absent("a-key.bin", b"1") is False
    assert await store.aget("a-key.bin") == b"1"
    assert await store.aexists("a-key.bin")
    assert [i.key async for i in store.alist_keys()] == ["a-key.bin"]
    await store.adelete("a-key.bin")
    assert not await store.aexists("a-key.bin")
    with pytest.raises(BlobNotFoundError):
        await store.aget("a-key.bin")


async def test_async_methods_do_not_run_on_the_event_loop_thread(store: BlobStore) -> None:
    seen: list[int] = []
    original = store.get

    def recording_get(key: str) -> bytes:
        seen.append(threading.get_ident())
        return original(key)

    store.get = recording_get  # type: ignore[method-assign]
    store.put_if_absent("t-key.bin", b"x")
    assert await store.aget("t-key.bin") == b"x"
    assert seen and seen[0] != threading.get_ident()


def test_local_writes_are_atomic_and_keys_validated(local_store: LocalBlobStore) -> None:
    local_store.put_if_absent("abcdef.bin", b"data")
    shard = local_store.root / "ab"
    assert [p.name for p in shard.iterdir()] == ["abcdef.bin"]  # no temporary file left
    (shard / ".tmp-crashed").write_bytes(b"partial")
    assert [i.key for i in local_store.list_keys()] == ["abcdef.bin"]
    for bad in ["../escape", "a/b", "", ".hidden", "x"]:
        with pytest.raises(ValueError, match="invalid blob key"):
            local_store.put_if_absent(bad, b"")


def test_local_put_of_existing_key_refreshes_old_mtime(local_store: LocalBlobStore) -> None:
    local_store.put_if_absent("oldblob.bin", b"v")
    path = local_store.root / "ol" / "oldblob.bin"
    old = (datetime.now(timezone.utc) - timedelta(days=2)).timestamp()
    os.utime(path, (old, old))
    assert local_store.put_if_absent("oldblob.bin", b"v") is False
    assert path.stat().st_mtime > old + 86400


def test_local_store_on_missing_folder_lists_nothing(tmp_path: Any) -> None:
    store = LocalBlobStore(tmp_path / "nowhere")
    assert list(store.list_keys()) == [] and not store.exists("abc.bin")


class RecordingClient:
    """A real boto3 client whose calls are recorded; optionally rejects ``IfNoneMatch`` like a
    server that does not implement conditional writes."""

    def __init__(self, client: Any, reject_if_none_match: bool = False) -> None:
        self._client = client
        self.reject = reject_if_none_match
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._client, name)
        if name == "get_paginator":
            return method

        def call(**kwargs: Any) -> Any:
            self.calls.append((name, kwargs))
            if name == "put_object" and "IfNoneMatch" in kwargs and self.reject:
                raise ClientError(
                    {
                        "Error": {"Code": "NotImplemented", "Message": "If-None-Match"},
                        "ResponseMetadata": {"HTTPStatusCode": 501},
                    },
                    "PutObject",
                )
            return method(**kwargs)

        return call

    def names(self) -> list[str]:
        return [name for name, _ in self.calls]


def test_s3_conditional_put_skips_existing_keys(s3_client: Any, bucket: str) -> None:
    client = RecordingClient(s3_client)
    store = S3BlobStore(bucket, prefix="p", client=client, touch_after_s=3600)
    assert store.put_if_absent("small.bin", b"x") is True
    assert store.conditional_put is True
    assert store.put_if_absent("small.bin", b"x") is False  # 412 from the server
    assert client.names() == ["put_object", "put_object", "head_object"]
    assert all(kw.get("IfNoneMatch") == "*" for name, kw in client.calls if name == "put_object")
    assert bucket_objects(s3_client, bucket) == ["p/small.bin"]


def test_s3_large_duplicates_are_never_uploaded(s3_client: Any, bucket: str) -> None:
    client = RecordingClient(s3_client)
    store = S3BlobStore(bucket, client=client, touch_after_s=3600)
    data = b"y" * (300 * 1024)
    assert store.put_if_absent("large.bin", data) is True
    client.calls.clear()
    assert store.put_if_absent("large.bin", data) is False
    assert client.names() == ["head_object"]


def test_s3_falls_back_to_head_when_conditional_put_is_unsupported(
    s3_client: Any, bucket: str
) -> None:
    client = RecordingClient(s3_client, reject_if_none_match=True)
    store = S3BlobStore(bucket, client=client)
    assert store.put_if_absent("k1.bin", b"1") is True
    assert store.conditional_put is False
    assert store.get("k1.bin") == b"1"
    client.calls.clear()
    assert store.put_if_absent("k1.bin", b"1") is False
    assert store.put_if_absent("k2.bin", b"2") is True
    assert client.names() == ["head_object", "head_object", "put_object"]
    assert "IfNoneMatch" not in client.calls[-1][1]


def test_s3_put_of_existing_key_refreshes_old_objects(s3_client: Any, bucket: str) -> None:
    client = RecordingClient(s3_client)
    store = S3BlobStore(bucket, client=client, touch_after_s=-1)  # every object counts as old
    store.put_if_absent("touch.bin", b"t")
    client.calls.clear()
    assert store.put_if_absent("touch.bin", b"t") is False
    assert "copy_object" in client.names()
    assert store.get("touch.bin") == b"t"
    fresh = S3BlobStore(bucket, client=RecordingClient(s3_client), touch_after_s=3600)
    fresh.put_if_absent("touch.bin", b"t")
    assert "copy_object" not in fresh.client.names()


def test_s3_prefix_isolates_keys(s3_client: Any, bucket: str) -> None:
    s3_client.put_object(Bucket=bucket, Key="other/thing.txt", Body=b"keep")
    store = S3BlobStore(bucket, prefix="blobs/", client=s3_client)
    assert store.name == f"s3://{bucket}/blobs/"
    store.put_if_absent("mine.bin", b"m")
    assert [i.key for i in store.list_keys()] == ["mine.bin"]
    assert sorted(bucket_objects(s3_client, bucket)) == ["blobs/mine.bin", "other/thing.txt"]


def test_s3_store_from_endpoint_url(
    s3_endpoint_url: str, bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in [
        ("AWS_ACCESS_KEY_ID", "testing"),
        ("AWS_SECRET_ACCESS_KEY", "testing"),
        ("AWS_DEFAULT_REGION", "us-east-1"),
    ]:
        monkeypatch.setenv(name, value)
    store = S3BlobStore(bucket, endpoint_url=s3_endpoint_url)
    assert store.put_if_absent("e.bin", b"e") and store.get("e.bin") == b"e"


def test_s3_other_errors_are_blob_store_errors(s3_client: Any) -> None:
    store = S3BlobStore("lgd-no-such-bucket-for-serde", client=s3_client)
    with pytest.raises(BlobStoreError) as info:
        store.put_if_absent("k.bin", b"x")
    assert isinstance(info.value.__cause__, ClientError)


def test_s3_missing_bucket_is_not_a_missing_blob(s3_client: Any) -> None:
    store = S3BlobStore("lgd-no-such-bucket-for-serde", client=s3_client)
    with pytest.raises(BlobStoreError, match="NoSuchBucket") as info:
        store.get("k.bin")
    assert not isinstance(info.value, BlobNotFoundError)


def test_stat_reports_the_current_blob(store: BlobStore) -> None:
    assert store.stat("st-key.bin") is None  # type: ignore[attr-defined]
    store.put_if_absent("st-key.bin", b"12345")
    info = store.stat("st-key.bin")  # type: ignore[attr-defined]
    assert info is not None and (info.key, info.size) == ("st-key.bin", 5)
    assert abs(info.last_modified - datetime.now(timezone.utc)) < timedelta(minutes=5)


def test_local_put_rewrites_a_blob_deleted_while_being_refreshed(
    local_store: LocalBlobStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    local_store.put_if_absent("racy.bin", b"v")
    path = local_store.root / "ra" / "racy.bin"
    old = (datetime.now(timezone.utc) - timedelta(days=2)).timestamp()
    os.utime(path, (old, old))
    real_utime = os.utime

    def collected_first(target: Any, *args: Any) -> None:  # garbage collection wins the race
        os.unlink(target)
        real_utime(target, *args)

    monkeypatch.setattr("langgraph_durable.serde.stores.os.utime", collected_first)
    assert local_store.put_if_absent("racy.bin", b"v") is True
    assert local_store.get("racy.bin") == b"v"


class CollectingClient(RecordingClient):
    """Deletes the object right before the store refreshes it (a collector racing the put)."""

    def __getattr__(self, name: str) -> Any:
        if name == "copy_object":
            def copy(**kwargs: Any) -> Any:
                self._client.delete_object(Bucket=kwargs["Bucket"], Key=kwargs["Key"])
                return self._client.copy_object(**kwargs)
            return copy
        return super().__getattr__(name)


@pytest.mark.parametrize("size", [10, 300 * 1024], ids=["conditional-put", "head-first"])
def test_s3_put_reuploads_an_object_deleted_while_being_refreshed(
    s3_client: Any, bucket: str, size: int
) -> None:
    data = b"r" * size
    S3BlobStore(bucket, client=s3_client).put_if_absent("racy.bin", data)
    store = S3BlobStore(bucket, client=CollectingClient(s3_client), touch_after_s=-1)
    assert store.put_if_absent("racy.bin", data) is True
    assert store.get("racy.bin") == data
