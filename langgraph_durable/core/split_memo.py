"""The last split of a growing list (sans-I/O; used by ``items.Items.split``).

A conversation's ``messages`` value is a new list at every super-step that starts with
the same message objects as the list stored before it. ``Items.split`` used to check
each of those objects against its snapshot one by one, in Python, at every ``put``
(O(length) interpreted steps per super-step: 0.35 ms per put at 600 messages). A
``LastSplit`` remembers, per thread and channel, the list it split last: its objects and
the snapshots (type, fields, extra fields: ``model_copies.snapshot_of``) its digests were
taken from. When a new list starts with those very objects (identity) and each still
equals its snapshot, compared as whole lists at C speed, that prefix's digests, stored
bytes and full nodes are taken as they are; only the items after it are checked and
serialized one by one (``items.py``). The result is the one the per-object path gives:
same digests, same manifest, same parts (``tests/unit/test_split_memo.py``).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any

Stored = Any  # items.Stored (bytes or a typed value not packed yet)

MIN_ITEMS = 32
"""Lists shorter than this are split object by object without a memo: below about one
node's worth of items the memo's own lists cost more than the checks they spare."""
_FIELDS = operator.attrgetter("__dict__")
_EXTRA = operator.attrgetter("__pydantic_extra__")


class LastSplit:
    """A list as ``Items.split`` last split it: ``items`` (the objects), their snapshots
    (``types``, ``fields``, ``extras``), ``digests`` and ``stored`` (per item), and the
    digests and stored bytes of its full nodes (``nodes``, ``node_bytes``)."""

    __slots__ = ("items", "types", "fields", "extras", "digests", "stored", "nodes",
                 "node_bytes")

    def __init__(self, items: list[object], snapshots: Sequence[tuple[Any, Any, Any]],
                 digests: list[bytes], stored: list[Stored], nodes: list[bytes],
                 node_bytes: list[bytes]) -> None:
        self.items = items
        self.types = [s[0] for s in snapshots]
        self.fields = [s[1] for s in snapshots]
        self.extras = [s[2] for s in snapshots]
        self.digests, self.stored = digests, stored
        self.nodes, self.node_bytes = nodes, node_bytes

    def prefix_of(self, value: list[object]) -> int:
        """How many leading items of ``value`` this split's digests hold for: all of
        ``self.items`` when ``value`` starts with those same objects (``is``) and every one
        still equals its snapshot (type, ``__dict__``, ``__pydantic_extra__``); else 0."""
        n = len(self.items)
        if n == 0 or len(value) < n or not all(map(operator.is_, value, self.items)):
            return 0
        head = value[:n]
        try:  # the prefix holds the objects split last, every one a pydantic model
            if (list(map(type, head)) != self.types
                    or list(map(_FIELDS, head)) != self.fields
                    or list(map(_EXTRA, head)) != self.extras):
                return 0
        except Exception:  # a field whose == raises: take the per-object path
            return 0
        return n

    def extended(self, value: list[object], snapshots: Sequence[tuple[Any, Any, Any]],
                 start: int, digests: list[bytes], stored: list[Stored],
                 nodes: list[bytes], node_bytes: list[bytes]) -> LastSplit:
        """The split of ``value``, whose first ``start`` items are this one's and whose
        others have ``snapshots``."""
        out = LastSplit.__new__(LastSplit)
        out.items = list(value)
        out.types = self.types[:start] + [s[0] for s in snapshots]
        out.fields = self.fields[:start] + [s[1] for s in snapshots]
        out.extras = self.extras[:start] + [s[2] for s in snapshots]
        out.digests, out.stored, out.nodes, out.node_bytes = digests, stored, nodes, node_bytes
        return out


def full_nodes(digests: list[bytes], last: LastSplit | None,
               node_digest: Callable[[bytes], bytes], size: int, magic: bytes
               ) -> tuple[list[bytes], list[bytes]]:
    """The digests and stored bytes (``magic`` + children) of the full nodes of a list
    whose item ``digests`` are given, ``size`` items a node; the nodes of ``last`` (whose
    items the list starts with) as they are."""
    nodes: list[bytes] = []
    stored: list[bytes] = []
    kept = len(last.nodes) if last is not None else 0
    for j in range(len(digests) // size):
        if j < kept:
            nodes.append(last.nodes[j])  # type: ignore[union-attr]
            stored.append(last.node_bytes[j])  # type: ignore[union-attr]
        else:
            children = b"".join(digests[j * size:(j + 1) * size])
            nodes.append(node_digest(children))
            stored.append(magic + children)
    return nodes, stored
