"""What the dashboard's pages show, as plain data (blocking reads: the app runs them in
a worker thread). No HTML here: the templates escape every value they are given."""

from __future__ import annotations

import datetime
import json
import logging
import shlex
from collections.abc import Mapping
from typing import Any

from ..inspection import effect_view as effects
from ..inspection import lookup, render, timeline
from ..inspection.strict import NotDecoded
from ..inspection.tolerant import Undecodable
from . import runpage

log = logging.getLogger("langgraph_durable.dashboard")

FOLD_CHARS = 600
"""A value whose JSON is longer than this is shown folded (a preview, opened on click)."""

MAX_CHARS = 200_000
"""At most this many characters of one value are sent to the browser."""

FRAME_ROWS = 5
"""First rows of a DataFrame shown."""


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


def age_s(ts: str | None, now: datetime.datetime | None = None) -> float | None:
    """Seconds since a checkpoint's ``ts`` (None when unknown)."""
    when = timeline.parse_ts(ts)
    return None if when is None else max(0.0, ((now or _now()) - when).total_seconds())


def human_age(seconds: float | None) -> str:
    """``75.0`` -> ``"1m 15s"``; None -> ``"-"``."""
    if seconds is None:
        return "-"
    s = int(seconds)
    if s >= 86400:
        return f"{s // 86400}d {s % 86400 // 3600}h"
    if s >= 3600:
        return f"{s // 3600}h {s % 3600 // 60}m"
    if s >= 60:
        return f"{s // 60}m {s % 60}s"
    return f"{s}s"


def thread_detail(saver: Any, thread_id: str, ns: str = "", checkpoint: str | None = None,
                  **run: Any) -> dict[str, Any]:
    """The thread page: one page of its run view (``runpage.timeline_page``: ``run`` are
    ``before``, ``step``, ``all_channels``), the state at ``checkpoint`` (default: the
    latest; ``state_view``), its status, its retention facts (``runpage.retention_view``;
    the storage panel is read apart: ``runpage.size_view``). Raises
    ``LookupFailedError`` when the thread, checkpoint or step is not there."""
    clients = saver.sync_clients
    tup = lookup.get(saver, clients, thread_id, checkpoint, ns)
    page = runpage.timeline_page(saver, thread_id, ns, tup, **run)
    latest = tup if checkpoint is None else lookup.outline(saver, thread_id, ns, limit=1)[0]
    chosen = tup.config["configurable"]["checkpoint_id"]
    return {"thread_id": thread_id, "ns": ns, **page,
            "status": runpage.status_of(latest, page["timeline"]), "checkpoint_id": chosen,
            "state": state_view(tup), "fork_command": fork_command(thread_id, chosen, ns),
            "effects": effects_view(saver, tup),
            "retention": runpage.retention_view(saver, thread_id)}


def effects_view(saver: Any, tup: Any) -> dict[str, Any]:
    """The effect journal of the tasks that ran from the checkpoint of ``tup``
    (``inspection.effect_view.checkpoint_effects``, as ``langgraph-durable show`` lists it):
    ``rows`` (each row's ``view`` is its result or error as a value view; a model call's
    ``model_call`` summary), ``model_calls`` and ``tokens`` (how many rows are journaled
    model calls and their total tokens), ``note`` (MongoDB did not answer, or the journal
    could not be read: the page is shown without it), ``journaled`` (what a model-call
    row means)."""
    c = tup.config["configurable"]
    try:
        rows, note = effects.checkpoint_effects(saver, c["thread_id"], c["checkpoint_ns"],
                                                c["checkpoint_id"])
    except Exception as exc:  # by type only: no stored value in the page or the logs
        log.warning("dashboard: reading the effect journal failed: %s", type(exc).__name__)
        rows, note = [], (f"the effect journal could not be read ({type(exc).__name__}): "
                          "its entries are not shown")
    for row in rows:
        shown = row["error"] if row["state"] == "failed" else row["result"]
        row["view"] = None if row["kind"] == "model_call" else _folded(shown)
    models = [r["model_call"] for r in rows if r["kind"] == "model_call"]
    return {"rows": rows, "note": note, "model_calls": len(models),
            "tokens": sum(m["tokens"]["total"] for m in models if m["tokens"]),
            "journaled": effects.JOURNALED_NOTE}


def fork_command(thread_id: str, checkpoint_id: str, ns: str = "",
                 values: Mapping[str, Any] | None = None, to: str | None = None) -> str:
    """The ``langgraph-durable fork`` command line doing what the time machine does."""
    argv = ["langgraph-durable", "fork", thread_id, "--checkpoint", checkpoint_id,
            "--to", to or f"{thread_id}-fork"]
    if ns:
        argv += ["--ns", ns]
    for channel, value in (values or {}).items():
        argv += ["--set", f"{channel}={json.dumps(value)}"]
    return " ".join(shlex.quote(a) for a in argv)


def state_view(tup: Any) -> dict[str, Any]:
    """One checkpoint for the page: ids, metadata (JSON text), ``state_version`` (None:
    unversioned), each channel's value as a view (``value_view``), pending writes and
    interrupts (previews)."""
    data = lookup.tuple_data(tup)
    values = tup.checkpoint.get("channel_values", {})
    return {
        "checkpoint_id": data["checkpoint_id"], "parent": data["parent_checkpoint_id"],
        "ts": render.utc(data["ts"]), "step": tup.metadata.get("step"),
        "source": tup.metadata.get("source"), "state_version": data["state_version"],
        "metadata": _folded(data["metadata"]),
        "channels": [{"channel": ch, "type": type(v).__name__, "view": value_view(v)}
                     for ch, v in sorted(values.items())],
        "writes": [{"task_id": t, "channel": ch, "view": value_view(v)}
                   for t, ch, v in tup.pending_writes or []],
        "interrupts": [_folded(i) for i in data["interrupts"]],
    }


def _folded(data: Any) -> dict[str, Any]:
    text = json.dumps(data, indent=2, ensure_ascii=False, default=str)
    cut = len(text) > MAX_CHARS
    return {"kind": "json", "text": text[:MAX_CHARS] + ("\n..." if cut else ""),
            "folded": len(text) > FOLD_CHARS, "preview": render.preview(data, 120),
            "chars": len(text)}


def value_view(value: Any) -> dict[str, Any]:
    """How one value is shown: ``messages`` (a chat: ``turns``, each AI tool call paired
    with its tool result), ``frame`` (a DataFrame or array: type, shape, columns, first
    rows), ``undecodable`` (type, size, why), ``not_decoded`` (a type not allowed:
    ``name``, ``reason``, ``text`` the placeholder), else ``json`` (text, folded when long)."""
    if isinstance(value, NotDecoded):
        return {"kind": "not_decoded", "name": value.name, "reason": value.reason,
                "text": repr(value)}
    if isinstance(value, Undecodable):
        return {"kind": "undecodable", "type": value.type, "size": value.size,
                "error": value.error}
    if isinstance(value, list) and value and all(render.is_message(m) for m in value):
        return {"kind": "messages", "turns": chat_turns(value)}
    if render.is_message(value):
        return {"kind": "messages", "turns": chat_turns([value])}
    shape = getattr(value, "shape", None)
    if isinstance(shape, tuple) and not isinstance(value, type):
        return frame_view(value)
    return _folded(render.jsonable(value))


def _content(message: Any) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    parts = []
    for part in content if isinstance(content, list) else [content]:
        if isinstance(part, Mapping) and isinstance(part.get("text"), str):
            parts.append(part["text"])
        else:
            parts.append(json.dumps(render.jsonable(part), ensure_ascii=False))
    return "\n".join(parts)


def chat_turns(messages: list[Any]) -> list[dict[str, Any]]:
    """Messages as chat turns: ``role`` (human, ai, tool, system, ...), ``name``, ``id``,
    ``text`` and, for an AI message, its ``calls`` (name, id, arguments as JSON text,
    and the ``result``: the text and status of the tool message answering it, which is
    then not shown again on its own)."""
    answers = {m.tool_call_id: m for m in messages
               if getattr(m, "type", None) == "tool" and getattr(m, "tool_call_id", None)}
    paired: set[str] = set()
    turns = []
    for m in messages:
        calls = []
        for call in getattr(m, "tool_calls", None) or []:
            answer = answers.get(call.get("id"))
            if answer is not None:
                paired.add(answer.tool_call_id)
            calls.append({"name": call.get("name"), "id": call.get("id"),
                          "args": json.dumps(render.jsonable(call.get("args")), indent=1,
                                             ensure_ascii=False)[:MAX_CHARS],
                          "result": None if answer is None else {
                              "text": _content(answer)[:MAX_CHARS],
                              "status": getattr(answer, "status", None)}})
        turns.append({"role": m.type, "name": getattr(m, "name", None),
                      "id": getattr(m, "id", None), "text": _content(m)[:MAX_CHARS],
                      "calls": calls,
                      "tool_call_id": getattr(m, "tool_call_id", None)})
    return [t for t in turns if not (t["role"] == "tool" and t["tool_call_id"] in paired)]


def frame_view(value: Any) -> dict[str, Any]:
    """A DataFrame, Series or array: type, shape, columns (DataFrame) and the first
    ``FRAME_ROWS`` rows as text cells."""
    shape = list(value.shape)
    columns = [str(c) for c in getattr(value, "columns", [])]
    rows: list[list[str]] = []
    head = getattr(value, "head", None)
    if callable(head):
        part = head(FRAME_ROWS)
        if hasattr(part, "itertuples"):
            rows = [[str(x) for x in r] for r in part.itertuples(index=True)]
            columns = ["", *columns] if columns else columns
        else:  # a Series
            rows = [[str(i), str(v)] for i, v in part.items()]
    else:  # an ndarray
        flat = value.reshape(-1)[:FRAME_ROWS] if shape else [value]
        rows = [[str(x)] for x in flat]
    return {"kind": "frame", "type": type(value).__name__, "shape": shape,
            "columns": columns, "rows": rows, "dtype": str(getattr(value, "dtype", "") or "")}


def diff_view(saver: Any, thread_id: str, a: str, b: str, ns: str = "") -> dict[str, Any]:
    """The diff page: ``render.diff_channels`` from checkpoint ``a`` to ``b`` (step
    numbers, ids or prefixes, as the CLI's ``diff``), each row with its one-line text."""
    clients = saver.sync_clients
    ta, tb = (lookup.get(saver, clients, thread_id, ref, ns) for ref in (a, b))
    rows = render.diff_channels(ta.checkpoint.get("channel_values", {}),
                                tb.checkpoint.get("channel_values", {}))
    return {"thread_id": thread_id, "ns": ns,
            "a": ta.config["configurable"]["checkpoint_id"],
            "b": tb.config["configurable"]["checkpoint_id"],
            "steps": [ta.metadata.get("step"), tb.metadata.get("step")],
            "rows": [{**r, "text": render.describe_change(r)} for r in rows],
            "command": " ".join(shlex.quote(x) for x in [
                "langgraph-durable", "diff", thread_id,
                ta.config["configurable"]["checkpoint_id"],
                tb.config["configurable"]["checkpoint_id"], *(["--ns", ns] if ns else [])])}
