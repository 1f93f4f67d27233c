"""The Lua script of a key prefix's binding (``plans/binding.py``): BIND records, in one
atomic step, the MongoDB database, collection_prefix and number of outbox partitions the
threads of a key prefix belong to, unless a binding is there already (the first process
wins), and replies with what is stored. Its one key (``keys.binding_key``,
``{<prefix>:binding}``) is in a slot of its own on a Redis Cluster.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core.ops import RedisReply, Script
from . import lua

BINDING_SCRIPTS = lua.sources(("bind",))
"""Script name -> Lua source of BIND (``hot/lua/bind.lua``; part of ``hot.scripts.SCRIPTS``)."""

BINDING_FIELDS = ("database", "collection_prefix", "by", "at", "partitions")
"""The fields of the binding hash, in the order BIND replies with them (an ``HMGET`` of
them reads a binding the same way)."""


@dataclass(frozen=True, slots=True)
class BindArgs:
    """KEYS/ARGV of BIND: ``binding`` (KEYS[1], ``keys.binding_key``) is recorded as
    ``database``, ``collection_prefix``, ``by`` (the process recording it, e.g. ``saver
    pid 12 on host app-1``), ``at_ms`` (ms since the epoch) and ``partitions`` (the number
    of outbox partitions) unless it exists; one an older version recorded without
    ``partitions`` gets it."""

    binding: str
    database: str
    collection_prefix: str
    by: str
    at_ms: int
    partitions: int

    def op(self) -> Script[Binding]:
        """The ``Script`` operation (ARGV in BIND's order); replies the stored ``Binding``."""
        return Script("bind", [self.binding], [
            self.database, self.collection_prefix, self.by, self.at_ms, self.partitions],
            decode=Binding.of)


@dataclass(frozen=True)
class Binding:
    """A key prefix's recorded binding (BIND's reply, or an ``HMGET`` of
    ``BINDING_FIELDS``): ``database`` and ``collection_prefix`` (None when the hash lacks
    the field), ``by`` (the process that recorded it), ``at_ms`` (when, ms since the
    epoch) and ``partitions`` (the number of outbox partitions; None in a binding an older
    version recorded)."""

    database: str | None
    collection_prefix: str | None
    by: str | None
    at_ms: int | None
    partitions: int | None = None

    @classmethod
    def of(cls, raw: RedisReply) -> Binding:
        """From the raw reply: the values of ``BINDING_FIELDS`` in order (None for a
        missing one)."""
        database, collection_prefix, by, at, partitions = (_text(v) for v in raw)
        return cls(database, collection_prefix, by, _number(at), _number(partitions))

    def matches(self, database: str, collection_prefix: str, partitions: int) -> bool:
        """True when it names ``database``, ``collection_prefix`` and (when recorded)
        ``partitions`` outbox partitions."""
        return (self.database == database and self.collection_prefix == collection_prefix
                and self.partitions in (None, partitions))


def _text(v: object) -> str | None:
    if v is None:
        return None
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)


def _number(text: str | None) -> int | None:
    return int(text) if text is not None and text.isdigit() else None
