"""The plan of ``list_threads``: which threads either tier holds, with their checkpoint
counts and last activity, a page at a time in ``thread_id`` order (sans-I/O)."""

from __future__ import annotations

import datetime
from collections import defaultdict
from dataclasses import dataclass

from ..core.ops import Aggregate, Doc, Find, Op, Parallel, Pipeline, Plan, Scan
from ..core.records import SEP, checkpoint_time_s
from ..durable import checkpoint_queries as Q
from ..hot.keys import prefix_pattern, thread_keys_of
from .context import Context


@dataclass(frozen=True)
class ThreadInfo:
    """One thread as ``list_threads`` sees it.

    Attributes:
        thread_id: the thread.
        checkpoints: its checkpoints in every namespace, both tiers merged (each once).
        last_checkpoint_id: its newest ``checkpoint_id`` over every namespace.
        last_activity: when that checkpoint was made (UTC ``datetime``), read from the
            uuid6 ``checkpoint_id``; ``None`` for a custom id that carries no time.
        in_redis: the hot tier holds keys of the thread (its hot window).
        in_mongodb: the durable tier holds checkpoints of it.
    """

    thread_id: str
    checkpoints: int
    last_checkpoint_id: str | None
    last_activity: datetime.datetime | None
    in_redis: bool
    in_mongodb: bool


@dataclass(frozen=True)
class ThreadPage:
    """A page of ``list_threads``: ``threads`` in ``thread_id`` order and ``next_cursor``,
    to pass as ``cursor`` for the next page (``None``: this was the last page)."""

    threads: list[ThreadInfo]
    next_cursor: str | None


def _text(v: object) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def hot_thread_pattern(ctx: Context) -> str:
    """SCAN pattern of the threads' index keys of this key prefix, in either layout of
    ``hot/keys.py`` (``hot_thread_ids`` drops any other key it matches)."""
    return prefix_pattern(ctx.config.key_prefix) + ":idx"


def hot_thread_ids(ctx: Context, keys: list[bytes]) -> set[str]:
    """Thread ids of the index keys (``idx``) among ``keys`` (``hot/keys.thread_keys_of``
    parses either layout, and the length prefix tells a thread id holding ``:idx`` apart)."""
    out = set()
    for raw in keys:
        found = thread_keys_of(ctx.config.key_prefix, raw)
        if found is not None and found.suffix_of(_text(raw)) == "idx":
            out.add(found.thread_id)
    return out


def _when(checkpoint_id: str | None) -> datetime.datetime | None:
    made = checkpoint_time_s(checkpoint_id) if checkpoint_id else None
    if made is None:
        return None
    return datetime.datetime.fromtimestamp(made, tz=datetime.timezone.utc)


def list_threads_plan(ctx: Context, limit: int, cursor: str | None) -> Plan[ThreadPage]:
    """Up to ``limit`` threads with ``thread_id`` greater than ``cursor``, in
    ``thread_id`` order, from both tiers: Redis's thread indexes (SCAN) and MongoDB's
    checkpoints (one aggregation for the ids, one for the page's counts). A checkpoint in
    both tiers counts once: Redis members at or below MongoDB's newest id of their
    namespace are looked up in MongoDB by id range. Returns a ``ThreadPage``."""
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ValueError(f"list_threads limit must be an int >= 1, got {limit!r}")
    cols = ctx.collections
    keys, docs = yield Parallel([
        Scan(hot_thread_pattern(ctx)),
        Aggregate(cols.checkpoints, Q.thread_ids_after(cursor, limit + 1)),
    ])
    hot = {t for t in hot_thread_ids(ctx, keys) if cursor is None or t > cursor}
    durable_ids = [d["_id"] for d in docs]
    union = sorted(hot | set(durable_ids))
    page = union[:limit]
    if not page:
        return ThreadPage([], None)
    more = len(union) > limit
    hot_page = [t for t in page if t in hot]
    ops: list[Op[object]] = [Aggregate(cols.checkpoints, Q.namespace_counts(cursor, page[-1]))]
    if hot_page:
        ops.append(Pipeline([["ZRANGE", ctx.keys(t).idx, 0, -1] for t in hot_page]))
    results = yield Parallel(ops)
    durable: dict[str, dict[str, tuple[int, str]]] = defaultdict(dict)
    for d in results[0]:
        durable[d["_id"]["t"]][d["_id"]["ns"]] = (int(d["n"]), d["last"])
    members: dict[str, dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    for tid, reply in zip(hot_page, results[1] if hot_page else []):
        for m in reply:
            ns, _, cid = _text(m).partition(SEP)
            members[tid][ns].append(cid)
    # Redis ids above MongoDB's newest of their namespace are surely not there yet; the
    # others (the flushed part of the hot window) are looked up by id range
    checks = [(tid, ns, min(c for c in cids if c <= durable[tid][ns][1]), durable[tid][ns][1])
              for tid, spaces in members.items() for ns, cids in spaces.items()
              if ns in durable[tid] and any(c <= durable[tid][ns][1] for c in cids)]
    found: list[list[Doc]] = []
    if checks:
        found = yield Parallel([Find(cols.checkpoints, Q.checkpoints_between(tid, ns, lo, hi),
                                     {"checkpoint_id": 1}) for tid, ns, lo, hi in checks])
    flushed: dict[tuple[str, str], set[str]] = {
        (tid, ns): {d["checkpoint_id"] for d in docs_}
        for (tid, ns, _lo, _hi), docs_ in zip(checks, found)}
    out = []
    for tid in page:
        spaces = durable.get(tid, {})
        count = sum(n for n, _ in spaces.values())
        ids = [last for _, last in spaces.values()]
        for ns, cids in members.get(tid, {}).items():
            count += len(set(cids) - flushed.get((tid, ns), set()))
            ids.append(max(cids))
        last = max(ids, default=None)
        out.append(ThreadInfo(tid, count, last, _when(last), tid in hot, bool(spaces)))
    return ThreadPage(out, page[-1] if more else None)
