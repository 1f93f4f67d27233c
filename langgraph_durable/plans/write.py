"""Plans for ``put`` and ``put_writes``: one Redis round trip each (plus MongoDB in strict mode)."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    get_checkpoint_metadata,
)

from ..core.items import MANIFEST_TYPE, Stored, packed
from ..core.ops import BulkWrite, Doc, Op, Parallel, Plan, Refusal, Script, Sleep, T
from ..core.outbox_entry import OutboxEntry
from ..core.records import (
    SEP,
    CheckpointRecord,
    Typed,
    WriteRecord,
    blob_field,
    check_id,
    config_of,
    md_query_of,
    member,
    pack_blob,
    write_field,
    write_idx,
)
from ..durable import chunks as C
from ..durable import documents as D
from ..durable import inline as I
from ..durable import item_docs as IT
from ..durable import write_groups as G
from ..durable.retention_docs import ttl_of_config
from ..errors import (
    ConcurrentRunError,
    CorruptRecordError,
    InvalidIdentifierError,
    OutboxFullError,
    ReplicationTimeoutError,
    ScriptRefused,
    SerializationError,
)
from ..hot.scripts import PutArgs, PutReply, PutWritesArgs
from ..serde.extref_errors import BlobStoreError
from .context import Context
from .fence import bulk_ignoring_newer, fence_plan, stream_ms
from .tombstones import check_deleted_plan, check_unknown_plan

log = logging.getLogger("langgraph_durable.saver")


def thread_ns(config: RunnableConfig) -> tuple[str, str]:
    """Validated ``(thread_id, checkpoint_ns)`` of a config; raises InvalidIdentifierError."""
    conf = config.get("configurable") or {}
    if "thread_id" not in conf or conf["thread_id"] is None:
        raise InvalidIdentifierError(
            "config['configurable']['thread_id'] is required by DurableSaver"
        )
    tid = check_id("thread_id", conf["thread_id"])
    ns = check_id("checkpoint_ns", conf.get("checkpoint_ns") or "", thread_id=tid)
    return tid, ns


def check_version(version: object, *, thread_id: str, channel: object) -> str:
    """A channel version as the key layout stores it (``ns NUL channel NUL version``):
    returns its text. LangGraph makes versions as ``str`` (``"<int:032>.<float>"`` of
    ``get_next_version``, InMemorySaver's and ours), ``int`` (``BaseCheckpointSaver``'s
    default ``get_next_version``) or ``float``; anything else (``bool``, ``None``, a
    tuple...), a NUL or a lone surrogate is refused with ``InvalidIdentifierError``
    naming the thread and the channel (nothing written)."""
    if isinstance(version, bool) or not isinstance(version, (str, int, float)):
        raise InvalidIdentifierError(
            f"the version of channel {channel!r} of thread {thread_id!r} must be a str, "
            f"int or float (as get_next_version makes it), got {type(version).__name__}")
    return check_id(f"the version of channel {channel!r}",
                    version if isinstance(version, str) else str(version), thread_id=thread_id)


def check_channels(versions: Mapping[Any, Any], *, thread_id: str) -> None:
    """Every channel name and version of a ``ChannelVersions`` mapping (``new_versions``,
    a checkpoint's ``channel_versions``) checked with ``check_id``/``check_version``;
    raises ``InvalidIdentifierError``. ASCII text without NUL (what LangGraph makes) is
    taken without further work: this runs on every ``put``."""
    if type(versions) is not dict and not isinstance(versions, Mapping):
        raise InvalidIdentifierError(
            f"channel versions of thread {thread_id!r} must be a mapping of channel -> "
            f"version, got {type(versions).__name__}")
    try:  # the common case at C speed: every name and version ASCII text without NUL
        names, texts = "".join(versions), "".join(versions.values())
    except TypeError:  # a version that is a number (or a name or version of a bad type)
        pass
    else:
        if names.isascii() and texts.isascii() and SEP not in names and SEP not in texts:
            return
    for ch, ver in versions.items():
        if type(ch) is str and ch.isascii() and SEP not in ch and (
                (type(ver) is str and ver.isascii() and SEP not in ver)
                or type(ver) is int or type(ver) is float):
            continue
        check_id("channel", ch, thread_id=thread_id)
        check_version(ver, thread_id=thread_id, channel=ch)


def dumps(ctx: Context, value: object, *, thread_id: str, what: str) -> Typed:
    """``serde.dumps_typed`` with errors and the size bound naming thread and channel."""
    try:
        typed: Typed = ctx.serde.dumps_typed(value)
    except BlobStoreError as exc:  # the store failed, not the value: retryable, kept apart
        raise exc.add_context(thread_id=thread_id, value=what) from exc.__cause__
    except Exception as exc:
        raise SerializationError(
            f"cannot serialize {what} of thread {thread_id!r}: value of type "
            f"{type(value).__module__}.{type(value).__qualname__}: {exc}"
        ) from exc
    if len(typed[1]) > ctx.config.max_value_bytes:
        raise SerializationError(
            f"{what} of thread {thread_id!r} is {len(typed[1])} bytes serialized, over "
            f"max_value_bytes={ctx.config.max_value_bytes}"
        )
    return typed


def value_typed(ctx: Context, value: object, parts: dict[bytes, Stored], *, thread_id: str,
                what: str, reuse: str | None = None) -> Typed:
    """The typed value to store for ``value``: a plain non-empty ``list`` becomes a
    manifest (``items.py``) whose items and nodes are added to ``parts``; anything else
    ``dumps``. ``reuse``: the list's name among the thread's (a channel value: the next
    put of the channel reuses the digests of the items it still starts with,
    ``Items.split``). Raises ``SerializationError`` naming the item's position."""
    if type(value) is not list or not value or not ctx.items.enabled:
        return dumps(ctx, value, thread_id=thread_id, what=what)
    split = ctx.items.split(
        value, lambda item, pos: dumps(ctx, item, thread_id=thread_id,
                                       what=f"item {pos} of {what}"), pack_blob, thread_id,
        reuse)
    parts.update(split.parts)
    return MANIFEST_TYPE, split.refs


def _max_outbox(ctx: Context) -> int:
    """The bound on one outbox stream: ``max_outbox`` shared by the partitions (0 = none)."""
    m = ctx.config.max_outbox
    return -(-m // ctx.partitions) if m else 0


def _payload(tid: str, kind: str, m: str, fields: Sequence[str],
             items: Mapping[bytes, bytes], size: int, ttl_min: float | None) -> bytes:
    """The payload of an ``OutboxEntry`` of kind ``"cp"``/``"w"`` naming ``fields`` and
    the digests of ``items``; its size = the record bytes it names (``size``, the record
    and its values) plus the items', so a flusher can cut its rounds by size without
    asking Redis (entries without it are measured with ``HSTRLEN``); ``ttl_min``: the
    thread TTL the run named (``durable/retention_docs.ttl_of_config``), for the flusher."""
    size += sum(len(v) for v in items.values())
    return OutboxEntry(tid, kind, m, list(fields), list(items), size, ttl_min).payload()


def replicated(ctx: Context, op: Script[T]) -> Script[T]:
    """``op`` waiting for ``redis_min_replicas`` replicas (``WAIT`` with
    ``redis_wait_timeout_s`` in ms, at least 1), or unchanged when that is 0."""
    n = ctx.config.redis_min_replicas
    if not n:
        return op
    ms = max(1, round(ctx.config.redis_wait_timeout_s * 1000))
    return replace(op, wait_replicas=n, wait_timeout_ms=ms)


def _not_replicated(exc: ReplicationTimeoutError, what: str, thread_id: str, ns: str,
                    checkpoint_id: str, task_id: str | None = None) -> ReplicationTimeoutError:
    """``exc`` from the driver, told again with the thread, namespace, checkpoint and task."""
    return ReplicationTimeoutError(
        f"{what} of thread {thread_id!r} (ns {ns!r}) IS stored on the Redis primary and in "
        f"the outbox (it reaches MongoDB as usual), but WAIT confirmed it on {exc.replicas} "
        f"replica(s), not the {exc.wanted} of redis_min_replicas, within "
        f"redis_wait_timeout_s={exc.timeout_s}: a failover of the primary now could lose "
        "it from Redis before the flush",
        wanted=exc.wanted, replicas=exc.replicas, timeout_s=exc.timeout_s,
        thread_id=thread_id, checkpoint_ns=ns, checkpoint_id=checkpoint_id, task_id=task_id)


def _send(ctx: Context, args: PutArgs | PutWritesArgs,
          parts: dict[bytes, Stored]) -> Plan[bytes]:
    """Run a writing script (the checkpoint and its outbox entry in one step, on a
    cluster too); apply the outbox-full policy (deadline read from ``ctx.clock``). A
    ``DELETED`` refusal (Redis holds a tombstone of the named checkpoint) is checked in
    MongoDB (``tombstones.check_deleted_plan``), an ``UNKNOWN`` one (Redis neither holds
    the checkpoint nor a tombstone of it) against MongoDB's tombstones
    (``tombstones.check_unknown_plan``), and the write sent again with
    ``checked_through_ms``, or ``ThreadDeletedError`` raised; a
    ``MISSING_ITEMS`` refusal (Redis lost items this process took as held) is sent again
    with every item in ``parts``. Returns the outbox entry id."""
    cfg = ctx.config
    deadline = ctx.clock.monotonic() + (
        cfg.outbox_full_timeout_s if cfg.on_outbox_full == "block" else 0)
    pause = 0.005
    while True:
        try:
            # the op yielded here, not through ``ask``: one generator less alive per call
            op = replicated(ctx, args.op())
            reply: PutReply = yield op
            break
        except ScriptRefused as refusal:
            if refusal.code == Refusal.MISSING_ITEMS:
                if len(args.items) == len(parts):
                    raise CorruptRecordError(
                        f"Redis refused the items of thread {args.thread_id!r} it was sent "
                        f"({refusal.detail} missing)") from None
                args = _with_every_item(ctx, args, parts)
                continue
            if refusal.code == Refusal.DELETED:
                deleted_at = int(refusal.detail)
                yield from check_deleted_plan(ctx, args.thread_id, args.named, deleted_at)
                args = args.checked_through(deleted_at)  # stored again since: refused
                continue                                  # only by a later delete
            if refusal.code == Refusal.UNKNOWN:  # Redis cannot tell: MongoDB's tombstones can
                checked = yield from check_unknown_plan(ctx, args.thread_id, args.named)
                args = args.checked_through(checked)
                if len(args.items) < len(parts):  # Redis lost the checkpoint: its items
                    args = _with_every_item(ctx, args, parts)  # too, most likely
                continue
            if refusal.code == Refusal.STALE_HEAD:
                assert isinstance(args, PutArgs)
                raise ConcurrentRunError(
                    f"thread {args.thread_id!r} (ns {args.ns!r}) was extended by another "
                    f"run: its latest checkpoint is now {refusal.detail!r}, this run started "
                    f"from {args.expected_head.split(SEP)[-1]!r}; nothing was written. "
                    "Reload the thread and retry (or set on_concurrent_run='fork')"
                ) from None
            if ctx.clock.monotonic() >= deadline:
                name = "put" if isinstance(args, PutArgs) else "put_writes"
                raise OutboxFullError(
                    f"outbox {ctx.outbox_of(args.thread_id)!r} holds its share of "
                    f"max_outbox={cfg.max_outbox} entries not yet in MongoDB; {name} of "
                    f"thread {args.thread_id!r} was not written") from None
            yield Sleep(pause)
            pause = min(pause * 2, 0.1)
    if reply.newest is not None:  # PUT stored a checkpoint_id below the namespace's newest
        _warn_not_increasing(args, reply.newest)
    return reply.entry_id


def _with_every_item(ctx: Context, args: PutArgs | PutWritesArgs,
                     parts: dict[bytes, Stored]) -> PutArgs | PutWritesArgs:
    """The same write bringing every item and node in ``parts`` (Redis lacks some this
    process took as held there: ``ctx.items`` forgets the thread's), with its outbox
    entry's byte count made again."""
    ctx.items.forget(args.thread_id)
    entry = OutboxEntry.of_payload(args.thread_id, args.payload)
    every = packed(parts, pack_blob)
    # the entry's bytes: its record's (the total less the items first sent) plus every item's
    record_bytes = (entry.size or 0) - sum(len(args.items.get(d, b"")) for d in entry.digests)
    return args.with_items(every, _payload(args.thread_id, entry.kind, entry.member,
                                           entry.names, every, record_bytes, entry.ttl_min))


def _warn_not_increasing(args: PutArgs | PutWritesArgs, newest: str) -> None:
    """Log that a put stored a checkpoint_id that is not above the newest of its thread
    and namespace (LangGraph makes ids from the host's clock: a host whose clock is behind
    another's makes smaller ones). Stored as InMemorySaver stores it; ``get_tuple`` without
    a ``checkpoint_id`` still answers the largest id, as InMemorySaver does."""
    cid = args.member.split(SEP)[-1]
    ns = args.ns if isinstance(args, PutArgs) else args.member.split(SEP)[0]
    log.warning(
        "thread %r (ns %r): new checkpoint %r is not above the thread's newest %r; stored "
        "(as InMemorySaver does), but the latest checkpoint stays %r: clock skew between "
        "the hosts running this thread? (checkpoint ids are made from the host's clock)",
        args.thread_id, ns, cid, newest, newest)


def _named(config: RunnableConfig, ns: str, parent: str | None) -> str:
    """The member of the checkpoint a put builds on, which must not have been deleted: its
    parent; for a subgraph's first checkpoint (no parent in its namespace), the enclosing
    namespace's checkpoint from LangGraph's ``checkpoint_map``; ``""`` for a new thread."""
    if parent:
        return member(ns, parent)
    if not ns:
        return ""
    outer = ns.rpartition("|")[0]
    found = (config["configurable"].get("checkpoint_map") or {}).get(outer)
    return member(outer, str(found)) if isinstance(found, str) and SEP not in found else ""


@dataclass(frozen=True)
class PreparedPut:
    """A ``put`` with its values serialized (``prepare_put``): what ``put_plan`` stores."""

    thread_id: str
    ns: str
    checkpoint_id: str
    record: CheckpointRecord
    blobs: list[tuple[str, Typed | None]]
    args: PutArgs
    parts: dict[bytes, Stored]


def prepare_put(
    ctx: Context,
    config: RunnableConfig,
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    new_versions: ChannelVersions,
) -> PreparedPut:
    """Validate and serialize a ``put`` (the serializer may upload to a blob store: the
    async saver calls this in a worker thread). Reads ``ctx.heads`` for the expected
    head. Raises ``InvalidIdentifierError`` (an identifier, channel or channel version
    the key layout cannot hold: ``check_id``, ``check_version``) and
    ``SerializationError``; nothing is written."""
    tid, ns = thread_ns(config)
    cid = check_id("checkpoint_id", checkpoint["id"], thread_id=tid)
    parent = config["configurable"].get("checkpoint_id")
    if parent is not None:
        parent = check_id("parent checkpoint_id", parent, thread_id=tid)
    check_channels(new_versions, thread_id=tid)
    check_channels(checkpoint["channel_versions"], thread_id=tid)
    c: dict[str, object] = dict(checkpoint)
    c.pop("channel_values", None)
    values = checkpoint.get("channel_values", {})
    blobs: list[tuple[str, Typed | None]] = []
    parts: dict[bytes, Stored] = {}
    for ch, ver in new_versions.items():
        typed = (
            value_typed(ctx, values[ch], parts, thread_id=tid,
                        what=f"channel {ch!r} (ns {ns!r})",
                        reuse=f"{ns}\x00{ch}" if type(values[ch]) is list else None)
            if ch in values else None
        )
        blobs.append((blob_field(ns, ch, ver), typed))
    md = get_checkpoint_metadata(config, metadata)
    rec = CheckpointRecord(
        ns=ns,
        checkpoint_id=cid,
        parent_id=parent,
        checkpoint=dumps(ctx, c, thread_id=tid, what=f"checkpoint {cid!r}"),
        metadata=dumps(ctx, md, thread_id=tid, what=f"metadata of checkpoint {cid!r}"),
        run_id=str(md["run_id"]) if md.get("run_id") is not None else None,
        md_query=md_query_of(md) if ctx.queryable else (),
        blob_fields=tuple(blob_field(ns, ch, v)
                          for ch, v in checkpoint["channel_versions"].items()),
    )
    m = member(ns, cid)
    expect = ""
    if ctx.config.on_concurrent_run == "raise" and parent and ctx.heads.expects(tid, ns, parent):
        expect = member(ns, parent)
    # a thread's first input checkpoint (LangGraph's step -1, no parent, root namespace)
    # on a thread Redis holds nothing of starts a new thread: Redis then holds all of it
    fresh = parent is None and ns == "" and md.get("step") == -1
    send = ctx.items.unknown(tid, parts, pack_blob)
    record = rec.pack()
    packed_blobs = [(f, pack_blob(typed)) for f, typed in blobs]
    size = len(record) + sum(len(b) for _, b in packed_blobs)
    keys = ctx.put_keys(tid)  # with the thread's registry: the put registers the thread
    args = PutArgs(
        keys=keys, max_outbox=_max_outbox(ctx), thread_id=tid,
        payload=_payload(tid, "cp", m, [f for f, _ in blobs], send, size,
                         ttl_of_config(config["configurable"], tid)), member=m, ns=ns,
        record=record, index=rec.pack_index(), expected_head=expect, new_thread=fresh,
        named=_named(config, ns, parent), checked_through_ms=0,
        blobs=packed_blobs, items=send)
    return PreparedPut(tid, ns, cid, rec, blobs, args, parts)


def put_plan(ctx: Context, put: PreparedPut) -> Plan[RunnableConfig]:
    """Store a prepared checkpoint and its changed channel values (one Redis round trip;
    in strict mode then MongoDB); mirrors ``InMemorySaver.put``. Returns the config of the
    stored checkpoint; the caller records it as the head (``Heads.seen``)."""
    tid, ns, cid = put.thread_id, put.ns, put.checkpoint_id
    try:
        entry = yield from _send(ctx, put.args, put.parts)
    except ReplicationTimeoutError as exc:
        raise _not_replicated(exc, f"checkpoint {cid!r}", tid, ns, cid) from exc
    if ctx.config.durability == "strict":
        cols = ctx.collections
        at = stream_ms(entry)
        # the small values inside the checkpoint document, as the flusher writes them
        cp_doc, big_ones = I.checkpoint_docs(tid, put.record, put.blobs, put_ms=at)
        (cp_doc,), cp_chunks = C.split_all("checkpoints", [cp_doc])
        blob_docs, blob_chunks = C.split_all("blobs", big_ones)
        yield from _strict_items(ctx, tid, put.args.items, at, cp_chunks + blob_chunks)
        ops: list[Op[object]] = [BulkWrite(cols.checkpoints, [I.upsert_checkpoint(cp_doc)])]
        if blob_docs:
            ops.append(BulkWrite(cols.blobs, [D.upsert(d) for d in blob_docs]))
        yield Parallel(ops)
        # a delete that ran since the Redis write must not be undone by this MongoDB write
        yield from fence_plan(
            ctx, [(entry, tid, OutboxEntry(tid, "cp", put.args.member,
                                           [f for f, _ in put.blobs]))])
    return config_of(tid, ns, cid)


def _strict_items(ctx: Context, thread_id: str, parts: Mapping[bytes, bytes], at_ms: int,
                  chunks: list[Doc]) -> Plan[None]:
    """Strict durability: the chunks and the items and nodes a write sent to Redis, stored
    in MongoDB before the documents that refer to them (insert-once upserts). The items it
    did not send, this process sent (and so stored in MongoDB) before."""
    cols = ctx.collections
    item_docs, item_chunks = C.split_all(
        "items", (IT.item_doc(thread_id, d, v, put_ms=at_ms) for d, v in parts.items()))
    yield from C.write_plan(cols.chunks, chunks + item_chunks)
    if item_docs:
        yield BulkWrite(cols.items, [IT.upsert_item(d) for d in item_docs])


@dataclass(frozen=True)
class PreparedWrites:
    """A ``put_writes`` with its values serialized (``prepare_put_writes``)."""

    thread_id: str
    ns: str
    checkpoint_id: str
    records: list[WriteRecord]
    args: PutWritesArgs
    parts: dict[bytes, Stored]


def prepare_put_writes(
    ctx: Context,
    config: RunnableConfig,
    writes: Sequence[tuple[str, object]],
    task_id: str,
    task_path: str,
) -> PreparedWrites | None:
    """Validate and serialize a ``put_writes`` (may upload, like ``prepare_put``); None
    when there is nothing to write. Their ``seq`` is ``ctx.clock.time_ns()``. Raises
    ``InvalidIdentifierError`` (nothing written) for a thread_id, checkpoint_ns,
    checkpoint_id, task_id or task_path that is not storable text (a NUL, a lone
    surrogate, another type) or a channel that is not text (a write's channel is data: a
    NUL in it round-trips, as in InMemorySaver), and ``SerializationError``."""
    tid, ns = thread_ns(config)
    raw_cid = config["configurable"].get("checkpoint_id")
    if not raw_cid:
        raise InvalidIdentifierError(
            f"put_writes of thread {tid!r} (ns {ns!r}) needs config['configurable']"
            "['checkpoint_id']"
        )
    cid = check_id("checkpoint_id", raw_cid, thread_id=tid)
    task_id = check_id("task_id", task_id, thread_id=tid)
    task_path = check_id("task_path", task_path or "", thread_id=tid)
    for ch, _value in writes:  # a write's channel is data (its Redis field and MongoDB
        if type(ch) is not str:  # _id name the task and index): any text, NUL included
            check_id("channel", ch, thread_id=tid)
    if not writes:
        return None
    seq = ctx.clock.time_ns()
    recs: list[WriteRecord] = []
    parts: dict[bytes, Stored] = {}
    for pos, (ch, value) in enumerate(writes):
        idx = write_idx(ch, pos)
        typed = value_typed(ctx, value, parts, thread_id=tid,
                            what=f"write to channel {ch!r} by task {task_id!r}")
        recs.append(WriteRecord(task_id, idx, ch, typed, task_path, seq))
    fields = [write_field(ns, cid, task_id, w.idx) for w in recs]
    m = member(ns, cid)
    send = ctx.items.unknown(tid, parts, pack_blob)
    packed_writes = [(f, w.pack(), w.idx < 0) for f, w in zip(fields, recs)]
    args = PutWritesArgs(
        keys=ctx.put_keys(tid), max_outbox=_max_outbox(ctx),
        thread_id=tid,
        payload=_payload(tid, "w", m, fields, send,
                         sum(len(b) for _, b, _ in packed_writes),
                         ttl_of_config(config["configurable"], tid)),
        member=m, checked_through_ms=0, writes=packed_writes, items=send)
    return PreparedWrites(tid, ns, cid, recs, args, parts)


def put_writes_plan(ctx: Context, prepared: PreparedWrites | None) -> Plan[None]:
    """Store prepared pending writes of a task: special channels overwrite, others insert
    once (one Redis round trip; in strict mode then MongoDB)."""
    if prepared is None:
        return None
    tid, ns, cid = prepared.thread_id, prepared.ns, prepared.checkpoint_id
    try:
        entry = yield from _send(ctx, prepared.args, prepared.parts)
    except ReplicationTimeoutError as exc:
        task = prepared.records[0].task_id
        raise _not_replicated(exc, f"pending writes of task {task!r} to checkpoint {cid!r}",
                              tid, ns, cid, task) from exc
    if ctx.config.durability == "strict":
        docs, chunks = C.split_all("writes", G.write_docs(tid, ns, cid, prepared.records,
                                                          put_ms=stream_ms(entry)))
        yield from _strict_items(ctx, tid, prepared.args.items, stream_ms(entry), chunks)
        yield from bulk_ignoring_newer(ctx.collections.writes,
                                       [G.upsert_any(d) for d in docs])
        fields = [f for f, _, _ in prepared.args.writes]
        yield from fence_plan(
            ctx, [(entry, tid, OutboxEntry(tid, "w", prepared.args.member, fields))])
    return None
