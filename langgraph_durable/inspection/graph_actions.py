"""Acting on a thread with the application's graph (the dashboard's actions and the CLI's
``resume``/``retry``): answer a pending interrupt, retry a failed or stalled thread
from its latest checkpoint, run a fork. Each is checked against the thread's latest
root checkpoint first (``prepare``: one-line ``ActionError`` before anything runs), then
run (``execute``: ``graph.invoke`` with the operator's saver as its checkpointer).

Which graph a thread belongs to: the ``lgd_graph`` key of its latest root checkpoint's
metadata (``GRAPH_KEY``; LangGraph copies ``config["metadata"]`` into every checkpoint's
metadata, so an application stamps it with ``graph.with_config(metadata={"lgd_graph":
"name"})``, and every run started here stamps it); without one, the only graph given,
else the operator's choice. Only code the operator names is imported
(``load_graph``); stored data never names anything that is imported or run."""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Mapping
from typing import Any

from ..errors import DurableSaverError
from . import lookup, render, timeline
from .strict import contains_placeholder

GRAPH_KEY = "lgd_graph"
"""Checkpoint metadata key naming the graph a thread belongs to."""

ACTIONS = ("resume", "retry", "run")
"""What can be done to a thread: answer its interrupt(s), retry it after an error or a
stall, run it from a fork (or ``update_state``) waiting for an ``invoke``."""

ALLOWED = {"resume": ("interrupted",), "retry": ("error", "stalled", "ready"),
           "run": ("ready", "stalled")}
"""The statuses (``timeline.status``) each action accepts."""


class ActionError(DurableSaverError, ValueError):
    """An action refused before anything ran (unknown graph, nothing pending, an
    interrupt id not pending, a value that is not JSON or not of the expected shape, a
    thread in a status the action does not apply to); the message is one line."""


def load_graph(spec: str, option: str = "--graph") -> Any:
    """The object ``MODULE:ATTR`` names (imported: operator-given code); a callable that
    is not a graph (no ``invoke``) is called with no argument and must return one.
    Raises ``ActionError`` naming ``option`` when it cannot be imported or is no graph."""
    module, _, attr = spec.partition(":")
    if not module or not attr:
        raise ActionError(f"{option} {spec!r} must be MODULE:ATTR (a compiled graph or a "
                          "function returning one)")
    try:
        obj: Any = importlib.import_module(module)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise ActionError(f"{option} {spec!r} cannot be imported: {exc}") from None
    if not hasattr(obj, "invoke") and callable(obj):
        obj = obj()
    if not (hasattr(obj, "invoke") and hasattr(obj, "copy")):
        raise ActionError(f"{option} {spec!r} is a {type(obj).__name__}, not a compiled "
                          "LangGraph graph")
    return obj


def parse_graphs(specs: list[str]) -> dict[str, Any]:
    """``NAME=MODULE:ATTR`` options (the dashboard's ``--graph``) as ``{name: graph}``.
    Raises ``ActionError`` for a malformed or repeated name, or a graph not imported."""
    graphs: dict[str, Any] = {}
    for spec in specs:
        name, eq, target = spec.partition("=")
        if not eq or not name.strip() or not target:
            raise ActionError(f"--graph {spec!r} must be NAME=MODULE:ATTR")
        if name.strip() in graphs:
            raise ActionError(f"--graph {name.strip()!r} is given twice")
        graphs[name.strip()] = load_graph(target, f"--graph {name.strip()}")
    return graphs


def graph_for(graphs: Mapping[str, Any], metadata: Mapping[str, Any] | None,
              chosen: str | None = None) -> str:
    """The name of the graph that runs a thread: its metadata's ``GRAPH_KEY``, else
    ``chosen`` (the operator's), else the only graph given. Raises ``ActionError`` when
    none is given, the thread's graph is not among them, or several are and none is
    chosen."""
    if not graphs:
        raise ActionError("no graph is given: pass --graph NAME=MODULE:ATTR "
                          "(create_app(graphs={...})) to act on threads")
    stamped = (metadata or {}).get(GRAPH_KEY)
    if isinstance(stamped, str) and stamped:
        if stamped not in graphs:
            raise ActionError(f"the thread belongs to graph {stamped!r} (metadata "
                              f"{GRAPH_KEY}), which is not given (given: "
                              f"{', '.join(sorted(graphs))})")
        return stamped
    if chosen:
        if chosen not in graphs:
            raise ActionError(f"no graph {chosen!r} (given: {', '.join(sorted(graphs))})")
        return chosen
    if len(graphs) == 1:
        return next(iter(graphs))
    raise ActionError(f"the thread names no graph (metadata {GRAPH_KEY}): choose one of "
                      f"{', '.join(sorted(graphs))}")


def pending_interrupts(tup: Any) -> list[dict[str, Any]]:
    """The interrupts pending at a checkpoint (its ``__interrupt__`` writes): ``id``,
    ``value`` (JSON data), ``schema`` (the JSON Schema the node gave, or None)."""
    out = []
    for _task, channel, value in tup.pending_writes or []:
        if channel != render.INTERRUPT_CHANNEL:
            continue
        for item in value if isinstance(value, (list, tuple)) else [value]:
            schema = getattr(item, "response_schema", None)
            out.append({"id": getattr(item, "id", None),
                        "value": render.jsonable(getattr(item, "value", item)),
                        "schema": schema if isinstance(schema, dict) else None})
    return out


def parse_value(text: str) -> Any:
    """A JSON value given by the operator. Raises ``ActionError`` when it is not JSON."""
    import json

    try:
        return json.loads(text)
    except ValueError as exc:
        raise ActionError(f"the value is not JSON ({exc}): give e.g. true, \"yes\" or "
                          "{\"approved\": true}") from None


def check_schema(value: Any, schema: Mapping[str, Any] | None, interrupt_id: str) -> None:
    """Validate ``value`` against the interrupt's JSON Schema when it has one (with
    ``jsonschema``, a dependency of the ``cli`` and ``dashboard`` extras; without it
    installed nothing is checked). Raises ``ActionError``."""
    if not schema:
        return
    try:
        import jsonschema
    except ImportError:
        return
    try:
        jsonschema.validate(value, dict(schema))
    except jsonschema.ValidationError as exc:
        raise ActionError(f"the value does not match interrupt {interrupt_id}'s schema: "
                          f"{exc.message}") from None


@dataclasses.dataclass
class Prepared:
    """An action checked against the thread's latest root checkpoint, ready to run."""

    thread_id: str
    action: str
    graph: str | None
    """The graph's name (stamped in the run's checkpoints), None for the one graph the
    CLI's operator named when the thread names none (nothing stamped)."""
    input: Any
    """What ``invoke`` gets: ``Command(resume={interrupt_id: value})`` or None."""
    given: dict[str, Any]
    """What the operator gave, for the audit log."""
    from_checkpoint: str
    status: str


def prepare(saver: Any, clients: Any, thread: str, action: str,
            graphs: Mapping[str, Any] | None, *,
            answers: Mapping[str | None, Any] | None = None, chosen: str | None = None,
            running_window_s: float = timeline.RUNNING_WINDOW_S) -> Prepared:
    """Check ``action`` on ``thread`` (root namespace) against its latest checkpoint.
    ``answers`` (``resume``): ``{interrupt_id: value}``; the key None stands for the only
    pending interrupt. ``graphs`` None: the operator gives the graph itself (the CLI),
    whatever the thread's ``GRAPH_KEY`` says (kept). Raises ``LookupFailedError`` (no
    such thread) or ``ActionError`` (the one-line reason) before anything runs."""
    if action not in ACTIONS:
        raise ActionError(f"unknown action {action!r} (one of {', '.join(ACTIONS)})")
    tup = lookup.get(saver, clients, thread, None, "")
    status = timeline.status(tup, None, running_window_s)["status"]
    cid = tup.config["configurable"]["checkpoint_id"]
    stamped = (tup.metadata or {}).get(GRAPH_KEY)
    name = (graph_for(graphs, tup.metadata, chosen) if graphs is not None
            else stamped if isinstance(stamped, str) and stamped else None)
    if status not in ALLOWED[action]:
        raise ActionError(_refusal(thread, action, status))
    for channel, value in [*tup.checkpoint.get("channel_values", {}).items(),
                           *((c, v) for _t, c, v in tup.pending_writes or [])]:
        found = contains_placeholder(value)
        if found is not None:
            raise ActionError(f"channel {channel!r} of thread {thread!r} holds {found}: a "
                              "run would read the placeholder; allow its type "
                              "(--allow-type module.Class) first")
    given: dict[str, Any] = {}
    command: Any = None
    if action == "resume":
        command, given = _resume(thread, pending_interrupts(tup), dict(answers or {}))
    return Prepared(thread, action, name, command, given, cid, status)


def _refusal(thread: str, action: str, status: str) -> str:
    why = {"interrupted": "it waits for an answer to its interrupt: resume it",
           "running": "it is running (its latest checkpoint is recent): a second run would "
                      "race the first; wait until it ends or is stalled",
           "done": "its run ended: nothing to " + action,
           "error": "a node failed: retry it",
           "ready": "it waits for a run: retry (run) it",
           "stalled": "nothing is pending: retry it"}.get(status, status)
    what = "nothing pending to resume" if action == "resume" else f"cannot {action}"
    return f"thread {thread!r} is {status}, {what}: {why}"


def _resume(thread: str, pending: list[dict[str, Any]],
            answers: dict[str | None, Any]) -> tuple[Any, dict[str, Any]]:
    if not answers:
        raise ActionError("no value given to resume with")
    ids = [p["id"] for p in pending]
    by_id = {p["id"]: p for p in pending}
    if None in answers:
        if len(pending) > 1:
            raise ActionError(f"{len(pending)} interrupts are pending in thread {thread!r}: "
                              f"give the interrupt id (one of {', '.join(ids)})")
        answers = {ids[0]: answers[None]}
    unknown = [i for i in answers if i not in by_id]
    if unknown:
        raise ActionError(f"interrupt {unknown[0]} is not pending in thread {thread!r} "
                          f"(pending: {', '.join(ids)})")
    for interrupt_id, value in answers.items():
        check_schema(value, by_id[interrupt_id]["schema"], str(interrupt_id))
    # imported here: langgraph.types (and the LangSmith run trees it loads) is about
    # 0.35 s of CPU that every other CLI command would pay at start
    from langgraph.types import Command

    return (Command(resume=dict(answers)),
            {"answers": {str(k): v for k, v in answers.items()}})


def bound(graph: Any, saver: Any) -> Any:
    """``graph`` with ``saver`` as its checkpointer (its own, if any, is not used: the
    run reads and writes what the operator sees)."""
    return graph.copy(update={"checkpointer": saver})


def execute(saver: Any, graph: Any, prepared: Prepared,
            running_window_s: float = timeline.RUNNING_WINDOW_S) -> dict[str, Any]:
    """Run a prepared action to its end (blocking: the whole run): ``graph.invoke``
    from the thread's latest checkpoint, the run's checkpoints stamped with the graph's
    name (``GRAPH_KEY``). Returns the thread's ``{"status", "step", "checkpoint_id"}``
    after it; the graph's exception propagates (the thread keeps its error write)."""
    config: dict[str, Any] = {"configurable": {"thread_id": prepared.thread_id}}
    if prepared.graph:
        config["metadata"] = {GRAPH_KEY: prepared.graph}
    bound(graph, saver).invoke(prepared.input, config)
    return outcome(saver, prepared.thread_id, running_window_s)


def outcome(saver: Any, thread: str,
            running_window_s: float = timeline.RUNNING_WINDOW_S) -> dict[str, Any]:
    """The thread's status, step and latest checkpoint id now (root namespace)."""
    tup = saver.get_tuple({"configurable": {"thread_id": thread, "checkpoint_ns": ""}})
    if tup is None:
        return {"status": "unknown", "step": None, "checkpoint_id": None}
    return {"status": timeline.status(tup, None, running_window_s)["status"],
            "step": tup.metadata.get("step"),
            "checkpoint_id": tup.config["configurable"]["checkpoint_id"]}
