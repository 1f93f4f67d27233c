"""Lua scripts of the hot tier. Each runs atomically in one round trip.

KEYS always start with the nine thread keys in ``ThreadKeys.all`` order
(cp, cv, idx, bl, w, wi, ns, meta, it). The writing scripts (PUT, PUT_WRITES) then take the
thread's tombstones (``gone``) and the thread's outbox stream as KEYS[11], in the same
slot (``hot/keys.py``), so a checkpoint and its outbox entry are one atomic step on a
Redis Cluster too. PUT also takes the partition's thread registry as KEYS[12] (registering
the thread), PAGE optionally as KEYS[10] (answering "no such thread"; ``hot/registry_scripts.py``).

Plans never build KEYS/ARGV themselves: each script has an argument class below with
named fields, whose ``op()`` encodes them in the order the Lua source reads them (the one
place that knows ``ARGV[4]`` is the member), and a reply class (``PageReply.of(raw)``,
fields named as the Lua header names what it returns: the one place that knows a reply's
positions), which the drivers apply (``Script.reply_of``), so plans read ``reply.complete``,
never ``reply[3]``. The Lua itself is in ``hot/lua/<name>.lua`` (``hot.lua``); the error
replies of the writing scripts (``WRITE_REFUSALS``) reach plans as
``errors.ScriptRefused``; ``ChainStatus`` names the statuses of CHAIN.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import NamedTuple

from ..core.ops import RedisReply, Refusal, Script
from . import lua
from .binding_scripts import BINDING_SCRIPTS
from .effect_scripts import EFFECT_SCRIPTS
from .flusher_scripts import FLUSHER_SCRIPTS
from .registry_scripts import REGISTRY_SCRIPTS
from .store_scripts import STORE_SCRIPTS

WRITE_REFUSALS = frozenset({Refusal.OUTBOX_FULL, Refusal.DELETED, Refusal.UNKNOWN,
                            Refusal.STALE_HEAD, Refusal.MISSING_ITEMS})
"""The codes PUT and PUT_WRITES refuse with (``put.lua``'s header): raised as
``errors.ScriptRefused`` whose ``detail`` is the checkpoint_id (UNKNOWN, STALE_HEAD), the
deletion time in ms (DELETED), the count of missing items (MISSING_ITEMS) or empty."""

SCRIPT_NAMES = ("put", "put_writes", "page", "parts", "ack_settle", "delete_parts",
                "delete_thread", "release", "learn_tombstones", "chain", "dead_replay",
                "collect_items")
"""The scripts of this module, by name (their Lua is ``hot/lua/<name>.lua``)."""

SCRIPTS = {
    **lua.sources(SCRIPT_NAMES),
    **REGISTRY_SCRIPTS,
    **EFFECT_SCRIPTS,
    **STORE_SCRIPTS,
    **FLUSHER_SCRIPTS,
    **BINDING_SCRIPTS,
}
"""Script name -> final Lua source (``hot.lua.source``), registered once per client: every
script of ``hot/lua`` (the thread registry's, the effect journal's, the memory store's,
the flusher's (``flusher_scripts.py``) and the key prefix's binding
(``binding_scripts.py``) besides this module's)."""


# --------------------------------------------------------------------------- arguments


@dataclass(frozen=True)
class PutArgs:
    """KEYS/ARGV of PUT. ``keys``: ``Context.script_keys`` (thread keys, tombstones and
    its outbox stream) and the partition's thread registry (``Context.registry_of``: the
    put registers the thread there); ``expected_head``: the member the namespace's head
    must still be (``""`` = no expectation); ``new_thread``: the thread's first input
    checkpoint; ``named``: the member the put builds on (``""`` = none);
    ``checked_through_ms``: deletes up to this time (ms) were found undone in MongoDB;
    ``blobs``: ``(blob field, blob envelope)`` pairs; ``items``: digest -> stored bytes of
    the items and nodes sent along (``items.py``); ``payload``: the outbox entry."""

    keys: Sequence[str]
    max_outbox: int
    thread_id: str
    payload: bytes
    member: str
    ns: str
    record: bytes
    index: bytes
    expected_head: str
    new_thread: bool
    named: str
    checked_through_ms: int
    blobs: Sequence[tuple[str, bytes]]
    items: Mapping[bytes, bytes] = field(default_factory=dict)

    def op(self) -> Script[PutReply]:
        """The ``Script`` operation (ARGV in PUT's order); refused with the codes of
        ``WRITE_REFUSALS``."""
        args: list[object] = [
            self.max_outbox, self.thread_id, self.payload, self.member, self.ns, self.record,
            self.index, self.expected_head, "1" if self.new_thread else "0", self.named,
            str(self.checked_through_ms), len(self.blobs)]
        for f, v in self.blobs:
            args += [f, v]
        for d, v in self.items.items():
            args += [d, v]
        return Script("put", self.keys, args, decode=PutReply.of,
                      refusals=WRITE_REFUSALS)

    def checked_through(self, ms: int) -> PutArgs:
        """The same put, sent again after MongoDB showed ``named`` stored after ``ms``."""
        return replace(self, checked_through_ms=ms)

    def with_items(self, items: Mapping[bytes, bytes], payload: bytes) -> PutArgs:
        """The same put bringing ``items`` (and the outbox entry naming them)."""
        return replace(self, items=items, payload=payload)


@dataclass(frozen=True)
class PutWritesArgs:
    """KEYS/ARGV of PUT_WRITES: ``member`` is the checkpoint written to (also the one that
    must not have been deleted); ``writes``: ``(write field, envelope, overwrite)``;
    ``items`` as in ``PutArgs``."""

    keys: Sequence[str]
    max_outbox: int
    thread_id: str
    payload: bytes
    member: str
    checked_through_ms: int
    writes: Sequence[tuple[str, bytes, bool]]
    items: Mapping[bytes, bytes] = field(default_factory=dict)

    @property
    def named(self) -> str:
        """The member that must not have been deleted: the checkpoint written to."""
        return self.member

    def op(self) -> Script[PutReply]:
        """The ``Script`` operation (ARGV in PUT_WRITES' order; its reply is a
        ``PutReply`` whose ``newest`` is always None); refused with the codes of
        ``WRITE_REFUSALS`` but ``STALE_HEAD``."""
        args: list[object] = [self.max_outbox, self.thread_id, self.payload, self.member,
                              str(self.checked_through_ms), len(self.writes)]
        for f, v, overwrite in self.writes:
            args += [f, v, "1" if overwrite else "0"]
        for d, v in self.items.items():
            args += [d, v]
        return Script("put_writes", self.keys, args, decode=PutReply.of,
                      refusals=WRITE_REFUSALS)

    def checked_through(self, ms: int) -> PutWritesArgs:
        """The same writes, sent again after MongoDB showed the checkpoint stored after
        ``ms``."""
        return replace(self, checked_through_ms=ms)

    def with_items(self, items: Mapping[bytes, bytes], payload: bytes) -> PutWritesArgs:
        """The same writes bringing ``items`` (and the outbox entry naming them)."""
        return replace(self, items=items, payload=payload)


def page_op(keys: Sequence[str], lex_max: str, lex_min: str, count: int,
            held: Iterable[bytes] = (), registry: tuple[str, str] | None = None
            ) -> Script[PageReply]:
    """PAGE: up to ``count`` checkpoints between the ZREVRANGEBYLEX bounds; the items
    whose digests are in ``held`` (the caller has their bytes) are not sent back.
    ``registry``: ``(registry key, thread_id)``, so a thread Redis holds nothing of that a
    complete registry lacks is answered as absent from both tiers (complete = 3)."""
    args: list[object] = [lex_max, lex_min, count, b"".join(held)]
    if registry is None:
        return Script("page", list(keys), args, decode=PageReply.of)
    return Script("page", [*keys, registry[0]], [*args, registry[1]], decode=PageReply.of)


def parts_op(keys: Sequence[str], members: Sequence[str],
             blob_fields: Sequence[str] = ()) -> Script[PartsReply]:
    """PARTS: the writes of ``members`` and the values of ``blob_fields``."""
    return Script("parts", list(keys), [len(members), *members, *blob_fields],
                  decode=PartsReply.of)


def delete_parts_op(keys: Sequence[str], tombstone_ttl_s: int, members: Sequence[str],
                    blob_fields: Sequence[str]) -> Script[int]:
    """DELETE_PARTS (``keys``: thread keys and tombstones). Replies with the deletion
    time (ms)."""
    return Script("delete_parts", list(keys),
                  [tombstone_ttl_s, len(members), *members, *blob_fields], decode=int)


def delete_thread_op(keys: Sequence[str], tombstone_ttl_s: int,
                     members: Sequence[str]) -> Script[DeleteThreadReply]:
    """DELETE_THREAD (``keys``: thread keys and tombstones; ``members``: checkpoints only
    MongoDB may hold, tombstoned too). Replies ``[deletion time (ms), [members Redis
    held]]`` (``DeleteThreadReply``)."""
    return Script("delete_thread", list(keys), [tombstone_ttl_s, *members],
                  decode=DeleteThreadReply.of)


def learn_tombstones_op(gone: str, ttl_s: int,
                        stones: Sequence[tuple[str, int]]) -> Script[int]:
    """LEARN_TOMBSTONES: ``stones`` (``(field, deletion time ms)`` from MongoDB) into the
    thread's tombstones ``gone``, marked complete (``!``), expiring within ``ttl_s``."""
    args: list[object] = [ttl_s]
    for f, at in stones:
        args += [f, at]
    return Script("learn_tombstones", [gone], args, decode=int)


def collect_items_op(meta: str, items: str, seen: str,
                     digests: Sequence[bytes]) -> Script[int]:
    """COLLECT_ITEMS: remove ``digests`` from the thread's items hash ``items`` unless its
    generation and writes count (``meta`` fields ``born`` and ``writes``, joined by ``:``,
    '' for one absent) are no longer ``seen``. Replies with the number removed, or -1 when
    the thread was written since (none removed)."""
    return Script("collect_items", [meta, items], [seen, *digests], decode=int)


def release_op(keys: Sequence[str], marker_ttl_s: int) -> Script[int]:
    """RELEASE: replies with the thread's unflushed entry count (0 = released)."""
    return Script("release", list(keys), [marker_ttl_s], decode=int)


def chain_op(keys: Sequence[str], ns: str, checkpoint_id: str, max_steps: int,
             channels: Sequence[str]) -> Script[ChainReply]:
    """CHAIN from ``checkpoint_id`` for ``channels`` (``ChainReply``)."""
    return Script("chain", list(keys), [ns, checkpoint_id, max_steps, *channels],
                  decode=ChainReply.of)


def ack_settle_op(outbox: str, group: str, hot_ttl_s: int, hot_max_checkpoints: int,
                  per_thread: Sequence[tuple[Sequence[str],
                                             Sequence[tuple[bytes, str, bool]]]]
                  ) -> Script[AckSettleReply]:
    """ACK_SETTLE: ``per_thread`` is ``(thread keys, [(entry id, member it named,
    counted)])`` per thread; ``counted``: the entry's counts were lowered before (a
    replayed ``settle`` dead letter: ``outbox.dead``), it lowers nothing again. Replies
    ``AckSettleReply``."""
    keys: list[str] = [outbox]
    args: list[object] = [group, hot_ttl_s, hot_max_checkpoints]
    for tkeys, entries in per_thread:
        keys += list(tkeys)
        args.append(len(entries))
        for eid, m, counted in entries:
            args += [eid, m, 1 if counted else 0]
    return Script("ack_settle", keys, args, decode=AckSettleReply.of)


@dataclass(frozen=True)
class DeadReplayArgs:
    """KEYS/ARGV of DEAD_REPLAY: put dead letter ``dead_id``'s entry (``fields``, its
    original entry's time ``entry_ms``) back in ``outbox`` (the thread's partition
    stream) unless a replay of it did before (a claim in the thread's ``meta``, written
    at ``now_ms``) or the thread is gone or newer (``DeadReplayReply``)."""

    outbox: str
    meta: str
    dead_id: str
    entry_ms: int
    now_ms: int
    fields: Mapping[bytes, bytes]

    def op(self) -> Script[DeadReplayReply]:
        """The script call."""
        args: list[object] = [self.dead_id, self.entry_ms, self.now_ms]
        for k, v in self.fields.items():
            args += [k, v]
        return Script("dead_replay", [self.outbox, self.meta], args,
                      decode=DeadReplayReply.of)


class ChainStatus(enum.IntEnum):
    """Why CHAIN stopped (its reply's first element)."""

    DONE = 0
    """Every channel has its seed, or the root was reached."""
    LEFT_REDIS = 1
    """The next ancestor is not in Redis (``next`` is its id): go on in MongoDB."""
    BLOB_MISSING = 2
    """A blob Redis lacks must be read from MongoDB (``next``: that ancestor's id)."""
    STEP_LIMIT = 3
    """The step limit was reached (``next``: the last ancestor's id)."""
    TARGET_NOT_IN_REDIS = 4
    """The target checkpoint itself is not in Redis: start from its MongoDB record."""


# --------------------------------------------------------------------------- replies


_new = tuple.__new__
"""``tuple.__new__``: makes a ``NamedTuple`` of an iterable without calling its ``__new__``."""


def _text(v: bytes | str) -> str:
    return v.decode() if isinstance(v, bytes) else v


Value = bytes | None
"""A stored value in a reply: its bytes, or None where Redis holds none (Lua ``false``)."""


@dataclass(frozen=True, slots=True)
class PutReply:
    """PUT's (and PUT_WRITES') reply: ``entry_id`` of the outbox entry (``b"ok"`` without
    an outbox); ``newest``: the namespace's largest checkpoint_id when PUT stored a
    checkpoint_id below it (hosts' clocks differ), else None (always for PUT_WRITES)."""

    entry_id: bytes
    newest: str | None = None

    @classmethod
    def of(cls, raw: RedisReply) -> PutReply:
        """From the raw reply: the entry id, or ``[entry id, newest checkpoint_id]``."""
        if isinstance(raw, list):
            return cls(raw[0], _text(raw[1]))
        return cls(raw)


class PageRow(NamedTuple):
    """One checkpoint of a PAGE: ``member`` (ns NUL checkpoint_id), its ``record``
    (``b""`` when Redis lost it), ``index`` (the cv entry, ``b""`` when none) and the
    ``write_values`` of its pending writes. A ``NamedTuple``: ``PageReply.of`` makes one
    per row with ``tuple.__new__`` (no ``__init__`` call per row)."""

    member: bytes
    record: bytes
    index: bytes  # type: ignore[assignment]  # the field, not tuple.index
    write_values: list[Value]


class PageReply(NamedTuple):
    """PAGE's reply: ``rows`` newest first; the channel values they name
    (``blob_fields`` and ``blob_values`` side by side); ``complete`` (1: Redis holds the
    whole thread, 2: every namespace's newest checkpoints, 3: no tier holds any checkpoint
    of the thread, 0: none of these); the items the manifests among those values name
    (``item_digests`` and ``item_values`` side by side). A ``NamedTuple`` made by
    ``tuple.__new__`` (``of``): decoding every get_tuple's reply costs ~1 us, not ~4 us
    as frozen dataclasses did."""

    rows: list[PageRow]
    blob_fields: list[bytes]
    blob_values: list[Value]
    complete: int
    item_digests: list[bytes]
    item_values: list[Value]

    @classmethod
    def of(cls, raw: RedisReply) -> PageReply:
        """From the raw reply ``[rows, fields, values, complete, digests, values]``; each
        row ``[member, record, cv entry, [write values]]``. Raises ``ValueError`` for a
        reply of another shape."""
        rows, fields, values, complete, digests, items = raw  # arrays come as lists
        for r in rows:
            if len(r) != 4:
                raise ValueError(f"PAGE reply row of {len(r)} elements, not 4")
        return _new(cls, ([_new(PageRow, r) for r in rows], fields, values, complete,
                          digests, items))


@dataclass(frozen=True, slots=True)
class PartsReply:
    """PARTS' reply: ``write_values`` (per member asked, in order, its pending writes'
    values), ``blob_values`` (per blob field asked, in order) and the items they name
    (``item_digests``, ``item_values``)."""

    write_values: list[list[Value]]
    blob_values: list[Value]
    item_digests: list[bytes]
    item_values: list[Value]

    @classmethod
    def of(cls, raw: RedisReply) -> PartsReply:
        """From the raw reply ``[[write values]..., blob values, digests, values]``."""
        writes, values, digests, items = raw  # arrays come as lists
        return cls(writes, values, digests, items)


@dataclass(frozen=True, slots=True)
class DeleteThreadReply:
    """DELETE_THREAD's reply: ``deleted_at_ms`` (the Redis clock) and ``held``, the
    members (ns NUL checkpoint_id) Redis held."""

    deleted_at_ms: int
    held: list[str]

    @classmethod
    def of(cls, raw: RedisReply) -> DeleteThreadReply:
        """From the raw reply ``[deletion time, [members]]``."""
        at, held = raw
        return cls(int(at), [m.decode("utf-8", "surrogateescape") if isinstance(m, bytes)
                             else m for m in held])


@dataclass(frozen=True, slots=True)
class ChainRow:
    """One ancestor CHAIN walked: its ``checkpoint_id``, ``index`` (cv entry),
    ``write_values`` of its pending writes, ``seeds`` (``(blob field, value)`` of the open
    channels it stores a non-empty value of) and ``missing`` (blob fields of open channels
    Redis lacks: read them from MongoDB)."""

    checkpoint_id: bytes
    index: bytes
    write_values: list[Value]
    seeds: list[tuple[bytes, bytes]]
    missing: list[bytes]


@dataclass(frozen=True, slots=True)
class ChainReply:
    """CHAIN's reply: why it stopped (``status``), the ``rows`` walked, ``next`` (the
    checkpoint_id to go on from, ``""`` when done; see ``ChainStatus``) and the items the
    rows' values name (``item_digests``, ``item_values``)."""

    status: ChainStatus
    rows: list[ChainRow]
    next: str
    item_digests: list[bytes]
    item_values: list[Value]

    @classmethod
    def of(cls, raw: RedisReply) -> ChainReply:
        """From the raw reply ``[status, rows, next, digests, values]``."""
        status, rows, nxt, digests, items = raw
        return cls(ChainStatus(int(status)), [
            ChainRow(cid, cv, wv, list(zip(seeds[::2], seeds[1::2])), missing)
            for cid, cv, wv, seeds, missing in rows], _text(nxt), digests, items)


@dataclass(frozen=True, slots=True)
class AckSettleReply:
    """ACK_SETTLE's reply: ``acked`` (per entry id, in the order sent: True when this call
    acknowledged it, False when it was acknowledged before), ``outbox_length`` (the
    partition's stream after the deletes) and ``unsettled``: thread index (0-based, in
    the order sent) -> error text, for each thread whose settle failed (its entries were
    acknowledged all the same); ``counted``: those of them whose counts (``dirty``, the
    checkpoints' unflushed counts) were lowered before the failure."""

    acked: list[bool]
    outbox_length: int
    unsettled: Mapping[int, str] = field(default_factory=dict)
    counted: frozenset[int] = frozenset()

    @classmethod
    def of(cls, raw: RedisReply) -> AckSettleReply:
        """From the raw reply ``[[1/0...], length, [thread no, error, ...], [thread no,
        ...]]`` (the third and fourth elements absent in replies of older scripts)."""
        acked, length = raw[0], raw[1]
        bad = raw[2] if len(raw) > 2 else []
        lowered = raw[3] if len(raw) > 3 else []
        return cls([bool(a) for a in acked], int(length),
                   {int(n) - 1: e.decode(errors="replace") if isinstance(e, bytes) else str(e)
                    for n, e in zip(bad[::2], bad[1::2])},
                   frozenset(int(n) - 1 for n in lowered))


@dataclass(frozen=True, slots=True)
class DeadReplayReply:
    """DEAD_REPLAY's reply: ``status`` (``ADDED``, ``REPLAYED``: added by an earlier
    replay, ``GONE``: Redis no longer holds the thread, ``NEWER``: the thread was deleted
    and written again since) and ``entry_id`` (the new entry's id when ``ADDED``, else
    ``""``)."""

    status: str
    entry_id: str

    @classmethod
    def of(cls, raw: RedisReply) -> DeadReplayReply:
        """From the raw reply ``[status, entry id]``."""
        status, eid = raw
        return cls(_text(status), _text(eid))
