"""``migrate``'s third pass: pending writes stored one document per write (releases before
``schema.WRITES_GROUP_VERSION``) regrouped into one document per ``put_writes`` call
(``durable/write_groups.py``), sans-I/O.

``regroup_writes_plan`` reads the per-write documents (``idx`` present, ``v`` 1 or 3; a
chunked one, a value over the chunk size, stays as it is) in ``_id`` order,
``batch_size`` a round; a task's documents of one checkpoint share an ``_id`` prefix,
so they come together, and the last task of a round is read whole. Per task, the writes
of one ``seq`` (one call) become one document (the latest ``put_ms`` of theirs; a call
over the chunk size stays per write). Each round inserts the new documents, then deletes
the per-write documents each holds, each only while it still has the ``v`` and ``seq``
that were read (a special channel overwritten since by an older release's flusher keeps
its newer document; reads take the newest ``seq`` of both). A document of the same call
already stored (a crash between the two steps, a newer flusher's copy) is kept as it is
and the per-write documents it holds are deleted. Then the checkpoints a delete
(``delete_thread``, ``delete_for_runs``, ``prune``) tombstoned after their writes were
stored lose the new documents again (the fence's rule: a delete that read the
checkpoint's writes before this round inserted them). The cursor is saved in ``meta``
(``migration:writes-per-call``) after each round: an interrupted run resumes there, a
second run regroups nothing; reads take both forms meanwhile.
"""

from __future__ import annotations

import datetime
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..core.ops import (
    BulkWrite,
    BulkWriteFailed,
    DeleteDoc,
    DeleteMany,
    Doc,
    Find,
    FindOne,
    InsertDoc,
    Mongo,
    Plan,
    ask,
)
from ..core.records import WriteRecord, member
from ..core.schema import WRITES_GROUP_VERSION
from ..durable import chunks as C
from ..durable import documents as D
from ..durable import meta_docs as Meta
from ..durable import write_groups as G
from ..plans.context import Context

log = logging.getLogger("langgraph_durable.admin.write_regroup")

CURSOR_ID = "migration:writes-per-call"
"""``_id`` of the ``meta`` document holding the regrouping's cursor."""

Key = tuple[str, str, str, str]
"""A task's writes of one checkpoint: ``(thread_id, checkpoint_ns, checkpoint_id,
task_id)``."""


@dataclass
class Regrouped:
    """What ``regroup_writes_plan`` did: per-write documents ``read``, call documents
    ``stored`` (new), per-write documents ``removed`` and ``finished`` (False when
    ``max_batches`` stopped it; the cursor stays for the next run)."""

    read: int = 0
    stored: int = 0
    removed: int = 0
    finished: bool = True


def _key(doc: Mapping[str, Any]) -> Key:
    return (doc["thread_id"], doc["checkpoint_ns"], doc["checkpoint_id"], doc["task_id"])


def _calls(docs: Sequence[Doc]) -> list[tuple[Doc, list[Doc]]]:
    """``(call document, the per-write documents it holds)`` of a task's per-write
    documents, one per ``seq``; a call over the chunk size is left out."""
    by_seq: dict[int, list[tuple[Doc, WriteRecord]]] = {}
    for d in docs:
        w = D.write_of(d)
        by_seq.setdefault(w.seq, []).append((d, w))
    out = []
    for pairs in by_seq.values():
        recs = [w for _, w in pairs]
        if sum(len(w.value[1]) for w in recs) > C.THRESHOLD_BYTES:
            continue
        tid, ns, cid, _task = _key(pairs[0][0])
        put_ms = max(int(d.get("put_ms") or 0) for d, _ in pairs)
        out.append((G.group_doc(tid, ns, cid, recs, put_ms=put_ms), [d for d, _ in pairs]))
    return out


def _round_plan(ctx: Context, docs: list[Doc], dry_run: bool) -> Plan[tuple[int, int]]:
    """Regroup one round's per-write documents (whole tasks); returns ``(call documents
    stored, per-write documents removed)``."""
    by_key: dict[Key, list[Doc]] = {}
    for d in docs:
        by_key.setdefault(_key(d), []).append(d)
    calls = [c for ds in by_key.values() for c in _calls(ds)]
    if dry_run or not calls:
        return len(calls), sum(len(ds) for _, ds in calls)
    col = ctx.collections.writes
    stored = len(calls)
    try:
        yield BulkWrite(col, [InsertDoc(g) for g, _ in calls])
    except BulkWriteFailed as exc:
        if not exc.only_duplicates():
            raise
        dup = set(exc.duplicates())
        stored -= len(dup)
        have = yield from ask(Find(col, D.ids_in([calls[i][0]["_id"] for i in dup])))
        held = {d["_id"]: {w.idx for w in G.records_of(d)} for d in have}
        for i in dup:  # delete only the per-write documents the stored call holds
            g, ds = calls[i]
            calls[i] = (g, [d for d in ds if d["idx"] in held.get(g["_id"], set())])
    result = yield BulkWrite(col, [
        DeleteDoc({"_id": d["_id"], "v": d.get("v"), "seq": d.get("seq")})
        for _, ds in calls for d in ds])
    yield from _fence_plan(ctx, [g for g, _ in calls])
    return stored, result.deleted


def _fence_plan(ctx: Context, groups: list[Doc]) -> Plan[None]:
    """Delete again the call documents of ``groups`` whose checkpoint a delete tombstoned
    at or after their ``put_ms`` (it may have read the checkpoint's writes before they
    were inserted)."""
    by_thread: dict[str, list[Doc]] = {}
    for g in groups:
        by_thread.setdefault(g["thread_id"], []).append(g)
    stones = yield from ask(Find(ctx.collections.tombstones,
                                 D.tombstones_of_threads(sorted(by_thread)),
                                 {"_id": 0, "thread_id": 1, "f": 1, "at_ms": 1}))
    gone: dict[tuple[str, str], int] = {}
    for s in stones:
        k = (str(s["thread_id"]), str(s["f"]))
        gone[k] = max(gone.get(k, 0), int(s["at_ms"]))
    undo = [g["_id"] for tid, gs in by_thread.items() for g in gs
            if max(gone.get((tid, "*"), -1), gone.get(
                (tid, member(g["checkpoint_ns"], g["checkpoint_id"])), -1)) >= g["put_ms"]]
    if undo:
        log.warning("%d regrouped writes documents belong to deleted checkpoints; removed",
                    len(undo))
        yield DeleteMany(ctx.collections.writes, D.ids_in(undo))


def remaining_plan(ctx: Context) -> Plan[int]:
    """How many per-write documents the regrouping has still to read (from the saved
    cursor)."""
    saved = yield FindOne(ctx.collections.meta, {"_id": CURSOR_ID})
    after = saved.get("after") if saved else None
    n: int = yield Mongo(ctx.collections.writes, "count_documents",
                         (G.per_write_docs(after),))
    return n


def regroup_writes_plan(ctx: Context, *, batch_size: int = 500,
                        on_batch: Callable[[int], None] | None = None,
                        max_batches: int | None = None,
                        dry_run: bool = False) -> Plan[Regrouped]:
    """Regroup the per-write documents into one document per call (see the module
    docstring). ``on_batch(n)`` is called after each round of ``n`` documents read;
    ``max_batches`` stops after that many rounds; ``dry_run`` writes nothing (no
    documents, no cursor) and counts. A document it cannot read raises
    ``CorruptRecordError`` naming it; the rounds before it are stored. Returns a
    ``Regrouped``."""
    cols = ctx.collections
    out = Regrouped()
    saved = yield FindOne(cols.meta, {"_id": CURSOR_ID})
    after = saved.get("after") if saved else None
    rounds = 0
    while True:
        if max_batches is not None and rounds >= max_batches:
            out.finished = False
            return out
        docs = yield from ask(Find(cols.writes, G.per_write_docs(after), sort=[("_id", 1)],
                                   limit=batch_size))
        if not docs:
            break
        if len(docs) == batch_size:  # the last task may go on: read it whole
            tid, ns, cid, task = _key(docs[-1])
            rest = yield from ask(Find(cols.writes, {
                **G.per_write_docs(docs[-1]["_id"]), "thread_id": tid, "checkpoint_ns": ns,
                "checkpoint_id": cid, "task_id": task}))
            docs += rest
        stored, removed = yield from _round_plan(ctx, docs, dry_run)
        out.read += len(docs)
        out.stored += stored
        out.removed += removed
        after = max(d["_id"] for d in docs)
        if not dry_run:
            yield Mongo(cols.meta, "update_one", (
                {"_id": CURSOR_ID},
                Meta.cursor_saved(after, datetime.datetime.now(datetime.timezone.utc),
                                  WRITES_GROUP_VERSION),
            ), {"upsert": True})
        rounds += 1
        if on_batch is not None:
            on_batch(len(docs))
    if not dry_run:
        yield Mongo(cols.meta, "delete_one", ({"_id": CURSOR_ID},))
    if out.stored or out.removed:
        log.info("regrouped %d per-write documents into %d documents of one call",
                 out.removed, out.stored)
    return out
