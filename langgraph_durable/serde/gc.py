"""Garbage collection of blobs no checkpoint references any more.

Blobs are shared (the same frame in many checkpoints and threads is one blob), so a blob can
only be deleted by comparing the whole store with the keys referenced by *every* saver and
thread using it (see :func:`~langgraph_durable.serde.refs_in` / ``collect_refs``).

The grace period protects writes in flight: a checkpoint uploads its blobs *before* it is
saved, so a blob may be unreferenced for a moment. Blobs modified within ``grace_period_s``
seconds are kept. A skipped duplicate upload refreshes a blob's modification time (stores do
so when it is older than their ``touch_after_s``, 60 s local / 300 s S3), so the grace period
must exceed ``touch_after_s`` plus the longest time between upload and checkpoint save.

Each blob chosen for deletion is looked at once more right before it is deleted (``stat``,
when the store has it: both built-in stores do), and kept if it was refreshed meanwhile. This
narrows the one remaining race, a writer re-using the blob between that last look and the
delete, to the duration of one delete request.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

from langgraph_durable.serde.stores import BlobStore

__all__ = ["DEFAULT_KEY_PATTERN", "GcReport", "acollect_garbage", "collect_garbage"]

DEFAULT_KEY_PATTERN = re.compile(r"^[0-9a-f]{64}\.[A-Za-z0-9._-]+$")
"""Keys written by :class:`ExternalRefSerializer`; other objects in the store are never touched."""


@dataclass
class GcReport:
    """What one :func:`collect_garbage` run saw and did (sizes in bytes)."""

    scanned: int = 0
    """Blobs listed whose key matches the key pattern."""
    deleted: list[str] = field(default_factory=list)
    """Keys deleted (or that would be, with ``dry_run``)."""
    bytes_deleted: int = 0
    kept_referenced: int = 0
    kept_recent: int = 0
    """Unreferenced blobs younger than the grace period."""
    ignored_foreign: int = 0
    """Objects whose key does not match the key pattern (never deleted)."""
    dry_run: bool = False
    cutoff: datetime | None = None
    """Blobs modified at or after this UTC time were kept as recent."""
    referenced: int = 0
    """How many distinct keys were given as referenced (by the saver scan, if any)."""


def _as_utc(now: datetime | float | None) -> datetime:
    if now is None:
        return datetime.now(timezone.utc)
    if isinstance(now, (int, float)):
        return datetime.fromtimestamp(now, timezone.utc)
    return now.replace(tzinfo=timezone.utc) if now.tzinfo is None else now.astimezone(timezone.utc)


def collect_garbage(
    store: BlobStore,
    referenced_keys: Collection[str],
    grace_period_s: float = 3600,
    now: datetime | float | None = None,
    *,
    dry_run: bool = False,
    key_pattern: re.Pattern[str] | None = DEFAULT_KEY_PATTERN,
) -> GcReport:
    """Delete blobs that are not in ``referenced_keys`` and older than ``grace_period_s``.

    Args:
        store: the blob store to clean.
        referenced_keys: every key still referenced by any checkpoint using ``store``.
        grace_period_s: seconds; blobs modified more recently than ``now - grace_period_s``
            are kept even if unreferenced.
        now: the current time (timezone-aware datetime, naive = UTC, or epoch seconds);
            default: the clock. Inject it in tests.
        dry_run: report what would be deleted without deleting.
        key_pattern: only keys matching it are considered (``None``: every key).

    Raises ``ValueError`` if ``grace_period_s`` is negative; store errors propagate (blobs
    deleted before the error stay deleted).
    """
    if grace_period_s < 0:
        raise ValueError(f"grace_period_s must be >= 0, got {grace_period_s}")
    referenced = set(referenced_keys)
    cutoff = _as_utc(now) - timedelta(seconds=grace_period_s)
    report = GcReport(dry_run=dry_run, cutoff=cutoff, referenced=len(referenced))
    stat = getattr(store, "stat", None)
    for info in list(store.list_keys()):
        if key_pattern is not None and not key_pattern.match(info.key):
            report.ignored_foreign += 1
            continue
        report.scanned += 1
        if info.key in referenced:
            report.kept_referenced += 1
        elif info.last_modified >= cutoff:
            report.kept_recent += 1
        else:
            if not dry_run and stat is not None:
                fresh = stat(info.key)  # refreshed by a writer since the listing?
                if fresh is None:
                    continue
                if fresh.last_modified >= cutoff:
                    report.kept_recent += 1
                    continue
            if not dry_run:
                store.delete(info.key)
            report.deleted.append(info.key)
            report.bytes_deleted += info.size
    return report


async def acollect_garbage(
    store: BlobStore,
    referenced_keys: Collection[str],
    grace_period_s: float = 3600,
    now: datetime | float | None = None,
    *,
    dry_run: bool = False,
    key_pattern: re.Pattern[str] | None = DEFAULT_KEY_PATTERN,
) -> GcReport:
    """:func:`collect_garbage` in a worker thread (same arguments, result and errors)."""
    return await asyncio.to_thread(
        collect_garbage,
        store,
        referenced_keys,
        grace_period_s,
        now,
        dry_run=dry_run,
        key_pattern=key_pattern,
    )
