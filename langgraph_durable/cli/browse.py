"""Read-only commands: ``threads``, ``history``, ``show``, ``diff``. They open the saver
without a flusher, so looking never writes anything."""

from __future__ import annotations

from typing import Any

import typer
from langgraph.checkpoint.base import CheckpointTuple
from rich.markup import escape
from rich.table import Table

from ..core.records import metadata_matches
from ..dashboard.listing import ListArgs
from ..inspection import effect_view as effects
from ..inspection import lookup, render, storage, versions
from ..serde.external import EXTREF_TYPE
from . import history_rows as runs
from . import thread_pages
from .session import CliError, Undecodable, command, console, echo_json, session_of

JSON = typer.Option(False, "--json", help="print JSON instead of a table")
NS = typer.Option(None, "--ns", help="checkpoint namespace (default: the root, \"\")")
THREAD = typer.Argument(..., metavar="THREAD", help="thread_id")
CHECKPOINT_HELP = "a step number (3, -1), a checkpoint_id or a unique prefix of one"


def resolve(ctx: typer.Context, thread: str, ref: str | None, ns: str | None) -> str | None:
    """``lookup.resolve`` with the session's saver: the checkpoint_id a command-line
    reference names (``None`` stays ``None``: the latest)."""
    session = session_of(ctx)
    return lookup.resolve(session.saver(tolerant=True), session.clients, thread, ref, ns)


def _get(ctx: typer.Context, thread: str, checkpoint: str | None,
         ns: str | None) -> CheckpointTuple:
    session = session_of(ctx)
    return lookup.get(session.saver(tolerant=True), session.clients, thread, checkpoint, ns)


def _blob_store_note(ctx: typer.Context, values: list[Any]) -> str | None:
    """A hint when values are external references the CLI could not decode."""
    refs = sum(1 for v in values if isinstance(v, Undecodable) and v.type == EXTREF_TYPE)
    if not refs:
        return None
    if session_of(ctx).blob_store_spec is None:
        return (f"{refs} value(s) are external references (ExternalRefSerializer): pass "
                "--blob-store s3://bucket/prefix or a folder (or LGD_BLOB_STORE) to decode them")
    return f"{refs} external reference(s) could not be read from the --blob-store given"


STATUSES = ("running", "interrupted", "error", "done", "ready", "stalled")
"""A thread's statuses (``inspection.timeline.status``)."""


@command
def threads(ctx: typer.Context,
            where: list[str] = typer.Option(  # noqa: B008
                [], "--where",
                help="keep threads whose latest checkpoint's metadata has key=value (repeatable)"),
            limit: int = typer.Option(50, "--limit", min=1, help="most threads shown"),
            state_version: str = typer.Option(
                None, "--state-version", metavar="N",
                help="keep threads whose latest checkpoint is at state version N "
                "('unversioned': written without a state version)"),
            state_version_below: int = typer.Option(
                None, "--state-version-below", metavar="N", min=1,
                help="keep threads older than state version N, those migrate-state "
                "would rewrite (unversioned ones count as the global option "
                "unversioned-state-version, 1)"),
            status: str = typer.Option(
                None, "--status", metavar="STATUS",
                help="keep threads of this status: " + ", ".join(STATUSES)),
            page: int = typer.Option(None, "--page", min=1,
                                     help="page N (of --limit threads) of the thread "
                                          "summaries, newest first"),
            search: str = typer.Option(None, "--search", metavar="TEXT",
                                       help="keep threads whose title or latest messages "
                                            "contain TEXT (case-insensitive)"),
            attention: bool = typer.Option(False, "--attention",
                                           help="interrupted, error and stalled threads, "
                                                "oldest first"),
            rebuild_summary: bool = typer.Option(
                False, "--rebuild-summary",
                help="write the thread summaries of every thread (data written before "
                     "them), in batches; prints a count"),
            after: str = typer.Option(None, "--after", metavar="THREAD",
                                      help="with --rebuild-summary: start after this "
                                           "thread_id (resume)"),
            as_json: bool = JSON) -> None:
    """Threads in either tier, newest update first: checkpoints, latest step and source,
    state version, last update (UTC), bytes in Redis and in MongoDB (every thread's
    checkpoints are read). With --status, --page, --search or --attention, a page of the
    thread summaries instead (one indexed query, whatever the number of threads): status
    (as the dashboard computes it from the latest root checkpoint), step, last node, state
    version, age, title, messages, and the counts by status. --rebuild-summary writes the
    summaries of existing data."""
    session = session_of(ctx)
    filters = [name for name, given in (
        ("--status", status is not None), ("--page", page is not None),
        ("--search", bool(search)), ("--attention", attention), ("--where", bool(where)),
        ("--state-version", state_version is not None),
        ("--state-version-below", state_version_below is not None)) if given]
    if rebuild_summary and filters:
        raise CliError(f"--rebuild-summary writes the summary of every thread: give it "
                       f"without {', '.join(filters)}")
    if after is not None and not rebuild_summary:
        raise CliError("--after resumes --rebuild-summary: give it with --rebuild-summary")
    if attention and status is not None:
        raise CliError("--attention lists interrupted, error and stalled threads: give it "
                       "or --status, not both")
    saver = session.saver(tolerant=True)
    if rebuild_summary:
        done, last = thread_pages.rebuild(saver, after)
        if as_json:
            echo_json({"summarised": done, "last": last})
        else:
            console().print(f"done: {done} thread summar{'y' if done == 1 else 'ies'} "
                            "written", highlight=False)
        return
    if status is not None and status not in STATUSES:
        raise CliError(f"--status must be one of {', '.join(STATUSES)}, got {status!r}")
    if status is not None or page is not None or search or attention:
        if state_version is not None or state_version_below is not None:
            raise CliError("--state-version and --state-version-below read every thread: "
                           "give them without --status, --page, --search, --attention")
        try:
            args = ListArgs(page=page or 1, status="attention" if attention else status,
                            where=tuple(where), search=search or "")
            args.query()
        except ValueError as exc:
            raise CliError(str(exc)) from None
        thread_pages.print_summary_rows(thread_pages.summary_rows(saver, args, limit),
                                        as_json)
        return
    want = render.parse_where(where)
    unversioned = session.config.unversioned_state_version
    try:
        exact = None if state_version is None else versions.parse_filter(state_version)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    rows = [row for row in storage.thread_rows(saver, session.clients, saver.serde)
            if metadata_matches(row["metadata"], want)
            and (state_version is None or row["state_version"] == exact)
            and (state_version_below is None or versions.compare(
                row["state_version"], state_version_below, unversioned) == "older")]
    total, rows = len(rows), rows[:limit]
    if as_json:
        echo_json({"threads": [{k: render.jsonable(v) for k, v in row.items()} for row in rows],
                   "total": total})
        return
    table = Table(title=f"threads ({len(rows)} of {total})")
    for col, just in (("thread", "left"), ("checkpoints", "right"), ("step", "right"),
                      ("source", "left"), ("state", "right"), ("updated (UTC)", "left"),
                      ("redis", "right"), ("mongodb", "right")):
        table.add_column(col, justify=just)  # type: ignore[arg-type]
    for row in rows:
        table.add_row(escape(row["thread_id"]), str(row["checkpoints"]),
                      "-" if row["step"] is None else str(row["step"]),
                      escape(str(row["source"] or "-")),
                      versions.shown(row["state_version"]),
                      render.utc(row["updated"]), render.human_bytes(row["hot_bytes"]),
                      render.human_bytes(row["durable_bytes"]))
    console().print(table)


@command
def history(ctx: typer.Context, thread: str = THREAD,
            ns: str = NS,
            limit: int = typer.Option(20, "--limit", min=1, help="checkpoints per page"),
            before: str = typer.Option(None, "--before",
                                       help="page: only checkpoints older than this id"),
            all_channels: bool = typer.Option(
                False, "--all-channels",
                help="also list LangGraph's internal channels (branch:to:*, __pregel_*) "
                "among those written"),
            as_json: bool = JSON) -> None:
    """Checkpoints of a thread, newest first: namespace, id, parent, step, source, the
    node(s) whose step made it (a Send resolved to its node), the channels they wrote,
    the step's duration (its ts minus its parent's), what it runs next, its pending
    writes; a node that failed is named with its error. Page with --limit and --before
    (the last id shown). Channel values are not decoded."""
    saver = session_of(ctx).saver(tolerant=True)
    rows, more = runs.history_rows(saver, thread, ns, before, limit, all_channels)
    if not rows and not before:
        raise CliError(f"thread {thread!r} not found" + (f" (ns {ns!r})" if ns else ""))
    nxt = rows[-1]["checkpoint_id"] if more and rows else None
    if as_json:
        echo_json({"thread_id": thread, "checkpoints": rows, "next_before": nxt})
        return
    out = console()
    out.print(runs.history_table(thread, rows, out.width))
    for line in runs.failure_lines(rows):
        out.print(escape(line))
    if nxt:
        out.print(f"next page: --before {nxt}")



def _effects(ctx: typer.Context, tup: CheckpointTuple) -> tuple[list[dict[str, Any]], str]:
    """``inspection.effect_view.checkpoint_effects`` of the checkpoint of ``tup``: the effect
    journal of the tasks that ran from it (model calls summed up), and a note, not empty
    when MongoDB did not answer (Redis's entries alone are shown)."""
    c = tup.config["configurable"]
    return effects.checkpoint_effects(session_of(ctx).saver(tolerant=True), c["thread_id"],
                                      c["checkpoint_ns"], c["checkpoint_id"])


def _effect_cells(e: dict[str, Any], room: int) -> list[str]:
    """One row of ``show``'s effects table: task, effect, call, state, tokens, result (a
    model call: ``[model call]``, its tool calls and a preview of its answer)."""
    if e["kind"] != "model_call":
        shown = e["error"] if e["state"] == "failed" else e["result"]
        return [escape(c) for c in (e["task_id"], e["name"], str(e["call"]), e["state"], "-",
                                    render.preview(shown, room))]
    m = e["model_call"]
    tokens = "-" if m["tokens"] is None else str(m["tokens"]["total"])
    if not m["answered"]:
        text = "no answer journaled: a re-execution calls the model again"
    else:
        calls = f"calls {', '.join(m['tool_calls'])}; " if m["tool_calls"] else ""
        text = calls + (m["answer"] or "")
    cells = [e["task_id"], f"[model call] {m['model']}", str(e["call"]), e["state"], tokens,
             text[:room - 1] + "\u2026" if len(text) > room else text]
    return [escape(c) for c in cells]  # text of the model's: never rich markup


@command
def show(ctx: typer.Context, thread: str = THREAD,
         at: str = typer.Argument(None, metavar="[CHECKPOINT]", help=CHECKPOINT_HELP),
         checkpoint: str = typer.Option(None, "--checkpoint", help="the same as CHECKPOINT"),
         ns: str = NS, as_json: bool = JSON) -> None:
    """One checkpoint decoded: metadata, channel values, pending writes and interrupts.
    CHECKPOINT is a step number, a checkpoint_id or a unique prefix of one (default: the
    latest). External-reference values need --blob-store."""
    tup = _get(ctx, thread, at or checkpoint, ns)
    data = lookup.tuple_data(tup)
    data["effects"], fx_note = _effects(ctx, tup)
    if as_json:
        note = _blob_store_note(ctx, list(tup.checkpoint.get("channel_values", {}).values()))
        echo_json({**data, **({"note": note} if note else {}),
                   **({"effects_note": fx_note} if fx_note else {})})
        return
    out = console()
    md = tup.metadata
    out.print(f"thread {data['thread_id']}  ns {data['checkpoint_ns']!r}  checkpoint "
              f"{data['checkpoint_id']}\nparent {data['parent_checkpoint_id'] or '-'}  step "
              f"{md.get('step')}  source {md.get('source')}  state version "
              f"{versions.shown(data['state_version'])}  time {render.utc(data['ts'])}")
    room = max(30, out.width - 40)
    values = Table(title="channel values")
    values.add_column("channel")
    values.add_column("type")
    values.add_column("value", no_wrap=True, overflow="ellipsis")
    for ch, v in sorted(tup.checkpoint.get("channel_values", {}).items()):
        values.add_row(ch, type(v).__name__, render.preview(v, room))
    out.print(values)
    if tup.pending_writes:
        writes = Table(title="pending writes")
        for col in ("task_id", "channel", "value"):
            writes.add_column(col, no_wrap=True, overflow="ellipsis")
        for t, ch, v in tup.pending_writes:
            writes.add_row(t, ch, render.preview(v, room - 40))
        out.print(writes)
    if data["interrupts"]:
        out.print(f"interrupts: {render.preview(data['interrupts'], 200)}")
    if data["effects"]:
        fx = Table(title="effects of the tasks run from this checkpoint")
        for col in ("task_id", "effect", "call", "state", "tokens", "result"):
            fx.add_column(col, no_wrap=True, overflow="ellipsis",
                          justify="right" if col in ("call", "tokens") else "left")
        for e in data["effects"]:
            fx.add_row(*_effect_cells(e, room - 40))
        models = [e for e in data["effects"] if e["kind"] == "model_call"]
        if models:
            fx.caption = escape(f"[model call]: {effects.JOURNALED_NOTE} (whether it was replayed "
                          "is not stored: the process metrics count replays)")
        out.print(fx)
    if fx_note:
        out.print(f"note: {fx_note}")
    note = _blob_store_note(ctx, [*tup.checkpoint.get("channel_values", {}).values(),
                                  *(v for _t, _c, v in tup.pending_writes or [])])
    if note:
        out.print(f"note: {note}")


@command
def diff(ctx: typer.Context, thread: str = THREAD,
         a: str = typer.Argument(..., metavar="A", help="older checkpoint: " + CHECKPOINT_HELP),
         b: str = typer.Argument(..., metavar="B", help="newer checkpoint: " + CHECKPOINT_HELP),
         ns: str = NS, as_json: bool = JSON) -> None:
    """What changed from checkpoint A to B, per channel: messages added/removed/changed
    (by message id), dict keys added/removed/changed, other values before -> after. A and
    B are step numbers, checkpoint_ids or unique prefixes (``diff t 3 7``)."""
    ta, tb = _get(ctx, thread, a, ns), _get(ctx, thread, b, ns)
    a, b = (t.config["configurable"]["checkpoint_id"] for t in (ta, tb))
    rows = render.diff_channels(ta.checkpoint.get("channel_values", {}),
                           tb.checkpoint.get("channel_values", {}))
    step = (ta.metadata.get("step"), tb.metadata.get("step"))
    if as_json:
        echo_json({"thread_id": thread, "a": a, "b": b, "steps": list(step), "channels": rows})
        return
    table = Table(title=f"{thread}: step {step[0]} -> {step[1]}")
    table.add_column("channel")
    table.add_column("change")
    table.add_column("details")
    for row in rows:
        table.add_row(row["channel"], row["change"], render.describe_change(row))
    out = console()
    out.print(table)
    if not rows:
        out.print("no channel changed")
