"""The run view: per super-step, which node(s) ran, how long the step took, what they
wrote, and which node failed with which error, read from checkpoints and their pending
writes alone (no graph needed), a page at a time.

Which node a task was is read from its pending writes' task path (LangGraph's
``task_path_str``): ``~__pregel_pull, NODE`` names it. A task started by a ``Send``
(``~__pregel_push, IDX, ...``) names only the index of the ``Send``; its node is found
by recomputing LangGraph's task id (``_xxhash_str``, ``_uuid5_str`` of
``langgraph.pregel._algo``: checkpoint id, namespace, step, node, ``__pregel_push``,
index) for each node the thread's checkpoints name (``versions_seen``, ``branch:to:*``)
and keeping the one that equals the write's task id; when none does (a node no
checkpoint names yet), the checkpoint's ``__pregel_tasks`` value (the ``Send`` list) is
decoded, for that checkpoint only. A push task that stays unresolved shows as ``Send``.

The step's duration is ``ts`` of the checkpoint minus ``ts`` of its parent: the wall
time from the parent being saved to this checkpoint being saved, which is the nodes'
run time plus the saver's writes of their results (for an input checkpoint, the time
the thread waited for that input). A node that failed has no checkpoint of its own: its
error (a pending write on ``__error__``) is shown on the checkpoint it ran from.
"""

from __future__ import annotations

import binascii
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from langgraph.checkpoint.base import CheckpointTuple

from ..core.records import load_value
from ..plans import read
from . import render, timeline
from .lookup import LookupFailedError

NULL_TASK_ID = "00000000-0000-0000-0000-000000000000"
"""The task id of writes no task made (what a ``Command`` given as input carries: its
``resume`` value, ``update``, ``goto``): LangGraph's, private since LangGraph 1.0."""

PAGE = 50
"""Checkpoints per page of the run view (the dashboard's timeline, ``history``)."""

PULL = "~__pregel_pull, "
PUSH = "~__pregel_push, "
TASKS = "__pregel_tasks"
ERROR = "__error__"
DECODED = frozenset({render.INTERRUPT_CHANNEL, ERROR})
"""Pending-write channels whose values are decoded (interrupts, errors)."""

INTERNAL_PREFIXES = ("branch:to:", "__pregel_", "join:", "start:", "branch:")
INTERNAL_NAMES = frozenset({"__start__", "__end__", "__input__", "__resume__",
                            "__no_writes__", "__return__", "__copy__"})


def duration_text(seconds: float | None) -> str:
    """A step's duration for people: ``"-"`` (unknown), ``"4.2 ms"`` under a second,
    ``"3.25 s"`` from one second."""
    if seconds is None:
        return "-"
    return f"{seconds * 1000:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"


def is_internal(channel: str) -> bool:
    """True for LangGraph's bookkeeping channels (``branch:to:*``, ``__pregel_*``,
    ``__start__``, ``__resume__``...): hidden from the run view unless asked. Errors
    and interrupts are not: they are shown on their own."""
    return channel.startswith(INTERNAL_PREFIXES) or channel in INTERNAL_NAMES


@dataclass
class Task:
    """One task that ran from a checkpoint: ``task_id``, ``node`` (``"Send"`` when a
    push task could not be resolved), ``kind`` (``pull``, ``push``, ``other``),
    ``channels`` written (in order, with repeats), ``error``/``interrupt`` previews."""

    task_id: str
    node: str
    kind: str
    channels: list[str] = field(default_factory=list)
    error: str | None = None
    interrupt: str | None = None


def _task_id_func(checkpoint: Mapping[str, Any]) -> Any:
    try:
        from langgraph.pregel._algo import _uuid5_str, _xxhash_str
    except ImportError:  # a LangGraph without them: push tasks stay "Send"
        return None
    return _xxhash_str if int(checkpoint.get("v", 1)) > 1 else _uuid5_str


def push_node(task_id: str, index: int, checkpoint: Mapping[str, Any], ns: str, step: int,
              candidates: set[str]) -> str | None:
    """The node of push task ``task_id`` (the ``index``-th ``Send`` of the checkpoint
    ``checkpoint`` of namespace ``ns`` whose tasks run at ``step``) among ``candidates``,
    by LangGraph's task id; None when no candidate gives that id."""
    func = _task_id_func(checkpoint)
    if func is None:
        return None
    raw = binascii.unhexlify(str(checkpoint["id"]).replace("-", ""))
    for node in sorted(candidates):
        task_ns = f"{ns}|{node}" if ns else node
        if func(raw, task_ns, str(step), node, "__pregel_push", str(index)) == task_id:
            return node
    return None


def node_names(checkpoint: Mapping[str, Any]) -> set[str]:
    """The node names a checkpoint knows: ``versions_seen`` keys and ``branch:to:*``."""
    names = {n for n in (checkpoint.get("versions_seen") or {}) if n != "__input__"}
    names |= {c[len(timeline.BRANCH):] for c in checkpoint.get("channel_versions") or {}
              if c.startswith(timeline.BRANCH)}
    return names


@dataclass
class PageRows:
    """One page read by ``read_page``: ``tuples`` (newest first, values not decoded;
    pending writes carry values on the interrupt and error channels only), ``paths``
    (checkpoint id -> ``[(task_id, channel, task_path)]``), ``cursor`` (the id to pass as
    ``before`` for the next, older page; None: no more)."""

    tuples: list[CheckpointTuple]
    paths: dict[str, list[tuple[str, str, str]]]
    cursor: str | None


def read_page(saver: Any, thread: str, ns: str = "", *, before: str | None = None,
              count: int = PAGE + 1, filter: Mapping[str, Any] | None = None) -> PageRows:
    """Up to ``count`` checkpoints of ``thread``/``ns`` older than ``before`` (None: from
    the newest), newest first, as ``lookup.outline`` reads them (no channel value
    decoded) but keeping each pending write's task path. ``filter`` narrows MongoDB's
    part of the read by metadata (the caller checks each row: Redis's part is not
    narrowed)."""
    serde = saver.serde
    raw = saver.run(read.page_plan(saver.context, thread, ns, before=before, count=count,
                                   filter=filter))
    tuples: list[CheckpointTuple] = []
    paths: dict[str, list[tuple[str, str, str]]] = {}
    for rec, writes in raw.rows:
        checkpoint = serde.loads_typed(rec.checkpoint)
        checkpoint["channel_values"] = {}
        ordered = sorted(writes, key=lambda w: w.sort_key())
        pending = [(w.task_id, w.channel, load_value(
            serde, w.value, raw.items, f"write {w.channel!r} of checkpoint "
            f"{rec.checkpoint_id!r} (thread {thread!r})") if w.channel in DECODED else None)
            for w in ordered]
        paths[rec.checkpoint_id] = [(w.task_id, w.channel, w.task_path) for w in ordered]
        parent = ({"configurable": {"thread_id": thread, "checkpoint_ns": rec.ns,
                                    "checkpoint_id": rec.parent_id}}
                  if rec.parent_id else None)
        tuples.append(CheckpointTuple(
            {"configurable": {"thread_id": thread, "checkpoint_ns": rec.ns,
                              "checkpoint_id": rec.checkpoint_id}},
            checkpoint, serde.loads_typed(rec.metadata), parent, pending))  # type: ignore[arg-type]
    return PageRows(tuples, paths, raw.cursor)


def just_after(checkpoint_id: str) -> str:
    """A ``before`` bound that keeps ``checkpoint_id`` itself (and everything older): the
    smallest string of its length above it (its last character's successor; a longer
    bound, ``id + "~"``, was not honoured by the MongoDB-wire server SecantusDB)."""
    return checkpoint_id[:-1] + chr(ord(checkpoint_id[-1]) + 1)


def find_step(saver: Any, thread: str, ns: str, step: int) -> str | None:
    """The newest checkpoint id of ``thread``/``ns`` at ``step`` (branches share step
    numbers: the newest wins), or None. Pages down from the newest, values not decoded;
    MongoDB's part of each page is narrowed to that step by its metadata index."""
    before: str | None = None
    while True:
        page = read_page(saver, thread, ns, before=before, count=200,
                         filter={"step": step})
        for tup in page.tuples:
            if tup.metadata.get("step") == step:
                return str(tup.config["configurable"]["checkpoint_id"])
        if page.cursor is None:
            return None
        before = page.cursor


def tasks_of(tup: CheckpointTuple, paths: list[tuple[str, str, str]],
             candidates: set[str], sends: list[Any] | None = None) -> list[Task]:
    """The tasks that ran from checkpoint ``tup`` (its pending writes grouped by task, in
    write order), each named (module docs); ``sends``: the checkpoint's decoded
    ``__pregel_tasks`` value when known (resolves a push task no candidate explains)."""
    cp = tup.checkpoint
    ns = tup.config["configurable"]["checkpoint_ns"]
    step = int((tup.metadata or {}).get("step", -1)) + 1
    values = {(t, ch, i): v for i, (t, ch, v) in enumerate(tup.pending_writes or [])}
    tasks: dict[str, Task] = {}
    for i, (task_id, channel, path) in enumerate(paths):
        task = tasks.get(task_id)
        if task is None:
            task = tasks[task_id] = _task(task_id, path, cp, ns, step, candidates, sends)
        value = values.get((task_id, channel, i))
        if channel == ERROR:  # LangGraph stores the error's repr: shown as it is
            task.error = (value if len(value) <= 300 else value[:299] + "\u2026") \
                if isinstance(value, str) else render.preview(value, 300)
        elif channel == render.INTERRUPT_CHANNEL:
            task.interrupt = render.preview(
                [getattr(v, "value", v) for v in value] if isinstance(value, (list, tuple))
                else getattr(value, "value", value), 160)
        else:
            task.channels.append(channel)
    return list(tasks.values())


def _task(task_id: str, path: str, cp: Mapping[str, Any], ns: str, step: int,
          candidates: set[str], sends: list[Any] | None) -> Task:
    if path.startswith(PULL):
        return Task(task_id, path[len(PULL):].split(", ")[0], "pull")
    if path.startswith(PUSH):
        parts = path[len(PUSH):].split(", ")
        index = int(parts[0]) if parts[0].isdigit() else -1
        node = push_node(task_id, index, cp, ns, step, candidates) if index >= 0 else None
        if node is None and sends is not None and 0 <= index < len(sends):
            node = getattr(sends[index], "node", None)
        return Task(task_id, node or "Send", "push")
    if task_id == NULL_TASK_ID:  # a Command given as input (resume, update, goto)
        return Task(task_id, "(input)", "other")
    return Task(task_id, path or task_id[:8], "other")


def decoded_sends(saver: Any, tup: CheckpointTuple) -> list[Any] | None:
    """The ``Send`` list of checkpoint ``tup`` (its ``__pregel_tasks`` value), decoding
    that checkpoint's values; None when it has none."""
    if TASKS not in (tup.checkpoint.get("updated_channels") or [TASKS]):
        return None
    full = saver.get_tuple(tup.config)
    sends = (full.checkpoint.get("channel_values") or {}).get(TASKS) if full else None
    return list(sends) if isinstance(sends, (list, tuple)) else None


def _names(tasks: list[Task]) -> list[str]:
    return list(dict.fromkeys(t.node for t in tasks))


def _wrote(tasks: list[Task], all_channels: bool) -> list[dict[str, Any]]:
    """Per node, the channels its tasks wrote: ``{"node", "channels": [{"channel",
    "count", "internal"}]}`` (internal channels left out unless ``all_channels``)."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for t in tasks:
        per = out.setdefault(t.node, {})
        for ch in t.channels:
            if all_channels or not is_internal(ch):
                row = per.setdefault(ch, {"channel": ch, "count": 0,
                                          "internal": is_internal(ch)})
                row["count"] += 1
    return [{"node": n, "channels": list(chs.values())} for n, chs in out.items()]


def run_view(saver: Any, thread: str, ns: str = "", *, before: str | None = None,
             step: int | None = None, all_channels: bool = False,
             chosen: CheckpointTuple | None = None, page_size: int = PAGE
             ) -> dict[str, Any]:
    """One page of the run view of ``thread``/``ns``, newest first: ``page_size`` rows
    older than ``before`` (None: from the newest), or the page starting at the newest
    checkpoint of ``step`` (jump to step). Each row is a ``timeline.timeline`` row (lane,
    branch, ...) plus ``made_by`` (the node(s) whose step made the checkpoint, or its
    source: ``input``, ``fork``, ``update``), ``wrote`` (their writes per node, see
    ``_wrote``), ``next`` (what it triggers, each ``Send`` resolved to its node),
    ``failed`` (``[{"node", "error"}]``: tasks run from it that wrote an error),
    ``interrupted`` (``[{"node", "value"}]``), ``duration_s`` (module docs).
    ``chosen``: a checkpoint already decoded (its ``Send`` list resolves a push task
    nothing else does). Returns ``{"rows", "next_before" (older page; None: last page),
    "first" (this page starts at the newest checkpoint), "step" (the step jumped to;
    None), "all_channels"}``. Raises ``LookupFailedError`` when ``step`` names no
    checkpoint."""

    if step is not None:
        found = find_step(saver, thread, ns, step)
        if found is None:
            raise LookupFailedError(f"thread {thread!r} (ns {ns!r}) has no checkpoint at "
                                    f"step {step}")
        before = just_after(found)
    page = read_page(saver, thread, ns, before=before, count=page_size + 1)
    shown = page.tuples[:page_size]
    by_id = {t.config["configurable"]["checkpoint_id"]: t for t in page.tuples}
    candidates: set[str] = set()
    for t in page.tuples:
        candidates |= node_names(t.checkpoint)
        candidates |= {p[len(PULL):].split(", ")[0] for _t, _c, p in
                       page.paths[t.config["configurable"]["checkpoint_id"]]
                       if p.startswith(PULL)}
    chosen_id = chosen.config["configurable"]["checkpoint_id"] if chosen else None
    tasks: dict[str, list[Task]] = {}
    for cid, t in by_id.items():
        sends = None
        if cid == chosen_id and chosen is not None:
            raw = (chosen.checkpoint.get("channel_values") or {}).get(TASKS)
            sends = list(raw) if isinstance(raw, (list, tuple)) else None
        found_tasks = tasks_of(t, page.paths[cid], candidates, sends)
        if sends is None and any(x.node == "Send" for x in found_tasks):
            found_tasks = tasks_of(t, page.paths[cid], candidates, decoded_sends(saver, t))
        tasks[cid] = found_tasks
    rows = timeline.timeline(shown)
    rows.reverse()  # newest first
    for row in rows:
        t = by_id[row["checkpoint_id"]]
        parent = row["parent"]
        made = [x for x in tasks.get(parent, []) if x.error is None] if parent else []
        source = (t.metadata or {}).get("source")
        if made:
            row["made_by"] = _names(made)
        elif source == "loop":
            row["made_by"] = timeline.last_nodes(t.checkpoint) or ["-"]
        else:
            row["made_by"] = [str(source or "-")]
        row["wrote"] = _wrote(made, all_channels)
        own = tasks[row["checkpoint_id"]]
        pushed = [x.node for x in own if x.kind == "push"]
        nxt = [n for n in timeline.next_nodes(t.checkpoint) if n != "Send"]
        if "Send" in timeline.next_nodes(t.checkpoint):
            nxt += list(dict.fromkeys(pushed)) or ["Send"]
        row["next"] = list(dict.fromkeys(nxt))
        row["failed"] = [{"node": x.node, "error": x.error} for x in own if x.error]
        row["interrupted"] = [{"node": x.node, "value": x.interrupt}
                              for x in own if x.interrupt]
        when = timeline.parse_ts(t.checkpoint.get("ts"))
        up = by_id.get(parent) if parent else None
        before_ts = timeline.parse_ts(up.checkpoint.get("ts")) if up else None
        row["duration_s"] = (when - before_ts).total_seconds() if when and before_ts else None
    more = len(page.tuples) > page_size
    return {"rows": rows, "next_before": shown[-1].config["configurable"]["checkpoint_id"]
            if more and shown else None, "first": before is None, "step": step,
            "all_channels": all_channels}
