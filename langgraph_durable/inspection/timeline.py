"""A thread's status and its timeline of super-steps, read from checkpoints alone (no
graph needed). Pure functions of ``CheckpointTuple``s.

Which nodes a checkpoint triggers (LangGraph's ``StateSnapshot.next``) is read from the
channels the step that made it updated (``checkpoint["updated_channels"]``): LangGraph
triggers node ``X`` through its channel ``branch:to:X`` (``__start__`` for an input
checkpoint, ``__pregel_tasks`` for ``Send``). Which node ran last is the one whose
``versions_seen`` holds the highest channel version.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from . import render

ERROR_CHANNEL = "__error__"
"""LangGraph's channel of a task's error write."""

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
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=datetime.timezone.utc)


def _values(writes: Sequence[Any], channel: str) -> list[Any]:
    out: list[Any] = []
    for _task, ch, value in writes:
        if ch == channel:
            out += list(value) if isinstance(value, (list, tuple)) else [value]
    return out


def status(tup: Any, now: datetime.datetime | None = None,
           running_window_s: float = RUNNING_WINDOW_S) -> dict[str, Any]:
    """A thread's status from its latest checkpoint tuple: ``{"status", "detail",
    "next"}`` where status is ``"error"`` (a task's error write pending; detail: the
    error), ``"interrupted"`` (an interrupt pending; detail: its value as JSON data),
    ``"done"`` (no node to run), ``"ready"`` (nodes to run from a checkpoint no run made:
    a fork or an ``update_state``; it waits for an ``invoke``), ``"running"`` (nodes to
    run and the checkpoint younger than ``running_window_s`` seconds) or ``"stalled"``
    (nodes to run, older)."""
    writes = tup.pending_writes or []
    nxt = next_nodes(tup.checkpoint)
    errors = _values(writes, ERROR_CHANNEL)
    if errors:
        return {"status": "error", "detail": render.preview(errors[-1], 300), "next": nxt}
    interrupts = _values(writes, render.INTERRUPT_CHANNEL)
    if interrupts:
        value = [render.jsonable(getattr(i, "value", i)) for i in interrupts]
        return {"status": "interrupted", "detail": value[0] if len(value) == 1 else value,
                "next": nxt}
    if not nxt:
        return {"status": "done", "detail": None, "next": nxt}
    if (tup.metadata or {}).get("source") in WAITING_SOURCES:
        return {"status": "ready", "detail": None, "next": nxt}
    when = parse_ts(tup.checkpoint.get("ts"))
    now = now or datetime.datetime.now(datetime.timezone.utc)
    recent = when is not None and (now - when).total_seconds() <= running_window_s
    return {"status": "running" if recent else "stalled", "detail": None, "next": nxt}


def timeline(tuples: Iterable[Any]) -> list[dict[str, Any]]:
    """The checkpoints of one thread and namespace (any order) as timeline rows, drawn as
    a tree: depth-first from the oldest root, a checkpoint's first child (by id)
    continues its lane, each further child (a branch: time travel, ``update_state`` on
    an old checkpoint) opens a new lane. Each row: ``checkpoint_id``, ``parent``,
    ``step``, ``source``, ``ts``, ``lane``, ``branch`` (it opens a lane), ``ran``
    (nodes triggered from it: ``next``), ``writes`` (channels of its pending writes,
    with counts), ``interrupts``/``errors`` (previews), ``duration_s`` (time from its
    parent's checkpoint to it, None for a root), ``forked_from`` (thread, checkpoint)."""
    items = {t.config["configurable"]["checkpoint_id"]: t for t in tuples}
    children: dict[str | None, list[str]] = {}
    for cid, t in items.items():
        parent = t.parent_config["configurable"]["checkpoint_id"] if t.parent_config else None
        children.setdefault(parent if parent in items else None, []).append(cid)
    for kids in children.values():
        kids.sort()
    rows: list[dict[str, Any]] = []
    roots = children.get(None, [])
    lanes = max(len(roots) - 1, 0)
    stack = [(c, i, i > 0) for i, c in reversed(list(enumerate(roots)))]
    while stack:  # depth first, iteratively: a 10,000-step chain is no recursion
        cid, lane, branch = stack.pop()
        rows.append(_row(items, cid, lane, branch))
        kids = children.get(cid, [])
        pushed = []
        for i, kid in enumerate(kids):
            if i:
                lanes += 1
            pushed.append((kid, lane if i == 0 else lanes, i > 0))
        stack += reversed(pushed)
    return rows


def _row(items: Mapping[str, Any], cid: str, lane: int, branch: bool) -> dict[str, Any]:
    t = items[cid]
    md = t.metadata or {}
    parent = t.parent_config["configurable"]["checkpoint_id"] if t.parent_config else None
    writes = t.pending_writes or []
    counts: dict[str, int] = {}
    for _task, ch, _v in writes:
        counts[ch] = counts.get(ch, 0) + 1
    when = parse_ts(t.checkpoint.get("ts"))
    before = parse_ts(items[parent].checkpoint.get("ts")) if parent and parent in items else None
    forked = md.get("forked_from_thread")
    return {
        "checkpoint_id": cid, "parent": parent, "step": md.get("step"),
        "source": md.get("source"), "ts": t.checkpoint.get("ts"), "lane": lane,
        "branch": branch, "ran": next_nodes(t.checkpoint),
        "writes": sorted(counts.items()),
        "interrupts": [render.preview(getattr(i, "value", i), 120)
                       for i in _values(writes, render.INTERRUPT_CHANNEL)],
        "errors": [render.preview(e, 200) for e in _values(writes, ERROR_CHANNEL)],
        "duration_s": (when - before).total_seconds() if when and before else None,
        "forked_from": (forked, md.get("forked_from_checkpoint")) if forked else None,
    }
