"""Application state versions of the long-term memory store's items (issue 34, item 5),
sans-I/O.

A ``DurableStore`` given ``state_version=N`` records N with every item it puts (the
record body's fifth element, ``core/store_records.StoreBody``; the MongoDB document's
``sv``); records put without a state version keep the four-element body, byte for byte.
On every read (get, search with or without a query, batches, both tiers) an item of an
older version has the chain of ``StateMigration.items`` hooks of ``state_migrations``
applied to its decoded value, in memory: nothing stored changes; the application's next
``put`` of the item stores it in the running version. A step without an ``items`` hook
keeps item values as they are (a plain function in ``state_migrations`` is a checkpoint
``values`` hook only). An item stored without a version reads as ``unversioned`` (default
1); one of a newer version raises ``StateVersionError`` unless ``newer="read"`` (returned
as stored). A gap in the chain, a hook that raises or returns something else than a dict
raise ``StateMigrationError`` naming namespace, key and versions.

Embeddings are not recomputed by a migration (the hooks run on read; the next put of the
item embeds its new value), and a ``search`` filter applies to the migrated value.

Everything here is pure: ``store/batch.Answers`` calls ``ItemVersions.migrate`` on each
value it decodes, the same code for the sync and the async API.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..config import MAX_STATE_VERSION
from ..errors import ConfigurationError, StateMigrationError, StateVersionError
from .state_versions import NewerState, StateMigration, as_migrations


def check_version(what: str, value: object, *, optional: bool = True) -> int | None:
    """``value`` as a state version (an int from 1 to ``MAX_STATE_VERSION``: a record
    holds it as a 64-bit int; None allowed when ``optional``); raises
    ``ConfigurationError`` naming ``what`` otherwise."""
    if value is None and optional:
        return None
    if (isinstance(value, bool) or not isinstance(value, int) or value < 1
            or value > MAX_STATE_VERSION):
        raise ConfigurationError(f"{what} must be a state version (an int >= 1, at most "
                                 f"{MAX_STATE_VERSION}"
                                 + (", or None" if optional else "") + f"), got {value!r}")
    return value


@dataclass(frozen=True)
class ItemVersions:
    """A store's state-version options (``DurableStore``'s ``state_version``,
    ``state_migrations``, ``unversioned_state_version``, ``newer_state``) and what it does
    with them. ``current`` None: nothing is recorded with puts and nothing is migrated or
    checked on reads. ``as_stored``: puts record ``current`` but reads return values as
    stored, neither migrated nor checked (the tools: ``cli/store_commands.py``)."""

    current: int | None = None
    migrations: Mapping[int, StateMigration] = field(default_factory=dict)
    unversioned: int = 1
    newer: NewerState = "raise"
    as_stored: bool = False

    def __post_init__(self) -> None:
        check_version("DurableStore state_version", self.current)
        check_version("DurableStore unversioned_state_version", self.unversioned,
                      optional=False)
        if self.newer not in ("raise", "read"):
            raise ConfigurationError(f"DurableStore newer_state must be 'raise' or 'read', "
                                     f"got {self.newer!r}")

    def migrate(self, namespace: tuple[str, ...], key: str, stored: int | None,
                value: dict[str, Any]) -> dict[str, Any]:
        """``value`` (of the item ``namespace``/``key``, stored in version ``stored``;
        None: stored without one, read as ``unversioned``) as the running version sees it:
        the same object when nothing is to be done, else the ``items`` hooks of the
        versions from ``stored`` to ``current`` applied in order. Raises
        ``StateVersionError`` for a newer item (unless ``newer="read"``),
        ``StateMigrationError`` for a gap in the chain or a hook that failed."""
        running = self.current
        if running is None or self.as_stored:
            return value
        version = self.unversioned if stored is None else stored
        if version == running:
            return value
        where = f"store item {key!r} of namespace {namespace!r}"
        ctx: dict[str, Any] = dict(namespace=namespace, key=key, stored=version,
                                   running=running)
        if version > running:
            if self.newer == "read":
                return value
            if stored is None:  # the configuration made it newer, not a deploy
                raise StateVersionError(
                    f"{where} has no state version, read as unversioned_state_version="
                    f"{version}, newer than the store's {running}: "
                    "unversioned_state_version must not be above state_version (the items "
                    "put before versions were used are of the oldest shape); nothing "
                    "stored was changed", **ctx)
            raise StateVersionError(
                f"{where} was put by state version {version}, newer than the store's "
                f"{running}, and cannot be read by it (a rolled-back deploy?): read it with "
                f"code of version {version} or later, or pass newer_state='read' to get it "
                "as stored; nothing stored was changed", **ctx)
        for k in range(version, running):
            step = self.migrations.get(k)
            if step is None:
                have = sorted(self.migrations)
                raise StateMigrationError(
                    f"{where} is of state version {version} and the store's is {running}, "
                    f"but state_migrations has no migration from {k} to {k + 1} (it has "
                    f"{have or 'none'}): add state_migrations[{k}] (a StateMigration, with "
                    "an items hook if item values change); nothing stored was changed",
                    step=(k, k + 1), missing=k, **ctx)
            if step.items is None:
                continue
            hook = (f"the items migration from state version {k} to {k + 1} "
                    f"(state_migrations[{k}].items) of {where} (stored version {version}, "
                    f"running {running})")
            try:
                out = step.items(namespace, key, value)
            except Exception as exc:
                raise StateMigrationError(
                    f"{hook} raised {type(exc).__name__}: {exc}; nothing stored was changed",
                    step=(k, k + 1), **ctx) from exc
            if not isinstance(out, dict):
                raise StateMigrationError(
                    f"{hook} returned {type(out).__name__}, not a dict; nothing stored was "
                    "changed", step=(k, k + 1), **ctx)
            value = out
        return value


def store_item_versions(cfg: Any, saver: Any, state_version: int | None,
                        state_migrations: Mapping[int, Any] | None,
                        unversioned: int | None, newer: str | None,
                        as_stored: bool = False) -> ItemVersions:
    """A ``DurableStore``'s ``ItemVersions``: each option given (not None), else the
    saver's (``saver.state_versions``, when the store is made from a saver: one registry
    for checkpoints and items), else the runtime's configuration ``cfg``
    (``DurableConfig.state_version``, ``unversioned_state_version``, ``newer_state``).
    ``as_stored``: ``ItemVersions.as_stored``. Raises ``ConfigurationError`` for a bad
    one."""
    held = getattr(saver, "state_versions", None) if saver is not None else None
    migrations: Mapping[int, StateMigration]
    if state_migrations is not None:
        migrations = as_migrations(state_migrations)
    else:
        migrations = dict(held.migrations) if held is not None else {}
    if state_version is None:
        state_version = cfg.state_version if held is None else held.current
    if unversioned is None:
        unversioned = cfg.unversioned_state_version if held is None else held.unversioned
    if newer is None:
        newer = cfg.newer_state if held is None else held.newer
    return ItemVersions(state_version, migrations, unversioned,
                        newer, as_stored)  # type: ignore[arg-type]


__all__ = ["ItemVersions", "check_version", "store_item_versions"]
