"""``io/wire.py``: the private redis-py internals of the hiredis fast path are there in
the installed redis-py, work on a real server's connection, and fall back clearly when
absent."""

from __future__ import annotations

import asyncio
import logging
import socket
import types
import uuid

import pytest
import redis.asyncio

from langgraph_durable.io import wire


def test_the_installed_redis_py_has_every_private_name_the_fast_path_reads() -> None:
    assert wire.missing() == []
    assert wire.pack is not None


def test_a_pooled_connection_takes_packed_commands_and_gives_their_replies(
        redis_url: str) -> None:
    key = f"wire-test:{uuid.uuid4().hex}"  # read only: nothing is written

    async def main() -> None:
        client = redis.asyncio.Redis.from_url(redis_url)
        try:
            pool = client.connection_pool
            conn = await pool.get_connection()
            try:
                await conn.connect()
                assert wire.stream_writer(conn) is not None
                assert wire.buffered_reader(conn) is not None
                assert isinstance(wire.raw_socket(conn), socket.socket)
                assert conn in wire.pooled_connections(pool)
                packed = b"".join([wire.pack(("PING",)), wire.pack(("GET", key)),
                                   wire.pack(("HGET", key))])  # wrong arity: an error
                ping, got, bad = await wire.send_read(conn, packed, 3)
                assert (ping, got) == (b"PONG", None)
                assert isinstance(bad, redis.exceptions.ResponseError)
            finally:
                await pool.release(conn)
        finally:
            await client.aclose()

    asyncio.run(main())


def test_a_connection_without_writer_falls_back_and_says_so_once(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(wire, "_warned", False)
    other = types.SimpleNamespace(is_connected=True)  # a redis-py without ``_writer``
    with caplog.at_level(logging.WARNING, logger="langgraph_durable.wire"):
        assert wire.stream_writer(other) is None
        assert wire.stream_writer(other) is None
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 1 and "no Connection._writer" in warned[0]
    assert wire.raw_socket(other) is None
    assert wire.pooled_connections(None) == []


def test_a_connection_not_connected_has_no_writer_and_no_warning(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(wire, "_warned", False)
    with caplog.at_level(logging.WARNING, logger="langgraph_durable.wire"):
        assert wire.stream_writer(redis.asyncio.connection.Connection()) is None
    assert caplog.records == []
