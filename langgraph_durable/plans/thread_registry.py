"""Plans of the thread registry: deciding whether it is complete, registering, forgetting.

A *complete* registry (``hot/registry_scripts.py``) lets a read of a thread that Redis holds no
checkpoint of answer "no such thread" without MongoDB, so a new conversation starts while
MongoDB is down. The invariant that makes this safe: **every thread either tier holds a
checkpoint of is a field of its partition's registry, once that registry is complete.**

- ``put`` registers its thread in its own script (PUT, same round trip).
- What writes a thread to MongoDB without a ``put`` (``copy_thread``'s target, the CLI's
  import) registers it first (``register_plan``), *before* the MongoDB write, so no
  moment exists where MongoDB holds a thread the registry lacks.
- ``delete_thread`` marks the thread deleted (``d``) only after both tiers' data is
  gone: MongoDB holds no checkpoint of it and Redis no key (a new run since keeps it;
  ``forget_plan``). Reads take it for absent; its field stays, so the registry also knows
  every thread that may have tombstones: a write naming a checkpoint Redis lacks, of a
  thread a complete registry never saw, is taken without asking MongoDB (PUT/PUT_WRITES,
  ``deleted_refusal`` in ``hot/lua/include/deleted_ref.lua``: a new thread's pending
  writes before its first put, while MongoDB is down too).
- The registry becomes complete only when no thread can be outside it
  (``setup_plan``, run by ``setup()`` with the MongoDB part): per partition, claim it
  (epoch ``pending <nonce>``) and read its outbox length; then one ``find_one`` on the
  checkpoints collection and one on the tombstones; then settle ``complete`` if the
  outbox was empty and MongoDB holds no checkpoint nor tombstone, else ``partial``, and
  only if the claim still stands (the hash
  was not lost nor claimed again meanwhile). The order matters: an entry moves from the
  outbox to MongoDB (written there first, deleted from the stream after), so an empty
  outbox followed by an empty collection means nothing was stored before the claim, and
  everything stored after it went through PUT or ``register_plan`` into this very hash.

A registry without an epoch (never set up, or recreated by PUT after Redis lost its data),
``pending`` or ``partial`` is not trusted: a miss asks MongoDB, as before. MongoDB down
during the set-up leaves the claim pending; the next set-up (the background retry of the
MongoDB set-up, another saver) claims it again. ``rebuild_plan`` (the CLI's ``registry
--rebuild``) makes a partial registry complete by registering every thread either tier
holds (and marking ``d`` every other thread MongoDB holds tombstones of).
"""

from __future__ import annotations

import uuid
from collections import defaultdict

from ..core.ops import Aggregate, FindOne, Parallel, Pipeline, Plan, Scan, ask
from ..durable import checkpoint_queries as Q
from ..hot.keys import EPOCH_FIELD
from ..hot.registry_scripts import COMPLETE, PARTIAL, claim_op, decide_op, forget_op
from .context import Context
from .threads import hot_thread_ids, hot_thread_pattern

BATCH = 1000
"""Fields per ``HSET`` when a rebuild registers threads."""


def setup_plan(ctx: Context) -> Plan[dict[str, str]]:
    """Decide every undecided partition registry (see the module docstring): two Redis
    round trips (claims and settles, one script per partition each) and one MongoDB
    ``find_one``, only when some registry has no decided epoch. Returns ``{registry key:
    state set}`` (empty when all were decided before). Raises ``TierUnavailableError``
    when a server does not answer (the claims then stay pending: not trusted)."""
    nonce = uuid.uuid4().hex
    claims = yield Parallel([claim_op(reg, out, nonce)
                             for reg, out in zip(ctx.registries, ctx.outboxes)])
    mine = {reg: claim.outbox_length for reg, claim in zip(ctx.registries, claims)
            if claim.claimed}
    if not mine:
        return {}
    empty = False
    if 0 in mine.values():  # complete only if MongoDB holds no checkpoint nor tombstone
        cols = ctx.collections
        docs = yield Parallel([FindOne(cols.checkpoints, {}, {"_id": 1}),
                               FindOne(cols.tombstones, {}, {"_id": 1})])
        empty = all(d is None for d in docs)
    states = {reg: COMPLETE if empty and not xlen else PARTIAL for reg, xlen in mine.items()}
    decided = yield Parallel([decide_op(reg, nonce, st) for reg, st in states.items()])
    return {reg: st for (reg, st), ok in zip(states.items(), decided) if ok}


def register_plan(ctx: Context, thread_id: str) -> Plan[None]:
    """Add ``thread_id`` to its partition's registry (one round trip). Call it *before*
    writing a thread to MongoDB other than through ``put`` (copy, import)."""
    yield Pipeline([["HSET", ctx.registry_of(thread_id), thread_id, 1]])
    return None


def forget_plan(ctx: Context, thread_id: str) -> Plan[bool]:
    """Remove ``thread_id`` from its registry once neither tier holds it (after
    ``delete_thread`` removed both): MongoDB is asked first (a new run's checkpoint flushed
    while the delete ran keeps it), then the script removes it only if Redis holds no key
    of it (a put since keeps it; its keys cannot have expired in between, as they live
    ``hot_ttl_s`` after a flush). True if removed."""
    left = yield from ask(FindOne(ctx.collections.checkpoints, {"thread_id": thread_id},
                                  {"_id": 1}))
    if left is not None:
        return False
    return (yield from ask(forget_op(ctx.keys(thread_id).all, ctx.registry_of(thread_id),
                                     thread_id)))


def rebuild_plan(ctx: Context) -> Plan[int]:
    """Make every partition's registry complete by registering every thread either tier
    holds (for a registry left ``partial``: an upgraded deployment, a Redis that lost its
    data). Safe while applications run: the registries are claimed first (``pending``: not
    trusted meanwhile); then every thread with a checkpoint index in Redis (``SCAN``), then
    every thread_id of the checkpoints collection (one ``$group``), is registered; then each
    registry is decided ``complete`` if its claim still stands. A thread leaves Redis only
    after reaching MongoDB (its keys expire once flushed), so reading Redis before MongoDB
    misses none; what is stored meanwhile is registered by its own PUT or
    ``register_plan``. Returns how many thread_ids were registered. Reads every thread: an
    administration step, never a hot path. Raises ``TierUnavailableError`` when a server
    does not answer (the registries then stay pending, not trusted)."""
    nonce = uuid.uuid4().hex
    yield Parallel([claim_op(reg, out, nonce, force=True)
                    for reg, out in zip(ctx.registries, ctx.outboxes)])
    threads = hot_thread_ids(ctx, (yield Scan(hot_thread_pattern(ctx))))
    docs = yield from ask(Aggregate(ctx.collections.checkpoints, Q.each_thread()))
    threads |= {str(d["_id"]) for d in docs}
    # threads deleted before, with tombstones in MongoDB: marked 'd' (a write naming one
    # of their checkpoints asks for the tombstones; a thread the registry lacks has none)
    gone = yield from ask(Aggregate(ctx.collections.tombstones, Q.each_thread()))
    by_registry: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for t in sorted(threads):
        by_registry[ctx.registry_of(t)].append((t, "1"))
    for t in sorted({str(d["_id"]) for d in gone} - threads):
        by_registry[ctx.registry_of(t)].append((t, "d"))
    for reg, pairs in by_registry.items():  # one pipeline per registry (one slot each)
        yield Pipeline([["HSET", reg, *[x for p in pairs[i:i + BATCH] for x in p]]
                        for i in range(0, len(pairs), BATCH)])
    yield Parallel([decide_op(reg, nonce, COMPLETE) for reg in ctx.registries])
    return len(threads)


def states_plan(ctx: Context) -> Plan[list[tuple[str, str, int]]]:
    """Per partition registry: ``(key, state, threads registered)``; state is the epoch's
    (``complete``, ``partial``, ``pending``) or ``missing`` without one."""
    replies = yield Parallel([Pipeline([["HGET", reg, EPOCH_FIELD], ["HLEN", reg]])
                              for reg in ctx.registries])
    out = []
    for reg, (epoch, n) in zip(ctx.registries, replies):
        text = epoch.decode() if isinstance(epoch, bytes) else epoch
        state = text.split(" ", 1)[0] if text else "missing"
        out.append((reg, state, int(n) - (1 if text else 0)))
    return out
