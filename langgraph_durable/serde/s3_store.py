"""The S3 blob store: blobs as objects of any S3-compatible bucket (AWS, MinIO, Ceph, R2,
moto), each request of the store's own client bounded by a deadline.

Keys are content hashes written once (see ``serde/stores.py``): a put of an existing key
is skipped and refreshes the object's LastModified when old.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timezone
from typing import Any

from langgraph_durable.serde.deadline import CallBound
from langgraph_durable.serde.extref_errors import BlobNotFoundError
from langgraph_durable.serde.stores import BaseBlobStore, BlobInfo, error_code, io_errors

__all__ = ["S3BlobStore"]

_HEAD_FIRST_BYTES = 256 * 1024
"""Blobs of at least this many bytes are checked with HEAD before upload (saves bandwidth)."""
_S3_WORKERS = 16
"""The most requests of one S3 store's own client running at once (see ``CallBound``)."""
_MIN_RATE = 1 << 20
"""Bytes per second a transfer is allowed at the slowest, in an S3 request's deadline."""


def _utc(moment: datetime) -> datetime:
    if moment.tzinfo is None:
        return moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc)


class S3BlobStore(BaseBlobStore):
    """Blobs as objects ``prefix + key`` in an S3 bucket (AWS, MinIO, Ceph, R2, moto, ...).

    A new key is uploaded with ``IfNoneMatch="*"`` so two writers racing on the same key
    store it once. A server that rejects that header (HTTP 501 or ``NotImplemented``) is
    remembered and then guarded by ``head_object`` only. Blobs of 256 KiB or more are checked
    with ``head_object`` *before* the upload, so a duplicate is never sent over the network.

    Args:
        bucket: the bucket name (it must exist).
        prefix: prepended to every key; ``"/"`` is appended when missing (``""``: none).
        client: a boto3 S3 client; by default ``boto3.client("s3", endpoint_url=...)``.
        endpoint_url: the endpoint of an S3-compatible server (ignored if ``client`` is
            given). The one rule, for the library, the CLI and the test servers alike: this
            argument, else ``S3_ENDPOINT_URL`` (``langgraph_durable.settings``), else boto3's
            own configuration (``AWS_ENDPOINT_URL_S3``, ``AWS_ENDPOINT_URL``, AWS).
        touch_after_s: a skipped put refreshes the object's LastModified (a server-side
            self-copy) if it is older than this many seconds.
        timeout_s: seconds the store's own client waits to connect and for each read
            (botocore's ``connect_timeout`` and ``read_timeout``); default
            ``LGD_BLOB_TIMEOUT_S``, else ``DurableConfig.blob_timeout_s`` (10).
        retries: retries of a failed request after the first attempt (botocore's
            ``standard`` mode); default ``LGD_BLOB_RETRIES``, else
            ``DurableConfig.blob_retries`` (2).

    Every request of the store's own client is bounded as a whole, not only per socket
    read: it runs in a worker thread (at most 16 at once per store) and the caller waits
    at most :meth:`deadline_s`, ``(2 * timeout_s + 1 + bytes / 1 MiB/s) * (retries + 1)
    + backoff`` seconds (per attempt: connect, up to 1 s for ``100 Continue``, the answer,
    and the body at 1 MiB/s at the slowest; ``backoff`` is botocore's, at most
    ``min(20, 2 ** i)`` s before retry ``i + 1``; 3 s for ``timeout_s=1, retries=0``, 66 s
    for the defaults). Past it the call raises :class:`BlobStoreError` naming the store,
    the key, the endpoint and the deadline, even against an endpoint that answers a byte at
    a time (botocore's ``read_timeout`` is per socket read). The abandoned request finishes
    or fails on its own; for an upload that is harmless, the object being content-addressed
    (the same key always holds the same bytes). When all 16 workers hold requests past their
    deadline (a hung endpoint), a new call fails at once with the same error instead of
    queueing or growing threads. A get is two requests (the answer's head, then its body
    with ``timeout_s + 1 + bytes / 1 MiB/s``); a put is one to three (HEAD, PUT, a
    refreshing copy), more only when racing garbage collection. Against an endpoint that
    accepts and never answers, botocore's own timeouts fail first, after about
    ``(timeout_s + 1) * (retries + 1) + 2 ** retries - 1`` seconds (see
    ``DurableConfig.blob_timeout_s``). A saver with ``blob_timeout_s``/``blob_retries`` set
    applies them to this store (:meth:`use_bounds`) where ``timeout_s``/``retries`` were not
    given. A ``client`` given is used as it is, called in the caller's thread with no
    deadline of the store's, with its own timeouts and retries (botocore's
    defaults are 60 s connect, 60 s read, 5 attempts in ``legacy`` mode: minutes against a
    hung endpoint): build it with ``botocore.config.Config(connect_timeout=...,
    read_timeout=..., retries=...)`` to bound it.

    Errors of the S3 client other than "not found" (no credentials, endpoint unreachable or
    timing out, ``NoSuchBucket``, access denied) raise :class:`BlobStoreError` naming the
    store, the key and (in botocore's message) the endpoint, with the ``botocore``
    exception as its cause. Raises ``ConfigurationError`` for a bad ``LGD_BLOB_*`` value.
    """

    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        client: Any = None,
        endpoint_url: str | None = None,
        *,
        touch_after_s: float = 300.0,
        timeout_s: float | None = None,
        retries: int | None = None,
    ) -> None:
        if (timeout_s is not None and not timeout_s > 0) or (retries is not None
                                                            and retries < 0):
            raise ValueError(f"S3BlobStore {bucket!r}: timeout_s must be more than 0 and "
                             f"retries at least 0 (got {timeout_s!r}, {retries!r})")
        self.own_client = client is None
        """True when the store built its client (then its bounds apply to it)."""
        self._given = {n for n, v in (("timeout_s", timeout_s), ("retries", retries))
                       if v is not None}
        self.timeout_s: float | None = None
        """Connect and read timeout (s) of the store's own client; None for a given client."""
        self.retries: int | None = None
        """Retries after the first attempt of the store's own client; None for a given one."""
        if client is None:
            from langgraph_durable.settings import blob_bounds, server_settings

            self._endpoint_url = endpoint_url or server_settings().s3_endpoint_url
            env = blob_bounds()
            self.timeout_s = float(env["blob_timeout_s"] if timeout_s is None else timeout_s)
            self.retries = int(env["blob_retries"] if retries is None else retries)
            client = self._bounded_client()
        self.client = client
        self.bucket = bucket
        self.prefix = prefix if not prefix or prefix.endswith("/") else prefix + "/"
        self.touch_after_s = touch_after_s
        self.conditional_put: bool | None = None
        """Whether the server honours ``IfNoneMatch="*"``; ``None`` until first learnt."""
        self.name = f"s3://{bucket}/{self.prefix}"
        self.endpoint: str | None = getattr(getattr(client, "meta", None), "endpoint_url", None)
        """The client's endpoint URL (named in errors), when it has one."""
        self._calls = CallBound(_S3_WORKERS, name=f"s3-{bucket}")

    def deadline_s(self, size: int = 0) -> float | None:
        """Seconds one request of the store's own client may take, moving ``size`` bytes:
        ``(2 * timeout_s + 1 + size / 1 MiB/s) * (retries + 1) + sum(min(20, 2 ** i) for
        i in range(retries))``; ``None`` for a client given (the store sets no deadline)."""
        if self.timeout_s is None or self.retries is None:
            return None
        backoff = sum(min(20, 2**i) for i in range(self.retries))
        return (2 * self.timeout_s + 1 + size / _MIN_RATE) * (self.retries + 1) + backoff

    def _bounded(self, fn: Any, deadline: float | None) -> Any:
        """``fn()`` within ``deadline`` seconds (in a worker), or directly when None."""
        if deadline is None:
            return fn()
        return self._calls.run(fn, deadline)

    def _call(self, method: str, size: int = 0, **kwargs: Any) -> Any:
        """``client.<method>(**kwargs)`` within :meth:`deadline_s` of ``size`` bytes."""
        bound = getattr(self.client, method)
        return self._bounded(lambda: bound(**kwargs), self.deadline_s(size))

    def _bounded_client(self) -> Any:
        """A boto3 S3 client for the store's endpoint with its timeouts and retries."""
        import boto3
        from botocore.config import Config

        assert self.timeout_s is not None and self.retries is not None
        config = Config(connect_timeout=self.timeout_s, read_timeout=self.timeout_s,
                        retries={"mode": "standard", "total_max_attempts": self.retries + 1})
        return boto3.client("s3", endpoint_url=self._endpoint_url, config=config)

    def use_bounds(self, timeout_s: float, retries: int) -> bool:
        """Give the store's own client these bounds (a saver's ``blob_timeout_s`` and
        ``blob_retries``), except those the store was given as arguments; a new client
        is built when they change (in-flight calls finish on the old one). A client the
        caller gave is left unchanged: returns False then, else True."""
        if not self.own_client:
            return False
        timeout = self.timeout_s if "timeout_s" in self._given else float(timeout_s)
        tries = self.retries if "retries" in self._given else int(retries)
        if (timeout, tries) != (self.timeout_s, self.retries):
            self.timeout_s, self.retries = timeout, tries
            self.client = self._bounded_client()
        return True

    def _key(self, key: str) -> str:
        if not key or key.startswith("/"):
            raise ValueError(f"invalid blob key {key!r} for {self.name}")
        return self.prefix + key

    def _head(self, key: str) -> dict[str, Any] | None:
        try:
            return dict(self._call("head_object", Bucket=self.bucket, Key=self._key(key)))
        except Exception as exc:
            code, status = error_code(exc)
            if status == 404 or code in ("404", "NoSuchKey", "NotFound"):
                return None
            raise

    def _touch_if_old(self, key: str, head: dict[str, Any] | None) -> bool:
        """Refresh LastModified if old; ``False`` if the object is gone (deleted meanwhile)."""
        head = head if head is not None else self._head(key)
        if head is None:
            return False
        if "LastModified" not in head:
            return True
        age = (datetime.now(timezone.utc) - _utc(head["LastModified"])).total_seconds()
        if age <= self.touch_after_s:
            return True
        try:
            self._call(
                "copy_object",
                int(head.get("ContentLength", 0) or 0),
                Bucket=self.bucket,
                Key=self._key(key),
                CopySource={"Bucket": self.bucket, "Key": self._key(key)},
                MetadataDirective="REPLACE",
                Metadata=dict(head.get("Metadata") or {}),
                ContentType=head.get("ContentType") or "application/octet-stream",
            )
        except Exception as exc:
            code, status = error_code(exc)
            if status == 404 or code in ("404", "NoSuchKey", "NotFound"):
                return False
            raise
        return True

    def _put_if_absent(self, key: str, data: bytes) -> bool:
        for _ in range(3):
            written = self._put_once(key, data)
            if written is not None:
                return written
        self._call("put_object", len(data), Bucket=self.bucket, Key=self._key(key), Body=data)
        return True

    def _put_once(self, key: str, data: bytes) -> bool | None:
        """``True`` written, ``False`` existed (and was refreshed), ``None`` vanished: retry."""
        full = self._key(key)
        if len(data) >= _HEAD_FIRST_BYTES or self.conditional_put is False:
            head = self._head(key)
            if head is not None:
                return False if self._touch_if_old(key, head) else None
        if self.conditional_put is not False:
            try:
                self._call("put_object", len(data), Bucket=self.bucket, Key=full, Body=data,
                           IfNoneMatch="*")
                self.conditional_put = True
                return True
            except Exception as exc:
                code, status = error_code(exc)
                if status == 412 or code in ("PreconditionFailed", "ConditionalRequestConflict"):
                    self.conditional_put = True
                    return False if self._touch_if_old(key, None) else None
                if not (status == 501 or code in ("NotImplemented", "InvalidArgument")):
                    raise
                self.conditional_put = False
                if self._head(key) is not None:
                    return False
        self._call("put_object", len(data), Bucket=self.bucket, Key=full, Body=data)
        return True

    def _get(self, key: str) -> bytes:
        try:
            response = self._call("get_object", Bucket=self.bucket, Key=self._key(key))
        except Exception as exc:
            code, status = error_code(exc)
            if code != "NoSuchBucket" and (status == 404 or code in ("NoSuchKey", "NotFound")):
                raise BlobNotFoundError(
                    f"blob {key!r} not found in {self.name}", key=key, store=self.name
                ) from None
            raise
        body = response["Body"]

        def read() -> bytes:
            try:
                return bytes(body.read())
            finally:
                body.close()

        size = int(response.get("ContentLength", 0) or 0)
        deadline = None if self.timeout_s is None else self.timeout_s + 1 + size / _MIN_RATE
        return bytes(self._bounded(read, deadline))

    def _exists(self, key: str) -> bool:
        return self._head(key) is not None

    def _stat(self, key: str) -> BlobInfo | None:
        head = self._head(key)
        if head is None:
            return None
        return BlobInfo(key, _utc(head["LastModified"]), int(head.get("ContentLength", 0)))

    def _delete(self, key: str) -> None:
        self._call("delete_object", Bucket=self.bucket, Key=self._key(key))

    def _list_keys(self) -> Iterator[BlobInfo]:
        paginator = self.client.get_paginator("list_objects_v2")
        kwargs: dict[str, Any] = {"Bucket": self.bucket}
        if self.prefix:
            kwargs["Prefix"] = self.prefix
        pages = iter(paginator.paginate(**kwargs))
        while True:  # each page is one request, within the deadline
            page = self._bounded(lambda: next(pages, None), self.deadline_s())
            if page is None:
                return
            for item in page.get("Contents", ()):
                key = str(item["Key"])[len(self.prefix) :]
                if key:
                    yield BlobInfo(key, _utc(item["LastModified"]), int(item["Size"]))

    def put_if_absent(self, key: str, data: bytes) -> bool:
        """Upload ``data`` unless ``key`` exists (see the class docstring for how).

        An existing object that disappears while it is being refreshed (garbage collection
        racing this put) is uploaded again, so a ``False`` return means the key exists.
        Raises :class:`BlobStoreError` when the bucket cannot be written."""
        with io_errors(self, "write", key):
            return self._put_if_absent(key, data)

    def get(self, key: str) -> bytes:
        """The object's bytes; raises :class:`BlobNotFoundError` if it does not exist,
        :class:`BlobStoreError` if the bucket cannot be read."""
        with io_errors(self, "read", key):
            return self._get(key)

    def exists(self, key: str) -> bool:
        """Whether the object exists (one HEAD request)."""
        with io_errors(self, "look up", key):
            return self._exists(key)

    def stat(self, key: str) -> BlobInfo | None:
        """The object's current :class:`BlobInfo` (one HEAD request), or ``None``."""
        with io_errors(self, "look up", key):
            return self._stat(key)

    def delete(self, key: str) -> None:
        """Delete the object (S3 treats a missing key as success)."""
        with io_errors(self, "delete", key):
            self._delete(key)

    def list_keys(self) -> Iterator[BlobInfo]:
        """Every object below ``prefix`` (paginated ``list_objects_v2``), prefix stripped."""
        with io_errors(self, "list", None):
            yield from self._list_keys()
