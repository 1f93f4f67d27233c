"""The deletes' tombstones in MongoDB, and the checks of a write naming a deleted checkpoint.

Every delete (``delete_thread``, ``delete_for_runs``, ``prune``) leaves a tombstone per
checkpoint it removes in both tiers: in Redis (``ThreadKeys.gone``, 7 days, answered on
the call path by PUT/PUT_WRITES: ``hot/scripts.py`` ``_deleted_ref``) and in MongoDB
(``Collections.tombstones``, ``tombstone_ttl_s``), written before the delete removes
anything from MongoDB. MongoDB's are asked only when Redis cannot answer: a write names a
checkpoint Redis neither holds nor has a tombstone of (``UNKNOWN``: Redis lost its data,
its tombstones expired, the hot window let the checkpoint go), so the common path (the
parent in Redis) stays one round trip and a write naming nothing (a new thread) is
untouched.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from pymongo.errors import OperationFailure

from ..context import Context
from ..drivers import BulkWrite, Doc, FindOne, Mongo, Parallel, Plan, ask
from ..durable import documents as D
from ..errors import ThreadDeletedError
from ..records import SEP

log = logging.getLogger("langgraph_durable.saver")


def record_plan(ctx: Context, thread_id: str, members: Sequence[str], at_ms: int) -> Plan[None]:
    """Store in MongoDB the tombstones of a delete at ``at_ms`` (Redis time, ms) of the
    checkpoint ``members`` of ``thread_id``: one unordered bulk of upserts (none when
    ``members`` is empty). Run after the delete's Redis script and before its MongoDB
    deletes, so a delete that removed anything from MongoDB left its tombstones there."""
    if members:
        yield BulkWrite(ctx.collections.tombstones,
                        D.tombstone_upserts(thread_id, sorted(set(members)), at_ms))


def _deleted(thread_id: str, ref_member: str, deleted_at_ms: int) -> ThreadDeletedError:
    ns, cid = ref_member.split(SEP)
    return ThreadDeletedError(
        f"checkpoint {cid!r} (ns {ns!r}) of thread {thread_id!r} was deleted (delete_thread, "
        f"delete_for_runs or prune at {deleted_at_ms} ms); nothing was written. Start a new "
        "run on the thread (no checkpoint_id in the config) to use the thread_id again",
        thread_id=thread_id, checkpoint_ns=ns, checkpoint_id=cid, deleted_at_ms=deleted_at_ms)


def _stored_after(doc: Doc | None, at_ms: int) -> bool:
    """True when the checkpoints document ``doc`` was stored after ``at_ms`` (its
    ``put_ms``: ``copy_thread`` or an import wrote it there since; a document without one
    counts as before)."""
    return doc is not None and int(doc.get("put_ms") or 0) > at_ms


def check_deleted_plan(ctx: Context, thread_id: str, ref_member: str,
                       deleted_at_ms: int) -> Plan[None]:
    """Redis answered ``DELETED``: raise ``ThreadDeletedError`` unless MongoDB holds the
    named checkpoint as stored after the delete at ``deleted_at_ms``. A checkpoint MongoDB
    still holds from before the delete is one the delete is removing right now."""
    ns, cid = ref_member.split(SEP)
    doc = yield from ask(FindOne(ctx.collections.checkpoints,
                                 {"_id": D.doc_id(thread_id, ns, cid), "thread_id": thread_id},
                                 {"put_ms": 1}))
    if not _stored_after(doc, deleted_at_ms):
        raise _deleted(thread_id, ref_member, deleted_at_ms)


def check_unknown_plan(ctx: Context, thread_id: str, ref_member: str) -> Plan[int]:
    """Redis answered ``UNKNOWN`` (it neither holds the named checkpoint nor has a
    tombstone of it): ask MongoDB for the checkpoint and its tombstone, in one concurrent
    round. No tombstone: the checkpoint was never deleted (or its tombstone expired, after
    ``tombstone_ttl_s``), so the write is taken as InMemorySaver takes it, whether MongoDB
    holds the checkpoint or not (a task's writes may arrive before their checkpoint's
    put). A tombstone and a copy stored after it (``copy_thread``, an import): taken. A
    tombstone alone: ``ThreadDeletedError``. Returns the ``checked_through_ms`` to send the
    write again with (at least 1): a delete after this check still refuses it."""
    ns, cid = ref_member.split(SEP)
    cols = ctx.collections
    doc, stone = yield Parallel([
        FindOne(cols.checkpoints, {"_id": D.doc_id(thread_id, ns, cid), "thread_id": thread_id},
                {"put_ms": 1}),
        FindOne(cols.tombstones, D.tombstone_query(thread_id, ref_member), {"at_ms": 1}),
    ])
    if stone is None:
        return 1
    at = int(stone["at_ms"])
    if not _stored_after(doc, at):
        raise _deleted(thread_id, ref_member, at)
    return max(at, 1)


def setup_indexes_plan(ctx: Context) -> Plan[None]:
    """Create the tombstones' indexes (``documents.indexes``), the TTL index expiring
    after ``tombstone_ttl_s``: an existing one with another ``expireAfterSeconds`` is
    dropped first and made again (MongoDB refuses a same-named index with other options)."""
    name = ctx.collections.tombstones
    ttl = ctx.config.tombstone_ttl_s
    have = yield Mongo(name, "list_indexes")
    for ix in have:
        if ix["name"] == D.TOMBSTONE_TTL_INDEX and ix.get("expireAfterSeconds") != ttl:
            log.info("tombstones index %r of collection %r: expireAfterSeconds %s -> %s "
                     "(tombstone_ttl_s)", ix["name"], name, ix.get("expireAfterSeconds"), ttl)
            try:
                yield Mongo(name, "drop_index", (D.TOMBSTONE_TTL_INDEX,))
            except OperationFailure as exc:
                if exc.code != 27:  # IndexNotFound: another process dropped it just now
                    raise
    yield Mongo(name, "create_indexes", (D.indexes(ttl)["tombstones"],))
