"""Operating commands: ``status``, ``flush``, ``registry``, ``flusher``, ``gc``, ``prune``,
``delete``, ``copy``, ``fork``, ``migrate``. Writing commands run an in-process flusher, so the
outbox drains even when no application is running; destructive ones ask first."""

from __future__ import annotations

import logging
import time
from typing import Any

import typer
from rich.table import Table

from ..admin.extref_gc import collect_saver_garbage
from ..core.records import SCHEMA_VERSION
from ..errors import TierUnavailableError
from ..inspection import health, lookup, render, storage
from ..inspection import store_view as store_info
from ..io.drivers import run_sync
from ..plans import binding, migrations
from ..plans import thread_registry as registry_plans
from ..plans.migrations import check_owner_plan, deployed_version_plan
from ..runtime.startup import WHO
from . import migrate_passes
from .preview import NoSetup, prune_preview
from .session import (
    CliError,
    command,
    confirm,
    console,
    echo_json,
    live_command,
    progress,
    session_of,
    tier_error,
    tier_line,
)

YES = typer.Option(False, "--yes", "-y", help="do not ask for confirmation")


@command
def status(ctx: typer.Context,
           as_json: bool = typer.Option(False, "--json", help="print JSON"),
           probe: bool = typer.Option(
               False, "--probe", help="for health checks: the outbox figures and a "
               "MongoDB read only, without the scan of every Redis key of the prefix and "
               "MongoDB's collection sizes"),
           max_oldest_age_s: float | None = typer.Option(
               None, "--max-oldest-age-s", min=0, help="exit 3 when the oldest unflushed "
               "outbox entry is older than this many seconds (both tiers answering)"),
           max_flush_lag_s: float = typer.Option(
               60.0, "--max-flush-lag-s", min=0, help="the verdict is degraded when the "
               "oldest unflushed entry is older than this many seconds"),
           fail_on: str = typer.Option(
               "down", "--fail-on", help="down: exit 2 and 3 only (the default, as "
               "before); failing: also exit 4 when the verdict is failing; degraded: also "
               "exit 5 when it is degraded")
           ) -> None:
    """Health verdict (ok, degraded, failing, with its reasons), outbox length, pending
    entries per consumer, oldest unflushed entry's age (s), dead letters, Redis memory of
    the hot tier, MongoDB sizes, schema versions. Exit 0; 2 when a tier does not answer
    (the other is still shown); 3 when both answer and the oldest unflushed entry is
    older than --max-oldest-age-s; with --fail-on failing (or degraded) 4 when the
    verdict is failing for another reason (no live flusher while entries wait, a full
    outbox); with --fail-on degraded 5 when it is degraded."""
    if fail_on not in ("failing", "degraded", "down"):
        raise CliError(f"--fail-on must be failing, degraded or down, not {fail_on!r}")
    session = session_of(ctx)
    saver = session.saver()
    c, sctx = session.clients, saver.context
    data: dict[str, Any] = {"key_prefix": sctx.config.key_prefix,
                            "database": sctx.config.database, "down": {}}
    # sizes of a database this key prefix is not bound to would mislead: each part
    # starts with its half of check_deployment(), so that a tier that does not answer
    # is waited for once (a probe's timeout is a few seconds)

    facts: dict[str, Any] = {}
    store: dict[str, Any] = {}  # the memory store's counts (not with --probe)

    def redis_part() -> dict[str, Any]:
        run_sync(binding.check_plan(sctx, WHO), c)
        part = {"outbox": storage.outbox_status(sctx, c.redis)}
        facts["redis"] = health.redis_facts(sctx, c.redis)
        if probe:
            return part
        store.update(unflushed=store_info.store_unflushed(sctx, c.redis),
                     outbox=store_info.store_outbox_entries(sctx, c.redis),
                     vector_index=store_info.store_vector_index(sctx, c.redis))
        return {**part, "hot": storage.hot_memory(sctx, c.redis)}

    def mongodb_part() -> dict[str, Any]:
        run_sync(check_owner_plan(sctx), c)
        part = {"schema": {"package": SCHEMA_VERSION,
                           "deployed": run_sync(deployed_version_plan(sctx), c)}}
        facts["mongodb"] = health.mongodb_facts(sctx, c.db)
        if not probe:
            store["mongodb_items"] = store_info.store_mongodb_items(sctx, c.db)
        return part if probe else {"durable": storage.durable_sizes(sctx, c.db), **part}

    for tier, part in (("redis", redis_part), ("mongodb", mongodb_part)):
        try:  # a tier that does not answer is reported; the other is still shown
            data.update(part())
        except Exception as exc:
            err = tier_error(exc, session) or exc
            if not isinstance(err, TierUnavailableError):
                raise
            data["down"][tier] = tier_line(err)
    if store:
        data["store"] = store
    data["health"] = health.judge(
        sctx, down=data["down"], outbox=data.get("outbox"), redis=facts.get("redis"),
        mongodb=facts.get("mongodb"),
        options=health.HealthOptions(max_flush_lag_s=max_flush_lag_s)).as_dict()
    age = data["outbox"]["oldest_age_s"] if "outbox" in data else None
    data["exceeded"] = [] if max_oldest_age_s is None or age is None or age <= max_oldest_age_s \
        else [f"oldest unflushed entry {age:.1f} s old, over --max-oldest-age-s "
              f"{max_oldest_age_s:g}"]
    if as_json:
        echo_json(data)
    else:
        _print_status(data)
    if data["down"]:
        raise typer.Exit(2)
    if data["exceeded"]:
        raise typer.Exit(3)
    verdict = data["health"]["verdict"]
    if fail_on != "down" and verdict == health.FAILING:
        raise typer.Exit(4)
    if fail_on == "degraded" and verdict == health.DEGRADED:
        raise typer.Exit(5)


def _print_status(data: dict[str, Any]) -> None:
    out = console()
    t = Table(title=f"langgraph-durable status (prefix {data['key_prefix']}, "
                    f"database {data['database']})", show_header=False)
    t.add_column("what")
    t.add_column("value")
    verdict = data["health"]
    t.add_row("HEALTH", verdict["verdict"].upper())
    for reason in verdict["reasons"]:
        t.add_row(f"  {reason['level']}", reason["text"])
    for tier, error in data["down"].items():
        t.add_row(f"{tier} DOWN", error)
    for limit in data["exceeded"]:
        t.add_row("LIMIT EXCEEDED", limit)
    if "outbox" in data:
        _status_redis_rows(t, data)
    if "schema" in data:
        _status_mongodb_rows(t, data)
    if "store" in data:
        t.add_row("memory store", _store_line(data["store"]))
    out.print(t)


def _store_line(s: dict[str, Any]) -> str:
    parts = []
    if "mongodb_items" in s:
        parts.append(f"{s['mongodb_items']} items in MongoDB")
    if "unflushed" in s:
        o = s["outbox"]
        among = "" if o["complete"] else f" (among the first {o['scanned']})"
        parts.append(f"{s['unflushed']} unflushed in Redis, {o['entries']} outbox "
                     f"entries{among}")
    v = s.get("vector_index")
    if v:
        state = "ready" if v["ready"] else "being rebuilt"
        held = "?" if v["vectors"] is None else f"{v['vectors']:,}"
        parts.append(f"vector search in Redis ({v['algorithm']} index, {v['dims']} dims, "
                     f"{v['metric']}, {state}, {held} vectors)")
    elif "unflushed" in s:
        parts.append("no Redis vector index")
    return ", ".join(parts)


def _status_redis_rows(t: Table, data: dict[str, Any]) -> None:
    o, h = data["outbox"], data.get("hot")
    age = "-" if o["oldest_age_s"] is None else f"{o['oldest_age_s']:.1f} s"
    t.add_row("outbox length", f"{o['length']} entries ({o['stream']})")
    t.add_row("pending (read, not acked)", str(o["pending"]))
    quiet = 0
    for cons in o["consumers"]:
        if cons["pending"] or cons["idle_s"] < 60:
            beat = f", heartbeat {cons['heartbeat']}" if cons.get("heartbeat") else ""
            t.add_row(f"  consumer {cons['name']}",
                      f"{cons['pending']} pending, idle {cons['idle_s']:.1f} s{beat}")
        else:
            quiet += 1
    if quiet:
        t.add_row("  other consumers", f"{quiet} idle over 60 s with nothing pending")
    t.add_row("oldest unflushed entry", age)
    t.add_row("dead letters", o.get("dead_letter_error")
              or f"{o['dead_letters']} ({o['dead_letter_stream']})")
    if h is not None:  # not with --probe
        t.add_row("redis (hot tier)", f"{render.human_bytes(h['bytes'])} in {h['keys']} "
                  f"keys, {h['threads']} threads; server "
                  f"{render.human_bytes(h['server_used_memory'])}, "
                  f"maxmemory-policy {h['maxmemory_policy']}")


def _status_mongodb_rows(t: Table, data: dict[str, Any]) -> None:
    for kind, s in data.get("durable", {}).items():  # not with --probe
        t.add_row(f"mongodb {kind}", f"{s['documents']} documents, "
                  f"{render.human_bytes(s['size'])} data, "
                  f"{render.human_bytes(s['index_size'])} indexes")
    schema = data["schema"]
    t.add_row("schema version", f"package {schema['package']}, deployed "
              f"{schema['deployed'] if schema['deployed'] is not None else '- (no setup)'}")


@command
def flush(ctx: typer.Context,
          timeout_s: float = typer.Option(60.0, "--timeout-s", help="seconds to wait")) -> None:
    """Move everything in the outbox to MongoDB now (runs a flusher until it is empty)."""
    session = session_of(ctx)
    saver = session.saver(flusher=True, setup=False)
    waiting = sum(session.clients.redis.xlen(s)  # before the flusher starts
                  for s in saver.context.outboxes)
    began = time.perf_counter()
    saver.setup()
    saver.flush(timeout_s=timeout_s)
    typer.echo(f"flushed: {waiting} outbox entries were waiting; outbox drained in "
               f"{time.perf_counter() - began:.2f} s")


@command
def registry(ctx: typer.Context,
             rebuild: bool = typer.Option(False, "--rebuild", help="register every thread "
                                          "of both tiers and make the registries complete"),
             as_json: bool = typer.Option(False, "--json", help="print JSON")) -> None:
    """The thread registries, one per outbox partition: state and threads registered.
    Complete: a thread Redis holds nothing of and the registry lacks is new, so it starts
    while MongoDB is down; partial, pending or missing: such a read asks MongoDB. With
    --rebuild (safe while applications run) every thread of both tiers is registered and
    the registries become complete."""
    session = session_of(ctx)
    sctx = session.saver().context
    if rebuild:
        n = run_sync(registry_plans.rebuild_plan(sctx), session.clients)
        typer.echo(f"registered {n} threads of both tiers", err=True)
    rows = run_sync(registry_plans.states_plan(sctx), session.clients)
    if as_json:
        echo_json([{"key": k, "state": st, "threads": n} for k, st, n in rows])
        return
    t = Table("registry", "state", "threads")
    for k, st, n in rows:
        t.add_row(k, st, str(n))
    console().print(t)


@live_command
def flusher(ctx: typer.Context) -> None:
    """Run a standalone flusher worker (``python -m langgraph_durable.outbox.worker``)
    with these options until SIGTERM/SIGINT."""
    from ..outbox import worker

    session = session_of(ctx)
    if not session.redis_url or not session.mongo_url:
        raise CliError("--redis-url and --mongo-url (or REDIS_URL and MONGODB_URL) are "
                       "required")
    argv = ["--redis-url", session.redis_url, "--mongo-url", session.mongo_url]
    accepted = {a.dest for a in worker.build_parser()._actions}
    for name, value in session.options.items():
        if name in accepted:
            argv += [f"--{name.replace('_', '-')}", str(value)]
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    code = worker.run(argv)
    raise typer.Exit(code)


@command
def gc(ctx: typer.Context,
       grace_period_s: float = typer.Option(3600.0, "--grace-period-s",
                                            help="keep unreferenced blobs younger than this"),
       dry_run: bool = typer.Option(False, "--dry-run", help="report, delete nothing"),
       force: bool = typer.Option(False, "--force", help="delete even when no thread of "
                                  "this key prefix and database refers to any object"),
       yes: bool = YES) -> None:
    """Delete blob-store objects (--blob-store, or the --serde's store) that no checkpoint,
    write, channel value, item or effect journal entry in either tier refers to and that
    are older than the grace period
    (``langgraph_durable.admin.extref_gc.collect_saver_garbage``)."""
    session = session_of(ctx)
    saver = session.saver(flusher=True)
    store = session.blob_store() or getattr(saver.serde, "store", None)
    if store is None:
        raise CliError("gc needs the blob store: pass --blob-store (s3://bucket/prefix or a "
                       "folder) or a --serde with a store")
    if not dry_run:
        confirm(f"delete unreferenced blobs older than {grace_period_s:g} s from {store!r}?",
                yes)
        if not force:  # a store shared with other apps, or the wrong prefix or database
            trial = collect_saver_garbage(saver, store, grace_period_s=grace_period_s, dry_run=True)
            if trial.referenced == 0 and trial.deleted:
                raise CliError(
                    f"no thread of key prefix {saver.config.key_prefix!r} (database "
                    f"{saver.config.database!r}) refers to any object of {store!r}, and gc "
                    f"would delete {len(trial.deleted)}: is the prefix or database wrong, or "
                    "is the store shared with other apps? Nothing deleted; pass --force to "
                    "delete them anyway")
    report = collect_saver_garbage(saver, store, grace_period_s=grace_period_s, dry_run=dry_run)
    verb = "would delete" if dry_run else "deleted"
    typer.echo(f"gc: {report.scanned} blobs scanned, {report.referenced} referenced keys; "
               f"{verb} {len(report.deleted)} ({render.human_bytes(report.bytes_deleted)}), kept "
               f"{report.kept_referenced} referenced and {report.kept_recent} recent")


def _threads_arg(ctx: typer.Context, threads: list[str], every: bool,
                 flusher: bool = True) -> list[str]:
    """The threads a command acts on: every thread (``--all``), or the named ones, all of
    which must exist (else ``CliError`` naming the unknown ones; nothing is done). The
    session's saver runs a flusher unless not ``flusher`` (a dry run moves nothing)."""
    session = session_of(ctx)
    saver = session.saver(flusher=True) if flusher else session.saver(tolerant=True)
    if every and threads:
        raise CliError("name threads or pass --all, not both (nothing done)")
    if every:
        return [t.thread_id for t in storage.all_threads(
            saver if flusher else NoSetup(saver.context, session.clients))]
    if not threads:
        raise CliError("name at least one thread (or --all)")
    threads = list(dict.fromkeys(threads))  # each once
    unknown = [t for t in threads if not storage.thread_exists(saver.context, session.clients, t)]
    if unknown:
        names = ", ".join(repr(t) for t in unknown)
        raise CliError(f"thread{'s' if len(unknown) > 1 else ''} {names} not found "
                       "(nothing done)")
    return threads


@command
def prune(ctx: typer.Context,
          threads: list[str] = typer.Argument(None, metavar="[THREAD]...",  # noqa: B008
                                              help="thread ids"),
          every: bool = typer.Option(False, "--all", help="every thread"),
          strategy: str = typer.Option("keep_latest", "--strategy",
                                       help="keep_latest (and the delta ancestors it needs) "
                                       "or delete"),
          keep_last: int = typer.Option(None, "--keep-last", min=1,
                                        help="keep the newest N checkpoints of each namespace "
                                        "(keep_latest)"),
          older_than: str = typer.Option(None, "--older-than",
                                         help="keep_latest: drop only checkpoints older than "
                                         "this (30d, 12h, 15m, 90s; the newest stays); delete: "
                                         "delete only threads inactive for this long"),
          dry_run: bool = typer.Option(False, "--dry-run", help="print what would be "
                                       "removed (threads, checkpoints, writes, values) and "
                                       "change nothing"),
          yes: bool = YES) -> None:
    """Drop old checkpoints of threads in both tiers (``DurableSaver.prune``): keep the
    newest one (default), the newest N (--keep-last) and/or those younger than
    --older-than; or delete whole threads (--strategy delete, with --older-than only the
    inactive ones: a retention job for cron). Unknown threads are an error. --dry-run
    lists what would go, as MongoDB holds it, and changes nothing."""
    from ..plans.history_edits import check_prune

    try:
        older_than_s = None if older_than is None else render.parse_duration(older_than)
        check_prune(strategy, keep_last, older_than_s)
    except ValueError as exc:
        raise CliError(str(exc).replace("prune keep_last", "--keep-last").replace(
            "prune strategy", "--strategy")) from None
    ids = _threads_arg(ctx, threads or [], every, flusher=not dry_run)
    what = strategy + (f", keep last {keep_last}" if keep_last else "") + (
        f", older than {older_than}" if older_than else "")
    if dry_run:
        prune_preview(session_of(ctx), ids, strategy, keep_last, older_than_s, what)
        return
    confirm(f"prune {len(ids)} thread(s) ({what})?", yes)
    session = session_of(ctx)
    saver = session.saver(flusher=True)
    with progress("pruning", len(ids)) as advance:
        for tid in ids:
            saver.prune([tid], strategy=strategy, keep_last=keep_last,
                        older_than_s=older_than_s)
            advance(1)
    if strategy == "delete":  # with --older-than, active threads stay: say how many went
        gone = sum(not storage.thread_exists(saver.context, session.clients, t) for t in ids)
        typer.echo(f"deleted {gone} of {len(ids)} thread(s) ({what})")
    else:
        typer.echo(f"pruned {len(ids)} thread(s) ({what})")


@command
def delete(ctx: typer.Context,
           threads: list[str] = typer.Argument(..., metavar="THREAD...",  # noqa: B008
                                               help="thread ids"),
           yes: bool = YES) -> None:
    """Delete threads entirely from both tiers (``DurableSaver.delete_thread``). Unknown
    threads are an error (nothing is deleted)."""
    ids = _threads_arg(ctx, threads, False)
    confirm(f"delete {len(ids)} thread(s) and all their checkpoints?", yes)
    saver = session_of(ctx).saver(flusher=True)
    with progress("deleting", len(ids)) as advance:
        for tid in ids:
            saver.delete_thread(tid)
            advance(1)
    typer.echo(f"deleted {len(ids)} thread(s)")


@command
def copy(ctx: typer.Context,
         src: str = typer.Argument(..., metavar="SRC", help="source thread_id"),
         dst: str = typer.Argument(..., metavar="DST", help="target thread_id"),
         yes: bool = YES) -> None:
    """Copy every checkpoint, blob and write of SRC to DST (``copy_thread``)."""
    session = session_of(ctx)
    saver = session.saver(flusher=True)
    if not storage.thread_exists(saver.context, session.clients, src):
        raise CliError(f"thread {src!r} not found")
    if storage.thread_exists(saver.context, session.clients, dst):
        confirm(f"thread {dst!r} exists; copy {src!r} into it (same ids are overwritten)?",
                yes)
    saver.copy_thread(src, dst)
    typer.echo(f"copied {src} -> {dst}")


@command
def fork(ctx: typer.Context,
         thread: str = typer.Argument(..., metavar="THREAD", help="source thread_id"),
         checkpoint: str = typer.Option(..., "--checkpoint", help="checkpoint to fork: a "
                                        "step number, a checkpoint_id or a unique prefix"),
         to: str = typer.Option(..., "--to", help="new thread_id"),
         ns: str = typer.Option("", "--ns", help="checkpoint namespace"),
         values: list[str] = typer.Option(  # noqa: B008
             [], "--set", help="channel=JSON: the fork's value of that channel (repeatable)"),
         ) -> None:
    """Time travel: a new thread whose latest checkpoint is CHECKPOINT of THREAD (same
    channel values and pending writes; metadata source "fork", forked_from_thread and
    forked_from_checkpoint). ``--set channel=JSON`` replaces a channel's value in the fork
    (a new version, as update_state stores an edit; no reducer applied). Resuming it
    continues from that point."""
    session = session_of(ctx)
    saver = session.saver(flusher=True)
    try:
        edits = render.parse_pairs(values, "--set", "channel=JSON", json_only=True)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    done = lookup.fork(saver, session.clients, thread, checkpoint, to, ns, edits)
    edited = f", {', '.join(sorted(edits))} set" if edits else ""
    typer.echo(f"forked {thread}@{done['source_checkpoint_id']} -> {to}@"
               f"{done['checkpoint_id']} (step {done['step']}, {done['pending_writes']} "
               f"pending writes{edited})")


@command
def migrate(ctx: typer.Context,
            batch_size: int = typer.Option(500, "--batch-size", min=1,
                                           help="documents rewritten per round"),
            dry_run: bool = typer.Option(False, "--dry-run", help="count, rewrite nothing"),
            max_batches: int = typer.Option(None, "--max-batches", hidden=True)) -> None:
    """Rewrite MongoDB documents of older schema versions in the current format, then
    store whole-list values as manifests of items (item_migration.py), then regroup
    pending writes into one document per put_writes call (write_regroup.py), each with a
    progress bar, then drop the indexes no release uses (documents.RETIRED_INDEXES: run
    it once every process is upgraded); resumable (cursors in the meta collection) and
    idempotent."""
    session = session_of(ctx)
    saver = session.saver()
    saver.setup()  # records the deployed version
    c, sctx = session.clients, saver.context
    census = run_sync(migrations.census_plan(sctx), c)
    old = sum(x["old"] for x in census.values())
    summary = ", ".join(f"{k} {v['old']}" for k, v in census.items())
    typer.echo(f"schema version {SCHEMA_VERSION}: {old} older documents ({summary})")
    if any(x["newer"] for x in census.values()):
        run_sync(migrations.migrate_plan(sctx), c)  # raises SchemaVersionError, rewrites nothing
    if old and not dry_run:
        with progress("migrating", old) as advance:
            done = run_sync(migrations.migrate_plan(sctx, batch_size=batch_size,
                                                    on_batch=lambda _k, n: advance(n),
                                                    max_batches=max_batches), c)
        typer.echo(f"rewrote {sum(done.values())} documents ("
                   + ", ".join(f"{k} {n}" for k, n in done.items()) + ")")
        if max_batches is not None:
            return
    migrate_passes.convert_lists(sctx, c, batch_size, dry_run, max_batches)
    migrate_passes.regroup_writes(sctx, c, batch_size, dry_run, max_batches)
    migrate_passes.drop_retired_indexes(sctx, c, dry_run)
