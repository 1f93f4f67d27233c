"""Blob stores: S3_ENDPOINT_URL is the one endpoint rule; I/O failures raise BlobStoreError
(retryable, naming store and key), never SerializationError; local files follow the umask."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import boto3
import numpy as np
import pytest
from botocore.config import Config

from langgraph_durable import DurableSaver, DurableSaverError, SerializationError
from langgraph_durable.cli.session import open_blob_store
from langgraph_durable.serde import (
    BlobNotFoundError,
    BlobStoreError,
    ExternalRefSerializer,
    LocalBlobStore,
    S3BlobStore,
)
from langgraph_durable.testing import unique_options


@pytest.fixture
def aws_test_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    for var in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)


def test_s3_endpoint_url_is_used_without_a_client(s3_endpoint_url, bucket, monkeypatch,
                                                  aws_test_credentials) -> None:
    monkeypatch.setenv("S3_ENDPOINT_URL", s3_endpoint_url)
    store = S3BlobStore(bucket, prefix="p")
    assert store.client.meta.endpoint_url == s3_endpoint_url
    assert store.put_if_absent("k1", b"data") is True
    assert store.get("k1") == b"data"
    # the CLI's --blob-store follows the same rule
    cli_store = open_blob_store(f"s3://{bucket}/p")
    assert cli_store.client.meta.endpoint_url == s3_endpoint_url
    assert cli_store.get("k1") == b"data"
    # an explicit endpoint_url wins over the variable
    other = S3BlobStore(bucket, endpoint_url="http://127.0.0.1:9")
    assert other.client.meta.endpoint_url == "http://127.0.0.1:9"


def test_no_such_bucket_is_a_blob_store_error(s3_client: Any) -> None:
    store = S3BlobStore("lgd-no-such-bucket", prefix="p", client=s3_client)
    with pytest.raises(BlobStoreError) as info:
        store.put_if_absent("k2", b"x")
    err = info.value
    assert (err.store, err.key) == ("s3://lgd-no-such-bucket/p/", "k2")
    assert str(err).startswith("blob store s3://lgd-no-such-bucket/p/ failed to write blob "
                               "'k2' (NoSuchBucket, HTTP 404): NoSuchBucket: An error "
                               "occurred (NoSuchBucket) when calling the PutObject operation")
    assert isinstance(err, DurableSaverError) and isinstance(err, ConnectionError)
    assert not isinstance(err, SerializationError)
    with pytest.raises(BlobStoreError, match="failed to read blob 'k2' \\(NoSuchBucket"):
        store.get("k2")


def test_an_unreachable_endpoint_is_a_blob_store_error() -> None:
    client = boto3.client("s3", endpoint_url="http://127.0.0.1:1", region_name="us-east-1",
                          aws_access_key_id="x", aws_secret_access_key="x",
                          config=Config(retries={"max_attempts": 1}, connect_timeout=2))
    store = S3BlobStore("b", client=client)
    with pytest.raises(BlobStoreError, match=r"^blob store s3://b/ failed to read blob 'k3': "
                       r"EndpointConnectionError: Could not connect to the endpoint URL"):
        store.get("k3")


def test_missing_credentials_are_a_blob_store_error(s3_endpoint_url, monkeypatch,
                                                    tmp_path) -> None:
    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("S3_ENDPOINT_URL", s3_endpoint_url)
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)  # it caches found credentials
    store = S3BlobStore("b", prefix="q")
    with pytest.raises(BlobStoreError, match=r"^blob store s3://b/q/ failed to write blob "
                       r"'k4': NoCredentialsError: Unable to locate credentials"):
        store.put_if_absent("k4", b"x")


def test_a_put_through_a_failing_store_raises_blob_store_error_and_writes_nothing(
        redis_url, mongo_url, s3_client) -> None:
    serde = ExternalRefSerializer(store=S3BlobStore("lgd-no-such-bucket", client=s3_client))
    from langgraph.checkpoint.base import empty_checkpoint

    with DurableSaver.from_urls(redis_url, mongo_url, serde=serde,
                                **unique_options()) as saver:
        cp = empty_checkpoint()
        cp["channel_values"] = {"arr": np.arange(10)}
        cp["channel_versions"] = {"arr": "1"}
        with pytest.raises(BlobStoreError) as info:
            saver.put({"configurable": {"thread_id": "s3", "checkpoint_ns": ""}}, cp,
                      {"step": 0}, {"arr": "1"})
        assert info.value.context["thread_id"] == "s3"
        assert "value=\"channel 'arr' (ns '')\"" in str(info.value)
        assert saver.get_tuple({"configurable": {"thread_id": "s3"}}) is None


def test_local_blob_files_follow_the_umask(tmp_path: Path) -> None:
    store = LocalBlobStore(tmp_path / "blobs", fsync=False)
    old = os.umask(0o022)
    try:
        store.put_if_absent("key-open", b"a")
        os.umask(0o077)
        store.put_if_absent("key-private", b"b")
    finally:
        os.umask(old)
    mode = stat.S_IMODE((tmp_path / "blobs" / "ke" / "key-open").stat().st_mode)
    assert mode == 0o644
    mode = stat.S_IMODE((tmp_path / "blobs" / "ke" / "key-private").stat().st_mode)
    assert mode == 0o600


def test_an_unwritable_folder_is_a_blob_store_error(tmp_path: Path) -> None:
    root = tmp_path / "not-a-folder"
    root.write_bytes(b"")  # a file where the store's folder should be (also fails as root)
    with pytest.raises(BlobStoreError, match=r"failed to write blob 'kk-5': "
                       r"NotADirectoryError"):
        LocalBlobStore(root).put_if_absent("kk-5", b"x")
    with pytest.raises(BlobNotFoundError):  # a missing blob stays BlobNotFoundError
        LocalBlobStore(tmp_path / "empty").get("kk-5")
