"""Records of the long-term memory store (``DurableStore``), one shape for both tiers
(sans-I/O).

An item is named by its namespace (a tuple of labels: non-empty strings without ``.``
nor NUL, LangGraph's rule) and its key. Its *field* ``"<label>.<label>...\\0<key>"``
names it in Redis (the item's key, the partition's unflushed index) and in the outbox
entry; its namespace's *tid* ``"\\0s<labels joined by .>"`` is the outbox entry's thread
field (``t``): no thread_id holds a NUL, so no thread's keys are ever touched by a store
entry, and every item of a namespace shares its outbox partition (``hot/store_scripts.py``).

A stored *record* is a fixed header written by the Lua script (``hot/lua/store_put.lua``)
followed by the body the client packed (``StoreBody``):

=======  =====  =====================================================================
bytes    name   meaning
=======  =====  =====================================================================
0-15     seq    the record's version: microseconds of the Redis clock, strictly
                increasing per partition (MongoDB keeps the highest: a replayed or late
                copy of an older record changes nothing)
16-31    cseq   the seq of the put that created this incarnation of the item (kept by
                later puts, reset after a delete): ``created_at`` and the order of
                ``search`` without a query (InMemoryStore's insertion order)
32-47    useq   the seq of the last put of a value (a TTL refresh keeps it):
                ``updated_at``
48       dead   ``1`` = a delete (tombstone), ``0`` = a value, ``2`` = a value put where
                Redis held no record of the item (MongoDB may hold a live version,
                whose cseq the flusher keeps: ``with_cseq``)
49-64    exp    when the item expires, ms since the epoch (0 = never)
65-      body   msgpack ``[[value type, value bytes], ttl minutes or None, vectors,
                paths]``, and a fifth element, the item's application state version
                (an int >= 1), only when the store put it with one
                (``DurableStore(state_version=N)``, ``core/item_versions.py``)
=======  =====  =====================================================================

A body without a state version is the four-element list of the releases before state
versions, byte for byte. Those releases refuse a five-element body with
``CorruptRecordError`` (a loud failure, never a silent misread): set a store
``state_version`` only once every process (application and flusher) runs a release that
reads it.
"""

from __future__ import annotations

from datetime import datetime, timezone
from typing import NamedTuple

import ormsgpack

from ..errors import CorruptRecordError

STORE_KIND = "st"
"""Kind of the store's outbox entries (beside ``"cp"``, ``"w"`` and ``"fx"``): the entry's
``member`` is the item's field."""

SEP = "\x00"
"""Between the namespace and the key in a field."""

HEADER = 65
"""Bytes of a record's header (the table of the module docstring)."""


def ns_text(namespace: tuple[str, ...]) -> str:
    """The namespace's labels joined by ``.`` (no label holds one: LangGraph's rule)."""
    return ".".join(namespace)


def ns_of(text: str) -> tuple[str, ...]:
    """Inverse of ``ns_text``."""
    return tuple(text.split(".")) if text else ()


def item_field(namespace: tuple[str, ...], key: str) -> str:
    """The item's field: ``ns_text(namespace) NUL key``."""
    return ns_text(namespace) + SEP + key


def split_field(field: str) -> tuple[tuple[str, ...], str]:
    """``(namespace, key)`` of a field (the first NUL splits: labels hold none)."""
    ns, _, key = field.partition(SEP)
    return ns_of(ns), key


def store_tid(namespace: tuple[str, ...]) -> str:
    """The outbox ``t`` field of the namespace's entries (and what picks its partition)."""
    return "\x00s" + ns_text(namespace)


def ms_to_datetime(ms: int) -> datetime:
    """A UTC datetime of ``ms`` since the epoch."""
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc)


class StoreBody(NamedTuple):
    """What the client packs for a put: the ``value`` (``(type, bytes)`` of the
    serializer), ``ttl_min`` (the TTL in minutes, kept for refreshes; None = none), the
    embeddings ``vectors`` (float32, ``len(paths)`` rows side by side; ``b""`` = none),
    their ``paths`` (the indexed fields, ``"text"``, ``"tags.0"``...) and the
    ``state_version`` the item was put in (None: put without one)."""

    value: tuple[str, bytes] | None
    ttl_min: float | None = None
    vectors: bytes = b""
    paths: tuple[str, ...] = ()
    state_version: int | None = None

    def pack(self) -> bytes:
        """The packed body (msgpack): four elements, a fifth only with a state version."""
        typed = [self.value[0], self.value[1]] if self.value is not None else None
        parts: list[object] = [typed, self.ttl_min, self.vectors or None, list(self.paths)]
        if self.state_version is not None:
            parts.append(self.state_version)
        return ormsgpack.packb(parts)

    @classmethod
    def unpack(cls, raw: bytes, where: str) -> StoreBody:
        """The body of ``raw`` (four elements, or five with a state version);
        ``CorruptRecordError`` naming ``where`` when it is none."""
        try:
            parts = ormsgpack.unpackb(raw)
            if len(parts) == 4:
                typed, ttl, vectors, paths = parts
                version = None
            else:
                typed, ttl, vectors, paths, version = parts
                if isinstance(version, bool) or not isinstance(version, int) or version < 1:
                    raise ValueError(f"state version {version!r} is not an int >= 1")
            value = (str(typed[0]), bytes(typed[1])) if typed is not None else None
            return cls(value, ttl, bytes(vectors or b""), tuple(paths), version)
        except Exception as exc:
            raise CorruptRecordError(f"store item {where}: body cannot be decoded: "
                                     f"{exc}") from exc


class StoreRecord(NamedTuple):
    """One stored version of an item (see the module docstring): ``field``, ``seq``,
    ``cseq``, ``useq`` (microseconds of the Redis clock), ``dead`` (a delete),
    ``expires_ms`` (0 = never), ``body`` (None for a delete), ``raw`` (the stored bytes,
    as Redis holds them; ``b""`` for a record read from MongoDB) and ``partial`` (read
    from MongoDB without its embeddings, as a search without a query reads: its body's
    ``vectors`` are not the item's, so it must not be written back as it is)."""

    field: str
    seq: int
    cseq: int
    useq: int
    dead: bool
    expires_ms: int
    body: StoreBody | None
    raw: bytes = b""
    partial: bool = False

    @classmethod
    def of_redis(cls, field: str, raw: bytes) -> StoreRecord:
        """The record Redis holds as ``raw``; ``CorruptRecordError`` naming the item when
        it is not one."""
        where = _where(field)
        try:
            seq, cseq, useq = int(raw[0:16]), int(raw[16:32]), int(raw[32:48])
            dead, exp = raw[48:49] == b"1", int(raw[49:65])
        except (ValueError, TypeError) as exc:
            raise CorruptRecordError(f"store item {where}: bad record header") from exc
        body = None if dead else StoreBody.unpack(raw[HEADER:], where)
        return cls(field, seq, cseq, useq, dead, exp, body, raw)

    @property
    def unsure(self) -> bool:
        """A value put where Redis held no record of the item (header ``dead`` = 2)."""
        return self.raw[48:49] == b"2"

    def with_cseq(self, cseq: int) -> StoreRecord:
        """This record as sure of its incarnation (``dead`` = 0), created at ``cseq``."""
        raw = self.raw[:16] + b"%016d" % cseq + self.raw[32:48] + b"0" + self.raw[49:]
        return self._replace(cseq=cseq, raw=raw)

    def live(self, now_ms: int) -> bool:
        """Not deleted and not expired at ``now_ms``."""
        return not self.dead and not (self.expires_ms and self.expires_ms <= now_ms)

    @property
    def namespace(self) -> tuple[str, ...]:
        """The item's namespace."""
        return split_field(self.field)[0]

    @property
    def key(self) -> str:
        """The item's key."""
        return split_field(self.field)[1]


def _where(field: str) -> str:
    ns, key = split_field(field)
    return f"{key!r} of namespace {ns!r}"
