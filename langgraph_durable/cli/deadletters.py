"""``dead-letters list|replay|drop``: the outbox entries flushers set aside
(``outbox/dead.py``): each with its thread, original entry id and stream, the step of the
flush round that failed, the error and its payload. Replay puts entries back in their
thread's outbox partition (after a fix: a flusher takes them as any entry); drop gives them
up."""

from __future__ import annotations

import datetime
from typing import Any

import typer
from rich.table import Table

from ..core.outbox_entry import DeadLetter
from ..io.drivers import run_sync
from ..outbox import dead
from .session import CliError, command, confirm, console, echo_json, session_of

app = typer.Typer(name="dead-letters", no_args_is_help=True, add_completion=False,
                  help="List, replay (after a fix) or drop the outbox entries flushers set "
                  "aside as dead letters.")

YES = typer.Option(False, "--yes", "-y", help="do not ask for confirmation")
IDS = typer.Argument(None, metavar="[ID]...", show_default=False,
                     help="dead-letter ids or original outbox entry ids (list shows both)")
ALL = typer.Option(False, "--all", help="every dead letter")
THREAD = typer.Option(None, "--thread", help="the dead letters of this thread")


def _row(d: DeadLetter) -> dict[str, Any]:
    """A dead letter as JSON: ids, stream, thread, step, error, time, and its payload's
    size and hex (``fields``: every original field, hex)."""
    return {"id": d.id, "entry_id": d.entry_id, "stream": d.stream, "thread_id": d.thread_id,
            "step": d.step, "error": d.error, "at_ms": d.at_ms,
            "payload_bytes": None if d.payload is None else len(d.payload),
            "fields": {k.decode(errors="replace"): bytes(v).hex()
                       for k, v in d.fields.items()}}


def _when(ms: int) -> str:
    if not ms:
        return "-"
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc).strftime(
        "%Y-%m-%d %H:%M:%S")


@command
def list_(ctx: typer.Context,
          thread: str | None = THREAD,
          as_json: bool = typer.Option(False, "--json", help="print JSON"),
          limit: int | None = typer.Option(None, "--limit", min=1,
                                           help="at most this many, oldest first")) -> None:
    """The dead letters, oldest first: id, original entry and stream, thread, failed
    step, error, when (UTC), payload size (--json: every original field in hex)."""
    session = session_of(ctx)
    letters = run_sync(dead.list_plan(session.saver().context, count=limit), session.clients)
    if thread is not None:
        letters = [d for d in letters if d.thread_id == thread]
    if as_json:
        echo_json([_row(d) for d in letters])
        return
    t = Table("id", "entry", "thread", "step", "error", "at (UTC)", "payload")
    for d in letters:
        t.add_row(d.id, f"{d.entry_id} ({d.stream})", d.thread_id, d.step, d.error,
                  _when(d.at_ms), "-" if d.payload is None else f"{len(d.payload)} B")
    console().print(t)
    typer.echo(f"{len(letters)} dead letters", err=True)


def _chosen(ctx: typer.Context, ids: list[str] | None, every: bool, thread: str | None
            ) -> tuple[Any, list[DeadLetter]]:
    if not ids and not every and thread is None:
        raise CliError("name dead letters by id, or give --thread THREAD or --all")
    session = session_of(ctx)
    letters = run_sync(dead.list_plan(session.saver().context), session.clients)
    chosen = dead.select(letters, ids=ids or (), thread_id=thread, every=every)
    missing = sorted(set(ids or ()) - {x for d in chosen for x in (d.id, d.entry_id)})
    if missing:
        raise CliError(f"no dead letter has the id {', '.join(missing)}")
    return session, chosen


@command
def replay(ctx: typer.Context, ids: list[str] | None = IDS, every: bool = ALL,
           thread: str | None = THREAD, yes: bool = YES) -> None:
    """Put dead letters back in their thread's outbox (after fixing what failed: a
    flusher takes them again) and remove them from the dead letters. Skipped, with the
    reason: those without their original fields (an earlier release's), those whose
    thread Redis no longer holds or holds in a newer generation (drop them)."""
    session, chosen = _chosen(ctx, ids, every, thread)
    if not chosen:
        typer.echo("no dead letters to replay", err=True)
        return
    confirm(f"replay {len(chosen)} dead letters into the outbox?", yes)
    done = run_sync(dead.replay_plan(session.saver().context, chosen), session.clients)
    for d, reason in done.skipped:
        typer.echo(f"skipped {d.id} (thread {d.thread_id!r}, entry {d.entry_id}): {reason}",
                   err=True)
    typer.echo(f"replayed {len(done.replayed)} dead letters; skipped {len(done.skipped)}")


@command
def drop(ctx: typer.Context, ids: list[str] | None = IDS, every: bool = ALL,
         thread: str | None = THREAD, yes: bool = YES) -> None:
    """Delete dead letters: their entries are given up (MongoDB never gets what they
    named)."""
    session, chosen = _chosen(ctx, ids, every, thread)
    if not chosen:
        typer.echo("no dead letters to drop", err=True)
        return
    confirm(f"drop {len(chosen)} dead letters? Their entries never reach MongoDB", yes)
    n = run_sync(dead.drop_plan(session.saver().context, chosen), session.clients)
    typer.echo(f"dropped {n} dead letters")
