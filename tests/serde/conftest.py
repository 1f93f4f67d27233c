"""Fixtures for the serde tests: a real S3 server (moto, via the ``langgraph_durable.testing``
plugin's ``s3_endpoint_url``), a fresh bucket per test, and local blob folders."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from langgraph_durable.serde import BlobStore, ExternalRefSerializer, LocalBlobStore, S3BlobStore


@pytest.fixture(autouse=True)
def _default_blob_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Keep the serializer's default store out of the working directory."""
    folder = tmp_path / "default-blobs"
    monkeypatch.setenv("LANGGRAPH_BLOB_DIR", str(folder))
    return folder


@pytest.fixture(scope="session")
def s3_client(s3_endpoint_url: str) -> Any:
    """A boto3 client for the session's S3 server (moto accepts any credentials)."""
    return boto3.client(
        "s3",
        endpoint_url=s3_endpoint_url,
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name="us-east-1",
    )


@pytest.fixture
def bucket(s3_client: Any) -> Iterator[str]:
    """A new, empty bucket for one test."""
    name = f"lgd-serde-{uuid.uuid4().hex[:16]}"
    s3_client.create_bucket(Bucket=name)
    yield name


@pytest.fixture
def s3_store(s3_client: Any, bucket: str) -> S3BlobStore:
    """An :class:`S3BlobStore` on a fresh bucket, under the prefix ``blobs/``."""
    return S3BlobStore(bucket, prefix="blobs", client=s3_client)


@pytest.fixture
def local_store(tmp_path: Path) -> LocalBlobStore:
    """A :class:`LocalBlobStore` in a temporary folder."""
    return LocalBlobStore(tmp_path / "blobs")


@pytest.fixture(params=["local", "s3"])
def store(request: pytest.FixtureRequest) -> BlobStore:
    """Each test using it runs against both stores."""
    return request.getfixturevalue(f"{request.param}_store")


@pytest.fixture
def serde(store: BlobStore) -> ExternalRefSerializer:
    """An :class:`ExternalRefSerializer` (JsonPlus inner) on ``store``."""
    return ExternalRefSerializer(store=store)
