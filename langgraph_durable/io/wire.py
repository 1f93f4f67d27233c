"""redis-py's private connection internals that the hiredis fast path reads, in one place.

The batchers (``coalesce.py``, ``coalesce_sync.py``) pack commands with hiredis'
public ``pack_command``; the asyncio one also writes the packed bytes straight to a
connection's stream writer and takes replies its parser already holds from the hiredis
reader. redis-py exposes neither, so this module reads its private attributes, each
with a fallback to redis-py's public path when it is absent:

- ``Connection._writer`` (asyncio ``StreamWriter``): absent -> ``send_packed_command``;
- ``redis._parsers.hiredis._AsyncHiredisParser``, its ``_reader`` and ``NOT_ENOUGH_DATA``:
  absent -> each reply by ``read_response()``;
- the parser's ``_hiredis_PushNotificationType`` (RESP3 push messages): absent -> none
  is expected on the buffered path;
- ``ConnectionPool._available_connections``/``_in_use_connections`` and the transport's
  ``_sock`` (closing the sockets of a closed event loop's clients, ``clients.py``):
  absent -> left to the garbage collector.

``missing()`` names what the installed redis-py lacks (``tests/test_wire.py`` asserts
it lacks nothing); the first connection met without ``_writer`` logs it once (WARNING).
"""

from __future__ import annotations

import asyncio
import logging
import socket
from typing import Any

import redis.asyncio.connection
import redis.exceptions

log = logging.getLogger("langgraph_durable.wire")

pack: Any
"""hiredis' ``pack_command`` (one command's bytes), or None without hiredis."""
try:
    from hiredis import pack_command as pack
except ImportError:  # pragma: no cover - hiredis is a default dependency
    pack = None

_HiredisParser: Any
_NOT_ENOUGH: Any
try:
    from redis._parsers.hiredis import NOT_ENOUGH_DATA as _NOT_ENOUGH
    from redis._parsers.hiredis import _AsyncHiredisParser as _HiredisParser
except ImportError:  # pragma: no cover - another redis-py layout: replies read one by one
    _HiredisParser = _NOT_ENOUGH = None

_ABSENT = object()
_warned = False


def missing() -> list[str]:
    """The private names of redis-py (and hiredis) this module reads that the installed
    versions lack (``[]``: the fast path is whole); each has its fallback (module doc)."""
    out = [] if pack is not None else ["hiredis.pack_command"]
    if _HiredisParser is None:
        out.append("redis._parsers.hiredis._AsyncHiredisParser")
    conn = redis.asyncio.connection.Connection()
    if not hasattr(conn, "_writer"):
        out.append("redis.asyncio.connection.Connection._writer")
    if _HiredisParser is not None and not hasattr(_HiredisParser(65536), "_reader"):
        out.append("_AsyncHiredisParser._reader")
    return out


def stream_writer(conn: Any) -> Any:
    """``conn``'s asyncio ``StreamWriter`` (redis-py's ``Connection._writer``; None when
    not connected, or when this redis-py has no such attribute: logged once)."""
    writer = getattr(conn, "_writer", _ABSENT)
    if writer is _ABSENT:
        global _warned
        if not _warned:
            _warned = True
            log.warning("redis-py %s has no Connection._writer: batched script calls go "
                        "through send_packed_command (correct, but more CPU per call)",
                        redis.__version__)
        return None
    return writer


def buffered_reader(conn: Any) -> Any:
    """The hiredis reader of ``conn``'s parser when a reply it already holds can be taken
    from it directly, as ``conn.read_response()`` would return it: redis-py's hiredis
    parser and no health checks (whose next time a read sets); else None. A reply read
    that way skips redis-py's per-read timeout context, which cost a batch's call more
    CPU than reading its reply: the first reply of a batch, and any not yet received, is
    still read by ``conn.read_response()``. A RESP3 push message met there is handed to
    the parser's push handler, as the parser hands it."""
    parser = getattr(conn, "_parser", None)
    if (_HiredisParser is None or type(parser) is not _HiredisParser
            or conn.health_check_interval):
        return None
    return getattr(parser, "_reader", None)


def raw_socket(conn: Any) -> socket.socket | None:
    """The socket under ``conn``'s asyncio transport (None when there is none)."""
    transport = getattr(getattr(conn, "_writer", None), "transport", None)
    sock = getattr(transport, "_sock", None)
    return sock if isinstance(sock, socket.socket) else None


def pooled_connections(pool: Any) -> list[Any]:
    """The connections ``pool`` (a redis-py ``ConnectionPool``) holds, idle and in use."""
    return [*getattr(pool, "_available_connections", ()),
            *getattr(pool, "_in_use_connections", ())]


async def send_read(conn: Any, packed: bytes, n: int) -> list[Any]:
    """One write of ``packed`` (``n`` commands) on ``conn``, then its ``n`` replies.

    On a connected connection without health checks the bytes go straight to its stream
    writer (waiting, under the socket timeout, only when the transport buffers them):
    redis-py's ``send_packed_command`` runs every write in a task of its own
    (``asyncio.wait_for``), one more event-loop turn per call."""
    try:
        writer = stream_writer(conn)
        if writer is None or conn.health_check_interval or not conn.is_connected:
            await conn.send_packed_command(packed)
        else:
            _write(conn, writer, packed)
            if writer.transport.get_write_buffer_size():
                await _drain(conn, writer)
        replies: list[Any] = []
        reader = buffered_reader(conn)
        while len(replies) < n:
            reply = reader.gets() if reader is not None else _NOT_ENOUGH
            if reply is _NOT_ENOUGH:  # not yet received: read it under the socket timeout
                try:
                    replies.append(await conn.read_response())
                except redis.exceptions.ResponseError as exc:
                    replies.append(exc)
                continue
            push = getattr(conn._parser, "_hiredis_PushNotificationType", None)
            if push is not None and isinstance(reply, push):  # RESP3: not a reply
                await conn._parser.handle_push_response(reply)
                continue
            if isinstance(reply, redis.exceptions.ConnectionError):
                raise reply  # as the parser raises it (``LOADING``...)
            if (isinstance(reply, list) and reply
                    and isinstance(reply[0], redis.exceptions.ConnectionError)):
                raise reply[0]
            replies.append(reply)
        return replies
    except BaseException:
        await conn.disconnect(nowait=True)  # replies may be left unread: never reuse it
        raise


def _write(conn: Any, writer: Any, packed: bytes) -> None:
    try:
        writer.write(packed)
    except OSError as exc:
        raise redis.exceptions.ConnectionError(f"Error while writing to socket: {exc}") from exc


async def _drain(conn: Any, writer: Any) -> None:
    """Wait until the transport took the buffered bytes (rare: a large batch), within the
    connection's socket timeout."""
    try:
        await asyncio.wait_for(writer.drain(), conn.socket_timeout or None)
    except asyncio.TimeoutError:
        raise redis.exceptions.TimeoutError("Timeout writing to socket") from None
    except OSError as exc:
        raise redis.exceptions.ConnectionError(f"Error while writing to socket: {exc}") from exc
