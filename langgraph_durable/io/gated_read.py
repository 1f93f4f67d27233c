"""A blocking read another thread can end: the blocking driver of ``GatedRead`` and
``unblock``, with redis-py's blocking clients.

A flusher with one outbox stream waits for new entries in ``XREADGROUP ... BLOCK``
(``flush_interval_s``); Redis ends that wait on its own timer (every 100 ms at its default
``hz`` of 10), so stopping the flusher waited up to that long. Here the read goes on a
pooled connection of its own, after ``CLIENT ID``: while it waits, its ``ReadGate`` holds
the connection's id, and ``unblock`` sends ``CLIENT UNBLOCK`` for it (the read returns
as if its ``BLOCK`` ran out: no entries). The gate's lock keeps the connection from going
back to the pool while an ``UNBLOCK`` naming it is on its way, so it never ends someone
else's blocking command, and ``UNBLOCK`` goes only to the read's server (ids are unique
per server: after a failover the pool's new connections go elsewhere). A server that
refuses either command (an ACL without ``CLIENT``) turns the gate off: reads run as a
plain ``Pipeline`` again.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import redis.exceptions

from ..core.ops import GatedRead, ReadGate
from .client_set import Clients

log = logging.getLogger("langgraph_durable.flusher")

STARTING_WAIT_S = 2.0
"""How long ``unblock`` waits for a read it finds sent but not yet waiting with its id
published (a few hundred microseconds on a healthy connection), in seconds."""


def read_sync(op: GatedRead, c: Clients) -> Any:
    """Run ``op``'s one command after ``CLIENT ID`` on a connection taken from the pool
    of ``c.redis`` (a ``redis.Redis``, not a cluster), its id in ``op.gate`` while the
    command waits; returns the command's raw reply. Raises the client's errors (an error
    reply as ``ResponseError``); the connection is closed after any error, then retried
    as redis-py retries a command (``retry`` of the connection)."""
    gate = op.gate
    assert gate is not None
    pool = c.redis.connection_pool
    conn = pool.get_connection()
    try:
        return conn.retry.call_with_retry(lambda: _exchange(conn, op, gate),
                                          lambda _error: conn.disconnect())
    except BaseException:
        conn.disconnect()
        raise
    finally:
        pool.release(conn)


def _exchange(conn: Any, op: GatedRead, gate: ReadGate) -> Any:
    (command,) = op.commands
    gate.starting = True  # sent, its id not yet published: unblock waits for it
    try:
        conn.send_packed_command(conn.pack_commands([("CLIENT", "ID"), tuple(command)]))
        try:
            client_id = conn.read_response()
        except redis.exceptions.ResponseError as exc:  # its reply is next: wait for it
            gate.starting = False
            if _is_refusal(exc):
                gate.refused = True
                log.info("CLIENT ID refused (%s): a stopping flusher waits for its "
                         "blocking read to end by itself", exc)
            return conn.read_response()
        with gate.lock:
            gate.client_id, gate.address = client_id, _address(conn)
        gate.starting = False
        try:
            return conn.read_response()
        finally:
            with gate.lock:  # after any UNBLOCK naming this connection was answered
                gate.client_id = gate.address = None
    finally:
        gate.starting = False


def _address(conn: Any) -> tuple[object, object, object]:
    """The server a connection talks to (ids are unique per server): host and port, or
    the socket path (a Sentinel-managed connection's host and port are its master's)."""
    return (getattr(conn, "host", None), getattr(conn, "port", None),
            getattr(conn, "path", None))


def _is_refusal(exc: Exception) -> bool:
    """Whether an error reply means the server will never take the command (an ACL, a
    renamed or disabled ``CLIENT``), not that it is busy (``BUSY``, ``LOADING``)."""
    return isinstance(exc, redis.exceptions.NoPermissionError) or "unknown" in str(exc).lower()


def unblock(gate: ReadGate, c: Clients) -> bool:
    """End the blocking read ``gate`` waits on, if any, with ``CLIENT UNBLOCK`` on a
    connection of the pool of ``c`` (blocking clients) to the read's server; True when
    one was ended. Nothing is sent when no read waits, or when the pool's connection
    goes to another server than the read's (a failover moved the pool). The connection is
    taken before the gate's lock, so a read holding the pool's last connection ends by
    itself and releases it meanwhile. A refusal (an ACL) turns the gate off; other errors
    are logged and ignored (the read then ends after its ``BLOCK``). A read whose command
    is sent but whose id is not published yet is waited for, up to ``STARTING_WAIT_S``
    (a stop landing then left the read waiting its whole ``BLOCK``: a worker's SIGTERM
    took up to its ``flush_interval_s``)."""
    deadline = time.monotonic() + STARTING_WAIT_S
    while gate.client_id is None:
        if not gate.starting or time.monotonic() > deadline:
            return False
        time.sleep(0.001)
    pool = c.redis.connection_pool
    try:
        conn = pool.get_connection()
    except redis.exceptions.RedisError as exc:
        log.info("CLIENT UNBLOCK not sent (%s): the flusher's read ends by itself", exc)
        return False
    try:
        with gate.lock:
            if gate.client_id is None or gate.address != _address(conn):
                return False
            conn.send_command("CLIENT", "UNBLOCK", gate.client_id)
            return bool(conn.read_response())
    except redis.exceptions.ResponseError as exc:
        if _is_refusal(exc):
            gate.refused = True
        log.info("CLIENT UNBLOCK refused (%s): a stopping flusher waits for its "
                 "blocking read to end by itself", exc)
    except redis.exceptions.RedisError as exc:
        conn.disconnect()
        log.info("CLIENT UNBLOCK failed (%s): the flusher's read ends by itself", exc)
    finally:
        pool.release(conn)
    return False
