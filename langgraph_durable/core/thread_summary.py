"""A thread's status facts, read from its latest root checkpoint alone (no graph, no I/O):
the rules the dashboard's status uses (``inspection/timeline.py`` calls them) and the
facts the thread summary keeps (``durable/summary_docs.py``, kept by the flusher).

Which nodes a checkpoint triggers (LangGraph's ``StateSnapshot.next``) is read from the
channels the step that made it updated (``checkpoint["updated_channels"]``): LangGraph
triggers node ``X`` through its channel ``branch:to:X`` (``__start__`` for an input
checkpoint, ``__pregel_tasks`` for ``Send``). Which node ran last is the one whose
``versions_seen`` holds the highest channel version.

A status is ``error``, ``interrupted``, ``done``, ``ready``, ``running`` or ``stalled``;
the last two differ only by the age of the checkpoint, so what is stored is the *state*
(``ACTIVE`` for both) and the status is decided when read (``status_of``).
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

ERROR_CHANNEL = "__error__"
"""LangGraph's channel of a task's error write."""

INTERRUPT_CHANNEL = "__interrupt__"
"""LangGraph's channel of interrupt writes."""

BRANCH = "branch:to:"
START = "__start__"
PUSH = "__pregel_tasks"

RUNNING_WINDOW_S = 120.0
"""How recent (seconds) a checkpoint with nodes still to run must be for its thread to be
``running``; an older one is ``stalled`` (its process stopped mid-run or waits a long
time on one node)."""

WAITING_SOURCES = frozenset({"fork", "update"})
"""Checkpoint sources no run is working from (``lookup.fork``, ``update_state``): their
threads are ``ready`` for an ``invoke``, not ``running``."""

ACTIVE = "active"
"""The stored state of a thread with nodes still to run from a checkpoint a run made:
``running`` or ``stalled`` by its age (``status_of``)."""

STATUSES = ("running", "stalled", "interrupted", "error", "done", "ready")
"""Every status a thread with a root checkpoint can have."""

ATTENTION = ("interrupted", "error", "stalled")
"""The statuses a person has to look at (the dashboard's "needs attention" view)."""


def next_nodes(checkpoint: Mapping[str, Any]) -> list[str]:
    """The nodes this checkpoint triggers (LangGraph's ``next``), in name order; ``"Send"``
    stands for pushed tasks. Empty: the run ended at this checkpoint."""
    updated = checkpoint.get("updated_channels")
    if updated is None:  # written by a LangGraph without updated_channels
        updated = [c for c, v in checkpoint.get("channel_values", {}).items() if v is not None]
    out = {c[len(BRANCH):] for c in updated if c.startswith(BRANCH)}
    if START in updated:
        out.add(START)
    if PUSH in updated:
        out.add("Send")
    return sorted(out)


def last_nodes(checkpoint: Mapping[str, Any]) -> list[str]:
    """The node(s) that ran last before this checkpoint (those whose ``versions_seen``
    holds the highest version; several for parallel nodes), ``[]`` for none."""
    best: Any = None
    names: list[str] = []
    for node, seen in (checkpoint.get("versions_seen") or {}).items():
        if not seen or node == "__input__":
            continue
        top = max(seen.values(), key=_version_key)
        if best is None or _version_key(top) > _version_key(best):
            best, names = top, [node]
        elif _version_key(top) == _version_key(best):
            names.append(node)
    return sorted(names)


def _version_key(v: Any) -> tuple[float, str]:
    if isinstance(v, (int, float)):
        return (float(v), "")
    head = str(v).split(".")[0]
    return (float(head) if head.isdigit() else 0.0, str(v))


def parse_ts(ts: str | None) -> datetime.datetime | None:
    """A checkpoint's ``ts`` as an aware UTC ``datetime`` (None when absent or unreadable)."""
    if not ts:
        return None
    try:
        when = datetime.datetime.fromisoformat(ts)
    except (TypeError, ValueError):
        return None
    return when if when.tzinfo else when.replace(tzinfo=datetime.timezone.utc)


def values_of(writes: Iterable[tuple[Any, str, Any]], channel: str) -> list[Any]:
    """The values of pending writes ``(task_id, channel, value)`` on ``channel``, a list
    value (several interrupts of one task) counted item by item."""
    out: list[Any] = []
    for _task, ch, value in writes:
        if ch == channel:
            out += list(value) if isinstance(value, (list, tuple)) else [value]
    return out


def state_of(errors: int, interrupts: int, nxt: Sequence[str], source: Any) -> str:
    """The time-independent part of a thread's status: ``"error"`` (a task's error write
    pending), ``"interrupted"`` (an interrupt pending), ``"done"`` (no node to run),
    ``"ready"`` (nodes to run from a checkpoint no run made: a fork or an
    ``update_state``), else ``ACTIVE`` (``status_of`` tells running from stalled)."""
    if errors:
        return "error"
    if interrupts:
        return "interrupted"
    if not nxt:
        return "done"
    if source in WAITING_SOURCES:
        return "ready"
    return ACTIVE


def status_of(state: str, when: datetime.datetime | None,
              now: datetime.datetime | None = None,
              running_window_s: float = RUNNING_WINDOW_S) -> str:
    """The status of a thread in ``state`` (``state_of``) whose latest checkpoint was made
    at ``when`` (aware UTC; None unknown): ``ACTIVE`` becomes ``"running"`` when ``when``
    is at most ``running_window_s`` seconds before ``now`` (default: the current time),
    else ``"stalled"``; any other state is the status."""
    if state != ACTIVE:
        return state
    now = now or datetime.datetime.now(datetime.timezone.utc)
    recent = when is not None and (now - when).total_seconds() <= running_window_s
    return "running" if recent else "stalled"


def message_text(message: Any) -> str:
    """A LangChain message's text (anything with ``type`` and ``content``): its string
    content, or the ``text`` parts of a content list joined by spaces; ``""`` else."""
    content = getattr(message, "content", None)
    if isinstance(content, str):
        return content
    parts = [p["text"] for p in content or [] if isinstance(p, Mapping)
             and isinstance(p.get("text"), str)] if isinstance(content, list) else []
    return " ".join(parts)


def is_message(value: Any) -> bool:
    """True for a LangChain message (anything with a string ``type`` and ``content``)."""
    return hasattr(value, "content") and isinstance(getattr(value, "type", None), str)


def short(text: str, width: int) -> str:
    """``text`` on one line, cut to ``width`` characters (an ellipsis marks the cut)."""
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "\u2026"
