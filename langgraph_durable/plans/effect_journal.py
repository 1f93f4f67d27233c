"""Plans of the effect journal (``langgraph_durable.effects``), sans-I/O: look up and start
an effect, journal its outcome, copy journal entries to MongoDB (the flusher), and the
journal's part of ``delete_thread``, ``delete_for_runs``/``prune`` and ``copy_thread``.

Redis holds a thread's journal in its ``fx`` hash (format in ``hot/effect_scripts.py``); MongoDB
in the collection ``<collection_prefix>effects``, one document per effect with ``_id`` =
``doc_id(thread_id, task_ns, task_id, name, n)`` and the entry's version ``v``: an upsert
replaces only an older version, so replaying an outbox entry, or a stalled flusher
writing an older copy, never changes a newer one.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import ormsgpack

from ..core.ops import DeleteMany, Doc, Find, FindOne, Pipeline, Plan, Refusal, Sleep, ask
from ..core.outbox_entry import OutboxEntry
from ..core.records import SEP, Typed, member
from ..durable import documents as D
from ..durable import effect_docs as F
from ..errors import (
    CorruptRecordError,
    EffectCheckpointError,
    OutboxFullError,
    ReplicationTimeoutError,
    ScriptRefused,
    TierUnavailableError,
)
from ..hot.effect_scripts import TRUST_FIELD, begin_op, end_op
from .context import Context
from .fence import bulk_ignoring_newer, stream_ms
from .write import replicated

FX_KIND = "fx"
"""Kind of the outbox entries of the journal (beside ``"cp"`` and ``"w"``)."""

STATES = {"s": "started", "d": "done", "e": "failed", "c": "cleared"}
"""Entry state letter -> name (``hot/effect_scripts.py``)."""

MODEL_CALL_PREFIX = "model:"
"""The journal's names of journaled model calls (``langgraph_durable.journal``): ``"model:"
+ name`` (the name given to ``journaled``/``ModelJournalMiddleware``, else the model's
identity). The operator's tools (``inspection.effect_view``) tell model-call entries by it."""


def collection(ctx: Context) -> str:
    """The MongoDB collection of the journal: ``<collection_prefix>effects``."""
    return ctx.collections.effects


@dataclass(frozen=True)
class EffectRef:
    """Which effect: one call of ``once(name, ...)`` in one task of one thread.

    ``task_ns``/``task_id``: the task's ``checkpoint_ns`` (``node:task_id`` under its
    graph's namespace) and LangGraph task id; ``n``: the call number of ``name`` within
    the task's execution (0, 1, ...); ``checkpoint_ns``/``checkpoint_id``: the graph's
    namespace and the checkpoint the task ran from (its journal goes when that
    checkpoint is deleted)."""

    thread_id: str
    task_ns: str
    task_id: str
    name: str
    n: int
    checkpoint_ns: str
    checkpoint_id: str

    @property
    def field(self) -> str:
        """The journal field: ``task_ns NUL task_id NUL name NUL n``."""
        return SEP.join((self.task_ns, self.task_id, self.name, str(self.n)))

    @property
    def doc_id(self) -> str:
        """The MongoDB ``_id`` of its document."""
        return D.doc_id(self.thread_id, self.task_ns, self.task_id, self.name, self.n)

    def describe(self) -> str:
        """``effect 'name' #n of task <id> (ns ...) of thread ...`` for messages."""
        return (f"effect {self.name!r} (call {self.n}) of task {self.task_id!r} "
                f"(checkpoint_ns {self.task_ns!r}) of thread {self.thread_id!r}")


@dataclass(frozen=True)
class Entry:
    """A journal entry: ``version`` (1, 2, ... per write), ``state`` (a key of
    ``STATES``), the result ``value`` (typed, state ``d``), the ``error`` (type name and
    message, state ``e``), the checkpoint the task ran from and when it was written
    (``at_ms``, client clock, ms since the epoch)."""

    version: int
    state: str
    value: Typed | None
    error: tuple[str, str] | None
    checkpoint_ns: str
    checkpoint_id: str
    at_ms: int

    def body(self) -> bytes:
        """The stored body: state letter and msgpack (the version is the script's)."""
        typed = [self.value[0], self.value[1]] if self.value is not None else None
        return self.state.encode() + ormsgpack.packb(
            [typed, list(self.error) if self.error else None, self.checkpoint_ns,
             self.checkpoint_id, self.at_ms])

    @classmethod
    def unpack(cls, raw: bytes, where: str) -> Entry:
        """Decode a stored entry; ``CorruptRecordError`` naming ``where`` when it is not one."""
        try:
            version, state = int(raw[:8]), raw[8:9].decode()
            typed, error, ns, cid, at = ormsgpack.unpackb(raw[9:])
            if state not in STATES:
                raise ValueError(f"unknown state {state!r}")
        except Exception as exc:
            raise CorruptRecordError(f"effect journal entry {where} cannot be decoded: "
                                     f"{exc}") from exc
        return cls(version, state, (typed[0], bytes(typed[1])) if typed else None,
                   (error[0], error[1]) if error else None, ns, cid, int(at))


def _keys(ctx: Context, thread_id: str) -> list[str]:
    keys = ctx.keys(thread_id)
    return [keys.fx, keys.meta, ctx.outbox_of(thread_id), keys.gone]


def _payload(thread_id: str, field: str, size: int) -> bytes:
    return OutboxEntry(thread_id, FX_KIND, "", [field], [], size).payload()


def _max_outbox(ctx: Context) -> int:
    m = ctx.config.max_outbox
    return -(-m // ctx.partitions) if m else 0


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


REDIS_AFTER_S = 0.002
"""Seconds ``task_checkpoint_plan`` waits for this process's put (``ctx.heads``, no I/O)
before it asks Redis: a put in flight as the task starts lands within about a round trip."""

MONGODB_AFTER_S = 0.1
"""Seconds it waits before it asks MongoDB too (Redis may have let the checkpoint go: an
old one replayed); never when Redis holds the whole thread."""


def _stored_plan(ctx: Context, ref: EffectRef, durable: bool) -> Plan[bool]:
    """Is ``ref``'s checkpoint stored? Redis (``HEXISTS`` on the ``cp`` hash; its meta
    ``complete`` 1 says Redis holds the whole thread), then, with ``durable``, MongoDB (an
    indexed ``find_one``; unreachable counts as "not known yet"). In strict durability
    only MongoDB counts: a strict put has stored its checkpoint once MongoDB holds it (the
    journal's entries are there before ``fn`` is called; a Redis losing its data must not
    take the task they belong to)."""
    if ctx.config.durability != "strict":
        keys = ctx.keys(ref.thread_id)
        hit, complete = yield from ask(Pipeline([
            ("HEXISTS", keys.cp, member(ref.checkpoint_ns, ref.checkpoint_id)),
            ("HGET", keys.meta, "complete")]))
        if hit:
            return True
        if not durable or complete in (b"1", "1"):
            return False
    try:
        doc = yield from ask(FindOne(ctx.collections.checkpoints, {
            "thread_id": ref.thread_id, "checkpoint_ns": ref.checkpoint_ns,
            "checkpoint_id": ref.checkpoint_id}, projection={"_id": 1}))
    except TierUnavailableError:
        return False
    return doc is not None


def task_checkpoint_plan(ctx: Context, ref: EffectRef) -> Plan[None]:
    """Return once the checkpoint ``ref``'s task runs from is stored: at once, without
    I/O, when it is this process's newest of its namespace (``ctx.heads``: its own put
    stored it, or a read found it as the latest); else it waits for the put, polling
    ``ctx.heads`` (0.2 ms doubling to 20 ms), and asks the tiers (``_stored_plan``) after
    ``REDIS_AFTER_S`` and every 0.1 s. LangGraph's default ``durability="async"`` stores a
    step's checkpoint while its tasks run: a crash between could lose the checkpoint, and
    the resumed step would make new task ids, so an effect journaled before it is stored
    would not be found again. Raises ``EffectCheckpointError`` when this process's put of
    it, or of one before it in the namespace, failed (``Heads.refused``: LangGraph then
    skips the later puts of the run) or after ``effect_checkpoint_wait_s`` seconds."""
    heads, clock = ctx.heads, ctx.clock
    tid, ns, cid = ref.thread_id, ref.checkpoint_ns, ref.checkpoint_id
    if heads.get(tid, ns) == cid:
        return
    wait_s = ctx.config.effect_checkpoint_wait_s
    start = clock.monotonic()
    ask_at, delay = start + REDIS_AFTER_S, 0.0002
    while True:
        if heads.get(tid, ns) == cid:
            return
        why = heads.refusal(tid, ns, cid)
        if why is not None:
            raise _not_stored(ref, why)
        now = clock.monotonic()
        if now >= ask_at:
            if (yield from _stored_plan(ctx, ref, durable=now - start >= MONGODB_AFTER_S)):
                return
            ask_at = now + 0.1
        if now - start >= wait_s:
            raise _not_stored(ref, f"it was not stored within effect_checkpoint_wait_s="
                                   f"{wait_s:g} s")
        yield Sleep(delay)
        delay = min(delay * 2, 0.02)


def _not_stored(ref: EffectRef, reason: str) -> EffectCheckpointError:
    return EffectCheckpointError(
        f"{ref.describe()} was not started: the checkpoint its task runs from "
        f"({ref.checkpoint_id!r}, checkpoint_ns {ref.checkpoint_ns!r}) is not stored, "
        f"{reason}. An effect waits for it so that a crash cannot lose the task its "
        "journal entry belongs to; nothing was called or journaled",
        thread_id=ref.thread_id, checkpoint_ns=ref.checkpoint_ns,
        checkpoint_id=ref.checkpoint_id, effect=ref.name, reason=reason)


def begin_plan(ctx: Context, ref: EffectRef, started: Entry) -> Plan[Entry | None]:
    """Look up ``ref``; when no live entry exists (none, or ``cleared``) store
    ``started`` (one round trip; a journal Redis cannot vouch for asks MongoDB first:
    one ``find_one`` and one more round trip; in strict durability the started entry is
    upserted into MongoDB too, and marked cleared in Redis when that fails, whose error is
    raised). Returns the entry found (``started``,
    ``done`` or ``failed``), or None when this call started it. Raises
    ``OutboxFullError`` (nothing stored) when the thread's outbox stream is full."""
    where = ref.describe()
    body = started.body()
    payload = _payload(ref.thread_id, ref.field, len(body))
    keys = _keys(ctx, ref.thread_id)
    op = begin_op(keys, ref.thread_id, ref.field, body, payload, _max_outbox(ctx))
    try:
        reply = yield from ask(op)
        if reply.status == "ask":
            doc = yield from ask(FindOne(collection(ctx), {"_id": ref.doc_id}))
            raw = bytes(doc["raw"]) if doc is not None else b""
            live = raw if raw and raw[8:9] != b"c" else b""
            reply = yield from ask(begin_op(
                keys, ref.thread_id, ref.field, body, payload, _max_outbox(ctx),
                floor=int(doc["v"]) if doc else 0, checked=True, known=live,
                hot_ttl_s=ctx.config.hot_ttl_s))
    except ScriptRefused as refusal:
        if refusal.code != Refusal.OUTBOX_FULL:
            raise
        raise OutboxFullError(
            f"outbox {ctx.outbox_of(ref.thread_id)!r} holds its share of max_outbox="
            f"{ctx.config.max_outbox} entries not yet in MongoDB; {where} was not "
            "started (its function was not called)") from None
    if reply.status == "new":
        try:
            yield from _strict_plan(ctx, ref, reply.entry, started.at_ms)
        except Exception:  # fn is not called: cleared, so no later execution is in doubt
            cleared = Entry(0, "c", None, None, started.checkpoint_ns, started.checkpoint_id,
                            started.at_ms)
            body = cleared.body()
            yield end_op(keys, ref.thread_id, ref.field, body,
                         _payload(ref.thread_id, ref.field, len(body)))
            raise
        return None
    return Entry.unpack(reply.entry, where)


def end_plan(ctx: Context, ref: EffectRef, outcome: Entry) -> Plan[None]:
    """Journal ``outcome`` (done, failed or cleared) of ``ref``: one round trip (with
    ``redis_min_replicas``, its ``WAIT`` in the same pipeline; in strict durability then
    MongoDB). Raises ``ReplicationTimeoutError`` naming the effect when too few replicas
    confirm it (the outcome IS stored on the primary and in the outbox)."""
    body = outcome.body()
    op = end_op(_keys(ctx, ref.thread_id), ref.thread_id, ref.field, body,
                _payload(ref.thread_id, ref.field, len(body)))
    try:
        stored = yield from ask(replicated(ctx, op))
    except ReplicationTimeoutError as exc:
        raise ReplicationTimeoutError(
            f"the outcome of {ref.describe()} IS stored on the Redis primary and in the "
            f"outbox, but WAIT confirmed it on {exc.replicas} replica(s), not the "
            f"{exc.wanted} of redis_min_replicas, within redis_wait_timeout_s="
            f"{exc.timeout_s}: a failover of the primary now could lose it from Redis "
            "before the flush", wanted=exc.wanted, replicas=exc.replicas,
            timeout_s=exc.timeout_s, thread_id=ref.thread_id, checkpoint_ns=ref.task_ns,
            checkpoint_id=ref.checkpoint_id, task_id=ref.task_id) from exc
    yield from _strict_plan(ctx, ref, stored, outcome.at_ms)


def _strict_plan(ctx: Context, ref: EffectRef, stored: bytes, at_ms: int) -> Plan[None]:
    """In ``durability="strict"``, upsert the entry just stored in Redis (``stored``:
    version and body) into MongoDB before ``once`` goes on, as a strict ``put`` does: a
    Redis that loses its data then cannot make a re-execution call ``fn`` again. The
    outbox entry stays for the flusher (the same version: an idempotent repeat that is also
    fenced: what a delete overtook is deleted again)."""
    if ctx.config.durability != "strict":
        return
    doc = effect_doc(ref.thread_id, ref.field, stored, at_ms)
    yield from bulk_ignoring_newer(collection(ctx), [F.effect_upsert(doc)])


def effect_doc(thread_id: str, field: str, raw: bytes, put_ms: int) -> Doc:
    """The MongoDB document of one journal entry ``raw`` stored under ``field``."""
    task_ns, task_id, name, n = field.split(SEP)
    entry = Entry.unpack(raw, f"{field!r} of thread {thread_id!r}")
    return {
        "_id": D.doc_id(thread_id, task_ns, task_id, name, int(n)),
        "thread_id": thread_id, "task_ns": task_ns, "task_id": task_id, "name": name,
        "n": int(n), "checkpoint_ns": entry.checkpoint_ns,
        "checkpoint_id": entry.checkpoint_id,
        "member": member(entry.checkpoint_ns, entry.checkpoint_id),
        "state": STATES[entry.state], "v": entry.version, "raw": raw, "at_ms": entry.at_ms,
        "put_ms": put_ms,
    }


def flush_effects_plan(ctx: Context, entries: Sequence[tuple[bytes, str, OutboxEntry]]
                       ) -> Plan[int]:
    """The flusher's part for the journal's outbox entries (``(entry id, thread_id,
    payload)`` of kind ``fx``): read the entries they name from Redis (one pipeline),
    upsert them into MongoDB, then fence them: delete again what a delete overtook (a
    tombstone of the whole thread or of the effect's checkpoint newer than the entry) and
    give each journal the ``hot_ttl_s`` of flushed keys. Returns the documents written."""
    at: dict[tuple[str, str], int] = {}
    for eid, tid, entry in entries:
        for f in entry.names:
            at[(tid, f)] = max(at.get((tid, f), 0), stream_ms(eid))
    by_thread: dict[str, list[str]] = defaultdict(list)
    for tid, f in sorted(at):
        by_thread[tid].append(f)
    threads = list(by_thread)
    replies = yield Pipeline([["HMGET", ctx.keys(t).fx, *fs] for t, fs in by_thread.items()])
    docs: list[Doc] = []
    for tid, values in zip(threads, replies):
        for f, raw in zip(by_thread[tid], values):
            if raw is not None:  # None: deleted since
                docs.append(effect_doc(tid, f, bytes(raw), at[(tid, f)]))
    if docs:
        yield from bulk_ignoring_newer(collection(ctx), [F.effect_upsert(d) for d in docs])
    ttl = ctx.config.hot_ttl_s
    cmds: list[list[object]] = [["HGETALL", ctx.keys(t).gone] for t in threads]
    if ttl > 0:
        cmds += [["EXPIRE", ctx.keys(t).fx, ttl] for t in threads]
    stones = (yield Pipeline(cmds))[:len(threads)]
    gone = {t: {_text(k): int(v) for k, v in raw.items()} for t, raw in zip(threads, stones)}
    back = [d["_id"] for d in docs
            if max(gone[d["thread_id"]].get("*", 0), gone[d["thread_id"]].get(d["member"], 0))
            >= at[(d["thread_id"], _field_of(d))]]  # as plans/fence.py
    if back:
        yield DeleteMany(collection(ctx), D.ids_in(back))
    return len(docs)


def _field_of(doc: Doc) -> str:
    return SEP.join((doc["task_ns"], doc["task_id"], doc["name"], str(doc["n"])))


def delete_thread_effects_plan(ctx: Context, thread_id: str, at_ms: int) -> Plan[None]:
    """``delete_thread``'s part: the thread's journal out of Redis, then its documents
    stored at or before ``at_ms`` (the delete's time) out of MongoDB. Runs after the
    delete's tombstones are written, so what a late flush of an older entry writes is fenced."""
    yield Pipeline([["DEL", ctx.keys(thread_id).fx]])
    yield DeleteMany(collection(ctx), D.stored_before(thread_id, at_ms))


def remove_effects_plan(ctx: Context, thread_id: str, members: Sequence[str]) -> Plan[None]:
    """``delete_for_runs``/``prune``'s part: the effects of tasks that ran from the removed
    checkpoints (``members``, ``ns NUL checkpoint_id``), in both tiers."""
    if not members:
        return
    gone = set(members)
    fx = ctx.keys(thread_id).fx
    (held,) = yield Pipeline([["HGETALL", fx]])
    drop = [k for k, raw in (held or {}).items() if _text(k) != TRUST_FIELD
            and member(*_checkpoint_of(bytes(raw))) in gone]
    if drop:
        yield Pipeline([["HDEL", fx, *drop]])
    yield DeleteMany(collection(ctx), F.effects_of_members(thread_id, gone))


def _checkpoint_of(raw: bytes) -> tuple[str, str]:
    entry = Entry.unpack(raw, "in Redis")
    return entry.checkpoint_ns, entry.checkpoint_id


def copy_effects_plan(ctx: Context, source: str, target: str, now_ms: int) -> Plan[int]:
    """``copy_thread``'s part (after the outbox drained): every journal document of
    ``source`` upserted under ``target`` (stored at ``now_ms``), and ``target``'s Redis
    journal dropped so its reads go to MongoDB. Returns the documents copied."""
    docs = yield from ask(Find(collection(ctx), {"thread_id": source}))
    for d in docs:
        d["thread_id"] = target
        d["_id"] = D.doc_id(target, d["task_ns"], d["task_id"], d["name"], d["n"])
        d["put_ms"] = now_ms
    if docs:
        yield from bulk_ignoring_newer(collection(ctx), [F.effect_upsert(d) for d in docs])
    yield Pipeline([["DEL", ctx.keys(target).fx]])
    return len(docs)


def journal_plan(ctx: Context, thread_id: str, *, hot_only: bool = False) -> Plan[list[Doc]]:
    """Every journal entry of ``thread_id``, both tiers merged (the newer version of an
    effect wins), as documents (``effect_doc``'s fields; ``tier`` ``"hot"`` or
    ``"durable"``), in ``task_ns``, ``task_id``, ``name``, ``n`` order: for the CLI and
    exports. MongoDB is read only when Redis cannot vouch for the journal (as
    ``EFFECT_BEGIN`` decides: the journal's ``!``, or no journal, no ``meta.fx`` and a
    thread that started in Redis), so a thread Redis holds entirely is shown while MongoDB
    is down. ``hot_only``: Redis's entries alone, MongoDB not read (for a reader that was
    told MongoDB does not answer)."""
    keys = ctx.keys(thread_id)
    held, (had_fx, complete) = yield Pipeline([["HGETALL", keys.fx],
                                               ["HMGET", keys.meta, "fx", "complete"]])
    trusted = any(_text(k) == TRUST_FIELD for k in held) or (
        not held and had_fx is None and complete is not None and _text(complete) in ("1", "2"))
    durable = [] if trusted or hot_only else (
        yield from ask(Find(collection(ctx), {"thread_id": thread_id})))
    out: dict[str, Doc] = {}
    for d in durable:
        out[d["_id"]] = {**d, "tier": "durable"}
    for k, raw in held.items():
        f = _text(k)
        if f == TRUST_FIELD:
            continue
        d = {**effect_doc(thread_id, f, bytes(raw), 0), "tier": "hot"}
        if d["_id"] not in out or out[d["_id"]]["v"] <= d["v"]:
            out[d["_id"]] = d
    return sorted(out.values(), key=lambda d: (d["task_ns"], d["task_id"], d["name"], d["n"]))
