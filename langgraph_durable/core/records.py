"""Sans-I/O record shapes shared by both tiers: what is stored, how it is encoded.

Nothing here talks to a server. The saver turns LangGraph's calls into these records,
the hot tier stores their bytes in Redis, the flusher turns the same bytes into MongoDB
documents, and reads turn them back into ``CheckpointTuple``s. Every stored value is
``(type, bytes)`` from the serializer; the envelopes around it are msgpack arrays that
start with ``SCHEMA_VERSION``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import ormsgpack
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    CheckpointTuple,
    writes_sort_key,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from ..errors import CorruptRecordError, InvalidIdentifierError
from .items import MANIFEST_TYPE, Items, expand, load_item, unwrap_manifest, wrap_manifest
from .schema import CHUNKED_VERSION as CHUNKED_VERSION  # re-exported (stored format)
from .schema import MD_QUERY_MAX_CHARS as MD_QUERY_MAX_CHARS
from .schema import SCHEMA_VERSION as SCHEMA_VERSION  # re-exported (stored format)
from .schema import MsgpackValue, check_not_newer, upgrade_envelope
from .schema import md_query_of as md_query_of

SEP = "\x00"
"""Separator of the parts of a Redis hash field; identifiers may not contain it."""

EMPTY = b""
"""Redis value of a channel blob that exists but holds no value (LangGraph's "empty")."""

Typed = tuple[str, bytes]

Decode = Callable[[list[tuple[bytes, Typed]]], list[object]]
"""Decodes the ``(digest, typed item)`` pairs of a manifest into their objects
(``items.Items.decode`` bound to a thread)."""


MAX_ID_BYTES = 65_536
"""Longest identifier ``check_id`` takes, in UTF-8 bytes. An identifier is part of
Redis keys and fields and of MongoDB ``_id``s (several in one document, under its
16 MiB limit); a 9 MB ``thread_id`` was taken by ``put`` and then dead-lettered, every
error message repeating it whole. InMemorySaver has no limit."""


def check_id(kind: str, value: object, *, thread_id: str | None = None) -> str:
    """Return ``value`` as a storable identifier string or raise ``InvalidIdentifierError``.

    ``thread_id`` may be any ``str``, ``int`` or ``uuid.UUID`` (converted with ``str``);
    every identifier must be non-NUL text (``"\\x00"`` separates key parts) of at most
    ``MAX_ID_BYTES`` bytes in UTF-8.
    """
    if isinstance(value, bool) or not isinstance(value, (str, int)) and not _is_uuid(value):
        where = f" (thread {thread_id!r})" if thread_id is not None else ""
        raise InvalidIdentifierError(
            f"{kind} must be a str, int or UUID, got {type(value).__name__}{where}"
        )
    text = str(value)
    try:
        size = len(text.encode("utf-8"))
    except UnicodeEncodeError:
        raise InvalidIdentifierError(f"{kind}{_of(kind, thread_id)} is not valid UTF-8 "
                                     f"text (a lone surrogate?): {text[:80]!r}") from None
    if SEP in text:
        raise InvalidIdentifierError(
            f"{kind}{_of(kind, thread_id)} contains a NUL character: {text[:80]!r}")
    if size > MAX_ID_BYTES:
        raise InvalidIdentifierError(
            f"{kind}{_of(kind, thread_id)} is {size:,} bytes in UTF-8, over the "
            f"{MAX_ID_BYTES:,}-byte limit of an identifier: {text[:80]!r}...")
    return text


def check_ids(kind: str, values: Iterable[object]) -> list[str]:
    """``values`` (a sequence of identifiers, e.g. the ``thread_ids`` of ``prune``) checked
    one by one with ``check_id``. A lone ``str`` is refused with ``InvalidIdentifierError``:
    iterating it would act on one-character identifiers (``prune("ab")`` on threads
    ``"a"`` and ``"b"``)."""
    if isinstance(values, (str, bytes)):
        raise InvalidIdentifierError(
            f"{kind}s must be a list of {kind}s, got the single string {values!r}: "
            f"pass [{values!r}]")
    return [check_id(kind, v) for v in values]


def _of(kind: str, thread_id: str | None) -> str:
    """`` of thread '...'`` for an error of ``check_id`` (only when it raises: the put
    path calls it for every identifier)."""
    return f" of thread {thread_id[:80]!r}" if thread_id is not None and kind != "thread_id" else ""


def _is_uuid(value: object) -> bool:
    import uuid

    return isinstance(value, uuid.UUID)


def member(ns: str, checkpoint_id: str) -> str:
    """Redis field/member naming one checkpoint of a thread: ``ns NUL checkpoint_id``."""
    return f"{ns}{SEP}{checkpoint_id}"


def blob_field(ns: str, channel: str, version: object) -> str:
    """Redis field naming one channel blob: ``ns NUL channel NUL version``."""
    return f"{ns}{SEP}{channel}{SEP}{version}"


def write_field(ns: str, checkpoint_id: str, task_id: str, idx: int) -> str:
    """Redis field naming one pending write: ``ns NUL checkpoint_id NUL task_id NUL idx``."""
    return f"{ns}{SEP}{checkpoint_id}{SEP}{task_id}{SEP}{idx}"


def split_field(field: str | bytes) -> list[str]:
    """Split a Redis field built by the helpers above into its parts."""
    if isinstance(field, bytes):
        field = field.decode()
    return field.split(SEP)


def write_idx(channel: str, position: int) -> int:
    """Index of a write: ``WRITES_IDX_MAP`` for special channels (negative), else position."""
    return WRITES_IDX_MAP.get(channel, position)


@dataclass(frozen=True)
class CheckpointRecord:
    """One checkpoint as stored, without its channel values.

    ``blob_fields`` name the channel blobs (one per channel in ``channel_versions``)
    that hold its values; ``md_query`` is the plain, queryable form of its top-level
    scalar metadata (empty when metadata must stay encrypted).
    """

    ns: str
    checkpoint_id: str
    parent_id: str | None
    checkpoint: Typed
    metadata: Typed
    run_id: str | None
    md_query: tuple[tuple[str, object], ...]
    blob_fields: tuple[str, ...]

    def pack(self) -> bytes:
        """Envelope stored in Redis (``T:cp``)."""
        return ormsgpack.packb(
            [
                SCHEMA_VERSION,
                self.parent_id,
                self.checkpoint[0],
                self.checkpoint[1],
                self.metadata[0],
                self.metadata[1],
                self.run_id,
                [list(kv) for kv in self.md_query],
            ]
        )

    def pack_index(self) -> bytes:
        """Small msgpack array of strings that Lua reads (``T:cv``): parent, blob fields."""
        return ormsgpack.packb([self.parent_id or "", *self.blob_fields])

    @classmethod
    def unpack(cls, ns: str, checkpoint_id: str, raw: bytes, index: bytes,
               thread_id: str | None = None) -> CheckpointRecord:
        """Inverse of ``pack``/``pack_index``; raises ``CorruptRecordError`` naming the
        checkpoint (and ``thread_id``, given) when either envelope is not one, or holds a
        field of the wrong type."""
        where = f"checkpoint {checkpoint_id!r} (ns {ns!r}" + (
            f", thread {thread_id!r})" if thread_id is not None else ")")
        v = _unpack(raw, where, "cp")
        idx = _unpack(index, where)
        try:
            _, parent, ct, cb, mt, mb, run_id, mdq = v
            if not (isinstance(ct, str) and isinstance(cb, bytes) and isinstance(mt, str)
                    and isinstance(mb, bytes) and isinstance(parent, (str, type(None)))):
                raise TypeError("a field holds the wrong type")
            fields = idx[1:]
            if not all(isinstance(f, str) and f.count(SEP) == 2 for f in fields):
                raise TypeError(f"blob index {fields!r} is not a list of blob fields")
            return cls(
                ns=ns,
                checkpoint_id=checkpoint_id,
                parent_id=parent,
                checkpoint=(ct, cb),
                metadata=(mt, mb),
                run_id=run_id,
                md_query=tuple((k, val) for k, val in mdq),
                blob_fields=tuple(fields),
            )
        except (TypeError, ValueError) as exc:
            raise CorruptRecordError(f"malformed record of {where}: {exc}",
                                     checkpoint_ns=ns, checkpoint_id=checkpoint_id,
                                     thread_id=thread_id) from exc


@dataclass(frozen=True)
class WriteRecord:
    """One pending write as stored: which task wrote what to which channel.

    ``seq`` orders overwrites of special channels (``WRITES_IDX_MAP``) so that a late
    flush never replaces a newer value in MongoDB.
    """

    task_id: str
    idx: int
    channel: str
    value: Typed
    task_path: str
    seq: int

    def pack(self) -> bytes:
        """Envelope stored in Redis (``T:w``); a manifest value (``items.MANIFEST_TYPE``)
        is wrapped as ``items.wrap_manifest`` describes."""
        t, b = self.value
        manifest = t == MANIFEST_TYPE
        raw = ormsgpack.packb(
            [SCHEMA_VERSION, self.task_id, self.idx, self.channel, t,
             b"" if manifest else b, self.task_path, self.seq]
        )
        return wrap_manifest(b, raw) if manifest else raw

    @classmethod
    def unpack(cls, raw: bytes, where: str) -> WriteRecord:
        """Inverse of ``pack``; raises ``CorruptRecordError`` naming ``where``."""
        refs, raw = unwrap_manifest(raw)
        v = _unpack(raw, where, "w")
        try:
            _, task_id, idx, channel, t, b, task_path, seq = v
            if refs is not None:
                b = refs
            return cls(task_id, int(idx), channel, (t, b), task_path, int(seq))
        except (TypeError, ValueError) as exc:
            raise CorruptRecordError(f"malformed write {where}: {exc}") from exc

    def sort_key(self) -> tuple[str, str, int]:
        """LangGraph's ``writes_sort_key``: ``(task_path, task_id, idx)``."""
        return writes_sort_key(self.task_path, self.task_id, self.idx)


def pack_blob(value: Typed | None) -> bytes:
    """Redis value of a channel blob (and of a stored item); ``None`` (LangGraph's
    "empty") becomes ``EMPTY``; a manifest is wrapped (``items.wrap_manifest``)."""
    if value is None or value[0] == "empty":
        return EMPTY
    if value[0] == MANIFEST_TYPE:
        return wrap_manifest(value[1], ormsgpack.packb([SCHEMA_VERSION, MANIFEST_TYPE, b""]))
    return ormsgpack.packb([SCHEMA_VERSION, value[0], value[1]])


def unpack_blob(raw: bytes | None, where: str) -> Typed | None:
    """Inverse of ``pack_blob``; ``None`` for an empty blob."""
    if not raw:
        return None
    refs, raw = unwrap_manifest(raw)
    v = _unpack(raw, where, "bl")
    try:
        _, t, b = v
        return (t, refs if refs is not None else b)
    except (TypeError, ValueError) as exc:
        raise CorruptRecordError(f"malformed blob {where}: {exc}") from exc


def _unpack(raw: bytes, where: str, kind: str | None = None) -> MsgpackValue:
    """Decode an envelope; one of an older version of ``kind`` (``"cp"``, ``"w"``,
    ``"bl"``) is upgraded through ``schema.ENVELOPE_STEPS``; a newer one raises
    ``SchemaVersionError``."""
    try:
        v = ormsgpack.unpackb(raw)
    except Exception as exc:  # ormsgpack raises its own error types
        raise CorruptRecordError(f"undecodable record at {where}: {exc}") from exc
    if isinstance(v, list) and v and type(v[0]) is int:
        check_not_newer(v[0], f"record at {where}")
        if kind is not None and v[0] < SCHEMA_VERSION:
            v = upgrade_envelope(kind, v, where)
    return v


def config_of(thread_id: str, ns: str, checkpoint_id: str) -> RunnableConfig:
    """The ``RunnableConfig`` naming one checkpoint, as LangGraph's savers return it."""
    return {
        "configurable": {
            "thread_id": thread_id,
            "checkpoint_ns": ns,
            "checkpoint_id": checkpoint_id,
        }
    }


def load_value(serde: SerializerProtocol, typed: Typed, items: Mapping[bytes, Typed],
               where: str, decode: Decode | None = None) -> object:
    """Decode a stored value: a manifest (``items.MANIFEST_TYPE``) becomes the list of
    its items, each decoded with ``serde`` as it decodes inside the whole list
    (``items.load_item``), or, given ``decode``, a callable taking ``[(digest, typed
    item)]`` and returning their objects, by it (``Items.decode``); anything else
    ``serde.loads_typed``."""
    if typed[0] != MANIFEST_TYPE:
        return serde.loads_typed(typed)
    found = expand(typed[1], items, where)
    if decode is not None:
        return decode(found)
    return [load_item(serde.loads_typed, item) for _, item in found]


def assemble(
    serde: SerializerProtocol,
    thread_id: str,
    rec: CheckpointRecord,
    blobs: Mapping[str, Typed | None],
    writes: Sequence[WriteRecord],
    items: Mapping[bytes, Typed] | None = None,
    remember: Items | None = None,
    latest: bool = False,
) -> CheckpointTuple:
    """Build the ``CheckpointTuple`` InMemorySaver would return for the same stored data.

    ``blobs`` maps blob field -> typed value (``None`` = empty); a field missing from it
    leaves that channel out of ``channel_values``, as InMemorySaver does. ``items``: the
    stored items and nodes (parsed, ``items.parse_stored``) that manifests among the
    values name; a missing one raises ``CorruptRecordError``. ``remember``: the
    ``items.Items`` that decodes the items (rebuilding those it decoded before); with
    ``latest`` (the checkpoint a run resumes from) it also remembers the objects, so a put
    of the same unchanged ones skips serializing them, and drops the thread's older ones.
    """
    items = items or {}
    fresh = [latest]

    def decode(found: list[tuple[bytes, Typed]]) -> list[object]:
        assert remember is not None  # the first list of a latest read starts afresh
        out: list[object] = remember.decode(thread_id, found, serde.loads_typed, latest, fresh[0])
        fresh[0] = False
        return out

    remember_in = decode if remember is not None else None
    checkpoint = serde.loads_typed(rec.checkpoint)
    values: dict[str, object] = {}
    for f in rec.blob_fields:
        typed = blobs.get(f)
        if typed is None:
            continue
        channel = split_field(f)[1]
        values[channel] = load_value(
            serde, typed, items,
            f"channel {channel!r} of checkpoint {rec.checkpoint_id!r} (thread {thread_id!r})",
            remember_in)
    checkpoint["channel_values"] = values
    ordered = sorted(writes, key=WriteRecord.sort_key)
    return CheckpointTuple(
        config=config_of(thread_id, rec.ns, rec.checkpoint_id),
        checkpoint=checkpoint,
        metadata=serde.loads_typed(rec.metadata),
        parent_config=(
            config_of(thread_id, rec.ns, rec.parent_id) if rec.parent_id else None
        ),
        pending_writes=[
            (w.task_id, w.channel, load_value(
                serde, w.value, items, f"write of task {w.task_id!r} to {w.channel!r} "
                f"(checkpoint {rec.checkpoint_id!r}, thread {thread_id!r})", remember_in))
            for w in ordered],
    )


def metadata_matches(metadata: Mapping[str, object], filter: Mapping[str, object] | None
                     ) -> bool:
    """InMemorySaver's filter rule: ``filter_value == metadata.get(key)`` for every pair
    (a missing key reads as ``None``; the filter value is the left operand, as there)."""
    return not filter or all(v == metadata.get(k) for k, v in filter.items())


_UUID_EPOCH_100NS = 0x01B21DD213814000
"""100-ns intervals from the UUID epoch (1582-10-15) to the Unix epoch (uuid6's offset)."""


def checkpoint_time_s(checkpoint_id: str) -> float | None:
    """When a checkpoint was made, in seconds since the Unix epoch, read from its
    ``checkpoint_id`` (LangGraph makes every id with ``uuid6``, whose first 60 bits are a
    100-ns timestamp); ``None`` for an id that is not a version-6 UUID (a custom id)."""
    import uuid

    try:
        u = uuid.UUID(checkpoint_id)
    except (ValueError, TypeError, AttributeError):
        return None
    if u.version != 6:
        return None
    ticks = (u.time_low << 28) | (u.time_mid << 12) | (u.time_hi_version & 0x0FFF)
    return (ticks - _UUID_EPOCH_100NS) / 1e7
