"""The application's state version of stored threads, for the operator's tools (the CLI's
``threads``/``show``/``migrate-state`` and the dashboard): read from a checkpoint's
metadata (``STATE_VERSION_KEY``, stamped by a saver configured with ``state_version``;
absent: the thread is *unversioned*), shown, and compared with the version the running
code carries. Reading a version decodes metadata only, never channel values."""

from __future__ import annotations

import concurrent.futures
import logging
from collections.abc import Iterable, Mapping
from typing import Any

from ..core.state_versions import STATE_VERSION_KEY, StateVersions

UNVERSIONED = "unversioned"
"""How a checkpoint without a state version is shown."""

DEFAULT_UNVERSIONED_AS = 1
"""The version an unversioned checkpoint is compared as (the saver's
``unversioned_state_version`` default)."""

log = logging.getLogger("langgraph_durable.inspection")

READERS = 8
"""Threads whose latest checkpoint ``latest_versions`` reads side by side."""


def version_of(metadata: Mapping[str, Any] | None) -> int | None:
    """The state version stored in checkpoint ``metadata`` (an int >= 1), or None when
    the checkpoint carries none (written without ``state_version``; a value of another
    type, which no saver writes, counts as none)."""
    value = (metadata or {}).get(STATE_VERSION_KEY)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def shown(version: int | None) -> str:
    """``2`` -> ``"2"``; None -> ``"unversioned"``."""
    return UNVERSIONED if version is None else str(version)


def compare(stored: int | None, current: int,
            unversioned_as: int = DEFAULT_UNVERSIONED_AS) -> str:
    """Where a thread at ``stored`` stands for code at ``current``: ``"older"`` (it needs
    migration: the code migrates it on read, ``migrate-state`` rewrites it),
    ``"current"`` or ``"newer"`` (written by newer code: refused on resume with
    ``StateVersionError``). An unversioned thread is compared as ``unversioned_as``."""
    effective = unversioned_as if stored is None else stored
    if effective < current:
        return "older"
    return "current" if effective == current else "newer"


def parse_filter(text: str) -> int | None:
    """A ``--state-version`` value: ``"2"`` -> 2, ``"unversioned"`` (or ``"none"``) ->
    None. Raises ``ValueError`` naming the text for anything else (a version is an int
    >= 1)."""
    raw = text.strip().lower()
    if raw in (UNVERSIONED, "none"):
        return None
    if raw.isdigit() and int(raw) >= 1:
        return int(raw)
    raise ValueError(f"--state-version expects a version (an int >= 1) or 'unversioned', "
                     f"got {text!r}")


def latest_versions(saver: Any, thread_ids: Iterable[str]) -> dict[str, int | None]:
    """Per thread, the state version of its latest root checkpoint (None: unversioned,
    or no root checkpoint), read without decoding channel values
    (``lookup.outline(limit=1)``: Redis when it holds the thread, else MongoDB), ``READERS``
    threads side by side. A thread whose checkpoint cannot be read (a damaged record) is
    left out, logged by its error's type; ``TierUnavailableError`` is raised."""
    from ..errors import TierUnavailableError
    from .lookup import outline

    def one(tid: str) -> tuple[bool, int | None]:
        try:
            found = outline(saver, tid, "", limit=1)
        except TierUnavailableError:
            raise
        except Exception as exc:  # by type only: no stored value in the logs
            log.warning("the state version of a thread could not be read: %s",
                        type(exc).__name__)
            return False, None
        return True, version_of(found[0].metadata) if found else None

    ids = list(thread_ids)
    if not ids:
        return {}
    with concurrent.futures.ThreadPoolExecutor(min(READERS, len(ids))) as pool:
        return {tid: v for tid, (ok, v) in zip(ids, pool.map(one, ids)) if ok}


def needs_migration(versions: Mapping[str, int | None], current: int,
                    unversioned_as: int = DEFAULT_UNVERSIONED_AS) -> dict[str, int]:
    """How many of ``versions`` (``latest_versions``) are ``older``, ``current`` and
    ``newer`` than ``current`` (``compare``)."""
    out = {"older": 0, "current": 0, "newer": 0}
    for v in versions.values():
        out[compare(v, current, unversioned_as)] += 1
    return out


def as_stored(view: Any) -> Any:
    """``view`` (a copy of a saver made for the operator's tools: ``strict_view``) made to
    return checkpoints as stored: no migration on read, no refusal of a newer version,
    nothing stamped by its puts (a fork keeps its checkpoint's version), whatever the
    application's saver was given (``state_version``, ``state_migrations``). Returns
    ``view``."""
    view._state = StateVersions(unversioned=view.state_versions.unversioned)
    return view
