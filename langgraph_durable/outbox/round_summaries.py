"""What a flush round's records say for the thread summaries (``summary_facts_plan``,
called by ``rounds.py``'s copy of checkpoint and pending-write entries): per thread with a
root checkpoint or root pending writes in the round, the facts
``plans.summary_upkeep.round_facts`` takes, read from the round's records as the copy
decoded them, and what the summary needs besides from Redis (one pipeline for the round;
LAST_NODE, ``hot/flusher_scripts.py``, per thread whose ``messages`` list's full nodes
are not known). Values are decoded only where the summary reads them (``_Decoded``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import redis.exceptions

from ..core.items import NODE_BYTES, NODE_MAGIC, parse_stored
from ..core.ops import Pipeline, Plan, Script
from ..core.records import CheckpointRecord, Typed, WriteRecord, unpack_blob
from ..hot.flusher_scripts import LastNodeArgs
from ..hot.lua import eval_command
from ..plans import summary_upkeep as summaries
from ..plans.context import Context
from .triage import of_entry


def summary_facts_plan(ctx: Context, rounds: Mapping[str, tuple[
        CheckpointRecord | None, list[tuple[str, WriteRecord]]]],
                       got: dict[tuple[str, str], dict[Any, Any]]) -> Plan[dict[str, Any]]:
    """What the round's records say for the thread summaries (``_summary_facts``), per
    thread with a root checkpoint or root pending writes in the round. What the summary
    of a thread's newest root checkpoint needs from Redis (``plans.summary_upkeep.
    wanted_items``) is read first, one pipeline for the round, only when a thread needs
    some: the latest messages whose items the round lacks (they reached Redis with a
    pending write, or a checkpoint, flushed in an earlier round; ``HMGET``, at most
    ``TEXT_MESSAGES`` items a thread; read, not written again), and where the list's
    full nodes end when its latest ``TEXT_MESSAGES`` places do not tell (LAST_NODE,
    ``hot.flusher_scripts.LastNodeArgs``, in the pipeline as ``lua.eval_command``: up to
    ``NODE_SIZE`` ``HSTRLEN`` in Redis, no item sent back), so the count is the list's
    length."""
    wanted: dict[str, summaries.Wanted] = {}
    probes: dict[str, Script[int]] = {}
    cmds: list[list[Any]] = []
    for tid, (newest, _writes) in rounds.items():
        want = summaries.wanted_items(
            newest, _Decoded(got.get((tid, "bl"), {}), _blob),
            _Decoded(got.get((tid, "it"), {}), _item))
        key = ctx.keys(tid).it
        if want.items:
            cmds.append(["HMGET", key, *want.items])
        if want.probe:
            probe = probes[tid] = LastNodeArgs(key, NODE_BYTES, NODE_MAGIC, want.probe).op()
            cmds.append(eval_command(probe))
        if want.items or want.probe:
            wanted[tid] = want
    replies = iter((yield Pipeline(cmds, raise_on_error=False)) if cmds else [])
    fetched: dict[str, dict[Any, Any]] = {}
    nodes: dict[str, int | None] = {}
    for tid, want in wanted.items():
        if want.items:
            values = next(replies)
            if isinstance(values, Exception) and not of_entry(values):
                raise values  # the tier's (a lost connection in a cluster pipeline)
            if not isinstance(values, Exception):  # a damaged key: the round's items only
                fetched[tid] = {**got.get((tid, "it"), {}), **dict(zip(want.items, values))}
        if want.probe:
            last = next(replies)
            if isinstance(last, Exception) and not isinstance(
                    last, redis.exceptions.ResponseError):
                raise last  # the tier's; a refused script: the count not known
            nodes[tid] = want.nodes(
                probes[tid].reply_of(last) if isinstance(last, int) else None)
    out = {}
    for tid, (newest, writes) in rounds.items():
        facts = _summary_facts(ctx, tid, newest, writes, got, fetched.get(tid),
                               nodes.get(tid))
        if facts is not None:
            out[tid] = facts
    return out


def _summary_facts(ctx: Context, tid: str, newest: CheckpointRecord | None,
                   writes: list[tuple[str, WriteRecord]],
                   got: dict[tuple[str, str], dict[Any, Any]],
                   items: dict[Any, Any] | None = None, nodes: int | None = None) -> Any:
    """What the round's records of ``tid`` say for its thread summary
    (``plans.summary_upkeep.round_facts``): its newest root checkpoint and root pending writes,
    as the copy decoded them; the blobs and items (the round's, or ``items``: those and
    the ones read for the summary) are decoded only where the summary reads them (the
    ``messages`` value, the few items it takes text from); ``nodes``: the full nodes of
    its ``messages`` list, when read from Redis."""
    return summaries.round_facts(
        ctx, tid, [] if newest is None else [newest], writes,
        _Decoded(got.get((tid, "bl"), {}), _blob),
        _Decoded(got.get((tid, "it"), {}) if items is None else items, _item), nodes)


def _blob(raw: bytes) -> Typed | None:
    return unpack_blob(raw, "a redis blob")


def _item(raw: bytes) -> Typed:
    return parse_stored(raw, functools.partial(unpack_blob, where="an item"))


class _Decoded(Mapping[Any, Any]):
    """Stored bytes of a Redis hash read (field -> bytes, None: gone) as the mapping of
    their decoded values, each decoded when first asked for; ``raw`` gives the bytes."""

    __slots__ = ("_raw", "_decode", "_done")

    def __init__(self, raw: Mapping[Any, bytes | None], decode: Callable[[bytes], Any]
                 ) -> None:
        self._raw, self._decode = raw, decode
        self._done: dict[Any, Any] = {}

    def raw(self, key: Any) -> bytes | None:
        """The stored bytes of ``key`` (None: not held)."""
        return self._raw.get(key)

    def __getitem__(self, key: Any) -> Any:
        try:
            return self._done[key]
        except KeyError:
            raw = self._raw.get(key)
            if raw is None:
                raise
            value = self._done[key] = self._decode(raw)
            return value

    def __contains__(self, key: object) -> bool:
        return self._raw.get(key) is not None

    def __iter__(self) -> Iterator[Any]:
        return (k for k, v in self._raw.items() if v is not None)

    def __len__(self) -> int:
        return sum(v is not None for v in self._raw.values())
