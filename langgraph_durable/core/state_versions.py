"""Application state versions and their migrations (issue 34), sans-I/O.

The *application's* state changes shape between deploys (today ``steps``, tomorrow
``plan`` and ``executed_steps``). A saver given ``state_version=N`` stamps N into the
metadata of every checkpoint it stores (``STATE_VERSION_KEY``), and, given
``state_migrations={k: fn}``, turns a checkpoint of an older version into version N when
it is read (``migrate_tuple``): ``fn`` takes the channel values of version k (a dict of
channel name to value, LangGraph's own channels such as ``branch:to:<node>`` included:
keep the keys you do not know) and returns those of version k + 1. Nothing stored is
changed by a read; the next ``put`` of the thread stores the migrated values
(``marked_versions``). Stored checkpoints of a *newer* version than the running code
raise ``StateVersionError`` on the resume path.

Where it comes from: the checkpoint's metadata is the one per-checkpoint field LangGraph's
``CheckpointTuple``/``StateSnapshot`` shows and ``list(filter=...)`` queries in both tiers
(the design agreed for issue 34; ``docs/operations.md`` has the rolling deploy).

What a migration sees and must do: ``fn`` gets a shallow copy of the checkpoint's
``channel_values`` and returns a new dict (it must not change the values it was given in
place: they may be objects this process keeps, e.g. decoded list items). It runs on every
read of an unmigrated checkpoint (``get_state``, each snapshot of ``get_state_history``),
so it should be fast and deterministic: the same stored checkpoint must migrate to the
same values (another process migrates it again and may store the same field again).

``DeltaChannel`` limitation: a ``DeltaChannel`` whose value is not stored in the
checkpoint (LangGraph rebuilds it from ``get_delta_channel_history``: a seed and the writes
since) is not in the values a ``values`` hook gets, and the delta walk reads one channel at
a time, never the whole state such a hook is written for. So only the ``writes`` hook is
applied to that history's writes; its seeds are returned as stored. Keep a
``DeltaChannel``'s name and value shape across versions (reshape other channels), or
reshape its writes with a ``writes`` hook.

Everything here is pure: no I/O, no clock; the saver (``saver.py``) calls it on the tuples
its plans return, the same code for the sync and the async API.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from langgraph.checkpoint.base import CheckpointTuple

from ..errors import ConfigurationError, StateMigrationError, StateVersionError

STATE_VERSION_KEY = "lgd_state_version"
"""The metadata key of a checkpoint's application state version (an int >= 1)."""

MARK = ".-m"
"""What a channel version made by a migration holds after its integer part:
``f"{n:032}.-m{target}.{checkpoint_id}"`` (``checkpoint_id``: the stored checkpoint the
value was migrated from). ``'-'`` sorts below every digit, so the marked version sorts
below the stored version with the same integer ``n`` (a node that saw the stored value is
not triggered again) and above every version of a lower integer (as the stored one did);
``get_next_version`` reads only the integer part. The checkpoint id keeps the migrated
values of two checkpoints apart (a fork from an older checkpoint, a channel new in the
migration, which every checkpoint of a thread gets with ``n`` = 1): a value is stored
under its thread, namespace, channel and version, so without it two different migrated
values would share one stored field."""

Values = dict[str, Any]
"""Channel values: channel name -> value."""
PendingWrite = tuple[str, str, Any]
"""A pending write as LangGraph shows it: ``(task_id, channel, value)``."""
ValuesFn = Callable[[Values], Values]
WritesFn = Callable[[list[PendingWrite]], list[PendingWrite]]
ItemsFn = Callable[[tuple[str, ...], str, dict[str, Any]], dict[str, Any]]
"""A store item's migration: ``(namespace, key, value of version k) -> value of k + 1``."""

NewerState = Literal["raise", "read"]


@dataclass(frozen=True)
class StateMigration:
    """One step of the chain, from version k to k + 1 (the key k of ``state_migrations``).

    Attributes:
        values: turns the channel values of version k (a shallow copy of the checkpoint's
            ``channel_values``: return a new dict, do not change the values in place)
            into those of version k + 1. Channels left out are dropped; channels added
            are new. None (a step that changes only store items): the channel values
            are kept as they are for this step.
        writes: optional; turns the checkpoint's pending writes (``[(task_id, channel,
            value), ...]``, e.g. a finished task's update or a pending interrupt's resume
            value, in LangGraph's order) of version k into version k + 1's. Without it
            pending writes are returned as stored.
        items: optional; turns a ``DurableStore`` item's value of version k into
            version k + 1's: ``items(namespace, key, value) -> value`` (``value`` is the
            decoded dict: return a new dict, do not change it in place). Without it the
            store's item values are kept as they are for this step
            (``core/item_versions.py``). The store uses only this hook; the saver never
            does.
    """

    values: ValuesFn | None = None
    writes: WritesFn | None = None
    items: ItemsFn | None = None


def as_migrations(given: Mapping[int, ValuesFn | StateMigration] | None
                  ) -> dict[int, StateMigration]:
    """The ``state_migrations`` option checked: keys ints >= 1, values callables or
    ``StateMigration``s (a plain callable is its ``values`` hook: checkpoints only; the
    store's items are migrated by ``StateMigration.items`` hooks alone). Raises
    ``ConfigurationError`` naming the bad entry."""
    out: dict[int, StateMigration] = {}
    if given is None:
        return out
    if not isinstance(given, Mapping):
        raise ConfigurationError(
            f"state_migrations must be a mapping of version -> function (e.g. {{1: "
            f"migrate_v1_to_v2}}), got {type(given).__name__}")
    for k, fn in given.items():
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ConfigurationError(
                f"state_migrations key {k!r} is not a state version (an int >= 1: the "
                "version the migration starts from)")
        if isinstance(fn, StateMigration):
            if any(h is not None and not callable(h)
                   for h in (fn.values, fn.writes, fn.items)):
                raise ConfigurationError(
                    f"state_migrations[{k}]: StateMigration.values, .writes and .items "
                    "must be functions or None")
            out[k] = fn
        elif callable(fn):
            out[k] = StateMigration(values=fn)
        else:
            raise ConfigurationError(
                f"state_migrations[{k}] must be a function of the channel values of "
                f"version {k} or a StateMigration, got {type(fn).__name__}")
    return out


def marked(version: object, target: int, checkpoint_id: str) -> str:
    """The marked channel version of a channel of checkpoint ``checkpoint_id`` migrated
    to ``target``: the integer part of ``version`` (``"<int:032>.<frac>"``, an int or a
    float; 1 for ``None``, a channel new in the migration), ``MARK``, ``target``, ``.``
    and ``checkpoint_id``."""
    if version is None:
        n = 1
    elif isinstance(version, (int, float)):
        n = int(version)
    else:
        n = int(str(version).split(".")[0])
    return f"{n:032}{MARK}{target:d}.{checkpoint_id}"


def is_marked(version: object) -> bool:
    """True for a channel version made by a migration (``marked``)."""
    return isinstance(version, str) and MARK in version


def marked_versions(channel_versions: Mapping[str, Any]) -> dict[str, str]:
    """The channels of a checkpoint being stored whose version is a marked one: their
    migrated value is stored by that put too (the stored records then refer only to
    values that are stored)."""
    return {ch: v for ch, v in channel_versions.items() if is_marked(v)}


class WrittenMarks:
    """The marked channel values this process already stored, ``(thread_id, ns, channel,
    version)``, so that later puts of a thread do not store the same value again: a
    bounded LRU of ``size`` entries (another process stores it at most once more: the same
    field, written again idempotently). Thread-safe."""

    def __init__(self, size: int = 10_000) -> None:
        self._seen: OrderedDict[tuple[str, str, str, str], None] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def unwritten(self, thread_id: str, ns: str, marks: Mapping[str, str]) -> dict[str, str]:
        """The entries of ``marks`` (channel -> marked version) not yet stored."""
        with self._lock:
            return {ch: v for ch, v in marks.items()
                    if (thread_id, ns, ch, v) not in self._seen}

    def written(self, thread_id: str, ns: str, marks: Mapping[str, str]) -> None:
        """Record ``marks`` as stored (call once the put returned)."""
        with self._lock:
            for ch, v in marks.items():
                key = (thread_id, ns, ch, v)
                self._seen[key] = None
                self._seen.move_to_end(key)
            while len(self._seen) > self._size:
                self._seen.popitem(last=False)


@dataclass(frozen=True)
class StateVersions:
    """A saver's state-version options (``DurableSaver``'s ``state_version``,
    ``state_migrations``, ``unversioned_state_version``, ``newer_state``) and what it does
    with them. ``current`` None: nothing is stamped or checked unless a call's config
    gives ``configurable["state_version"]``."""

    current: int | None = None
    migrations: Mapping[int, StateMigration] = field(default_factory=dict)
    unversioned: int = 1
    newer: NewerState = "raise"
    marks: WrittenMarks = field(default_factory=WrittenMarks, compare=False, repr=False)

    def running(self, config: Mapping[str, Any] | None) -> int | None:
        """The state version of a call: ``config["configurable"]["state_version"]`` (an
        int >= 1, else ``ConfigurationError``) or the saver's ``current``."""
        conf = (config or {}).get("configurable") or {}
        given = conf.get("state_version")
        if given is None:
            return self.current
        if isinstance(given, bool) or not isinstance(given, int) or given < 1:
            raise ConfigurationError(
                f"config['configurable']['state_version'] must be an int >= 1, got {given!r}")
        return given

    def stamp(self, metadata: Mapping[str, Any], running: int | None) -> Any:
        """``metadata`` to store: a copy with ``STATE_VERSION_KEY`` set to ``running``, or
        ``metadata`` itself when no version runs (the caller's dict is never changed)."""
        if running is None:
            return metadata
        return {**metadata, STATE_VERSION_KEY: running}

    def for_put(self, config: Mapping[str, Any], checkpoint: Mapping[str, Any],
                metadata: Mapping[str, Any], new_versions: Mapping[str, Any]
                ) -> tuple[Any, Any, dict[str, str]]:
        """What ``put`` stores with a state version: ``(metadata, new_versions, marks)``,
        the metadata stamped (``stamp``), ``new_versions`` with the channels of a marked
        version this process has not stored yet (``marks``: record them with
        ``marks.written`` once the put returned). Without a state version the arguments
        are returned as given and ``marks`` is empty."""
        running = self.running(config)
        if running is None:
            return metadata, new_versions, {}
        marks = marked_versions(checkpoint["channel_versions"])
        if marks:
            conf = config.get("configurable") or {}
            marks = self.marks.unwritten(str(conf.get("thread_id")),
                                         str(conf.get("checkpoint_ns") or ""), marks)
            if marks:
                new_versions = {**marks, **new_versions}
        return self.stamp(metadata, running), new_versions, marks

    def stored_of(self, tup: CheckpointTuple, running: int) -> int:
        """The state version of a stored checkpoint: its metadata's ``STATE_VERSION_KEY``,
        ``unversioned`` without one. Raises ``StateVersionError`` for a value that is not
        an int >= 1."""
        v = (tup.metadata or {}).get(STATE_VERSION_KEY)
        if v is None:
            return self.unversioned
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise _version_error(
                tup, v, running, f"its metadata {STATE_VERSION_KEY!r} holds {v!r}, not a "
                "state version (an int >= 1): repair the record or delete the thread")
        return v

    def chain(self, tup: CheckpointTuple, stored: int, running: int
              ) -> list[tuple[int, StateMigration]]:
        """The migrations from ``stored`` to ``running`` in order; raises
        ``StateMigrationError`` naming the first missing step."""
        out = []
        for k in range(stored, running):
            step = self.migrations.get(k)
            if step is None:
                thread_id, ns, cid = _where(tup)
                have = sorted(self.migrations)
                raise StateMigrationError(
                    f"checkpoint {cid!r} of thread {thread_id!r} (ns {ns!r}) is of state "
                    f"version {stored} and the running code's is {running}, but "
                    f"state_migrations has no migration from {k} to {k + 1} (it has "
                    f"{have or 'none'}): add state_migrations[{k}]; nothing stored was "
                    "changed", thread_id=thread_id, checkpoint_ns=ns, checkpoint_id=cid,
                    stored=stored, running=running, step=(k, k + 1), missing=k)
            out.append((k, step))
        return out

    def check(self, tup: CheckpointTuple, running: int, *, resume: bool) -> int:
        """The stored version of ``tup`` once checked against ``running``: raises
        ``StateVersionError`` for a newer one on the resume path (``resume``) or with
        ``newer="raise"``."""
        stored = self.stored_of(tup, running)
        if stored > running and (resume or self.newer == "raise"):
            what = ("resumed" if resume else "read")
            raise _version_error(
                tup, stored, running,
                f"it was written by state version {stored}, newer than the running code's "
                f"{running}, and cannot be {what} by it (a rolled-back deploy?): run this "
                f"thread with code of version {stored} or later"
                + ("" if resume else "; to read history anyway pass newer_state='read'"))
        return stored

    def migrate_tuple(self, tup: CheckpointTuple, running: int | None, *,
                      resume: bool) -> CheckpointTuple:
        """``tup`` as the running state version sees it (the same object when nothing is
        to be done): for a stored version below ``running``, the chain applied to a
        shallow copy of its channel values and to its pending writes, every channel of
        the migrated values given its marked version (``marked``), channels the chain
        dropped removed from ``channel_versions``. Its metadata still shows the stored
        version (what is at rest). A newer one: ``check``. Raises
        ``StateMigrationError`` for a gap, a migration that raised (chained from its
        error) or a result of the wrong type."""
        if running is None:
            return tup
        stored = self.check(tup, running, resume=resume)
        if stored >= running:
            return tup
        steps = self.chain(tup, stored, running)
        cp = tup.checkpoint
        values: Values = dict(cp["channel_values"])
        writes: list[PendingWrite] = list(tup.pending_writes or [])
        for k, step in steps:
            if step.values is not None:
                values = _apply(tup, stored, running, k, "values", step.values, values,
                                dict)
            if step.writes is not None:
                writes = _apply(tup, stored, running, k, "writes", step.writes,
                                list(writes), list)
        versions = dict(cp["channel_versions"])
        for ch in set(cp["channel_values"]) - set(values):
            versions.pop(ch, None)
        cid = _where(tup)[2]
        for ch in values:
            versions[ch] = marked(versions.get(ch), running, cid)
        return tup._replace(
            checkpoint={**cp, "channel_values": values, "channel_versions": versions},
            pending_writes=writes if tup.pending_writes is not None else None)

    def migrate_writes(self, tup: CheckpointTuple, running: int | None,
                       writes: Sequence[PendingWrite]) -> list[PendingWrite]:
        """``writes`` (of checkpoints in the chain of ``tup``) through the writes hooks
        from ``tup``'s stored version to ``running`` (the delta-channel history: only the
        writes hooks; see ``DurableSaver.get_delta_channel_history``)."""
        out = list(writes)
        if running is None:
            return out
        stored = self.check(tup, running, resume=False)
        if stored >= running:
            return out
        for k, step in self.chain(tup, stored, running):
            if step.writes is not None:
                out = _apply(tup, stored, running, k, "writes", step.writes, list(out), list)
        return out


def _where(tup: CheckpointTuple) -> tuple[str, str, str]:
    conf = tup.config["configurable"]
    return (str(conf.get("thread_id")), str(conf.get("checkpoint_ns", "")),
            str(conf.get("checkpoint_id")))


def _version_error(tup: CheckpointTuple, stored: object, running: int, why: str
                   ) -> StateVersionError:
    thread_id, ns, cid = _where(tup)
    return StateVersionError(
        f"checkpoint {cid!r} of thread {thread_id!r} (ns {ns!r}): {why}; nothing stored was "
        "changed", thread_id=thread_id, checkpoint_ns=ns, checkpoint_id=cid, stored=stored,
        running=running)


def _apply(tup: CheckpointTuple, stored: int, running: int, k: int, hook: str,
           fn: Callable[[Any], Any], arg: Any, kind: type) -> Any:
    """``fn(arg)``, its error or a result not of ``kind`` as ``StateMigrationError``."""
    thread_id, ns, cid = _where(tup)
    ctx = dict(thread_id=thread_id, checkpoint_ns=ns, checkpoint_id=cid, stored=stored,
               running=running, step=(k, k + 1))
    where = (f"the {hook} migration from state version {k} to {k + 1} "
             f"(state_migrations[{k}]) of checkpoint {cid!r} of thread {thread_id!r} "
             f"(ns {ns!r}; stored version {stored}, running {running})")
    try:
        out = fn(arg)
    except Exception as exc:
        raise StateMigrationError(
            f"{where} raised {type(exc).__name__}: {exc}; nothing stored was changed",
            **ctx) from exc  # type: ignore[arg-type]
    if not isinstance(out, kind):
        raise StateMigrationError(
            f"{where} returned {type(out).__name__}, not a {kind.__name__}; nothing stored "
            "was changed", **ctx)  # type: ignore[arg-type]
    return out
