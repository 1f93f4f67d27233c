"""``migrate-state``: rewrite old threads in the application's current state version
(``inspection/state_migration.py``)."""

from __future__ import annotations

from typing import Any

import typer

from ..errors import ConfigurationError
from ..inspection import state_migration as sm
from ..inspection import versions
from .session import CliError, command, echo_json, session_of

_SAID = {"migrated": "migrated", "would_migrate": "would migrate", "newer": "newer",
         "skipped": "skipped", "failed": "failed"}


@command
def migrate_state(ctx: typer.Context,
                  migrations: str = typer.Option(
                      ..., "--migrations", metavar="MODULE:ATTR",
                      help="the application's migration registry: a dict of state "
                      "version -> function or StateMigration (imported: the module must "
                      "be importable)"),
                  state_version: int | None = typer.Option(
                      None, "--state-version", metavar="N", min=1,
                      help="the version to bring threads to (the new code's "
                      "state_version; default: the global --state-version, env "
                      "LGD_STATE_VERSION)"),
                  dry_run: bool = typer.Option(
                      False, "--dry-run", help="run the migrations in memory and say what "
                      "would be rewritten; write nothing"),
                  limit: int = typer.Option(
                      None, "--limit", metavar="K", min=1,
                      help="stop after K threads migrated (run again for more)"),
                  thread: list[str] = typer.Option(  # noqa: B008
                      [], "--thread", metavar="T", help="only this thread (repeatable)"),
                  as_json: bool = typer.Option(False, "--json", help="print JSON")) -> None:
    """Rewrite the latest checkpoint of every thread older than --state-version N in
    version N (each namespace's latest, subgraphs first), under the same checkpoint_id:
    pending writes (an interrupt's resume) stay attached. Threads already at N are
    skipped, so an interrupted run is finished by running it again; threads written by
    newer code are left alone. A checkpoint without a version is read as the global
    --unversioned-state-version (default 1). Prints a line per thread changed and the
    counts; exit 1 when some thread failed (each named with its reason)."""
    session = session_of(ctx)
    config = session.config
    target = state_version or config.state_version
    if target is None:
        raise CliError("give the version to migrate to: --state-version N (or the global "
                       "--state-version / LGD_STATE_VERSION)")
    unversioned = config.unversioned_state_version
    try:
        registry = sm.load_registry(migrations)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    extra = {"state_version": target, "state_migrations": registry}
    try:
        saver = session.saver(flusher=not dry_run, extra=extra)
    except ConfigurationError as exc:
        raise CliError(f"--migrations {migrations!r}: {exc}") from None

    def said(o: sm.ThreadOutcome) -> None:
        if as_json or o.outcome == "current":
            return
        line = f"{_SAID[o.outcome]} {o.thread_id}: state version {versions.shown(o.stored)}"
        if o.outcome in ("migrated", "would_migrate"):
            line += f" -> {target} ({len(o.rewritten)} checkpoint(s))"
        if o.reason:
            line += f": {o.reason}"
        typer.echo(line)

    result = sm.migrate_threads(saver, target, registry, threads=thread or None,
                                limit=limit, dry_run=dry_run, unversioned_as=unversioned,
                                report=said)
    counts = result.counts()
    if as_json:
        data: dict[str, Any] = {"state_version": target, "dry_run": dry_run,
                                "counts": counts, "limited": result.limited,
                                "threads": [o.as_dict() for o in result.outcomes
                                            if o.outcome != "current"]}
        echo_json(data)
    else:
        done = (f"{counts['would_migrate']} would be migrated" if dry_run
                else f"{counts['migrated']} migrated")
        typer.echo(f"state version {target}{' (dry run)' if dry_run else ''}: "
                   f"{done}, {counts['current']} already current, {counts['newer']} newer "
                   f"(left alone), {counts['skipped']} skipped (migrate on read), "
                   f"{counts['failed']} failed"
                   + (f"; stopped at --limit {limit}: run again for the rest"
                      if result.limited else ""))
    if counts["failed"]:
        raise typer.Exit(1)
