"""Lua scripts the flusher runs besides the thread scripts: its heartbeat in the key
prefix's heartbeat registry (HEARTBEAT_BEAT, HEARTBEAT_REAP, HEARTBEAT_FORGET;
``outbox/heartbeat.py``), the upkeep of an outbox stream's consumer group (GROUP_LEAVE,
GROUP_UPKEEP; ``outbox/group.py``) and where a thread's ``messages`` list's full nodes
end, for its summary (LAST_NODE; ``outbox/round_summaries.py``).

Each takes one key (KEYS[1]: the heartbeat registry ``keys.heartbeats_key``, an outbox
stream, or a thread's items hash), so it runs in that key's slot on a Redis Cluster. As
the other scripts', each has an argument class naming its KEYS and ARGV whose ``op()``
builds the ``Script`` operation, typed by its reply (a class below, or ``int``/``bool``).
HEARTBEAT_REAP (one per outbox stream) and LAST_NODE (one per thread, beside ``HMGET``s)
are sent many to a ``Pipeline``, one round trip: ``lua.eval_command(op)`` is the command
of such an operation and ``op.reply_of(reply)`` its typed reply.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..core.ops import RedisReply, Script, StreamEntry
from . import lua

FLUSHER_SCRIPT_NAMES = ("heartbeat_beat", "heartbeat_reap", "heartbeat_forget",
                        "group_leave", "group_upkeep", "last_node")
"""The scripts of this module, by name (``hot/lua/<name>.lua``)."""

FLUSHER_SCRIPTS = lua.sources(FLUSHER_SCRIPT_NAMES)
"""Script name -> Lua source of this module's scripts (part of ``hot.scripts.SCRIPTS``)."""


def _text(v: bytes | str) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def _texts(raw: RedisReply) -> list[str]:
    return [_text(m) for m in raw or []]


# --------------------------------------------------------------------------- heartbeats


@dataclass(frozen=True, slots=True)
class BeatArgs:
    """KEYS/ARGV of HEARTBEAT_BEAT: member ``consumer`` of the heartbeat registry
    ``heartbeats`` (KEYS[1]) lapses ``ttl_ms`` from now (the Redis server's clock); the
    registry lives ``registry_ttl_ms`` more; up to ``limit`` members already lapsed are
    sent back."""

    heartbeats: str
    consumer: str
    ttl_ms: int
    registry_ttl_ms: int
    limit: int

    def op(self) -> Script[list[str]]:
        """The ``Script`` operation; replies the lapsed members (dead flushers)."""
        return Script("heartbeat_beat", [self.heartbeats],
                      [self.consumer, self.ttl_ms, self.registry_ttl_ms, self.limit],
                      decode=_texts)


@dataclass(frozen=True, slots=True)
class ReapArgs:
    """KEYS/ARGV of HEARTBEAT_REAP: in outbox ``stream`` (KEYS[1]), consumer ``consumer``
    of ``group`` claims up to ``limit`` entries idle over ``idle_ms`` that the ``dead``
    consumers hold; each dead consumer holding nothing more there is deleted from the
    group."""

    stream: str
    group: str
    consumer: str
    idle_ms: int
    limit: int
    dead: Sequence[str]

    def op(self) -> Script[ReapReply]:
        """The ``Script`` operation (``ReapReply``)."""
        return Script("heartbeat_reap", [self.stream],
                      [self.group, self.consumer, self.idle_ms, self.limit, *self.dead],
                      decode=ReapReply.of)


@dataclass(frozen=True, slots=True)
class ReapReply:
    """HEARTBEAT_REAP's reply: the ``claimed`` entries (``(entry id, {field: value})``)
    and the dead consumers ``deleted`` from the group (they held nothing more)."""

    claimed: list[StreamEntry]
    deleted: list[str]

    @classmethod
    def of(cls, raw: RedisReply) -> ReapReply:
        """From the raw reply ``[[[id, [field, value, ...]], ...], [consumer, ...]]``."""
        entries, deleted = raw
        return cls([(eid, _pairs(fields)) for eid, fields in entries or []],
                   _texts(deleted))


def _pairs(raw: RedisReply) -> dict[bytes, bytes]:
    if isinstance(raw, dict):
        return dict(raw)
    return dict(zip(raw[::2], raw[1::2])) if raw else {}


@dataclass(frozen=True, slots=True)
class ForgetArgs:
    """KEYS/ARGV of HEARTBEAT_FORGET: remove the ``members`` of the heartbeat registry
    ``heartbeats`` (KEYS[1]) that are still lapsed (one that beat since keeps its place)."""

    heartbeats: str
    members: Sequence[str]

    def op(self) -> Script[int]:
        """The ``Script`` operation; replies how many members were removed."""
        return Script("heartbeat_forget", [self.heartbeats], list(self.members), decode=int)


# --------------------------------------------------------------------------- consumer group


@dataclass(frozen=True, slots=True)
class LeaveArgs:
    """KEYS/ARGV of GROUP_LEAVE: delete ``consumer`` from ``group`` of outbox ``stream``
    (KEYS[1]) unless it holds pending entries there (``XGROUP DELCONSUMER`` would drop them
    from the group's pending list). A missing stream or group is the Redis error the
    script's ``XPENDING`` raises."""

    stream: str
    group: str
    consumer: str

    def op(self) -> Script[bool]:
        """The ``Script`` operation; replies True if the consumer was deleted."""
        return Script("group_leave", [self.stream], [self.group, self.consumer], decode=bool)


@dataclass(frozen=True, slots=True)
class UpkeepArgs:
    """KEYS/ARGV of GROUP_UPKEEP on outbox ``stream`` (KEYS[1]) and its ``group``: remove
    the consumers idle over ``stale_ms`` holding nothing; then, when the stream's oldest
    entry is at or before the group's last-delivered id and no consumer holds it, set the
    group's id back to 0 so ``XREADGROUP >`` delivers it (and what follows) again."""

    stream: str
    group: str
    stale_ms: int

    def op(self) -> Script[UpkeepReply]:
        """The ``Script`` operation (``UpkeepReply``)."""
        return Script("group_upkeep", [self.stream], [self.group, self.stale_ms],
                      decode=UpkeepReply.of)


@dataclass(frozen=True, slots=True)
class UpkeepReply:
    """GROUP_UPKEEP's reply: ``removed`` consumers, whether the group was ``rewound`` and
    then the stream's ``oldest`` entry id (None when not rewound)."""

    removed: int
    rewound: bool
    oldest: str | None = None

    @classmethod
    def of(cls, raw: RedisReply) -> UpkeepReply:
        """From the raw reply ``[removed, 1 if rewound else 0, oldest id (when rewound)]``."""
        rewound = bool(raw[1])
        return cls(int(raw[0]), rewound,
                   _text(raw[2]) if rewound and len(raw) > 2 else None)


# --------------------------------------------------------------------------- summaries


@dataclass(frozen=True, slots=True)
class LastNodeArgs:
    """KEYS/ARGV of LAST_NODE: the place among ``digests`` (in list order) of the last one
    stored in the items hash ``items`` (KEYS[1]) as a node: a field ``node_bytes`` long
    starting with ``node_magic`` (``core.items``), read from the end (``HSTRLEN``; ``HGET``
    only of a field as long as a node)."""

    items: str
    node_bytes: int
    node_magic: bytes
    digests: Sequence[bytes]

    def op(self) -> Script[int]:
        """The ``Script`` operation; replies the 1-based place of the last stored node, 0
        when none is, -1 when a field after it is not in the hash."""
        return Script("last_node", [self.items],
                      [self.node_bytes, self.node_magic, *self.digests], decode=int)
