"""The passes of ``langgraph-durable migrate`` after the rewrite of older document versions
(``cli/operating.migrate``): whole-list values to manifests of items (``admin/item_migration.py``),
then pending writes regrouped into one document per ``put_writes`` call
(``admin/write_regroup.py``), then nodes stored on their own put inside their items'
documents (``admin/node_fold.py``), each with a progress bar and a line of what it did,
then the indexes no release uses any more dropped (``documents.RETIRED_INDEXES``)."""

from __future__ import annotations

from typing import Any

import typer

from ..admin import item_migration, node_fold, write_regroup
from ..io.drivers import run_sync
from ..plans.migrations import retired_indexes_plan
from .session import progress


def _bulk_pass(sctx: Any, c: Any, label: str, module: Any, plan: Any, batch_size: int,
               dry_run: bool, max_batches: int | None) -> Any:
    """Run the resumable pass ``plan`` of ``module`` (its ``remaining_plan`` sizes the
    progress bar ``label``); returns what the plan returned."""
    todo = run_sync(module.remaining_plan(sctx), c)
    with progress(label, todo) as advance:
        return run_sync(plan(sctx, batch_size=batch_size, on_batch=advance,
                             max_batches=max_batches, dry_run=dry_run), c)


def _stopped(got: Any) -> str:
    return "" if got.finished else "; stopped early, run again to resume"


def regroup_writes(sctx: Any, c: Any, batch_size: int, dry_run: bool,
                   max_batches: int | None) -> None:
    """``migrate``'s third pass: pending writes stored one document per write (earlier
    releases) regrouped into one document per ``put_writes`` call (``write_regroup``)."""
    got = _bulk_pass(sctx, c, "regrouping writes", write_regroup,
                     write_regroup.regroup_writes_plan, batch_size, dry_run, max_batches)
    verb = "would regroup" if dry_run else "regrouped"
    typer.echo(f"writes: {verb} {got.removed} per-write documents into {got.stored} "
               f"documents of one call{_stopped(got)}")


def fold_nodes(sctx: Any, c: Any, batch_size: int, dry_run: bool,
               max_batches: int | None) -> None:
    """``migrate``'s fourth pass: nodes stored as documents of their own put inside the
    documents of the items completing them (``node_fold``)."""
    got = _bulk_pass(sctx, c, "folding nodes", node_fold, node_fold.fold_nodes_plan,
                     batch_size, dry_run, max_batches)
    verb = "would put" if dry_run else "put"
    typer.echo(f"nodes: {verb} {got.folded} of {got.read} stored on their own inside their "
               f"items' documents{_stopped(got)}")


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
               f"manifests ({kinds}); {got.items} item documents stored{_stopped(got)}")


def drop_retired_indexes(sctx: Any, c: Any, dry_run: bool) -> None:
    """``migrate``'s last pass: drop the indexes earlier releases made and nothing uses
    (``documents.RETIRED_INDEXES``), once every process runs this release; one MongoDB
    refuses to drop (a range shard key's) is kept and named."""
    dropped, kept = run_sync(retired_indexes_plan(sctx, dry_run=dry_run), c)
    verb = "would drop" if dry_run else "dropped"
    typer.echo(f"retired indexes: {verb} {len(dropped)}" + (
        f" ({', '.join(dropped)})" if dropped else "") + (
        f"; kept {len(kept)} MongoDB refused to drop ({'; '.join(kept)})" if kept else ""))
