"""Read-only commands: ``threads``, ``history``, ``show``, ``diff``. They open the saver
without a flusher, so looking never writes anything."""

from __future__ import annotations

from typing import Any

import typer
from langgraph.checkpoint.base import CheckpointTuple
from rich.table import Table

from ..records import metadata_matches
from . import render as R
from . import storage as S
from .session import CliError, command, console, echo_json, session_of

JSON = typer.Option(False, "--json", help="print JSON instead of a table")
NS = typer.Option(None, "--ns", help="checkpoint namespace (default: the root, \"\")")


def _get(ctx: typer.Context, thread: str, checkpoint: str | None,
         ns: str | None) -> CheckpointTuple:
    saver = session_of(ctx).saver(tolerant=True)
    conf: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ns or ""}
    if checkpoint:
        conf["checkpoint_id"] = checkpoint
    tup = saver.get_tuple({"configurable": conf})
    if tup is None:
        what = f"checkpoint {checkpoint!r} of thread" if checkpoint else "thread"
        raise CliError(f"{what} {thread!r} (ns {ns or ''!r}) not found")
    return tup


@command
def threads(ctx: typer.Context,
            where: list[str] = typer.Option(  # noqa: B008
                [], "--where",
                help="keep threads whose latest checkpoint's metadata has key=value (repeatable)"),
            limit: int = typer.Option(50, "--limit", min=1, help="most threads shown"),
            as_json: bool = JSON) -> None:
    """Threads in either tier, newest update first: checkpoints, latest step and source,
    last update (UTC), bytes in Redis and in MongoDB."""
    session = session_of(ctx)
    saver = session.saver(tolerant=True)
    want = R.parse_where(where)
    rows = [row for row in S.thread_rows(saver.ctx, session.clients, saver.serde)
            if metadata_matches(row["metadata"], want)]
    total, rows = len(rows), rows[:limit]
    if as_json:
        echo_json({"threads": [{k: R.jsonable(v) for k, v in row.items()} for row in rows],
                   "total": total})
        return
    table = Table(title=f"threads ({len(rows)} of {total})")
    for col, just in (("thread", "left"), ("checkpoints", "right"), ("step", "right"),
                      ("source", "left"), ("updated (UTC)", "left"), ("redis", "right"),
                      ("mongodb", "right")):
        table.add_column(col, justify=just)  # type: ignore[arg-type]
    for row in rows:
        table.add_row(row["thread_id"], str(row["checkpoints"]),
                      "-" if row["step"] is None else str(row["step"]), row["source"] or "-",
                      R.utc(row["updated"]), R.human_bytes(row["hot_bytes"]),
                      R.human_bytes(row["durable_bytes"]))
    console().print(table)


@command
def history(ctx: typer.Context, thread: str = typer.Argument(..., help="thread_id"),
            ns: str = NS,
            limit: int = typer.Option(20, "--limit", min=1, help="checkpoints per page"),
            before: str = typer.Option(None, "--before",
                                       help="page: only checkpoints older than this id"),
            as_json: bool = JSON) -> None:
    """Checkpoints of a thread, newest first: namespace, id, parent, step, source, number
    of pending writes. Page with --limit and --before (the last id shown)."""
    saver = session_of(ctx).saver(tolerant=True)
    conf: dict[str, Any] = {"thread_id": thread}
    if ns is not None:
        conf["checkpoint_ns"] = ns
    before_cfg: Any = {"configurable": {"checkpoint_id": before}} if before else None
    rows = []
    for tup in saver.list({"configurable": conf}, before=before_cfg, limit=limit + 1):
        c = tup.config["configurable"]
        parent = tup.parent_config["configurable"]["checkpoint_id"] if tup.parent_config else None
        rows.append({"ns": c["checkpoint_ns"], "checkpoint_id": c["checkpoint_id"],
                     "parent": parent, "step": tup.metadata.get("step"),
                     "source": tup.metadata.get("source"), "writes": len(tup.pending_writes or []),
                     "ts": tup.checkpoint.get("ts")})
    if not rows and not before:
        raise CliError(f"thread {thread!r} not found")
    more, rows = len(rows) > limit, rows[:limit]
    nxt = rows[-1]["checkpoint_id"] if more else None
    if as_json:
        echo_json({"thread_id": thread, "checkpoints": rows, "next_before": nxt})
        return
    table = Table(title=f"history of {thread}")
    widths = {"ns": 2, "checkpoint_id": 36, "parent": 13, "step": 4, "source": 6,
              "writes": 6, "time (UTC)": 20}
    for col, width in widths.items():  # only the parent (the next row's id) may be cut
        table.add_column(col, justify="right" if col in ("step", "writes") else "left",
                         no_wrap=col != "parent", min_width=width, overflow="ellipsis")
    for row in rows:
        table.add_row(row["ns"] or '""', row["checkpoint_id"], row["parent"] or "-",
                      str(row["step"]), str(row["source"]), str(row["writes"]),
                      R.utc(row["ts"]))
    out = console()
    out.print(table)
    if nxt:
        out.print(f"next page: --before {nxt}")


def _tuple_data(tup: CheckpointTuple) -> dict[str, Any]:
    c = tup.config["configurable"]
    writes = [{"task_id": t, "channel": ch, "value": R.jsonable(v)}
              for t, ch, v in tup.pending_writes or []]
    interrupts = [R.jsonable(i) for t, ch, v in tup.pending_writes or []
                  if ch == R.INTERRUPT_CHANNEL for i in (v if isinstance(v, (list, tuple))
                                                         else [v])]
    return {
        "thread_id": c["thread_id"], "checkpoint_ns": c["checkpoint_ns"],
        "checkpoint_id": c["checkpoint_id"],
        "parent_checkpoint_id": tup.parent_config["configurable"]["checkpoint_id"]
        if tup.parent_config else None,
        "metadata": R.jsonable(tup.metadata), "ts": tup.checkpoint.get("ts"),
        "channel_values": R.jsonable(tup.checkpoint.get("channel_values", {})),
        "pending_writes": writes, "interrupts": interrupts,
    }


@command
def show(ctx: typer.Context, thread: str = typer.Argument(..., help="thread_id"),
         checkpoint: str = typer.Option(None, "--checkpoint", help="checkpoint id "
                                        "(default: the latest)"),
         ns: str = NS, as_json: bool = JSON) -> None:
    """One checkpoint decoded: metadata, channel values, pending writes and interrupts."""
    tup = _get(ctx, thread, checkpoint, ns)
    data = _tuple_data(tup)
    if as_json:
        echo_json(data)
        return
    out = console()
    md = tup.metadata
    out.print(f"thread {data['thread_id']}  ns {data['checkpoint_ns']!r}  checkpoint "
              f"{data['checkpoint_id']}\nparent {data['parent_checkpoint_id'] or '-'}  step "
              f"{md.get('step')}  source {md.get('source')}  time {R.utc(data['ts'])}")
    room = max(30, out.width - 40)
    values = Table(title="channel values")
    values.add_column("channel")
    values.add_column("type")
    values.add_column("value", no_wrap=True, overflow="ellipsis")
    for ch, v in sorted(tup.checkpoint.get("channel_values", {}).items()):
        values.add_row(ch, type(v).__name__, R.preview(v, room))
    out.print(values)
    if tup.pending_writes:
        writes = Table(title="pending writes")
        for col in ("task_id", "channel", "value"):
            writes.add_column(col, no_wrap=True, overflow="ellipsis")
        for t, ch, v in tup.pending_writes:
            writes.add_row(t, ch, R.preview(v, room - 40))
        out.print(writes)
    if data["interrupts"]:
        out.print(f"interrupts: {R.preview(data['interrupts'], 200)}")


@command
def diff(ctx: typer.Context, thread: str = typer.Argument(..., help="thread_id"),
         a: str = typer.Argument(..., help="older checkpoint id"),
         b: str = typer.Argument(..., help="newer checkpoint id"),
         ns: str = NS, as_json: bool = JSON) -> None:
    """What changed from checkpoint A to B, per channel: messages added/removed/changed
    (by message id), dict keys added/removed/changed, other values before -> after."""
    ta, tb = _get(ctx, thread, a, ns), _get(ctx, thread, b, ns)
    rows = R.diff_channels(ta.checkpoint.get("channel_values", {}),
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
        table.add_row(row["channel"], row["change"], R.describe_change(row))
    out = console()
    out.print(table)
    if not rows:
        out.print("no channel changed")
