"""The list value a thread summary reads (sans-I/O): where the latest messages of a
``messages`` manifest are and how many it holds, read from the digests alone, no item
decoded. A manifest (``core/items.py``) names items and full nodes (``NODE_SIZE`` items
each, first), so the summary's count and latest messages need the items at the end of
the list and where its nodes end: ``wanted_items`` says which the flusher reads from
Redis for a round (``Wanted``), ``tail`` and ``held_nodes`` read them from what a round
holds (``plans/summary_upkeep.py`` ``round_facts``)."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import NamedTuple

from ..core.items import MANIFEST_TYPE, NODE_MAGIC, NODE_SIZE, NODE_TYPE, split_digests
from ..core.records import SEP, CheckpointRecord, Typed
from ..durable import summary_docs as S
from ..errors import CorruptRecordError

log = logging.getLogger("langgraph_durable.summaries")

MESSAGES = "messages"
"""The channel whose messages a summary counts and takes its title and text from."""


def node_of(items: Mapping[bytes, Typed], digest: bytes) -> bytes | None:
    """The item digests of ``digest`` when ``items`` holds it as a node, else None
    (``items`` holding its stored bytes, ``outbox.rounds``: read from them, nothing
    decoded)."""
    raw = getattr(items, "raw", None)
    if raw is not None:
        stored = raw(digest)
        return bytes(stored[2:]) if stored is not None and stored[:2] == NODE_MAGIC else None
    got = items[digest]
    return got[1] if got[0] == NODE_TYPE else None


def listed(refs: bytes, items: Mapping[bytes, Typed]) -> list[bytes] | None:
    """The item digests of the list a manifest names, in order (nodes expanded, as
    ``expand``), or None when ``items`` lacks one; decodes no item."""
    out: list[bytes] = []
    try:
        for d in split_digests(refs):
            if d not in items:
                return None
            children = node_of(items, d)
            if children is None:
                out.append(d)
                continue
            for c in split_digests(children):
                if c not in items or node_of(items, c) is not None:
                    return None
                out.append(c)
    except CorruptRecordError:
        return None
    return out


def tail(digests: Sequence[bytes], items: Mapping[bytes, Typed]
          ) -> tuple[list[bytes], int | None]:
    """``(digests of the latest items, in order, up to TEXT_MESSAGES, read from the end
    of the list and stopping at the first one items lacks; the full nodes in front of
    the last node met, None: no node met)``."""
    out: list[bytes] = []
    nodes = None
    for i in range(len(digests) - 1, -1, -1):
        if len(out) >= S.TEXT_MESSAGES:
            break
        d = digests[i]
        if d not in items:
            break
        children = node_of(items, d)
        if children is None:
            out.append(d)
            continue
        nodes = i + 1 if nodes is None else nodes
        for c in reversed(split_digests(children)):
            if len(out) >= S.TEXT_MESSAGES:
                break
            if c not in items or node_of(items, c) is not None:
                return out[::-1], nodes
            out.append(c)
    return out[::-1], nodes


def held_nodes(digests: Sequence[bytes], items: Mapping[bytes, Typed], end: int
                ) -> tuple[int | None, int]:
    """``(the full nodes of a manifest, None: not told; the place the read stopped at)``,
    read from place ``end - 1`` back through the items ``items`` holds: a node held, the
    list's start. The items after the full nodes are fewer than ``NODE_SIZE``, so the
    read goes back ``NODE_SIZE`` places from the end at most (a manifest whose items
    there are no node is not so made: not told)."""
    start = max(0, len(digests) - NODE_SIZE)
    i = end
    while i > start:
        d = digests[i - 1]
        if d not in items:
            return None, i
        if node_of(items, d) is not None:
            return i, i
        i -= 1
    return (0 if i == 0 else None), i


class Wanted(NamedTuple):
    """What the flusher reads from Redis for a thread's summary (``wanted_items``):
    ``items``, digests to read (``HMGET``); ``probe``, digests of the manifest from
    place ``start`` on whose last stored node the flusher finds (the ``LAST_NODE``
    script), when the count cannot be told otherwise."""

    items: list[bytes]
    start: int = 0
    probe: tuple[bytes, ...] = ()

    def nodes(self, last: int | None) -> int | None:
        """The manifest's full nodes from ``last``, the probe's reply (the place among
        ``probe``, 1-based, of the last stored node; 0: none; -1 or None: not known):
        the nodes come first, and a manifest's items after them are fewer than
        ``NODE_SIZE``, so ``probe`` starts at a node unless it starts the list (a reply
        of 0 past the start is a manifest not so made: not known)."""
        if last is None or last < 0 or (last == 0 and self.start > 0):
            return None
        return self.start + last


def wanted_items(rec: CheckpointRecord | None, blobs: Mapping[str, Typed | None],
                 items: Mapping[bytes, Typed]) -> Wanted:
    """What ``round_facts`` needs for the ``messages`` of ``rec`` (a root checkpoint) that
    ``items`` (the round's) lacks. ``Wanted.items``: the digests of the latest
    ``TEXT_MESSAGES`` messages it lacks (they reached Redis with a pending write flushed
    in an earlier round, or with an earlier checkpoint; a node among them: its digest,
    the items it holds are read when it is in ``items``). ``Wanted.probe``: when the
    latest ``TEXT_MESSAGES`` places of the manifest are not known to hold a node and the
    round's items before them do not tell where the nodes end (``_held_nodes``), the
    places where its last node may be (its items after the nodes are fewer than
    ``NODE_SIZE``: up to ``NODE_SIZE`` places), so the count is exact. Found from
    the record's blob fields and the manifest's digests, nothing decoded; empty when the
    round holds no new ``messages`` list of ``rec``."""
    if rec is None or rec.ns:
        return Wanted([])
    want: list[bytes] = []
    held = 0
    try:  # a damaged record or blob: its round's facts say so (round_facts), never this
        field = next((f for f in rec.blob_fields if f.split(SEP)[1:2] == [MESSAGES]), None)
        typed = blobs.get(field) if field is not None else None
        if typed is None or typed[0] != MANIFEST_TYPE or listed(typed[1], items) is not None:
            return Wanted([])  # no list, or the round holds it whole
        digests = split_digests(typed[1])
        i = len(digests)
        while i > 0 and held < S.TEXT_MESSAGES:
            i -= 1
            d = digests[i]
            children = node_of(items, d) if d in items else None
            if children is None:
                if d not in items:
                    want.append(d)
                held += 1
                continue
            for c in reversed(split_digests(children)):
                if held >= S.TEXT_MESSAGES:
                    break
                if c not in items:
                    want.append(c)
                held += 1
            return Wanted(want)  # a node: the count is told by its place
        # places 0 to i - 1 not read: where the nodes end among them, when the round's
        # items before the latest ones do not tell
        nodes, j = held_nodes(digests, items, i)
        start = max(0, len(digests) - NODE_SIZE)
        return Wanted(want, start, () if nodes is not None else tuple(digests[start:j]))
    except Exception as exc:  # by type only: no stored value in the logs
        log.debug("summary: the latest messages' items not found: %s", type(exc).__name__)
        return Wanted([])
