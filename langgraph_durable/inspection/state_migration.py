"""Rewriting old threads in the application's current state version
(``langgraph-durable migrate-state``; issue 34).

A saver configured with ``state_version=N`` and ``state_migrations`` migrates an older
checkpoint every time it reads it; the stored bytes stay as written until the thread's
next checkpoint. ``migrate_threads`` makes that next checkpoint now, for threads nobody
resumes: for each thread whose latest root checkpoint is older than N it reads the latest
checkpoint of every namespace of the thread (subgraphs first, the root last) through
such a saver (the migration runs there, as on a resume) and ``put``s the result under
the **same** ``checkpoint_id`` and parent, with metadata stamped N. The saver's ``put``
overwrites a stored checkpoint_id in both tiers as ``InMemorySaver.put`` overwrites its
dict entry (Redis ``HSET``; MongoDB's flush upserts the document), so the checkpoint's
pending writes (an interrupt's resume, the writes of tasks that finished) stay attached
and the history keeps its shape. A checkpoint Redis does not hold (the thread's hot keys
are gone: only MongoDB holds it) gets its pending writes put into Redis first
(``_writes_into_redis``), since a read served by Redis takes Redis's writes of a
checkpoint Redis holds. Each checkpoint is rewritten by one ``put``: a run
killed at any moment leaves every checkpoint in its old or its new version, both
readable; running again skips threads whose root is already at N (resumable) and goes
on with the rest.

Left as they are, with the reason: a thread written by newer code (``"newer"``), a
checkpoint whose pending writes a writes hook (``StateMigration.writes``) would change
(they are stored insert-once, so they would stay in the old shape under a checkpoint
stamped N; such a thread migrates on read when it resumes), a root that is the thread's
input checkpoint alone (step -1; the put would start a new thread in Redis), a value
the operator's tools do not decode (a placeholder would be stored; ``--allow-type``).
Failed, with the reason: a migration that raised or a gap in the chain
(``StateMigrationError``), a put refused. A checkpoint whose parent ``prune`` deleted
(``keep_latest``: the put naming it is refused) is stored without that parent link, the
same id and pending writes: the pruned history already ended there.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..core.records import member
from ..core.state_versions import STATE_VERSION_KEY, is_marked
from ..durable.write_groups import pending_of
from ..errors import DurableSaverError, ThreadDeletedError, TierUnavailableError
from ..plans import read
from . import lookup, storage, versions
from .strict import contains_placeholder

OUTCOMES = ("migrated", "would_migrate", "current", "newer", "skipped", "failed")
"""What ``migrate_threads`` reports for a thread, in the order the counts are shown."""


@dataclass(frozen=True)
class ThreadOutcome:
    """What ``migrate_threads`` did with one thread.

    Attributes:
        thread_id: the thread.
        outcome: one of ``OUTCOMES``: ``migrated`` (its checkpoints were rewritten),
            ``would_migrate`` (a dry run: the migration ran in memory, nothing written),
            ``current`` (already at the version: nothing to do), ``newer`` (written by
            newer code: left alone), ``skipped`` (left to migrate on read; ``reason``
            says why), ``failed`` (``reason`` says why; nothing of it changed, or the
            namespaces named in ``rewritten`` only).
        stored: the state version of its latest root checkpoint before (None:
            unversioned).
        rewritten: the namespaces whose latest checkpoint was rewritten (``""`` is the
            root), in the order written.
        reason: why it was skipped or failed (one line naming the checkpoint), else None.
    """

    thread_id: str
    outcome: str
    stored: int | None
    rewritten: tuple[str, ...] = ()
    reason: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """The outcome as JSON data (``migrate-state --json``)."""
        return {"thread_id": self.thread_id, "outcome": self.outcome,
                "from": self.stored, "rewritten": list(self.rewritten),
                "reason": self.reason}


@dataclass
class MigrationReport:
    """Every thread's ``ThreadOutcome`` of one run and their counts per outcome;
    ``limited``: the run stopped at ``limit`` threads migrated, others may remain."""

    state_version: int
    dry_run: bool
    outcomes: list[ThreadOutcome] = field(default_factory=list)
    limited: bool = False

    def counts(self) -> dict[str, int]:
        """Threads per outcome (every one of ``OUTCOMES``, zeros included)."""
        out = dict.fromkeys(OUTCOMES, 0)
        for o in self.outcomes:
            out[o.outcome] += 1
        return out


def load_registry(spec: str) -> Mapping[int, Any]:
    """The migration registry ``module:attr`` names (``--migrations``): imported (code the
    operator names; stored data is never run), a mapping of version -> function or
    ``StateMigration``. Raises ``ValueError`` naming the spec when it does not import or
    is not such a mapping (the saver checks the chain itself)."""
    import importlib

    module, sep, attr = spec.partition(":")
    if not sep or not module or not attr:
        raise ValueError(f"--migrations expects module:attribute, got {spec!r}")
    try:
        obj: Any = importlib.import_module(module)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"--migrations {spec!r} cannot be imported: {exc}") from exc
    except Exception as exc:  # the operator's module raised while it was imported
        raise ValueError(f"--migrations {spec!r}: importing it raised "
                         f"{type(exc).__name__}: {exc}") from exc
    if not isinstance(obj, Mapping):
        raise ValueError(f"--migrations {spec!r} is a {type(obj).__name__}, not a mapping "
                         "of state version (int) -> migration")
    bad = [k for k in obj if isinstance(k, bool) or not isinstance(k, int)]
    if bad:
        raise ValueError(f"--migrations {spec!r}: key {bad[0]!r} ({type(bad[0]).__name__}) "
                         "is not a state version: the keys are ints, the version each "
                         "migration starts from")
    return obj


def _writes_hook_applies(registry: Mapping[int, Any], start: int, target: int) -> bool:
    return any(getattr(registry.get(v), "writes", None) is not None
               for v in range(start, target))


def migrate_threads(saver: Any, target: int, registry: Mapping[int, Any], *,
                    threads: Iterable[str] | None = None, limit: int | None = None,
                    dry_run: bool = False, unversioned_as: int = 1,
                    key: str | None = None,
                    report: Callable[[ThreadOutcome], None] | None = None
                    ) -> MigrationReport:
    """Rewrite threads older than state version ``target`` in it (module docstring).

    Args:
        saver: a ``DurableSaver`` configured with ``state_version=target`` and
            ``state_migrations=registry`` (it migrates on read; with a running flusher
            unless ``dry_run``), whose serializer is the tools' strict one.
        threads: these threads only (default: every thread, in ``thread_id`` order).
        limit: stop after this many threads migrated (or would be, in a dry run).
        dry_run: read and migrate in memory, write nothing.
        unversioned_as: the version a checkpoint without one is read as (the saver's
            ``unversioned_state_version``).
        key: the metadata key of the version (``STATE_VERSION_KEY``).
        report: called with each thread's outcome as soon as it is known.

    Returns the ``MigrationReport``. Raises ``TierUnavailableError`` when a tier does not
    answer (the threads done so far stay done)."""
    out = MigrationReport(target, dry_run)
    ids = list(threads) if threads is not None else [
        i.thread_id for i in storage.all_threads(saver)]
    done = 0
    for tid in ids:
        if limit is not None and done >= limit:
            out.limited = True
            break
        result = _one_thread(saver, tid, target, registry, dry_run, unversioned_as,
                             key or STATE_VERSION_KEY)
        done += result.outcome in ("migrated", "would_migrate")
        out.outcomes.append(result)
        if report is not None:
            report(result)
    return out


def _one_thread(saver: Any, tid: str, target: int, registry: Mapping[int, Any],
                dry_run: bool, unversioned_as: int, key: str) -> ThreadOutcome:
    root = lookup.outline(saver, tid, "", limit=1)
    stored = versions.version_of(root[0].metadata) if root else None
    if not root and not storage.thread_exists(saver.context, saver.sync_clients, tid):
        return ThreadOutcome(tid, "failed", None, reason=f"thread {tid!r} not found")
    where = versions.compare(stored, target, unversioned_as)
    if root and where != "older":
        return ThreadOutcome(tid, where, stored)
    spaces = saver.run(read.namespaces_plan(saver.context, tid))
    order = sorted((ns for ns in spaces if ns), key=lambda ns: (-ns.count("|"), ns))
    rewritten: list[str] = []
    for ns in [*order, *([""] if "" in spaces else [])]:
        latest = lookup.outline(saver, tid, ns, limit=1)
        if not latest or versions.compare(versions.version_of(latest[0].metadata), target,
                                          unversioned_as) != "older":
            continue
        cid = latest[0].config["configurable"]["checkpoint_id"]
        what = f"checkpoint {cid!r} (ns {ns!r}) of thread {tid!r}"
        try:
            refusal = _rewrite(saver, tid, ns, cid, target, registry, dry_run,
                               unversioned_as, key, what)
        except TierUnavailableError:
            raise
        except DurableSaverError as exc:
            return ThreadOutcome(tid, "failed", stored, tuple(rewritten),
                                 f"{type(exc).__name__}: {_first_line(exc)}")
        if refusal is not None:
            return ThreadOutcome(tid, "skipped", stored, tuple(rewritten), refusal)
        rewritten.append(ns)
    return ThreadOutcome(tid, "would_migrate" if dry_run else "migrated", stored,
                         tuple(rewritten))


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else ""


def _rewrite(saver: Any, tid: str, ns: str, cid: str, target: int,
             registry: Mapping[int, Any], dry_run: bool, unversioned_as: int, key: str,
             what: str) -> str | None:
    """Rewrite one checkpoint in ``target``; returns why it was left as it is (None:
    rewritten, or would be)."""
    conf = {"thread_id": tid, "checkpoint_ns": ns, "checkpoint_id": cid}
    tup = saver.get_tuple({"configurable": conf})  # migrated on read by the saver
    if tup is None:
        return f"{what} was deleted meanwhile"
    stored = versions.version_of(tup.metadata)
    start = unversioned_as if stored is None else stored
    if tup.pending_writes and _writes_hook_applies(registry, start, target):
        return (f"{what} has pending writes a writes migration applies to: they are "
                "stored insert-once, so it migrates on read when the thread resumes")
    if not ns and tup.parent_config is None and tup.metadata.get("step") == -1:
        return f"{what} is the thread's input checkpoint alone: it migrates on read"
    values = tup.checkpoint.get("channel_values", {})
    for channel, value in [*values.items(), *((c, v) for _t, c, v in tup.pending_writes or [])]:
        found = contains_placeholder(value)
        if found is not None:
            return (f"channel {channel!r} of {what} holds {found}: allow its type "
                    "(--allow-type module.Class) to migrate it")
    if dry_run:
        return None
    now = lookup.outline(saver, tid, ns, limit=1)
    if not now or now[0].config["configurable"]["checkpoint_id"] != cid:
        # a run stored a newer checkpoint meanwhile (the running code's version): this
        # one is history now, and a put would make it the namespace's head again
        return f"{what} is no longer the latest: the thread ran meanwhile"
    refusal = _writes_into_redis(saver, tid, ns, cid, tup.pending_writes or [], what)
    if refusal is not None:
        return refusal
    checkpoint = {**tup.checkpoint, "channel_values": dict(values),
                  "channel_versions": dict(tup.checkpoint["channel_versions"])}
    marked = {ch: v for ch, v in checkpoint["channel_versions"].items()
              if ch in values and is_marked(v)}
    parent = (tup.parent_config or {}).get("configurable", {}).get("checkpoint_id")
    put_conf: dict[str, Any] = {"thread_id": tid, "checkpoint_ns": ns}
    if parent:
        put_conf["checkpoint_id"] = parent
    metadata = {**tup.metadata, key: target}
    try:
        saver.put({"configurable": put_conf}, checkpoint, metadata, marked)
    except ThreadDeletedError as exc:
        if not parent or exc.checkpoint_id != parent:
            raise
        # the parent was pruned (keep_latest): the put names it, so Redis refuses it.
        # The checkpoint itself is still there (checked again: a delete of the whole
        # thread meanwhile must not be undone); its link to a parent no read can follow
        # is dropped, as the pruned history already ends at it
        now = lookup.outline(saver, tid, ns, limit=1)
        if not now or now[0].config["configurable"]["checkpoint_id"] != cid:
            raise
        saver.put({"configurable": {"thread_id": tid, "checkpoint_ns": ns}}, checkpoint,
                  metadata, marked)
    return None


def _writes_into_redis(saver: Any, tid: str, ns: str, cid: str,
                       pending: list[tuple[str, str, Any]], what: str) -> str | None:
    """Before a checkpoint Redis does not hold (a thread only MongoDB holds: its hot keys
    expired, Redis lost them) is put there: its pending writes, read from MongoDB with
    their task paths, put into Redis first (``put_writes``, one call per task, in
    LangGraph's order, as ``lookup.fork`` copies them). A read served by Redis takes the
    writes Redis holds for a checkpoint it holds, so without them a resume would run the
    finished tasks again and lose an interrupt. Writes first: a run killed between the two
    leaves the checkpoint in MongoDB alone, its writes in both tiers (merged on read, the
    flush's upserts change nothing). Returns why the checkpoint is left as it is, or
    None."""
    if not pending:
        return None
    ctx, clients = saver.context, saver.sync_clients
    if clients.redis.hexists(ctx.keys(tid).cp, member(ns, cid)):
        return None  # Redis holds it, so it holds its writes
    cols = ctx.collections
    docs = storage.loaded(clients.db, cols, list(clients.db[cols.writes].find(
        {"thread_id": tid, "checkpoint_ns": ns, "checkpoint_id": cid})))
    ordered = sorted(pending_of(docs).values(), key=lambda w: w.sort_key())
    if [(w.task_id, w.channel) for w in ordered] != [(t, c) for t, c, _ in pending]:
        return (f"{what}: its pending writes in MongoDB are not those read (some not "
                "flushed yet?): run again later")
    tasks: dict[tuple[str, str], list[tuple[str, Any]]] = defaultdict(list)
    for w, (_t, channel, value) in zip(ordered, pending):
        tasks[(w.task_path, w.task_id)].append((channel, value))
    conf = {"configurable": {"thread_id": tid, "checkpoint_ns": ns, "checkpoint_id": cid}}
    for (path, task_id), writes in tasks.items():
        saver.put_writes(conf, writes, task_id, path)
    return None
