"""What a server's error becomes for the plan that ran the operation (the sync and the
async driver alike): a script's declared refusal -> ``ScriptRefused``; its ``WRONGTYPE``
-> ``CorruptRecordError``; Redis refusing the URL's database number ->
``ConfigurationError``; a server that does not answer -> ``TierUnavailableError``; a
MongoDB command's failure -> ``CommandFailed``/``BulkWriteFailed``; anything else as the
client raised it."""

from __future__ import annotations

from typing import Any

import redis.exceptions
from pymongo.errors import BulkWriteError, OperationFailure, PyMongoError

from ..core.ops import CommandFailed, MongoOp, Pipeline, Script
from ..errors import (
    ConfigurationError,
    CorruptRecordError,
    ScriptRefused,
    TierUnavailableError,
)
from .mongo_calls import bulk_write_failed

_UNANSWERED_MONGO = frozenset({
    "ServerSelectionTimeoutError", "AutoReconnect", "NetworkTimeout", "ConnectionFailure",
})
"""PyMongo's errors (by class name) that mean MongoDB did not answer."""


def what(op: Any) -> str:
    """How an error names ``op``: a script's name, ``pipeline`` for any pipeline (a
    ``GatedRead`` too), else the operation's class in lower case."""
    if isinstance(op, Script):
        return op.name
    return "pipeline" if isinstance(op, Pipeline) else type(op).__name__.lower()


def _refusal(exc: Exception, op: Any) -> ScriptRefused | None:
    """The ``ScriptRefused`` that a script's error reply ``exc`` stands for: a Redis
    ``ResponseError`` whose first word is one of the op's ``refusals``; else None."""
    if not isinstance(op, Script) or not op.refusals or not isinstance(
            exc, redis.exceptions.ResponseError):
        return None
    refused = ScriptRefused.parse(op.name, str(exc))
    return refused if refused.code in op.refusals else None


def _wrong_type(exc: Exception, op: Any) -> CorruptRecordError | None:
    """The ``CorruptRecordError`` that a script's ``WRONGTYPE`` error reply stands for (a
    key among the script's KEYS holds another type than the script reads: a damaged or
    foreign key; the plan running the script names which one, ``plans/read.py``
    ``damaged_keys_plan``); else None. Only that reply of a ``Script``: any other error
    (NOSCRIPT, OOM, a lost connection) keeps its own type."""
    if not isinstance(op, Script) or type(exc) is not redis.exceptions.ResponseError:
        return None
    text = str(exc)
    if not text.startswith("WRONGTYPE"):
        return None
    return CorruptRecordError(
        f"Redis script {op.name!r} met a key of the wrong type among {list(op.keys)!r}: "
        f"{text}", tier="hot")


def _no_free_connection(exc: Exception) -> bool:
    """True for redis-py's refusal of a caller by a full non-blocking pool
    (``MaxConnectionsError`` from 6.x, a plain ``ConnectionError`` before; "Too many
    connections" either way): no server was asked."""
    return isinstance(exc, redis.exceptions.ConnectionError) and (
        type(exc).__name__ == "MaxConnectionsError" or str(exc) == "Too many connections")


def _bad_database_number(exc: Exception, op: Any, redis_name: str) -> Exception | None:
    """The ``ConfigurationError`` for Redis's refusal of the ``SELECT`` a connection sends
    for the database number of its URL ("DB index is out of range": past the server's
    ``databases``, 16 by default; "ERR SELECT is not allowed in cluster mode"); else None."""
    if not isinstance(exc, redis.exceptions.ResponseError):
        return None
    text = str(exc)
    if not (text.startswith("DB index is out of range") or "SELECT is not allowed" in text):
        return None
    return ConfigurationError(
        f"Redis {redis_name} refused the database number of its URL ({what(op)}): {text}. "
        "Use a number below the server's `databases` setting (16 by default; 0 on a Redis "
        "Cluster, which has database 0 only)")


def wrap(exc: Exception, op: Any, redis_name: str, mongo_name: str) -> Exception:
    """The error a plan receives for ``exc``, raised by ``op`` on the servers named
    ``redis_name``/``mongo_name`` (``Clients``' names, quoted in the message); ``exc``
    itself when the package has no type of its own for it."""
    refused = _refusal(exc, op) or _wrong_type(exc, op)
    if refused is not None:
        return refused
    bad_number = _bad_database_number(exc, op, redis_name)
    if bad_number is not None:
        return bad_number
    if _no_free_connection(exc):
        return TierUnavailableError(
            f"Redis {redis_name} was not asked ({what(op)}): the Redis client's connection "
            "pool had no free connection (redis-py's ConnectionPool refuses a caller when "
            "all of its max_connections are in use, the in-process flusher's included): "
            "give the client a larger max_connections, or a BlockingConnectionPool, which "
            f"waits for one: {exc}", tier="hot", server=redis_name,
            operation=what(op), reason=str(exc))
    if isinstance(exc, (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)):
        return TierUnavailableError(
            f"Redis {redis_name} did not answer ({what(op)}): {exc}", tier="hot",
            server=redis_name, operation=what(op), reason=str(exc))
    if isinstance(exc, PyMongoError) and type(exc).__name__ in _UNANSWERED_MONGO:
        where = f"{op.collection}.{op.method}" if isinstance(op, MongoOp) else what(op)
        return TierUnavailableError(
            f"MongoDB {mongo_name} did not answer ({where}): {exc}", tier="durable",
            server=mongo_name, operation=where, reason=str(exc))
    if isinstance(exc, OperationFailure) and isinstance(op, MongoOp):
        if isinstance(exc, BulkWriteError):
            return bulk_write_failed(op.collection, exc)
        message = (exc.details or {}).get("errmsg") or str(exc)
        return CommandFailed(op.collection, op.method, int(exc.code or 0), str(message))
    return exc
