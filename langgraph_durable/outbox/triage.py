"""Triage of a flush round's errors and entries (``rounds.py``): which errors are one
entry's own (its entry is set aside as a dead letter: ``of_entry``) and which a tier's (the
round is retried), and the shapes of the entry kinds that a round can copy."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import repeat

import redis.exceptions
from bson.errors import InvalidDocument
from pymongo.errors import DocumentTooLarge

from ..core.ops import BulkWriteFailed
from ..core.outbox_entry import OutboxEntry
from ..core.records import SEP
from ..errors import CorruptRecordError

POISON = (CorruptRecordError, InvalidDocument, DocumentTooLarge, ValueError, KeyError,
          TypeError, UnicodeDecodeError, OverflowError, BulkWriteFailed)
"""Errors of one entry's data, no retry can fix (``of_entry``): the entry goes to the
dead-letter stream instead of blocking. Every other error is the tier's (a server down, a
connection lost, a write concern not met): the round is retried."""


_TRANSIENT_CODES = {6, 7, 89, 91, 189, 262, 9001, 10107, 11600, 11602, 13435, 13436,
                    13, 24, 50, 112, 202, 8000, 14031, 16500}
"""MongoDB error codes of a server or network in trouble (retry), not of a bad document:
host unreachable or not found, network timeouts, shutdowns, step-downs, not primary;
also Unauthorized (13), LockTimeout (24), MaxTimeMSExpired (50), WriteConflict (112),
NetworkInterfaceExceededTimeLimit (202), Atlas's errors (8000), OutOfDiskSpace (14031)
and a throttled request (16500): none is the document's fault."""


def _transient(exc: Exception) -> bool:
    """True for a bulk write that failed for reasons a retry can fix (write concern,
    shutdown, step-down); False for a document MongoDB will never take (e.g. too large)."""
    if not isinstance(exc, BulkWriteFailed):
        return False
    return bool(exc.write_concern_errors) or not exc.write_errors or any(
        e.code in _TRANSIENT_CODES for e in exc.write_errors)


def of_entry(exc: BaseException) -> bool:
    """True when ``exc`` is an error of one entry's data (set it aside), False when it is
    the tier's (retry the round): a Redis ``WRONGTYPE`` (a key of the thread holds another
    type), a record that does not decode, a document MongoDB or its driver refuses
    (``POISON``, a bulk write's non-transient write errors)."""
    if isinstance(exc, redis.exceptions.ResponseError):
        return str(exc).startswith("WRONGTYPE")
    if isinstance(exc, BulkWriteFailed):
        return not _transient(exc)
    return isinstance(exc, POISON)


def raise_tier_errors(replies: Sequence[object]) -> None:
    """Raise the first error of a pipeline's ``replies`` that is the tier's, not of one
    key (``of_entry``; a cluster pipeline returns a lost connection in place of its
    commands' replies)."""
    for r in replies:
        if isinstance(r, Exception) and not of_entry(r):
            raise r


def step_of(exc: BaseException) -> str:
    """The step an entry's error belongs to: ``write`` (MongoDB or its driver refused a
    document) or ``copy`` (its records could not be read from Redis or decoded)."""
    return "write" if isinstance(exc, (BulkWriteFailed, InvalidDocument, DocumentTooLarge,
                                       OverflowError)) else "copy"


def check_records(entry: OutboxEntry) -> None:
    """A ``cp``/``w`` entry's shape: ``member`` is ``ns NUL checkpoint_id``, each name a
    blob field (3 parts) or a write field (4 parts), each digest bytes. Raises
    ``ValueError`` naming the thread and what is wrong."""
    if not isinstance(entry.member, str) or entry.member.count(SEP) != 1:
        raise ValueError(f"outbox entry of thread {entry.thread_id!r}: member "
                         f"{entry.member!r} is not 'checkpoint_ns NUL checkpoint_id'")
    parts = 3 if entry.kind == "cp" else 4
    bad = _misshapen(entry.names, parts)
    if bad is not None:
        raise ValueError(f"outbox entry of thread {entry.thread_id!r}, checkpoint "
                         f"{entry.member!r}: field {bad!r} does not have {parts} parts")
    _digests(entry)


def check_journal(entry: OutboxEntry) -> None:
    """An ``fx`` entry's shape: a ``member`` string, each name a journal field (4
    parts). Raises ``ValueError`` naming the thread and what is wrong."""
    if not isinstance(entry.member, str):
        raise ValueError(f"effect journal entry of thread {entry.thread_id!r}: member "
                         f"{entry.member!r} is not a string")
    bad = _misshapen(entry.names, 4)
    if bad is not None:
        raise ValueError(f"effect journal entry of thread {entry.thread_id!r}: field "
                         f"{bad!r} is not 'task_ns NUL task_id NUL name NUL n'")
    _digests(entry)


def check_store(entry: OutboxEntry) -> None:
    """A memory store entry's shape (``st``): ``member`` is ``namespace NUL key`` (the
    namespace's labels joined by ``.``: ``core/store_records.py``). Raises ``ValueError``
    naming the namespace's outbox ``t`` and what is wrong."""
    if not isinstance(entry.member, str) or SEP not in entry.member:
        raise ValueError(f"memory store entry {entry.thread_id!r}: member "
                         f"{entry.member!r} is not 'namespace NUL key'")


def _misshapen(names: Sequence[object], parts: int) -> object | None:
    """The first of ``names`` that is not a string of ``parts`` NUL-separated parts, None
    when all are (counted in one pass of C loops: a round checks every entry it takes)."""
    try:
        counts = list(map(str.count, names, repeat(SEP)))  # type: ignore[arg-type]
    except TypeError:
        return next(n for n in names if not isinstance(n, str))
    if counts.count(parts - 1) == len(counts):
        return None
    return next(n for n, c in zip(names, counts) if c != parts - 1)


def _digests(entry: OutboxEntry) -> None:
    if entry.digests and set(map(type, entry.digests)) != {bytes}:
        raise ValueError(f"outbox entry of thread {entry.thread_id!r}: item digests are "
                         f"not bytes: {list(entry.digests)[:3]!r}")
