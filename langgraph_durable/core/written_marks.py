"""Which migrated channel values a put may leave out (``StateVersions.for_put``; issue 34).

A checkpoint read in an older state version is migrated in memory: every channel of the
migrated values gets a *marked* version (``state_versions.marked``), and the next put of
the thread stores those values besides LangGraph's ``new_versions``. ``WrittenMarks``
remembers what this process stored, so the puts that follow do not send them again.
Pure bookkeeping, no I/O.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping


class WrittenMarks:
    """Which migrated (marked) channel values a put of this process may leave out, because
    the put's parent checkpoint, one this process stored, already refers to them: a
    bounded LRU of ``size`` checkpoints, ``(thread_id, ns, checkpoint_id)`` -> the marked
    ``(channel, version)`` pairs that checkpoint holds. Thread-safe.

    Keyed by the parent, not by the thread: a thread deleted and recreated with the same
    checkpoint ids (``copy_thread`` from a template again, an export imported over it)
    brings back the *unmigrated* checkpoint, so a put whose parent is that checkpoint
    stores the migrated values again, while the children of a checkpoint this process
    stored (the usual run) do not send them twice. A value left out is still stored: the
    parent refers to it, and ``prune`` and ``delete`` keep the values a kept checkpoint
    refers to; an export of the thread carries them. A put without a parent (no
    ``checkpoint_id`` in its config) falls back to what any put of the thread stored in
    this process. Another process stores a value at most once more (the same field, the
    same value)."""

    def __init__(self, size: int = 10_000) -> None:
        self._held: OrderedDict[tuple[str, str, str], frozenset[tuple[str, str]]] = (
            OrderedDict())
        self._any: OrderedDict[tuple[str, str, str, str], None] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def unwritten(self, thread_id: str, ns: str, marks: Mapping[str, str],
                  parent: str | None = None) -> dict[str, str]:
        """The entries of ``marks`` (channel -> marked version) a put must store: those
        its ``parent`` checkpoint (stored by this process) does not hold; without a
        ``parent``, those no put of the thread in this process stored."""
        with self._lock:
            if parent is None:
                return {ch: v for ch, v in marks.items()
                        if (thread_id, ns, ch, v) not in self._any}
            held = self._held.get((thread_id, ns, parent), frozenset())
            return {ch: v for ch, v in marks.items() if (ch, v) not in held}

    def written(self, thread_id: str, ns: str, marks: Mapping[str, str],
                checkpoint_id: str | None = None,
                held: Mapping[str, str] | None = None) -> None:
        """Record a put that returned: ``marks`` it stored, and ``held`` (default
        ``marks``), every marked version checkpoint ``checkpoint_id`` refers to (stored by
        it or by its parent)."""
        with self._lock:
            for ch, v in {**marks, **(held or {})}.items():
                key = (thread_id, ns, ch, v)
                self._any[key] = None
                self._any.move_to_end(key)
            if checkpoint_id is not None:
                ck = (thread_id, ns, checkpoint_id)
                self._held[ck] = frozenset((held if held is not None else marks).items())
                self._held.move_to_end(ck)
            for lru in (self._any, self._held):
                while len(lru) > self._size:
                    lru.popitem(last=False)
