"""The deletes' tombstones in MongoDB, and the checks of a write naming a deleted checkpoint.

Every delete (``delete_thread``, ``delete_for_runs``, ``prune``) leaves a tombstone per
checkpoint it removes in both tiers: in Redis (``ThreadKeys.gone``, 7 days, answered on
the call path by PUT/PUT_WRITES: ``hot/lua/include/deleted_ref.lua``) and in MongoDB
(``Collections.tombstones``, ``tombstone_ttl_s``), written before the delete removes
anything from MongoDB. MongoDB's are asked only when Redis cannot answer: a write names a
checkpoint Redis neither holds nor has a tombstone of, on a thread whose tombstones Redis
does not hold in full (``UNKNOWN``: Redis lost its data, its tombstones expired, or the
thread was never deleted since and the hot window or a task's early writes name a
checkpoint Redis lacks). The answer loads every tombstone of the thread into Redis,
marked complete, so that happens once per thread in 7 days: the common path (the parent
in Redis) stays one round trip, a write naming nothing (a new thread) is untouched, and
so are a task's writes that arrive before their checkpoint's put (``durability="async"``)
once the thread's tombstones are loaded.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from ..core.ops import (
    BulkWrite,
    CommandFailed,
    CreateIndexes,
    Doc,
    Find,
    FindOne,
    Mongo,
    Parallel,
    Plan,
    ask,
)
from ..core.records import SEP
from ..durable import documents as D
from ..errors import ThreadDeletedError
from ..hot.keys import TOMBSTONE_TTL_S
from ..hot.scripts import learn_tombstones_op
from .context import Context

log = logging.getLogger("langgraph_durable.saver")


def record_plan(ctx: Context, thread_id: str, members: Sequence[str], at_ms: int) -> Plan[None]:
    """Store in MongoDB the tombstones of a delete at ``at_ms`` (Redis time, ms) of the
    checkpoint ``members`` of ``thread_id`` (and ``*``, the whole thread, for
    ``delete_thread``, as in Redis's ``gone``): one unordered bulk of upserts (none when
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
    """Redis answered ``UNKNOWN``: it neither holds the named checkpoint nor a tombstone of
    it, and does not hold every tombstone of the thread (no ``!``: it lost its data, or its
    tombstones expired). Ask MongoDB for the checkpoint and every tombstone of the thread,
    in one concurrent round, and load the tombstones into Redis (``learn_tombstones_op``:
    the thread's next such write is answered by Redis alone, as a task's writes arriving
    before their checkpoint's put are). Then decide for the named checkpoint: no
    tombstone: never deleted (or its tombstone expired, after ``tombstone_ttl_s``), so the
    write is taken as InMemorySaver takes it, whether MongoDB holds the checkpoint or not;
    a tombstone and a copy stored after it (``copy_thread``, an import): taken; a tombstone
    alone: ``ThreadDeletedError``. Returns the ``checked_through_ms`` to send the write
    again with (at least 1): a delete after this check still refuses it."""
    ns, cid = ref_member.split(SEP)
    cols = ctx.collections
    doc, stones = yield Parallel([
        FindOne(cols.checkpoints, {"_id": D.doc_id(thread_id, ns, cid), "thread_id": thread_id},
                {"put_ms": 1}),
        Find(cols.tombstones, {"thread_id": thread_id}, {"_id": 0, "f": 1, "at_ms": 1}),
    ])
    known = {str(d["f"]): int(d["at_ms"]) for d in stones}
    yield learn_tombstones_op(ctx.keys(thread_id).gone, _learned_ttl_s(ctx, known),
                              sorted(known.items()))
    at = known.get(ref_member)
    if at is None:
        return 1
    if not _stored_after(doc, at):
        raise _deleted(thread_id, ref_member, at)
    return max(at, 1)


def _learned_ttl_s(ctx: Context, known: dict[str, int]) -> int:
    """Seconds the tombstones loaded from MongoDB stay in Redis: Redis's own
    ``TOMBSTONE_TTL_S``, or less, until the oldest of them expires in MongoDB (then the next
    write Redis cannot answer for loads them again, without it), at least 1."""
    if not known:
        return TOMBSTONE_TTL_S
    now_ms = ctx.clock.time_ns() // 1_000_000
    left_ms = min(known.values()) + ctx.config.tombstone_ttl_s * 1000 - now_ms
    return max(1, min(TOMBSTONE_TTL_S, left_ms // 1000))


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
            except CommandFailed as exc:
                if exc.code != 27:  # IndexNotFound: another process dropped it just now
                    raise
    yield CreateIndexes(name, D.indexes(ttl)["tombstones"])
