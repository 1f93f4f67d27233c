"""The passes of ``langgraph-durable migrate`` after the rewrite of older document versions
(``cli/operating.migrate``): whole-list values to manifests of items (``admin/item_migration.py``),
then pending writes regrouped into one document per ``put_writes`` call
(``admin/write_regroup.py``), each with a progress bar and a line of what it did, then
the indexes no release uses any more dropped (``documents.RETIRED_INDEXES``)."""

from __future__ import annotations

from typing import Any

import typer

from ..admin import item_migration, write_regroup
from ..io.drivers import run_sync
from ..plans.migrations import retired_indexes_plan
from .session import progress


def regroup_writes(sctx: Any, c: Any, batch_size: int, dry_run: bool,
                   max_batches: int | None) -> None:
    """``migrate``'s third pass: pending writes stored one document per write (earlier
    releases) regrouped into one document per ``put_writes`` call (``write_regroup``)."""
    todo = run_sync(write_regroup.remaining_plan(sctx), c)
    with progress("regrouping writes", todo) as advance:
        got = run_sync(write_regroup.regroup_writes_plan(
            sctx, batch_size=batch_size, on_batch=advance, max_batches=max_batches,
            dry_run=dry_run), c)
    verb = "would regroup" if dry_run else "regrouped"
    typer.echo(f"writes: {verb} {got.removed} per-write documents into {got.stored} "
               "documents of one call" + ("" if got.finished else
                                          "; stopped early, run again to resume"))


def convert_lists(sctx: Any, c: Any, batch_size: int, dry_run: bool,
                  max_batches: int | None) -> None:
    """``migrate``'s second pass: whole-list values to manifests (``item_migration``)."""
    if not sctx.items.enabled:
        typer.echo("list values: item store disabled (list_items=False, or an encrypting "
                   "serializer without a digest key); nothing converted")
        return
    todo = run_sync(item_migration.remaining_plan(sctx), c)
    with progress("converting lists", todo) as advance:
        got = run_sync(item_migration.convert_lists_plan(
            sctx, batch_size=batch_size, on_batch=lambda _k, n: advance(n),
            max_batches=max_batches, dry_run=dry_run), c)
    n = sum(got.converted.values())
    kinds = ", ".join(f"{k} {v}" for k, v in got.converted.items())
    verb = "would convert" if dry_run else "converted"
    typer.echo(f"list values: {verb} {n} of {sum(got.examined.values())} values read to "
               f"manifests ({kinds}); {got.items} item documents stored"
               + ("" if got.finished else "; stopped early, run again to resume"))


def drop_retired_indexes(sctx: Any, c: Any, dry_run: bool) -> None:
    """``migrate``'s last pass: drop the indexes earlier releases made and nothing uses
    (``documents.RETIRED_INDEXES``), once every process runs this release; one MongoDB
    refuses to drop (a range shard key's) is kept and named."""
    dropped, kept = run_sync(retired_indexes_plan(sctx, dry_run=dry_run), c)
    verb = "would drop" if dry_run else "dropped"
    typer.echo(f"retired indexes: {verb} {len(dropped)}" + (
        f" ({', '.join(dropped)})" if dropped else "") + (
        f"; kept {len(kept)} MongoDB refused to drop ({'; '.join(kept)})" if kept else ""))
