"""The dashboard's actions on a thread with the application's graphs (``create_app(saver,
graphs={...})``): answer a pending interrupt, retry a failed or stalled thread, run a
fork; the runs go to ``runs.Runs`` (bounded) and every action is written to the audit
log (``inspection.audit``). Blocking: the app calls these in a worker thread. The checks
(token, CSRF, ``allow_writes``) are the app's, as for the fork."""

from __future__ import annotations

import logging
import shlex
from collections.abc import Mapping
from typing import Any

from ..inspection import audit, lookup, render, timeline
from ..inspection import graph_actions as actions
from ..inspection.timeline import RUNNING_WINDOW_S
from . import run_executor as runs

log = logging.getLogger("langgraph_durable.dashboard")


class Actions:
    """What the thread page offers and does.

    Args:
        view: the saver the pages read with (strict, tolerant, checkpoints as stored).
        runner: the saver runs use as their checkpointer (strict, not tolerant, the
            application's state versions kept: a run migrates on read as the app does).
        graphs: ``{name: compiled graph}``; empty: nothing can be done, the page says so.
        who: the identity written in the audit log (``audit.who_of_token``).
        workers, max_queued: ``runs.Runs``'s bounds.
    """

    def __init__(self, view: Any, runner: Any, graphs: Mapping[str, Any], who: str, *,
                 workers: int = 2, max_queued: int = 8,
                 running_window_s: float = RUNNING_WINDOW_S) -> None:
        self.view, self.runner, self.graphs = view, runner, dict(graphs)
        self.who, self.running_window_s = who, running_window_s
        self.runs = runs.Runs(workers, max_queued)

    @property
    def _audit(self) -> tuple[Any, str]:
        return self.view.sync_clients.db, self.view.context.collections.audit

    def log(self, thread: str, limit: int = 50) -> list[dict[str, Any]]:
        """The thread's audit entries, newest first (``audit.entries``); a database that
        does not answer gives ``[]`` (logged by type)."""
        db, col = self._audit
        try:
            return audit.entries(db, col, thread, limit)
        except Exception as exc:
            log.warning("dashboard: reading the audit log failed: %s", type(exc).__name__)
            return []

    def panel(self, thread: str, ns: str) -> dict[str, Any]:
        """What the page shows for ``thread``: ``graphs`` (names), ``graph`` (the
        thread's, or None when the operator chooses), ``choose`` (several and none
        stamped), ``interrupts`` (pending: id, value preview, schema), ``can`` (the
        actions its status allows), ``commands`` (the CLI equivalents), ``runs`` (this
        dashboard's), ``audit`` (the log's entries)."""
        out: dict[str, Any] = {"graphs": sorted(self.graphs), "graph": None, "choose": False,
                               "interrupts": [], "can": [], "commands": [],
                               "runs": self.runs.of_thread(thread), "audit": self.log(thread),
                               "status": None, "error": None}
        if ns:
            out["error"] = ("actions apply to the thread's root namespace: open the thread "
                            "without ns to act on it")
            return out
        try:
            tup = lookup.get(self.view, self.view.sync_clients, thread, None, "")
        except lookup.LookupFailedError:
            return out
        status = timeline.status(tup, None, self.running_window_s)["status"]
        out["status"] = status
        out["interrupts"] = [{**p, "preview": render.preview(p["value"], 300)}
                             for p in actions.pending_interrupts(tup)]
        out["can"] = [a for a in actions.ACTIONS if status in actions.ALLOWED[a]
                      and not (a == "run" and status != "ready")
                      and not (a == "retry" and status == "ready")]
        stamped = (tup.metadata or {}).get(actions.GRAPH_KEY)
        try:
            out["graph"] = actions.graph_for(self.graphs, tup.metadata)
        except actions.ActionError as exc:
            out["error"] = str(exc) if stamped or not self.graphs else None
            out["choose"] = bool(self.graphs) and not stamped
        out["commands"] = commands(thread, out["graph"], status, out["interrupts"])
        return out

    def act(self, field: Mapping[str, str]) -> dict[str, Any]:
        """Check and queue the action a form asks (``thread_id``, ``action``, ``value``
        and ``interrupt_id`` for resume, ``graph`` when the operator chooses one). The
        audit log gets an entry either way: ``refused`` with the reason, or ``queued``
        (then ``running``, ``done``/``failed`` with the thread's status after the run).
        Returns the run's record. Raises ``LookupFailedError``, ``ActionError``,
        ``runs.QueueFullError``, ``runs.ThreadBusyError`` (each after recording it)."""
        thread, action = field.get("thread_id", ""), field.get("action", "")
        if not thread:
            raise actions.ActionError("thread_id is missing")
        db, col = self._audit
        given: dict[str, Any] = {}
        try:
            answers: dict[str | None, Any] | None = None
            if action == "resume":
                given = {"value": field.get("value", ""),
                         "interrupt_id": field.get("interrupt_id") or None}
                answers = {given["interrupt_id"]: actions.parse_value(field.get("value", ""))}
            prepared = actions.prepare(self.view, self.view.sync_clients, thread, action,
                                       self.graphs, answers=answers,
                                       chosen=field.get("graph") or None,
                                       running_window_s=self.running_window_s)
        except (lookup.LookupFailedError, actions.ActionError) as exc:
            audit.record(db, col, thread_id=thread, who=self.who, via="dashboard",
                         action=action or "?", graph=field.get("graph") or None,
                         given=given, from_checkpoint=None, state="refused",
                         error=audit.one_line(str(exc)))
            raise
        entry = audit.record(db, col, thread_id=thread, who=self.who, via="dashboard",
                             action=action, graph=prepared.graph, given=prepared.given,
                             from_checkpoint=prepared.from_checkpoint, state="queued")
        graph = self.graphs[prepared.graph or ""]  # always named here (graphs given)

        def run() -> dict[str, Any]:
            audit.update(db, col, entry, thread, state="running")
            return actions.execute(self.runner, graph, prepared, self.running_window_s)

        def ended(record: dict[str, Any]) -> None:
            try:
                if record["state"] == "done":
                    audit.update(db, col, entry, thread, state="done", result=record["result"])
                else:
                    audit.update(db, col, entry, thread, state="failed",
                                 result=actions.outcome(self.view, thread,
                                                        self.running_window_s),
                                 error=audit.one_line(record["error"] or "failed"))
            except Exception as exc:  # the run's end is in the page's runs still
                log.warning("dashboard: writing the audit log failed: %s", type(exc).__name__)

        try:
            return self.runs.submit(thread, action, run, ended, meta={"audit_id": entry})
        except (runs.QueueFullError, runs.ThreadBusyError) as exc:
            audit.update(db, col, entry, thread, state="refused",
                         error=audit.one_line(str(exc)))
            raise

    def cancel(self, thread: str, run_id: str) -> dict[str, Any]:
        """Cancel a queued run of ``thread`` (its audit entry ``cancelled``). Raises
        ``ActionError`` when it is not queued any more (a started run is not stopped)."""
        record = next((r for r in self.runs.of_thread(thread) if r["id"] == run_id), None)
        done = self.runs.cancel(run_id) if record is not None else None
        if done is None:
            raise actions.ActionError(
                f"run {run_id} of thread {thread!r} is not queued: a run that has started "
                "cannot be stopped safely (see docs/dashboard.md, Actions)")
        db, col = self._audit
        audit.update(db, col, done["meta"]["audit_id"], thread, state="cancelled")
        return done


def commands(thread: str, graph: str | None, status: str | None,
             interrupts: list[dict[str, Any]]) -> list[str]:
    """The CLI lines doing what the page offers (``MODULE:ATTR`` for the graph)."""
    spec = "MODULE:ATTR"
    out = []
    if status == "interrupted":
        for p in interrupts or [{"id": None}]:
            argv = ["langgraph-durable", "resume", thread, "--graph", spec, "--value", "JSON"]
            if len(interrupts) > 1 and p["id"]:
                argv += ["--interrupt-id", p["id"]]
            out.append(" ".join(shlex.quote(a) for a in argv))
    elif status in ("error", "stalled", "ready"):
        out.append(" ".join(shlex.quote(a) for a in
                            ["langgraph-durable", "retry", thread, "--graph", spec]))
    return out
