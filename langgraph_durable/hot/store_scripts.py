"""Redis keys and scripts of the long-term memory store (``DurableStore``).

A namespace plays the role a thread plays for checkpoints: its items, the unflushed
index and the clock of its outbox partition, and that partition's outbox stream share
one hash tag, so STORE_PUT (``lua/store_put.lua``) writes an item and its outbox entry in
one atomic step on a Redis Cluster too. With one partition every store key is under
``{<prefix>:store}``; with P >= 2, under the tag of the partition of the namespace's tid
(``core/store_records.store_tid``, ``keys.partition_of``), the same tag as that
partition's outbox stream (``keys.outbox_key``).

=================  ==========================================================
key                holds
=================  ==========================================================
``<tag>:si:<f>``   the item of field ``f`` (its newest record; no TTL while
                   unflushed, then ``hot_ttl_s`` or its own expiry)
``<tag>:sd``       the partition's *unflushed index*: field -> record, for
                   every item whose newest record MongoDB may lack (reads
                   overlay it on MongoDB's answer)
``<tag>:sc``       the partition's store clock: the last seq (us) it issued
=================  ==========================================================
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from ..core.ops import RedisReply, Refusal, Script
from . import lua
from .keys import partition_of, partition_tag

STORE_SCRIPT_NAMES = ("store_put", "store_settle", "store_get")
"""The store's scripts, by name (``hot/lua/<name>.lua``)."""

STORE_SCRIPTS = lua.sources(STORE_SCRIPT_NAMES)
"""Script name -> final Lua source, registered with the package's others."""

STORE_REFUSALS = frozenset({Refusal.OUTBOX_FULL})
"""The code STORE_PUT refuses with (raised as ``errors.ScriptRefused``)."""


def store_tag(prefix: str, tid: str, partitions: int) -> str:
    """The hash tag of the store keys of the namespace whose tid is ``tid``."""
    if partitions <= 1:
        return "{" + prefix + ":store}"
    return partition_tag(prefix, partition_of(tid, partitions), partitions)


def dirty_keys(prefix: str, partitions: int) -> list[str]:
    """The unflushed index of every partition (what a search overlays)."""
    if partitions <= 1:
        return ["{" + prefix + ":store}:sd"]
    return [partition_tag(prefix, k, partitions) + ":sd" for k in range(partitions)]


@dataclass(frozen=True)
class StoreKeys:
    """The store keys of one namespace's partition: ``tag`` and the names built on it."""

    tag: str

    @property
    def dirty(self) -> str:
        """The partition's unflushed index (hash: field -> record)."""
        return self.tag + ":sd"

    @property
    def clock(self) -> str:
        """The partition's store clock (the last seq issued, us)."""
        return self.tag + ":sc"

    def item(self, field: str) -> str:
        """The key of the item of ``field``."""
        return self.tag + ":si:" + field


class StorePutArgs(NamedTuple):
    """KEYS/ARGV of STORE_PUT (see its Lua header): ``keys`` of the namespace's
    partition, the partition's ``outbox``, the item's ``field``, the ``mode`` (``put``,
    ``del``, ``touch``, ``expire``, ``import``), ``expires_ms`` (0 = never), the packed
    ``body`` (``b""`` for a delete), ``expect`` (the seq a touch or expire requires),
    ``cseq`` and ``useq`` (a touch of an item Redis does not hold; an import), the outbox
    entry ``payload`` and
    ``now_ms`` (the client's clock: a value expired by then counts as deleted). A
    ``NamedTuple`` (immutable): one is built per put, where a frozen dataclass's
    ``__init__`` cost several times as much."""

    keys: StoreKeys
    outbox: str
    max_outbox: int
    tid: str
    field: str
    mode: str
    expires_ms: int
    body: bytes
    payload: bytes
    expect: int = 0
    cseq: int = 0
    useq: int = 0
    now_ms: int = 0

    def op(self) -> Script[StorePutReply | None]:
        """The ``Script`` operation; refused with ``OUTBOX_FULL``."""
        k = self.keys
        return Script("store_put", [k.item(self.field), k.dirty, k.clock, self.outbox],
                      [self.max_outbox, self.tid, self.field, self.mode, self.expires_ms,
                       self.body, self.expect, self.cseq, self.useq, self.payload,
                       self.now_ms],
                      decode=StorePutReply.of, refusals=STORE_REFUSALS)


@dataclass(frozen=True, slots=True)
class StorePutReply:
    """STORE_PUT's reply: the written version's ``seq``, ``cseq`` and ``useq`` (us)."""

    seq: int
    cseq: int
    useq: int

    @classmethod
    def of(cls, raw: RedisReply) -> StorePutReply | None:
        """From the raw reply ``[seq, cseq, useq]``; None for ``[]`` (nothing written)."""
        if not raw:
            return None
        seq, cseq, useq = raw
        return cls(int(seq), int(cseq), int(useq))


def store_settle_op(keys: StoreKeys, hot_ttl_ms: int, now_ms: int,
                    records: Sequence[tuple[str, bytes, bytes]]) -> Script[int]:
    """STORE_SETTLE of ``records`` (``(field, the unflushed record read, the record
    written to MongoDB)``) of one partition; replies with the number taken out of the
    unflushed index."""
    args: list[object] = [hot_ttl_ms, now_ms]
    for f, read, written in records:
        args += [f, read, written]
    return Script("store_settle", [keys.dirty, *(keys.item(f) for f, _, _ in records)],
                  args, decode=int)


def store_get_op(item_key: str) -> Script[bytes | None]:
    """STORE_GET of one item: its record, None when Redis holds none."""
    return Script("store_get", [item_key], [], decode=_record)


def _record(raw: RedisReply) -> bytes | None:
    return None if raw is None else bytes(raw)
