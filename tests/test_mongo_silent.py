"""A MongoDB that is reachable and answers its monitors' handshakes but no command (a stuck
disk, a lock, a stalled primary): every call still ends, in ``mongo_socket_timeout_s``
seconds, with ``TierUnavailableError``; a saver started meanwhile starts (its MongoDB
set-up deferred) and its outbox reaches MongoDB once commands are answered again.

Before ``mongo_socket_timeout_s`` the clients ``from_urls`` builds had no socket timeout:
such calls, and a saver's set-up, waited forever (found by a new user's break test)."""

from __future__ import annotations

import contextlib
import logging
import socket
import struct
import threading
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import urlparse

import bson
import pymongo
import pytest

from langgraph_durable import DurableSaver, TierUnavailableError
from langgraph_durable.testing import unique_options, wait_for

HANDSHAKE = frozenset({"hello", "ismaster", "isMaster", "ping", "buildinfo", "buildInfo",
                       "saslStart", "saslContinue", "endSessions"})
"""Commands the proxy always forwards: what the driver's monitors and handshakes send."""


def _exact(s: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        got = s.recv(n - len(out))
        if not got:
            raise EOFError
        out += got
    return out


def _command(msg: bytes) -> str:
    """The command name of an ``OP_MSG`` (its body's first key); "" for anything else."""
    if struct.unpack("<i", msg[12:16])[0] != 2013 or msg[20] != 0:
        return ""
    size = struct.unpack("<i", msg[21:25])[0]
    return next(iter(bson.decode(msg[21:21 + size])), "")


class SilentProxy:
    """A TCP proxy to the MongoDB at ``upstream`` (``host``, ``port``) whose ``silent``
    flag, when set, swallows every command but the handshakes (never answered)."""

    def __init__(self, upstream: tuple[str, int]) -> None:
        self.upstream = upstream
        self.silent = threading.Event()
        self.swallowed: list[str] = []
        self._srv = socket.create_server(("127.0.0.1", 0))
        self.port = self._srv.getsockname()[1]
        self._socks: list[socket.socket] = [self._srv]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._srv.accept()
            except OSError:
                return
            up = socket.create_connection(self.upstream)
            self._socks += [client, up]
            threading.Thread(target=self._to_server, args=(client, up), daemon=True).start()
            threading.Thread(target=self._to_client, args=(up, client), daemon=True).start()

    def _to_server(self, client: socket.socket, up: socket.socket) -> None:
        with contextlib.suppress(OSError, EOFError):  # a side closed: this pump ends
            while True:
                head = _exact(client, 16)
                msg = head + _exact(client, struct.unpack("<i", head[:4])[0] - 16)
                name = _command(msg)
                if self.silent.is_set() and name not in HANDSHAKE:
                    self.swallowed.append(name)
                    continue
                up.sendall(msg)

    @staticmethod
    def _to_client(up: socket.socket, client: socket.socket) -> None:
        with contextlib.suppress(OSError):  # a side closed: this pump ends
            while data := up.recv(65536):
                client.sendall(data)

    def close(self) -> None:
        for s in self._socks:
            s.close()


@pytest.fixture
def proxy(mongo_url: str) -> Iterator[SilentProxy]:
    u = urlparse(mongo_url)
    p = SilentProxy((u.hostname or "127.0.0.1", u.port or 27017))
    yield p
    p.close()


def _ends(call: Callable[[], Any], limit_s: float = 30.0) -> tuple[str, Any]:
    """``("ok", result)`` or ``("raised", exception)`` of ``call`` run in a thread;
    ``("blocked", None)`` when it has not ended within ``limit_s`` seconds (a hang: the
    test fails, it does not wait for it)."""
    box: dict[str, tuple[str, Any]] = {}

    def run() -> None:
        try:
            box["r"] = ("ok", call())
        except Exception as exc:  # noqa: BLE001 - the test looks at it
            box["r"] = ("raised", exc)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(limit_s)
    return box.get("r", ("blocked", None))


def _cfg(tid: str, cid: str | None = None) -> dict[str, Any]:
    c: dict[str, Any] = {"thread_id": tid, "checkpoint_ns": ""}
    if cid:
        c["checkpoint_id"] = cid
    return {"configurable": c}


def _checkpoint(n: int) -> dict[str, Any]:
    return {"v": 1, "id": f"1f000000-0000-6000-8000-{n:012d}", "ts": "2026-12-05T00:00:00+00:00",
            "channel_values": {"n": n}, "channel_versions": {"n": f"{n:032}.0"},
            "versions_seen": {}, "pending_sends": []}


def _url(proxy: SilentProxy) -> str:
    return f"mongodb://127.0.0.1:{proxy.port}/?directConnection=true"


def test_calls_to_a_mongodb_that_answers_no_command_end_with_tier_unavailable(
        redis_url: str, proxy: SilentProxy) -> None:
    opts = unique_options(mongo_socket_timeout_s=0.5, server_selection_timeout_s=2)
    with DurableSaver.from_urls(redis_url, _url(proxy), **opts) as saver:
        saver.put(_cfg("t"), _checkpoint(1), {"step": 0}, {"n": f"{1:032}.0"})
        saver.flush(timeout_s=30)
        proxy.silent.set()
        # a read Redis cannot answer (an id it never held) and a listing of every thread
        # both ask MongoDB
        for call in (lambda: saver.get_tuple(_cfg("t", "1f000000-0000-6000-8000-000000000009")),
                     lambda: saver.list_threads(limit=5)):
            how, got = _ends(call)
            assert how == "raised", f"the call {how}: {got!r}"
            assert isinstance(got, TierUnavailableError), repr(got)
            assert got.tier == "durable"
            assert "did not answer" in str(got)
        assert proxy.swallowed  # the commands did reach the silent server
        # Redis still serves the thread's latest checkpoint
        assert saver.get_tuple(_cfg("t")).checkpoint["channel_values"] == {"n": 1}  # type: ignore[union-attr]
        proxy.silent.clear()
        saver.close(drain_timeout_s=0)


def test_a_saver_started_while_mongodb_answers_no_command_starts_and_catches_up(
        redis_url: str, mongo_url: str, proxy: SilentProxy,
        caplog: pytest.LogCaptureFixture) -> None:
    opts = unique_options(mongo_socket_timeout_s=0.5, server_selection_timeout_s=2)
    proxy.silent.set()
    saver = DurableSaver.from_urls(redis_url, _url(proxy), **opts)
    try:
        with caplog.at_level(logging.WARNING, "langgraph_durable"):
            how, got = _ends(lambda: saver.put(
                _cfg("t"), _checkpoint(1), {"step": 0}, {"n": f"{1:032}.0"}))
        assert how == "ok", f"the first put {how}: {got!r}"
        assert "MongoDB did not answer while the saver started" in caplog.text
        assert saver.get_tuple(_cfg("t")).checkpoint["channel_values"] == {"n": 1}  # type: ignore[union-attr]
        proxy.silent.clear()
        wait_for(lambda: saver.runtime.deferred.done, 30, "the deferred MongoDB set-up")
        saver.flush(timeout_s=30)
        with pymongo.MongoClient(mongo_url) as m:
            assert m[opts["database"]]["checkpoints"].count_documents({"thread_id": "t"}) == 1
    finally:
        proxy.silent.clear()
        saver.close(drain_timeout_s=0)
