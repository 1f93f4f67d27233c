"""Retention by policy from the command line (``DurableConfig.ttl``, ``plans/retention_policy.py``):
``retention`` (the policy, the last sweep, the threads due next), ``sweep`` (now, or
``--dry-run``), ``pin`` and ``unpin``. The policy comes from ``LGD_TTL`` (JSON, as
``langgraph.json``'s ``checkpointer.ttl``) or ``--policy``."""

from __future__ import annotations

import datetime
import json
from typing import Any

import typer
from pydantic import ValidationError
from rich.markup import escape
from rich.table import Table

from ..config import ThreadTTL
from ..durable.retention_docs import ThreadRetention
from ..plans.retention_policy import lease_plan
from .browse import JSON
from .session import CliError, command, confirm, console, echo_json, session_of

POLICY = typer.Option(None, "--policy", metavar="JSON",
                      help='the retention policy, e.g. \'{"strategy": "delete", '
                      '"default_ttl": 43200}\' (default: LGD_TTL)')
THREADS = typer.Argument(..., metavar="THREAD...", help="thread ids")  # noqa: B008


def _policy(text: str | None) -> dict[str, Any]:
    """``from_urls`` options for ``--policy`` (none when not given: ``LGD_TTL`` applies);
    raises ``CliError`` for text that is not a policy."""
    if text is None:
        return {}
    try:
        return {"ttl": ThreadTTL.model_validate(json.loads(text))}
    except (ValueError, ValidationError) as exc:
        raise CliError(f"--policy is not a retention policy: {exc}") from None


def when(ms: int | None) -> str:
    """``ms`` since the epoch as ``YYYY-MM-DD HH:MM:SSZ`` (``-`` for None; ``<ms> ms``
    for a time no date holds, e.g. past the year 9999)."""
    if ms is None:
        return "-"
    try:
        at = datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc)
    except (ValueError, OverflowError, OSError, TypeError):
        return f"{ms} ms"
    return at.strftime("%Y-%m-%d %H:%M:%SZ")


def _due_table(rows: list[ThreadRetention], now_ms: int) -> Table:
    t = Table(title="threads due next (soonest first; pinned ones are never swept)")
    for col in ("thread", "expires", "in", "ttl (min)", "last activity"):
        t.add_column(col, no_wrap=True, overflow="ellipsis")
    for r in rows:
        left = None if r.expires_ms is None else (r.expires_ms - now_ms) / 60_000
        t.add_row(escape(r.thread_id), when(r.expires_ms),
                  "-" if left is None else ("due" if left <= 0 else f"{left:.0f} min"),
                  "default" if r.ttl_minutes is None else f"{r.ttl_minutes:g}",
                  when(r.last_activity_ms))
    return t


@command
def retention(ctx: typer.Context,
              limit: int = typer.Option(20, "--limit", min=1, help="threads shown"),
              policy: str = POLICY, as_json: bool = JSON) -> None:
    """The retention policy (strategy, default TTL, sweep interval and limit), the last
    sweep (when, by whom, what it did), the next one, and the threads that expire
    soonest, with their expiry, own TTL and last activity. Changes nothing."""
    saver = session_of(ctx).saver(tolerant=True, extra=_policy(policy))
    ttl = saver.config.ttl
    lease = saver.run(lease_plan(saver.context)) or {}
    due = saver.retention_due(limit)
    now_ms = int(datetime.datetime.now(datetime.timezone.utc).timestamp() * 1000)
    if as_json:
        echo_json({"policy": None if ttl is None else ttl.model_dump(),
                   "last_sweep": lease.get("last"), "next_sweep_ms": lease.get("next_at"),
                   "sweeping": lease.get("owner") if lease.get("until", 0) > now_ms else None,
                   "due": [r.as_dict() for r in due]})
        return
    out = console()
    if ttl is None:
        out.print("no retention policy (set LGD_TTL or --policy): nothing is recorded or "
                  "swept")
    else:
        out.print(f"policy: {ttl.strategy}, default TTL "
                  f"{'none' if ttl.default_ttl is None else f'{ttl.default_ttl:g} min'}, "
                  f"sweep every {ttl.sweep_interval_minutes:g} min, at most "
                  f"{ttl.sweep_limit} threads")
    if lease:
        busy = lease.get("until", 0) > now_ms
        out.print(f"last sweep: {lease.get('last') or '-'} (by {lease.get('owner')}, "
                  f"started {when(lease.get('started'))})" + (
                      "; sweeping now" if busy else "")
                  + f"; next not before {when(lease.get('next_at'))}")
    out.print(_due_table(due, now_ms))


@command
def sweep(ctx: typer.Context,
          limit: int = typer.Option(None, "--limit", min=1,
                                    help="most threads (default the policy's sweep_limit)"),
          dry_run: bool = typer.Option(False, "--dry-run", help="list what the sweep would "
                                       "delete, prune or hold, and change nothing"),
          policy: str = POLICY, yes: bool = typer.Option(False, "--yes", "-y",
                                                         help="do not ask"),
          as_json: bool = JSON) -> None:
    """Sweep now (``DurableSaver.sweep``): the threads whose expiry passed are deleted
    (strategy delete) or pruned to their newest checkpoint (keep_latest); pinned threads
    and threads waiting for an answer to an interrupt stay. One sweeper at a time: when
    another holds the lease, nothing is done (exit code 1)."""
    session = session_of(ctx)
    extra = _policy(policy)
    if dry_run:
        saver = session.saver(tolerant=True, extra=extra)
    else:
        confirm("sweep expired threads now?", yes)
        saver = session.saver(flusher=True, extra=extra)
    report = saver.sweep(limit=limit, dry_run=dry_run)
    if report.skipped:
        raise CliError(f"nothing swept: {report.skipped}")
    if as_json:
        echo_json({**report.summary(), "dry_run": dry_run, "deleted": report.deleted,
                   "pruned": report.pruned, "held": report.held, "gone": report.gone,
                   "moved": report.moved, "failed": report.failed})
        return
    verb = "would be " if dry_run else ""
    for label, ids in (("deleted", report.deleted), ("pruned", report.pruned),
                       ("held (unanswered interrupt)", report.held),
                       ("already gone", report.gone), ("active again, left", report.moved)):
        if ids:
            typer.echo(f"{verb}{label}: {', '.join(ids)}")
    for tid, error in report.failed.items():
        typer.echo(f"left (damaged records): {tid}: {error}", err=True)
    typer.echo(f"{'dry run: ' if dry_run else ''}{len(report.deleted)} deleted, "
               f"{len(report.pruned)} pruned, {len(report.held)} held"
               + (f", {len(report.failed)} left with damaged records" if report.failed
                  else "")
               + (" (stopped: the lease was lost)" if report.stopped else ""))


@command
def pin(ctx: typer.Context, threads: list[str] = THREADS) -> None:
    """Pin threads: no retention sweep deletes or prunes them until unpinned."""
    saver = session_of(ctx).saver(flusher=True)
    for tid in threads:
        saver.pin_thread(tid)
    typer.echo(f"pinned {len(threads)} thread(s)")


@command
def unpin(ctx: typer.Context, threads: list[str] = THREADS) -> None:
    """Unpin threads: sweeps take them again once their expiry passed."""
    saver = session_of(ctx).saver(flusher=True)
    for tid in threads:
        saver.unpin_thread(tid)
    typer.echo(f"unpinned {len(threads)} thread(s)")
