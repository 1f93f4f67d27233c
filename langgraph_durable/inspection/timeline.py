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
from collections.abc import Iterable, Mapping
from typing import Any

from ..core.thread_summary import (
    BRANCH,
    ERROR_CHANNEL,
    PUSH,
    RUNNING_WINDOW_S,
    START,
    WAITING_SOURCES,
    last_nodes,
    next_nodes,
    parse_ts,
    state_of,
    status_of,
)
from ..core.thread_summary import values_of as _values
from . import render

__all__ = ["BRANCH", "ERROR_CHANNEL", "PUSH", "RUNNING_WINDOW_S", "START", "WAITING_SOURCES",
           "last_nodes", "next_nodes", "parse_ts", "status", "timeline"]


def status(tup: Any, now: datetime.datetime | None = None,
           running_window_s: float = RUNNING_WINDOW_S) -> dict[str, Any]:
    """A thread's status from its latest checkpoint tuple: ``{"status", "detail",
    "next"}`` where status is ``"error"`` (a task's error write pending; detail: the
    error), ``"interrupted"`` (an interrupt pending; detail: its value as JSON data),
    ``"done"`` (no node to run), ``"ready"`` (nodes to run from a checkpoint no run made:
    a fork or an ``update_state``; it waits for an ``invoke``), ``"running"`` (nodes to
    run and the checkpoint younger than ``running_window_s`` seconds) or ``"stalled"``
    (nodes to run, older): the rules of ``core.thread_summary`` (``state_of``,
    ``status_of``), which the thread summary keeps too."""
    writes = tup.pending_writes or []
    nxt = next_nodes(tup.checkpoint)
    errors = _values(writes, ERROR_CHANNEL)
    interrupts = _values(writes, render.INTERRUPT_CHANNEL)
    state = state_of(len(errors), len(interrupts), nxt, (tup.metadata or {}).get("source"))
    detail: Any = None
    if errors:
        detail = render.preview(errors[-1], 300)
    elif interrupts:
        value = [render.jsonable(getattr(i, "value", i)) for i in interrupts]
        detail = value[0] if len(value) == 1 else value
    return {"status": status_of(state, parse_ts(tup.checkpoint.get("ts")), now,
                                running_window_s),
            "detail": detail, "next": nxt}


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
