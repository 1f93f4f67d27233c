"""Every S3 request of a store's own client is bounded (issue 31): against an endpoint that
accepts and never answers, a call raises BlobStoreError naming the endpoint and the key
after about ``blob_timeout_s * (blob_retries + 1)`` seconds, not botocore's minutes; the
bounds come from the store's arguments, ``LGD_BLOB_*`` or the saver's options; a client
the caller gave is left alone."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator

import boto3
import numpy as np
import pytest
from botocore.config import Config
from langgraph.checkpoint.base import empty_checkpoint

from langgraph_durable import ConfigurationError, DurableSaver
from langgraph_durable.serde import BlobStoreError, ExternalRefSerializer, S3BlobStore
from langgraph_durable.testing import unique_options, wait_for


@pytest.fixture(autouse=True)
def aws_test_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    for var in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_PROFILE", "S3_ENDPOINT_URL",
                "LGD_BLOB_TIMEOUT_S", "LGD_BLOB_RETRIES"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)


class HungEndpoint:
    """A TCP server on 127.0.0.1 that accepts every connection and never answers."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0), backlog=64)
        self.server.settimeout(0.05)
        self.url = f"http://127.0.0.1:{self.server.getsockname()[1]}"
        self.accepted: list[socket.socket] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.accepted.append(conn)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        for conn in self.accepted:
            conn.close()
        self.server.close()


@pytest.fixture
def hung() -> Iterator[HungEndpoint]:
    endpoint = HungEndpoint()
    try:
        yield endpoint
    finally:
        endpoint.close()


def _attempts(hung: HungEndpoint, expected: int) -> int:
    """The connections the hung endpoint accepted, once it has ``expected`` (or after 5 s)."""
    with contextlib.suppress(TimeoutError):
        wait_for(lambda: len(hung.accepted) >= expected, 5.0, f"{expected} connections")
    return len(hung.accepted)


def test_a_put_to_a_hung_endpoint_raises_blob_store_error_within_its_bound(hung) -> None:
    timeout_s, retries = 0.5, 1
    store = S3BlobStore("b", prefix="p", endpoint_url=hung.url, timeout_s=timeout_s,
                        retries=retries)
    t0 = time.monotonic()
    with pytest.raises(BlobStoreError) as info:
        store.put_if_absent("k-hung", b"some bytes")
    elapsed = time.monotonic() - t0
    err = info.value
    assert (err.store, err.key) == ("s3://b/p/", "k-hung")
    assert str(err).startswith("blob store s3://b/p/ failed to write blob 'k-hung': "
                               "ReadTimeoutError: Read timeout on endpoint URL: "
                               f'"{hung.url}/b/p/k-hung"')
    # botocore's defaults (60 s read timeout, 5 attempts) took minutes here
    assert elapsed < 10 * timeout_s * (retries + 1)
    assert _attempts(hung, retries + 1) == retries + 1  # the first try and one retry
    assert (store.timeout_s, store.retries) == (0.5, 1)
    assert store.client.meta.config.read_timeout == 0.5
    assert store.client.meta.config.connect_timeout == 0.5


def test_lgd_blob_variables_bound_a_store_built_without_arguments(hung, monkeypatch) -> None:
    monkeypatch.setenv("LGD_BLOB_TIMEOUT_S", "0.4")
    monkeypatch.setenv("LGD_BLOB_RETRIES", "0")
    store = S3BlobStore("b", endpoint_url=hung.url)
    assert (store.timeout_s, store.retries) == (0.4, 0)
    t0 = time.monotonic()
    with pytest.raises(BlobStoreError, match=r"^blob store s3://b/ failed to read blob "
                       r"'k-env': ReadTimeoutError: Read timeout on endpoint URL"):
        store.get("k-env")
    assert time.monotonic() - t0 < 10 * 0.4
    assert _attempts(hung, 1) == 1  # no retry
    monkeypatch.setenv("LGD_BLOB_RETRIES", "-1")
    with pytest.raises(ConfigurationError, match=r"LGD_BLOB_RETRIES='-1': Input should be "
                       "greater than or equal to 0"):
        S3BlobStore("b", endpoint_url=hung.url)


def test_the_default_bounds_replace_botocores_minutes(monkeypatch) -> None:
    store = S3BlobStore("b", endpoint_url="http://127.0.0.1:9")
    assert (store.timeout_s, store.retries) == (10.0, 2)
    config = store.client.meta.config
    assert (config.connect_timeout, config.read_timeout) == (10.0, 10.0)
    assert config.retries == {"mode": "standard", "total_max_attempts": 3}


def test_a_saver_bounds_its_s3_store_so_a_put_fails_in_time(hung, redis_url,
                                                             mongo_url) -> None:
    store = S3BlobStore("b", endpoint_url=hung.url)
    serde = ExternalRefSerializer(store=store)
    with DurableSaver.from_urls(redis_url, mongo_url, serde=serde, blob_timeout_s=0.5,
                                blob_retries=1, **unique_options()) as saver:
        assert (store.timeout_s, store.retries) == (0.5, 1)
        cp = empty_checkpoint()
        cp["channel_values"] = {"arr": np.arange(10)}
        cp["channel_versions"] = {"arr": "1"}
        t0 = time.monotonic()
        with pytest.raises(BlobStoreError) as info:
            saver.put({"configurable": {"thread_id": "hung", "checkpoint_ns": ""}}, cp,
                      {"step": 0}, {"arr": "1"})
        assert time.monotonic() - t0 < 10 * 0.5 * 2
        assert info.value.context["thread_id"] == "hung"
        assert f"Read timeout on endpoint URL: \"{hung.url}/b/" in str(info.value)
        assert _attempts(hung, 2) == 2
        assert saver.get_tuple({"configurable": {"thread_id": "hung"}}) is None


def test_the_stores_own_arguments_and_a_given_client_win_over_the_saver(
        redis_url, mongo_url) -> None:
    own = S3BlobStore("b", endpoint_url="http://127.0.0.1:9", timeout_s=3.0)
    with DurableSaver.from_urls(redis_url, mongo_url, serde=ExternalRefSerializer(store=own),
                                blob_timeout_s=0.5, blob_retries=4, **unique_options()):
        assert (own.timeout_s, own.retries) == (3.0, 4)  # its argument, the saver's retries
    client = boto3.client("s3", endpoint_url="http://127.0.0.1:9",
                          config=Config(read_timeout=42))
    given = S3BlobStore("b", client=client)
    with DurableSaver.from_urls(redis_url, mongo_url,
                                serde=ExternalRefSerializer(store=given),
                                blob_timeout_s=0.5, **unique_options()):
        assert given.client is client and client.meta.config.read_timeout == 42
        assert (given.own_client, given.timeout_s, given.retries) == (False, None, None)
    # a saver whose options do not set the bounds leaves the store's as they are
    left = S3BlobStore("b", endpoint_url="http://127.0.0.1:9", retries=0)
    with DurableSaver.from_urls(redis_url, mongo_url, serde=ExternalRefSerializer(store=left),
                                **unique_options()):
        assert (left.timeout_s, left.retries) == (10.0, 0)
