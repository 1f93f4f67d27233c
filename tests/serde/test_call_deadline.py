"""A deadline on the whole S3 request (issue 31): botocore's read timeout is per socket read,
so the store runs each request of its own client in a bounded set of worker threads and
waits at most its deadline; a hung endpoint cannot grow threads without limit."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import Iterator

import boto3
import pytest

from langgraph_durable.serde import BlobStoreError, S3BlobStore
from langgraph_durable.serde.deadline import CallBound, DeadlinePassed
from langgraph_durable.testing import wait_for


class Trickle:
    """A TCP server on 127.0.0.1 that answers every request one byte every 0.3 s."""

    def __init__(self) -> None:
        self.server = socket.create_server(("127.0.0.1", 0), backlog=64)
        self.server.settimeout(0.05)
        self.url = f"http://127.0.0.1:{self.server.getsockname()[1]}"
        self.accepted = 0
        self._stop = threading.Event()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self.accepted += 1
            threading.Thread(target=self._trickle, args=(conn,), daemon=True).start()

    def _trickle(self, conn: socket.socket) -> None:
        with conn:
            conn.recv(65536)
            for b in b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n" * 10:
                if self._stop.wait(0.3):
                    return
                conn.sendall(bytes([b]))

    def close(self) -> None:
        self._stop.set()
        self.server.close()


@pytest.fixture
def trickle(monkeypatch: pytest.MonkeyPatch) -> Iterator[Trickle]:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setattr(boto3, "DEFAULT_SESSION", None)
    endpoint = Trickle()
    try:
        yield endpoint
    finally:
        endpoint.close()


def test_the_deadline_follows_the_stores_bounds() -> None:
    store = S3BlobStore("b", endpoint_url="http://127.0.0.1:9", timeout_s=1, retries=0)
    assert store.deadline_s() == 3.0
    assert store.deadline_s(2 << 20) == 5.0  # 2 MiB at 1 MiB/s
    store.use_bounds(10, 2)  # the store's own arguments win
    assert store.deadline_s() == 3.0
    built = S3BlobStore("b", endpoint_url="http://127.0.0.1:9")
    built.use_bounds(10, 2)  # a saver's blob_timeout_s=10, blob_retries=2 (the defaults)
    assert built.deadline_s() == (2 * 10 + 1) * 3 + 1 + 2 == 66
    given = S3BlobStore("b", client=boto3.client("s3", region_name="us-east-1",
                                                 endpoint_url="http://127.0.0.1:9"))
    assert given.deadline_s() is None


def test_an_async_put_to_a_trickling_endpoint_ends_at_the_deadline(trickle) -> None:
    store = S3BlobStore("b", endpoint_url=trickle.url, timeout_s=0.5, retries=0)

    async def put() -> float:
        t0 = time.monotonic()
        with pytest.raises(BlobStoreError) as info:
            await store.aput_if_absent("k", b"x" * 10)
        assert info.value.key == "k"
        assert f"(endpoint {trickle.url})" in str(info.value)
        assert "deadline 2 s" in str(info.value)
        return time.monotonic() - t0

    elapsed = asyncio.run(put())
    # at the 2 s deadline, not after the 120 s the endpoint trickles for; the upper bound
    # is far above 2 s so that a loaded machine's stall cannot fail it
    assert 2.0 <= elapsed < 10.0


def test_when_every_worker_is_stuck_a_new_call_fails_at_once() -> None:
    bound = CallBound(workers=2, name="test")
    release = threading.Event()
    ran: list[int] = []

    def stuck() -> int:
        release.wait(30)
        ran.append(1)
        return 1

    for _ in range(2):
        with pytest.raises(DeadlinePassed) as info:
            bound.run(stuck, 0.2)
        assert not info.value.stuck
    assert bound.abandoned == 2
    t0 = time.monotonic()
    with pytest.raises(DeadlinePassed) as info:
        bound.run(lambda: ran.append(2), 5.0)
    # at once, not after the 5 s deadline (stuck and the message say so too); the bound
    # is far below 5 s, not 1 s, so that a loaded machine's stall cannot fail it
    assert time.monotonic() - t0 < 3.0
    assert info.value.stuck
    assert str(info.value) == ("all 2 workers are held by calls past their deadline; "
                               "not run")
    release.set()  # the abandoned calls end on their own and free their workers
    wait_for(lambda: bound.abandoned == 0, 30, "the abandoned calls to end")
    assert bound.run(lambda: 42, 1.0) == 42
    assert ran == [1, 1]


def test_a_call_waits_for_a_busy_worker_within_its_deadline() -> None:
    bound = CallBound(workers=1, name="test")
    started, release = threading.Event(), threading.Event()

    def slow() -> str:
        started.set()
        release.wait(5)
        return "slow"

    results: list[str] = []
    first = threading.Thread(target=lambda: results.append(bound.run(slow, 10)))
    first.start()
    assert started.wait(5)
    threading.Timer(0.2, release.set).start()
    assert bound.run(lambda: "second", 5) == "second"  # waited for the worker
    first.join(5)
    assert results == ["slow"]
    with pytest.raises(ZeroDivisionError):  # the call's own error is re-raised
        bound.run(lambda: 1 // 0, 1)
