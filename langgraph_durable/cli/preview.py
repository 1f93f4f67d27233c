"""``prune --dry-run``: what a prune would remove, read without writing anything (not
even the saver's set-up, which records itself in MongoDB's ``meta``)."""

from __future__ import annotations

from typing import Any

import typer

from ..inspection import storage
from ..io.drivers import run_sync
from ..plans.history_edits import prune_preview_plan
from ..plans.threads import list_threads_plan


class NoSetup:
    """``list_threads`` run on the clients without the saver's set-up (which records
    itself in MongoDB's ``meta``): for commands that must write nothing."""

    def __init__(self, sctx: Any, clients: Any) -> None:
        self.sctx, self.clients = sctx, clients

    def list_threads(self, *, limit: int, cursor: str | None = None) -> Any:
        """A ``ThreadPage`` (``DurableSaver.list_threads``)."""
        return run_sync(list_threads_plan(self.sctx, limit, cursor), self.clients)


def prune_preview(session: Any, ids: list[str], strategy: str, keep_last: int | None,
                  older_than_s: float | None, what: str) -> None:
    """Print, per thread of ``ids``, what ``prune`` with these arguments would remove
    (``plans.history_edits.prune_preview_plan``), a total (``what`` describes the arguments),
    and the outbox entries not counted; writes nothing. ``session``: the CLI's
    ``Session``, its saver opened without a flusher."""
    saver = session.saver()
    sctx = saver.context
    chosen = run_sync(prune_preview_plan(sctx, ids, strategy, keep_last=keep_last,
                                         older_than_s=older_than_s), session.clients)
    n_threads = n_checkpoints = n_writes = n_values = 0
    for tid, c in chosen.items():
        if c is None:
            typer.echo(f"{tid}: kept (active within --older-than)")
            continue
        if c.whole_thread:
            typer.echo(f"{tid}: whole thread, {c.dropped} checkpoint(s)")
        elif not c.dropped:
            typer.echo(f"{tid}: nothing ({c.kept} checkpoint(s) kept)")
            continue
        else:
            per_ns = ", ".join(f"ns {ns!r}: {len(cids)}" for ns, cids in c.checkpoints.items()
                               if cids)
            typer.echo(f"{tid}: {c.dropped} of {c.dropped + c.kept} checkpoint(s) ({per_ns}), "
                       f"{len(c.write_ids)} pending write(s), {len(c.blob_fields)} channel "
                       "value(s)")
        n_threads += 1
        n_checkpoints += c.dropped
        n_writes += len(c.write_ids)
        n_values += len(c.blob_fields)
    typer.echo(f"dry run ({what}): would prune {n_threads} of {len(ids)} thread(s): "
               f"{n_checkpoints} checkpoint(s), {n_writes} pending write(s), {n_values} "
               "channel value(s) (and the items only they name); nothing was changed")
    waiting = storage.outbox_status(sctx, session.clients.redis)["length"]
    if waiting:
        typer.echo(f"note: {waiting} outbox entr{'y' if waiting == 1 else 'ies'} not yet in "
                   "MongoDB are not counted (prune flushes them first: as newer "
                   "checkpoints they may make it drop more of the older ones)")
