"""Acting on threads with the application's graph: ``resume`` (answer a pending
interrupt), ``retry`` (a failed, stalled or forked thread from its latest checkpoint),
and ``audit`` (the log of every such action, the dashboard's too). Each action runs the
graph in this process, to its end or its next interrupt, with the CLI's saver (strict
serializer, a flusher) as its checkpointer, and writes an audit entry."""

from __future__ import annotations

from typing import Any

import typer
from rich.table import Table

from ..inspection import audit, render
from ..inspection import graph_actions as actions
from .session import CliError, command, console, echo_json, session_of

GRAPH = typer.Option(..., "--graph", metavar="MODULE:ATTR",
                     help="the compiled graph (or a function returning one) to run")
THREAD = typer.Argument(..., metavar="THREAD", help="thread_id")


def _act(ctx: typer.Context, thread: str, action: str, graph_spec: str,
         answers: dict[str | None, Any] | None = None) -> dict[str, Any]:
    """Check, record, run and record the end of one action; the thread's outcome."""
    try:
        graph = actions.load_graph(graph_spec)
    except actions.ActionError as exc:
        raise CliError(str(exc)) from None
    session = session_of(ctx)
    saver = session.saver(flusher=True)
    db, col = session.clients.db, saver.context.collections.audit
    who = audit.who_of_cli()
    try:
        prepared = actions.prepare(saver, session.clients, thread, action, None,
                                   answers=answers)
    except actions.ActionError as exc:
        audit.record(db, col, thread_id=thread, who=who, via="cli", action=action,
                     graph=graph_spec, given={"answers": _shown(answers)}
                     if answers else {}, from_checkpoint=None, state="refused",
                     error=audit.one_line(str(exc)))
        raise CliError(str(exc)) from None
    entry = audit.record(db, col, thread_id=thread, who=who, via="cli", action=action,
                         graph=prepared.graph or graph_spec, given=prepared.given,
                         from_checkpoint=prepared.from_checkpoint, state="running")
    try:
        result = actions.execute(saver, graph, prepared)
    except Exception as exc:
        audit.update(db, col, entry, thread, state="failed",
                     result=actions.outcome(saver, thread), error=audit.one_line(exc))
        raise CliError(f"the run of thread {thread!r} failed: "
                       f"{audit.one_line(exc)}") from None
    audit.update(db, col, entry, thread, state="done", result=result)
    return result


def _shown(answers: dict[str | None, Any] | None) -> dict[str, Any]:
    return {str(k): v for k, v in (answers or {}).items()}


def _report(thread: str, verb: str, result: dict[str, Any]) -> None:
    typer.echo(f"{verb} {thread}: now {result['status']} at step {result['step']} "
               f"(checkpoint {result['checkpoint_id']})")


@command
def resume(ctx: typer.Context, thread: str = THREAD, graph: str = GRAPH,
           value: str = typer.Option(..., "--value", metavar="JSON",
                                     help="the answer, a JSON value (true, '\"yes\"', "
                                     "'{\"approved\": true}')"),
           interrupt_id: str = typer.Option(None, "--interrupt-id", metavar="ID",
                                            help="which pending interrupt to answer "
                                            "(needed when several are pending)")) -> None:
    """Answer a pending interrupt of THREAD with a JSON value and run the graph on, to
    its end or its next interrupt (Command(resume={interrupt_id: value})). The value is
    checked against what is pending first (its id; the interrupt's JSON Schema when it
    has one). Recorded in the audit log."""
    try:
        answer = actions.parse_value(value)
    except actions.ActionError as exc:
        raise CliError(str(exc)) from None
    _report(thread, "resumed", _act(ctx, thread, "resume", graph, {interrupt_id: answer}))


@command
def retry(ctx: typer.Context, thread: str = THREAD, graph: str = GRAPH) -> None:
    """Run THREAD again from its latest checkpoint (graph.invoke(None, config)): a node
    that failed runs again, a stalled run goes on, a fork runs. Refused for a thread
    that is running, interrupted (use resume) or done. Recorded in the audit log."""
    _report(thread, "retried", _act(ctx, thread, "retry", graph))


@command
def audit_log(ctx: typer.Context,
              thread: str = typer.Option(None, "--thread", metavar="THREAD",
                                         help="only this thread's actions"),
              limit: int = typer.Option(100, "--limit", min=1, help="most entries shown"),
              as_json: bool = typer.Option(False, "--json", help="print JSON instead of a "
                                           "table")) -> None:
    """The audit log: every action on threads (resume, retry, run) from the dashboard
    and the CLI, newest first: when, who, via, action, thread, graph, input, state,
    result or error."""
    session = session_of(ctx)
    saver = session.saver(tolerant=True)
    rows = audit.entries(session.clients.db, saver.context.collections.audit, thread, limit)
    if as_json:
        echo_json({"entries": [render.jsonable(r) for r in rows]})
        return
    table = Table(title=f"audit log ({len(rows)} entries)")
    for col in ("when (UTC)", "who", "via", "action", "thread", "graph", "input", "state",
                "result"):
        table.add_column(col)
    for r in rows:
        result = r.get("result") or {}
        shown = (f"{result.get('status')} at step {result.get('step')}" if result else "")
        if r.get("error"):
            shown = (shown + " " if shown else "") + r["error"]
        table.add_row(render.utc(r["at"].isoformat()), r["who"], r["via"], r["action"],
                      r["thread_id"], r.get("graph") or "-",
                      render.preview(r.get("input"), 60), r["state"], shown or "-")
    console().print(table)
