"""Plans of the long-term memory store (``DurableStore``), sans-I/O: write items (one
STORE_PUT each: Redis holds the item and its outbox entry atomically), read them (Redis
first, MongoDB for what Redis no longer holds, the unflushed index overlaid on MongoDB's
answers), copy them to MongoDB (the flusher, ``outbox/rounds.py``) and sweep expired
ones.

Read-your-writes: every record MongoDB may lack is in its partition's unflushed index
(``hot/store_scripts.py``) from the put until the flusher wrote it to MongoDB, and is taken out
only after that write (STORE_SETTLE). A read of many items (search:
``plans/store_search.py``; list_namespaces) reads the unflushed index first and MongoDB
second, so an item settled in between is in MongoDB's answer; an item the unflushed
index holds is answered from it (its newest record when read), and a delete stays in
the unflushed index as a tombstone until MongoDB holds it. A get reads the
item's own key (the newest record, unflushed ones always) and asks MongoDB on a miss.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from ..core.ops import Aggregate, Find, Op, Parallel, Pipeline, Plan, Refusal, ask
from ..core.outbox_entry import OutboxEntry
from ..core.store_records import (
    STORE_KIND,
    StoreBody,
    StoreRecord,
    item_field,
    ns_of,
    ns_text,
    split_field,
    store_tid,
)
from ..durable import store_docs as S
from ..errors import OutboxFullError, ScriptRefused
from ..hot.store_scripts import (
    StoreKeys,
    StorePutArgs,
    dirty_keys,
    store_get_op,
    store_settle_op,
    store_tag,
)
from .context import PUT_KEYS_CACHE, Context
from .fence import insert_else_upsert
from .store_fetch import live_records_plan
from .store_vectors import index_flushed_plan
from .write import replicated

Parsed = tuple[bytes, str, OutboxEntry]
"""An outbox entry read by the flusher: ``(entry id, its thread field, the entry)``."""


def _text(v: bytes | str) -> str:
    return v.decode("utf-8", "surrogateescape") if isinstance(v, bytes) else v


def keys_of(ctx: Context, namespace: tuple[str, ...]) -> tuple[str, StoreKeys, str]:
    """``(tid, store keys, outbox stream)`` of ``namespace`` (one hash slot), remembered
    in ``ctx.store_keys`` for the last ``PUT_KEYS_CACHE`` namespaces (all dropped at once
    when full): every put of a namespace names the same keys."""
    cache = ctx.store_keys
    try:
        found: tuple[str, StoreKeys, str] | None = cache.get(namespace)
    except TypeError:  # an unhashable label (refused by validation before a write)
        return _keys_of(ctx, namespace)
    if found is None:
        if len(cache) >= PUT_KEYS_CACHE:
            cache.clear()
        found = cache[namespace] = _keys_of(ctx, namespace)
    return found


def _keys_of(ctx: Context, namespace: tuple[str, ...]) -> tuple[str, StoreKeys, str]:
    tid = store_tid(namespace)
    return (tid, StoreKeys(store_tag(ctx.config.key_prefix, tid, ctx.partitions)),
            ctx.outbox_of(tid))


def _max_outbox(ctx: Context) -> int:
    m = ctx.config.max_outbox
    return -(-m // ctx.partitions) if m else 0


def write_op(ctx: Context, namespace: tuple[str, ...], key: str, mode: str, body: bytes,
             expires_ms: int, *, expect: int = 0, cseq: int = 0, useq: int = 0,
             now_ms: int = 0) -> Op[Any]:
    """The STORE_PUT of one item version (``mode`` ``put``, ``del``, ``touch``,
    ``expire`` or ``import``: see ``hot/lua/store_put.lua``); ``now_ms``: the caller's
    clock (a value expired by then is replaced by a new incarnation; 0 =
    ``ctx.clock``). With
    ``redis_min_replicas`` it waits for that many replicas, as the saver's puts do
    (``ReplicationTimeoutError`` when fewer confirm: the version IS on the primary)."""
    tid, keys, outbox = keys_of(ctx, namespace)
    field = item_field(namespace, key)
    payload = OutboxEntry(tid, STORE_KIND, field, (), (), len(body)).payload()
    now_ms = now_ms or ctx.clock.time_ns() // 1_000_000
    return replicated(ctx, StorePutArgs(keys, outbox, _max_outbox(ctx), tid, field, mode,
                                        expires_ms, body, payload, expect, cseq, useq,
                                        now_ms).op())


def write_plan(ctx: Context, ops: Sequence[Op[Any]]) -> Plan[list[Any]]:
    """Run the STORE_PUTs ``ops`` (together); raises ``OutboxFullError`` when an outbox
    partition holds its share of ``max_outbox`` (the writes refused are not stored)."""
    if not ops:
        return []
    try:
        if len(ops) == 1:
            return [(yield ops[0])]
        replies: list[Any] = yield Parallel(list(ops))
        return replies
    except ScriptRefused as refusal:
        if refusal.code != Refusal.OUTBOX_FULL:
            raise
        raise OutboxFullError(
            f"the store's outbox partition holds its share of max_outbox="
            f"{ctx.config.max_outbox} entries not yet in MongoDB; the put was not stored "
            "(is MongoDB reachable and a flusher running?)") from None


def touch_plan(ctx: Context, records: Iterable[StoreRecord],
               now_ms: int) -> Plan[list[Op[Any]]]:
    """The TTL refreshes of ``records`` read now: each one with a TTL expires ``ttl``
    minutes from ``now_ms`` (its value, embeddings and times kept; skipped by Redis when
    a newer version exists). STORE_PUT writes Redis's copy of the version when Redis
    holds it and the body sent when not, so a ``partial`` record (read from MongoDB
    without its embeddings) gets them back first (one find): the version MongoDB holds
    now, when it is still the one read (else the item changed since: no refresh)."""
    recs = [r for r in records if r.body is not None and r.body.ttl_min]
    partial = [r for r in recs if r.partial]
    full: dict[str, StoreRecord] = {}
    if partial:
        ids = [S.store_id(r.namespace, r.key) for r in partial]
        docs = yield from ask(Find(ctx.collections.store, S.items_named(ids)))
        for doc in docs:
            rec = S.record_of(doc)
            full[rec.field] = rec
    ops: list[Op[Any]] = []
    for rec in recs:
        if rec.partial:
            held = full.get(rec.field)
            if held is None or held.seq != rec.seq or held.body is None:
                continue
            rec = held
        assert rec.body is not None and rec.body.ttl_min
        ns, key = split_field(rec.field)
        ops.append(write_op(ctx, ns, key, "touch", rec.body.pack(),
                            now_ms + round(rec.body.ttl_min * 60_000), expect=rec.seq,
                            cseq=rec.cseq, useq=rec.useq, now_ms=now_ms))
    return ops


def get_plan(ctx: Context, items: Sequence[tuple[tuple[str, ...], str]],
             now_ms: int) -> Plan[list[StoreRecord | None]]:
    """The live records of ``items`` (``(namespace, key)``), None for an item deleted,
    expired at ``now_ms`` or never stored: Redis's copy (STORE_GET per item: asyncio
    callers' reads share one pipeline), MongoDB's for the items Redis does not hold (one
    find)."""
    fields = [item_field(ns, k) for ns, k in items]
    ops: list[Op[Any]] = [store_get_op(keys_of(ctx, ns)[1].item(f))
                          for (ns, _), f in zip(items, fields)]
    raws = (yield Parallel(ops)) if len(ops) > 1 else [(yield ops[0])]
    found = {f: StoreRecord.of_redis(f, bytes(raw))
             for f, raw in zip(fields, raws) if raw is not None}
    return (yield from live_records_plan(ctx, items, found, now_ms))


def unflushed_raw(replies: Sequence[Any], prefix: tuple[str, ...] = ()
                  ) -> Iterable[tuple[str, bytes]]:
    """``(field, stored bytes)`` of the unflushed records (HGETALL replies: dicts,
    ``drivers.normalise``) of the namespaces under ``prefix``, not decoded."""
    head = (ns_text(prefix) + ".").encode() if prefix else b""
    for raw in replies:
        for f, v in raw.items():
            name = f if isinstance(f, bytes) else f.encode()
            if head and not (name.partition(b"\x00")[0] + b".").startswith(head):
                continue
            yield _text(f), bytes(v)


def unflushed(replies: Sequence[Any], prefix: tuple[str, ...] = ()
              ) -> Iterable[StoreRecord]:
    """The unflushed records (HGETALL replies) of the namespaces under ``prefix``; only
    those are decoded."""
    for f, raw in unflushed_raw(replies, prefix):
        yield StoreRecord.of_redis(f, raw)


def namespaces_plan(ctx: Context, now_ms: int) -> Plan[set[tuple[str, ...]]]:
    """Every namespace holding a live item at ``now_ms``: MongoDB's (one aggregation
    counting live documents per namespace) corrected by the unflushed index (read
    first): a namespace with an unflushed live item is in; one whose live documents are
    all overridden by unflushed deletes (or expired versions) is out."""
    replies = yield Pipeline([["HGETALL", k] for k in
                              dirty_keys(ctx.config.key_prefix, ctx.partitions)])
    overlay = list(unflushed(replies))
    col = ctx.collections.store
    counted = yield from ask(Aggregate(col, S.live_per_namespace(now_ms)))
    counts = {str(d["_id"]): int(d["n"]) for d in counted}
    found = {ns_text(r.namespace) + "." for r in overlay if r.live(now_ms)}
    gone = [r for r in overlay if not r.live(now_ms)
            and ns_text(r.namespace) + "." in counts]
    if gone:
        ids = [S.store_id(r.namespace, r.key) for r in gone]
        docs = yield from ask(Find(col, S.items_named(ids), S.LIVENESS))
        for d in docs:
            if S.is_live(d, now_ms):
                counts[str(d["ns"])] -= 1
    found.update(ns for ns, n in counts.items() if n > 0)
    return {ns_of(ns[:-1]) for ns in found}


def flush_store_plan(ctx: Context, entries: list[Parsed]) -> Plan[int]:
    """The flusher's copy of store entries: read the unflushed records they name (one
    pipeline), write them to MongoDB (inserts; for documents already there, upserts
    guarded by ``seq``: a replay, another flusher's copy or a stalled round changes
    nothing newer: ``fence.insert_else_upsert``), then take them out of the unflushed
    index (STORE_SETTLE per partition). A value put where Redis held no record of the
    item keeps the cseq (``created_at``, search order) of the live version MongoDB
    holds, if any (one find for the round), in MongoDB and in Redis's copy. An entry
    whose record is no longer unflushed was written by another flusher. Returns the
    documents written."""
    by_tag: dict[str, list[str]] = defaultdict(list)
    for _eid, _tid, entry in entries:
        ns, _key = split_field(entry.member)
        tag = keys_of(ctx, ns)[1].tag
        if entry.member not in by_tag[tag]:
            by_tag[tag].append(entry.member)
    tags = list(by_tag)
    replies = yield Pipeline([["HMGET", StoreKeys(t).dirty, *by_tag[t]] for t in tags])
    read: list[tuple[str, StoreRecord]] = []
    for tag, raws in zip(tags, replies):
        read += [(tag, StoreRecord.of_redis(f, bytes(raw)))
                 for f, raw in zip(by_tag[tag], raws) if raw is not None]
    if not read:
        return 0
    held = yield from _held_plan(ctx, [rec for _, rec in read if rec.unsure])
    written: dict[str, list[tuple[str, bytes, bytes]]] = {}
    docs = []
    for tag, rec in read:
        out = rec
        if rec.unsure:
            doc = held.get(S.store_id(rec.namespace, rec.key))
            alive = doc is not None and not doc.get("dead") and (
                not doc.get("exp") or int(doc["exp"]) > rec.seq // 1000)
            out = rec.with_cseq(int(doc["cseq"]) if alive and doc else rec.cseq)
        docs.append(S.store_doc(out, ctx.config.tombstone_ttl_s))
        written.setdefault(tag, []).append((rec.field, rec.raw, out.raw))
    yield from insert_else_upsert(ctx.collections.store, docs, S.upsert_record,
                                  ignore_newer=True)
    yield from index_flushed_plan(ctx, [rec for _, rec in read])  # the Redis vector index
    now_ms = ctx.clock.time_ns() // 1_000_000
    hot_ms = ctx.config.hot_ttl_s * 1000
    ops: list[Op[Any]] = [store_settle_op(StoreKeys(t), hot_ms, now_ms, recs)
                          for t, recs in written.items()]
    yield Parallel(ops)
    return len(docs)


def _held_plan(ctx: Context, records: list[StoreRecord]) -> Plan[dict[str, Any]]:
    """The documents MongoDB holds of ``records`` (by ``_id``; versions only)."""
    if not records:
        return {}
    ids = [S.store_id(r.namespace, r.key) for r in records]
    docs = yield from ask(Find(ctx.collections.store, S.items_named(ids),
                               {"cseq": 1, "dead": 1, "exp": 1}))
    return {str(d["_id"]): d for d in docs}


def sweep_plan(ctx: Context, now_ms: int, limit: int) -> Plan[int]:
    """One TTL sweep: up to ``limit`` values MongoDB holds that expired at ``now_ms``
    become deletes (STORE_PUT ``expire``, skipped where a newer version was written
    since), which the flusher carries to MongoDB as tombstones and which leave Redis once
    flushed. Values not yet flushed are swept once they are. Returns the deletes written.
    Reads never return an expired item, swept or not."""
    docs = yield from ask(Find(ctx.collections.store, S.expired_query(now_ms),
                               {"namespace": 1, "key": 1, "seq": 1}, limit=limit))
    ops = [write_op(ctx, tuple(d["namespace"]), str(d["key"]), "expire", b"", 0,
                    expect=int(d["seq"]), now_ms=now_ms) for d in docs]
    replies = yield from write_plan(ctx, ops)
    return sum(1 for r in replies if r is not None)


def put_body(value: tuple[str, bytes] | None, ttl_min: float | None, vectors: bytes = b"",
             paths: Sequence[str] = (), state_version: int | None = None) -> bytes:
    """The packed body of a put (``core/store_records.StoreBody``; ``state_version``
    None: the four-element body)."""
    return StoreBody(value, ttl_min, vectors, tuple(paths), state_version).pack()
