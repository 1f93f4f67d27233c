"""The outbox stream entry, one shape for the side that writes it and the side that reads
it (sans-I/O).

A writing script (PUT, PUT_WRITES, EFFECT_BEGIN/END: ``hot/lua``) appends to the thread's
outbox stream the entry ``{t: thread_id, p: payload}``; ``payload`` is msgpack of
``[kind, member, fields, digests, size]``. The flusher reads it back (``outbox/rounds.py``)
and copies what it names from Redis to MongoDB. ``OutboxEntry`` packs and unpacks it, so
no other module knows a position: the stream entry's bytes are exactly those of the
versions before it (entries of older versions lack ``size``, or ``digests`` too; they read
back with ``size`` None and no digests).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

import ormsgpack

THREAD_FIELD = b"t"
"""Stream entry field: the thread_id (utf-8)."""
PAYLOAD_FIELD = b"p"
"""Stream entry field: the packed payload."""
COUNTED_FIELD = b"c"
"""Stream entry field of a ``settle`` dead letter's entry (``outbox.dead``): ``1`` when
its thread's counts were lowered for it before the settle failed (a replay of it lowers
nothing again), ``0`` when not; absent on the entries PUT writes."""


class OutboxEntry(NamedTuple):
    """One outbox entry of ``thread_id``. ``kind``: ``"cp"``, ``"w"`` or ``"fx"``;
    ``member``: the checkpoint it belongs to (``ns NUL checkpoint_id``; ``""`` for
    ``fx``); ``names``: the Redis hash fields it names (a ``cp``'s blob fields, a ``w``'s
    write fields, an ``fx``'s journal fields); ``digests``: the items sent with it
    (16-byte digests, ``core/items.py``); ``size``: the record bytes it names plus its
    items' (a flusher cuts rounds by it; None in entries of older versions, which it
    measures in Redis); ``ttl_min``: the thread TTL in minutes its run named
    (``config["configurable"]["lgd_ttl_minutes"]``), None when none (the flusher records
    it with the thread's activity, ``plans/retention_policy.py``; older releases ignore it). A
    ``NamedTuple`` (immutable, compared by value): one is built per
    stream entry a flusher reads and per ``put``/``put_writes``, where a frozen dataclass's
    ``__init__`` cost several times as much."""

    thread_id: str
    kind: str
    member: str
    names: Sequence[str] = ()
    digests: Sequence[bytes] = ()
    size: int | None = None
    ttl_min: float | None = None

    def payload(self) -> bytes:
        """The packed payload (stream field ``p``): msgpack of ``[kind, member, names,
        digests, size, ttl_min]`` (``size`` left out when None, as older versions wrote
        it, and ``ttl_min`` when None)."""
        body: list[object] = [self.kind, self.member, list(self.names), list(self.digests)]
        if self.size is not None or self.ttl_min is not None:
            body.append(self.size)
        if self.ttl_min is not None:
            body.append(self.ttl_min)
        return ormsgpack.packb(body)

    def fields(self) -> dict[bytes, bytes]:
        """The stream entry's fields (as ``XADD`` in the Lua writes them)."""
        return {THREAD_FIELD: self.thread_id.encode(), PAYLOAD_FIELD: self.payload()}

    @classmethod
    def of(cls, fields: Mapping[bytes, bytes]) -> OutboxEntry:
        """The entry of a stream entry's ``fields``; raises ``KeyError`` without ``t`` or
        ``p``, ``ormsgpack.MsgpackDecodeError``/``ValueError`` for a payload that is not
        one (the flusher moves such an entry to the dead-letter stream)."""
        return cls.of_payload(fields[THREAD_FIELD].decode(), fields[PAYLOAD_FIELD])

    @classmethod
    def of_payload(cls, thread_id: str, payload: bytes) -> OutboxEntry:
        """The entry of ``thread_id`` whose packed payload is ``payload``."""
        body = ormsgpack.unpackb(payload)
        if not isinstance(body, list) or len(body) < 3:
            raise ValueError(f"outbox payload of thread {thread_id!r} is not "
                             f"[kind, member, fields, ...]: {body!r}")
        n = len(body)
        size = body[4] if n > 4 and isinstance(body[4], int) else None
        names = body[2] if type(body[2]) is list else list(body[2])  # no copy of a list
        digests = (body[3] if type(body[3]) is list else list(body[3])) if n > 3 else []
        ttl = body[5] if n > 5 and isinstance(body[5], (int, float)) else None
        return cls(thread_id, body[0], body[1], names, digests, size, ttl)


ORIGINAL = b"f:"
"""Prefix of a dead letter's fields that hold the original stream entry's fields
(``f:t``, ``f:p``): replaying re-adds exactly those."""


class DeadLetter(NamedTuple):
    """An outbox entry a flusher set aside (the dead-letter stream, ``hot.keys.
    dead_letter_key``), with what replaying it needs. ``entry_id``/``stream``: the
    original entry's id and outbox stream; ``thread_id``: its thread (``""`` when
    unreadable); ``step``: the step of the flush round that failed (``parse``, ``copy``,
    ``write``, ``fence``, ``settle``); ``error``: ``"<type>: <message>"``; ``at_ms``: when
    it was set aside (ms, the flusher's clock); ``fields``: the original stream entry's
    fields (``t``, ``p``: thread and payload; whatever a damaged entry held); ``id``: this
    dead letter's id in the dead-letter stream (``""`` before it is added). Dead letters
    of earlier releases hold only ``entry``, ``thread`` and ``error``: they read back
    with ``stream`` ``""`` and no ``fields`` (nothing to replay)."""

    entry_id: str
    stream: str
    thread_id: str
    step: str
    error: str
    at_ms: int
    fields: Mapping[bytes, bytes]
    id: str = ""

    @property
    def payload(self) -> bytes | None:
        """The original entry's payload (field ``p``), None when it had none."""
        return self.fields.get(PAYLOAD_FIELD)

    def to_fields(self) -> dict[bytes, bytes]:
        """The dead-letter stream entry's fields."""
        out = {b"entry": self.entry_id.encode(), b"stream": self.stream.encode(),
               b"thread": self.thread_id.encode(errors="replace"),
               b"step": self.step.encode(), b"error": self.error.encode(errors="replace"),
               b"at_ms": str(self.at_ms).encode()}
        out.update({ORIGINAL + k: v for k, v in self.fields.items()})
        return out

    @classmethod
    def of(cls, dead_id: bytes | str, fields: Mapping[bytes, bytes]) -> DeadLetter:
        """The dead letter of a dead-letter stream entry ``(dead_id, fields)``; tolerant:
        a missing field reads as ``""`` (0 for ``at_ms``), bytes that are not utf-8 are
        replaced."""
        def text(k: bytes) -> str:
            return bytes(fields.get(k, b"")).decode(errors="replace")
        at = text(b"at_ms")
        return cls(text(b"entry"), text(b"stream"), text(b"thread"), text(b"step"),
                   text(b"error"), int(at) if at.isdigit() else 0,
                   {k[len(ORIGINAL):]: v for k, v in fields.items()
                    if k.startswith(ORIGINAL)},
                   dead_id.decode() if isinstance(dead_id, bytes) else dead_id)
