"""The blob store the examples keep DataFrames in: S3 when ``S3_ENDPOINT_URL`` is set (a bucket
of its own is created), otherwise a local folder. Stores are named by their ``.name``
(``file:///...`` or ``s3://bucket/prefix/``) so another process can open the same one."""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from langgraph_durable.serde import BlobStore, LocalBlobStore, S3BlobStore

ENV_S3 = "S3_ENDPOINT_URL"
PREFIX = "blobs"


def s3_client() -> Any:
    """A boto3 client for ``$S3_ENDPOINT_URL``; placeholder credentials when none are
    configured (moto, MinIO test servers accept any)."""
    import boto3

    session = boto3.session.Session()
    extra: dict[str, Any] = {}
    if session.get_credentials() is None:
        extra.update(aws_access_key_id="testing", aws_secret_access_key="testing")
    if session.region_name is None:
        extra["region_name"] = "us-east-1"
    return session.client("s3", endpoint_url=os.environ[ENV_S3], **extra)


def open_blob_store(local_dir: str | os.PathLike[str], bucket: str | None = None
                    ) -> tuple[BlobStore, str]:
    """``(store, description)``: a new S3 bucket (``bucket`` or a random name) under
    ``$S3_ENDPOINT_URL`` when that is set, else a :class:`LocalBlobStore` at ``local_dir``."""
    if os.environ.get(ENV_S3):
        client = s3_client()
        name = bucket or f"lgd-example-{uuid.uuid4().hex[:12]}"
        client.create_bucket(Bucket=name)
        store: BlobStore = S3BlobStore(name, prefix=PREFIX, client=client)
        return store, f"{store.name} (S3 at {os.environ[ENV_S3]})"
    store = LocalBlobStore(local_dir)
    return store, f"{store.name} (local folder)"


def store_from_name(name: str) -> BlobStore:
    """Open the store whose ``.name`` is ``name`` (``s3://`` needs ``$S3_ENDPOINT_URL``)."""
    url = urlparse(name)
    if url.scheme == "file":
        return LocalBlobStore(Path(unquote(url.path)))
    if url.scheme == "s3":
        return S3BlobStore(url.netloc, prefix=url.path.lstrip("/"), client=s3_client())
    raise ValueError(f"unknown blob store {name!r}")


def drop_bucket(store: BlobStore) -> None:
    """Delete every object of an S3 store's bucket and the bucket (no-op for local stores)."""
    if not isinstance(store, S3BlobStore):
        return
    for info in list(store.list_keys()):
        store.delete(info.key)
    store.client.delete_bucket(Bucket=store.bucket)
