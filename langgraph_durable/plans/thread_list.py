"""A page of the thread list from the thread summaries (``durable/summary_docs.py``): one
find on their indexes, the threads not flushed yet merged from Redis, the statuses'
counts from a ``Census`` the reader keeps up to date with the summaries changed since its
last look (an indexed find of ``u``), or, for a page filtered by metadata, text or
thread_id, from one ``$group``."""

from __future__ import annotations

import datetime
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..core.ops import Find, Pipeline, Plan
from ..core.outbox_entry import OutboxEntry
from ..core.thread_summary import ATTENTION, STATUSES, status_of
from ..durable import summary_docs as S
from .context import Context
from .summary_upkeep import facts_or_damage_plan, readable_docs, upkeep_plan

HOT_SCAN = 2000
"""Outbox entries per partition a page reads to find the threads MongoDB lacks yet."""

HOT_THREADS = 100
"""At most this many unflushed threads are merged into a page (the newest entries'); a
larger backlog shows the rest once flushed."""

RELOAD_S = 60.0
"""A ``Census`` reads every summary again after this many seconds (deleted threads'
summaries leave no change to see; writers' clocks may differ)."""

_EPOCH = datetime.datetime.min.replace(tzinfo=datetime.timezone.utc)


@dataclass(frozen=True)
class ListPage:
    """A page of the thread list: ``rows`` (summary documents, each with its ``status``
    at the time read), ``total`` (threads answering the query), ``counts`` (threads per
    status answering the query but its status), ``unflushed`` (threads whose summary was
    read from Redis, not from MongoDB), ``versions`` (threads per state version,
    ``lgd_state_version``, None unversioned, over every thread; when asked)."""

    rows: list[dict[str, Any]]
    total: int
    counts: dict[str, int]
    unflushed: int
    versions: dict[Any, int] | None = None


def _aware(when: Any) -> datetime.datetime | None:
    if isinstance(when, datetime.datetime) and when.tzinfo is None:
        return when.replace(tzinfo=datetime.timezone.utc)
    return when if isinstance(when, datetime.datetime) else None


def with_status(doc: Mapping[str, Any], now: datetime.datetime,
                running_window_s: float) -> dict[str, Any]:
    """``doc`` with its ``status`` at ``now`` (``core.thread_summary.status_of``;
    ``unknown`` for a summary that knows no checkpoint's state yet)."""
    when = _aware(doc.get("at"))
    return {**doc, "at": when,
            "status": status_of(doc["state"], when, now, running_window_s)
            if doc.get("state") else "unknown"}


class Census:
    """Every thread's state, time and state version as the summaries say, kept by a
    reader (the dashboard: one per app) so that a page's counts cost no scan:
    ``sync_plan`` reads the summaries changed since its last look (``u``, an indexed
    find), or all of them every ``reload_s`` seconds. Thread-safe."""

    def __init__(self, reload_s: float = RELOAD_S) -> None:
        self.reload_s = reload_s
        self.rows: dict[str, tuple[Any, Any, Any]] = {}
        self._since_ms = 0
        self._loaded = float("-inf")
        self._lock = threading.Lock()

    FIELDS = {"thread_id": 1, "state": 1, "at": 1, "sv": 1, "u": 1}
    """The summaries' fields a census reads."""

    def sync_plan(self, ctx: Context) -> Plan[int]:
        """Bring the census up to date; returns how many summaries changed since the
        last look (all of them at a reload)."""
        with self._lock:
            reload = time.monotonic() - self._loaded >= self.reload_s
            since = self._since_ms
        if reload:
            docs = yield Find(ctx.collections.threads, {}, self.FIELDS)
        else:
            docs = yield Find(ctx.collections.threads, S.summaries_changed_since(since),
                              self.FIELDS)
        return self.take(docs, reload)

    def take(self, docs: Iterable[Mapping[str, Any]], reload: bool = False) -> int:
        """Apply summaries read (``FIELDS``; ``reload``: they are all of them); returns
        how many differ from what the census held. A damaged summary counts with its
        damaged fields empty (``summary_upkeep.readable_docs``)."""
        docs = readable_docs(docs)
        with self._lock:
            if reload:
                self.rows, self._loaded = {}, time.monotonic()
            changed = 0
            for d in docs:
                row = (d.get("state"), _aware(d.get("at")), d.get("sv"))
                if self.rows.get(d["thread_id"]) != row:
                    changed += 1
                self.rows[d["thread_id"]] = row
                self._since_ms = max(self._since_ms, int(d.get("u") or 0))
        return changed

    def page_ids(self, query: S.ListQuery, now: datetime.datetime,
                 running_window_s: float, without: Iterable[str], start: int,
                 count: int) -> list[str]:
        """The thread_ids of ``count`` threads from position ``start`` of the list
        ``query`` asks for (its status and thread_id filters; not its metadata or text
        ones), newest first (oldest first for "needs attention"), then by thread_id,
        leaving out ``without``."""
        skip = set(without)
        needle = query.q.strip().lower()
        with self._lock:
            rows = list(self.rows.items())
        chosen = []
        for tid, (state, at, _sv) in rows:
            if tid in skip or (needle and needle not in tid.lower()):
                continue
            status = status_of(state, at, now, running_window_s) if state else "unknown"
            if query.status == "attention":
                if status not in ATTENTION:
                    continue
            elif query.status is not None and status != query.status:
                continue
            chosen.append({"thread_id": tid, "at": at})
        chosen.sort(key=_order, reverse=query.oldest_first)
        return [d["thread_id"] for d in chosen[start:start + count]]

    def forget(self, thread_ids: Iterable[str]) -> None:
        """Drop threads whose summary is gone (deleted since the census read it)."""
        with self._lock:
            for tid in thread_ids:
                self.rows.pop(tid, None)

    def tally(self, now: datetime.datetime, running_window_s: float,
              without: Iterable[str] = (), q: str = ""
              ) -> tuple[dict[str, int], dict[Any, int], int]:
        """``(threads per status, threads per state version, threads with no state)``
        at ``now``, of the threads whose thread_id contains ``q`` (case-insensitive),
        leaving out the threads ``without``."""
        needle = q.strip().lower()
        skip = set(without)
        counts = {s: 0 for s in STATUSES}
        by_version: dict[Any, int] = {}
        unknown = 0
        with self._lock:
            rows = list(self.rows.items())
        for tid, (state, at, sv) in rows:
            if tid in skip or (needle and needle not in tid.lower()):
                continue
            if not state:
                unknown += 1
                continue
            status = status_of(state, at, now, running_window_s)
            counts[status] = counts.get(status, 0) + 1
            by_version[sv] = by_version.get(sv, 0) + 1
        return counts, by_version, unknown


def unflushed_threads_plan(ctx: Context) -> Plan[list[str]]:
    """Threads with checkpoints or writes waiting in the outbox (newest first, at most
    ``HOT_THREADS``): one ``XREVRANGE`` per partition, in one pipeline."""
    replies = yield Pipeline([["XREVRANGE", s, "+", "-", "COUNT", HOT_SCAN]
                              for s in ctx.outboxes], raise_on_error=False)
    seen: dict[str, None] = {}
    for reply in replies:
        if isinstance(reply, Exception):
            continue
        for _eid, fields in reply:
            try:
                entry = OutboxEntry.of(fields if isinstance(fields, dict)
                                       else dict(zip(fields[::2], fields[1::2])))
            except Exception:
                continue
            if entry.kind in ("cp", "w") and "\x00" not in entry.thread_id:
                seen.setdefault(entry.thread_id, None)
    return list(seen)[:HOT_THREADS]


def _hot_docs(ctx: Context, now: datetime.datetime,
              running_window_s: float) -> Plan[list[dict[str, Any]]]:
    """Summaries of the threads with unflushed entries, from their latest checkpoint
    (Redis first); a thread whose records are damaged is left out (logged)."""
    out = []
    for tid in (yield from unflushed_threads_plan(ctx)):
        facts = yield from facts_or_damage_plan(ctx, tid)
        doc = S.merge(tid, None, facts, 0) if facts is not None else None
        if doc is not None:
            out.append(with_status(doc, now, running_window_s))
    return out


def _refresh_stale(ctx: Context, rows: list[dict[str, Any]]
                   ) -> Plan[dict[str, dict[str, Any]]]:
    """Summaries of the ``rows`` a flush round could not decode (or found damaged), from
    their latest checkpoint with ``ctx.serde``, written back: ``{thread_id: new
    summary}``; a thread whose records are damaged keeps its row (logged)."""
    fresh: dict[str, S.Facts] = {}
    for d in rows:
        if d.get("stale"):
            facts = yield from facts_or_damage_plan(ctx, d["thread_id"])
            if facts is not None:
                fresh[d["thread_id"]] = facts
    if not fresh:
        return {}
    yield from upkeep_plan(ctx, fresh)
    return {tid: doc for tid, f in fresh.items()
            if (doc := S.merge(tid, None, f, 0)) is not None}


def _order(d: Mapping[str, Any]) -> tuple[float, str]:
    at = d.get("at") or _EPOCH
    return (-at.timestamp(), d["thread_id"])


def list_page_plan(ctx: Context, query: S.ListQuery, page: int, size: int, *,
                   now: datetime.datetime, running_window_s: float,
                   versions: bool = False, census: Census | None = None) -> Plan[ListPage]:
    """Page ``page`` (from 1) of ``size`` threads answering ``query``: the threads with
    unflushed entries summarised from Redis (``_hot_docs``) in place of MongoDB's rows of
    them; the rest chosen, counted per status and ordered (newest first; "needs
    attention" oldest first; then by thread_id) from ``census`` (synced first: one
    indexed find of what changed) when the query filters by status and thread_id alone,
    else from one find of the summaries matching its metadata and text filters (their
    census fields only); then one find of the page's summaries by ``_id``; the rows marked
    ``stale`` summarised with ``ctx.serde`` and written back."""
    cols = ctx.collections
    hot = yield from _hot_docs(ctx, now, running_window_s)
    hot_ids = [d["thread_id"] for d in hot]
    shown = [d for d in hot if S.matches(d, query, d["status"])]
    start = (max(1, page) - 1) * size
    first = max(0, start - len(shown))
    narrowed = bool(query.where or query.search.strip()) or census is None
    unfiltered = S.ListQuery(None, query.where, query.search, query.q)
    fields = {"text": 0, "pw": 0, "recent": 0}
    if narrowed:  # MongoDB filters (one scan, the few fields a census needs), then reads
        # the page's summaries by _id: the counts and the page from the same answer
        matched = Census(reload_s=float("inf"))
        matched.take((yield Find(cols.threads, S.list_filter_without(unfiltered, hot_ids),
                                 Census.FIELDS)))
        ids = matched.page_ids(query, now, running_window_s, hot_ids, first,
                               size + len(shown))
        found = (yield Find(cols.threads, S.summaries_of(ids), fields)) if ids else []
        by_id = {d["thread_id"]: d for d in readable_docs(found)}
        rows = [by_id[t] for t in ids if t in by_id]
        counts, by_version, unknown = matched.tally(now, running_window_s, hot_ids)
    else:  # the census picks the page's threads and counts: MongoDB reads 50 by _id
        assert census is not None
        yield from census.sync_plan(ctx)
        ids = census.page_ids(query, now, running_window_s, hot_ids, first,
                              size + len(shown))
        found = (yield Find(cols.threads, S.summaries_of(ids), fields)) if ids else []
        by_id = {d["thread_id"]: d for d in readable_docs(found)}
        census.forget(t for t in ids if t not in by_id)  # deleted since it looked
        rows = [by_id[t] for t in ids if t in by_id]
        counts, by_version, unknown = census.tally(now, running_window_s, hot_ids, query.q)
    fresh = yield from _refresh_stale(ctx, rows)
    for tid, doc in fresh.items():  # a stale row's count moves to its status now
        old = next(with_status(d, now, running_window_s)["status"] for d in rows
                   if d["thread_id"] == tid)
        if old in counts:
            counts[old] -= 1
        else:
            unknown -= 1
        new = with_status(doc, now, running_window_s)
        if S.matches(new, unfiltered, new["status"]):
            counts[new["status"]] = counts.get(new["status"], 0) + 1
    rows = [with_status(fresh.get(d["thread_id"], d), now, running_window_s) for d in rows]
    # a stale row refreshed may have left the status asked for (MongoDB chose the others)
    rows = [d for d in rows if d["thread_id"] not in fresh
            or S.matches(d, S.ListQuery(query.status), d["status"])]
    for d in hot:
        if S.matches(d, unfiltered, d["status"]):
            counts[d["status"]] = counts.get(d["status"], 0) + 1
            by_version[d.get("sv")] = by_version.get(d.get("sv"), 0) + 1
    merged = sorted(rows + shown, key=_order, reverse=query.oldest_first)
    if query.status == "attention":
        total = sum(counts.get(s, 0) for s in ATTENTION)
    elif query.status is not None:
        total = counts.get(query.status, 0)
    else:
        total = sum(counts.values()) + max(0, unknown)
    offset = start - first
    return ListPage(merged[offset:offset + size], total, counts, len(hot),
                    by_version if versions else None)
