"""The thread list read from the thread summaries (``durable/summary_docs.py``): a page is one
indexed query, one count and one ``$group`` of the statuses (``plans.summary_upkeep.
list_page_plan``), plus the threads not flushed yet, summarised from Redis; filters by
status (with counts), metadata ``key=value`` (the CLI's ``--where``), message text and
thread_id, and the "needs attention" view. One poll loop per app (``ListFeed``) serves
every open list: it asks MongoDB what changed since its last look (one indexed find) and
wakes the open lists, each of which sends the browser only the rows that changed."""

from __future__ import annotations

import asyncio
import datetime
import json
import logging
import shlex
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..core.thread_summary import STATUSES
from ..durable import summary_docs as S
from ..inspection import render, versions
from ..plans import thread_list as L

log = logging.getLogger("langgraph_durable.dashboard")

PAGE_SIZE = 50
"""Threads per page of the thread list."""

TICK_S = 5.0
"""Open lists are read again at least this often (seconds) even when nothing changed:
a running thread turns stalled with time alone."""

FILTERS = ("running", "stalled", "interrupted", "error", "done", "ready")
"""The status filters the list offers (with counts), in the order shown."""


@dataclass(frozen=True)
class ListArgs:
    """What a thread list page shows: ``q`` (thread_id contains), ``page`` (from 1),
    ``status`` (a status, ``"attention"`` or None), ``where`` (``key=value`` texts),
    ``search`` (message text contains)."""

    q: str = ""
    page: int = 1
    status: str | None = None
    where: tuple[str, ...] = ()
    search: str = ""

    def query(self) -> S.ListQuery:
        """The summaries' query; raises ``ValueError`` for a ``where`` not ``key=value``
        (``render.parse_where``)."""
        return S.ListQuery(self.status, render.parse_where(list(self.where)), self.search,
                           self.q)

    def params(self, **change: Any) -> dict[str, Any]:
        """The query string of this page with ``change`` (``page``, ``status``...): what
        deep links and the pager keep (empty values left out)."""
        out: dict[str, Any] = {"q": self.q, "status": self.status, "where": list(self.where),
                               "search": self.search, "page": self.page}
        out.update(change)
        return {k: v for k, v in out.items() if v not in (None, "", [], 1) or
                (k == "page" and v != 1)}


def parse_args(params: Any) -> ListArgs:
    """``ListArgs`` of a request's query parameters (``q``, ``page``, ``status``,
    ``where``, repeated or several pairs split as a shell does, ``search``). Raises
    ``ValueError`` naming an unknown status or a ``where`` that is not ``key=value``."""
    try:
        page = max(1, int(params.get("page", "1")))
    except ValueError:
        page = 1
    status = params.get("status") or None
    if status is not None and status not in (*STATUSES, "attention"):
        raise ValueError(f"unknown thread status {status!r}: one of "
                         f"{', '.join(STATUSES)}, attention")
    raw = params.getlist("where") if hasattr(params, "getlist") else [params.get("where", "")]
    where = tuple(p for w in raw for p in shlex.split(w or ""))
    args = ListArgs(params.get("q", ""), page, status, where, params.get("search", ""))
    args.query()  # a where not key=value: ValueError now
    return args


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


def row_of(doc: Mapping[str, Any], now: datetime.datetime) -> dict[str, Any]:
    """One row of the list from a summary (``plans.thread_list.with_status``):
    ``thread_id``, ``status``, ``detail`` (the error's text; the pending interrupts'
    count), ``last``, ``next``, ``step``, ``state_version``, ``age_s`` (seconds since its
    latest checkpoint), ``title``, ``messages``, ``graph``, ``interrupts``, ``errors``,
    ``ts``, ``at_ms``
    (its time, ms since the epoch: the page shows the age from it, so that a row's HTML
    changes only when the thread does)."""
    when = doc.get("at")
    detail = None
    if doc["status"] == "error":
        detail = doc.get("error")
    elif doc["status"] == "interrupted":
        n = int(doc.get("interrupts") or 0)
        detail = f"{n} interrupt{'s' if n != 1 else ''} pending"
    return {"thread_id": doc["thread_id"], "status": doc["status"], "detail": detail,
            "last": list(doc.get("last") or []), "next": list(doc.get("next") or []),
            "step": doc.get("step"), "state_version": doc.get("sv"),
            "age_s": None if when is None else max(0.0, (now - when).total_seconds()),
            "title": doc.get("title"), "messages": doc.get("messages"),
            "graph": doc.get("graph"), "interrupts": doc.get("interrupts") or 0,
            "errors": doc.get("errors") or 0, "ts": doc.get("ts"),
            "at_ms": None if when is None else int(when.timestamp() * 1000)}


def thread_list(saver: Any, args: ListArgs, *,
                running_window_s: float, state_version: int | None = None,
                unversioned_as: int = versions.DEFAULT_UNVERSIONED_AS,
                size: int | None = None, census: L.Census | None = None) -> dict[str, Any]:
    """One page of the thread list (``plans.thread_list.list_page_plan``; blocking; the
    counts from ``census`` when given, the app's, kept up to date by each read). Returns ``{"rows"
    (``row_of``), "total", "page", "pages", "counts" (threads per status answering every
    filter but the status), "attention" (interrupted + error + stalled among them),
    "unflushed", "args" (``ListArgs``), "q", "versions"}``: ``versions`` counts the
    threads older, newer and at ``state_version`` (None without one). ``size``: threads a
    page (default ``PAGE_SIZE``)."""
    size = size or PAGE_SIZE
    now = _now()
    query = args.query()
    result = saver.run(L.list_page_plan(saver.context, query, args.page, size, now=now,
                                        running_window_s=running_window_s,
                                        versions=state_version is not None, census=census))
    pages = max(1, -(-result.total // size))
    counts = result.counts
    found = None
    if state_version is not None and result.versions is not None:
        tally = {"older": 0, "current": 0, "newer": 0}
        for v, n in result.versions.items():
            tally[versions.compare(v, state_version, unversioned_as)] += n
        found = {"current": state_version, "older": tally["older"],
                 "newer": tally["newer"], "same": tally["current"]}
    return {"rows": [row_of(d, now) for d in result.rows], "total": result.total,
            "page": min(args.page, pages), "pages": pages, "counts": counts,
            "attention": sum(counts.get(s, 0) for s in ("interrupted", "error", "stalled")),
            "unflushed": result.unflushed, "args": args, "q": args.q, "versions": found}


@dataclass
class ListFeed:
    """The one poll loop of an app's open thread lists: every ``poll_s`` seconds it asks
    MongoDB which summaries changed since its last look (``census.sync_plan``: one
    indexed find; the census also gives every page its counts) and Redis whether entries
    wait in the outbox (threads not flushed yet, running now); when either says so, or
    ``TICK_S`` passed, it bumps ``version`` and wakes every list waiting in ``wait``.
    Started by the first list that waits, stopped by ``stop``."""

    saver: Any
    poll_s: float
    census: L.Census = field(default_factory=L.Census)
    version: int = 0
    polls: int = 0
    _cond: asyncio.Condition | None = None
    _task: asyncio.Task[None] | None = None
    _last_tick: float = field(default_factory=time.monotonic)

    def _look(self) -> bool:
        changed = self.saver.run(self.census.sync_plan(self.saver.context))
        waiting = self.saver.run(L.unflushed_threads_plan(self.saver.context))
        return bool(changed or waiting)

    async def _loop(self) -> None:
        from starlette.concurrency import run_in_threadpool
        assert self._cond is not None
        while True:
            try:
                moved = await run_in_threadpool(self._look)
            except Exception as exc:  # by type: the lists keep their last rows
                log.warning("dashboard: polling the thread summaries failed: %s",
                            type(exc).__name__)
                moved = False
            self.polls += 1
            if moved or time.monotonic() - self._last_tick >= TICK_S:
                self._last_tick = time.monotonic()
                async with self._cond:
                    self.version += 1
                    self._cond.notify_all()
            await asyncio.sleep(self.poll_s)

    async def wait(self, seen: int, timeout_s: float) -> int:
        """Wait until ``version`` passes ``seen`` (or ``timeout_s`` seconds); returns it.
        Starts the loop on first use (in the running event loop)."""
        if self._cond is None:
            self._cond = asyncio.Condition()
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self._loop())
        async with self._cond:
            if self.version == seen:
                try:
                    await asyncio.wait_for(self._cond.wait_for(lambda: self.version != seen),
                                           timeout_s)
                except asyncio.TimeoutError:
                    pass
            return self.version

    def stop(self) -> None:
        """Cancel the loop (the app's shutdown)."""
        if self._task is not None:
            self._task.cancel()


async def row_events(is_disconnected: Callable[[], Any], feed: ListFeed,
                     read: Callable[[], Any], render_row: Callable[[dict[str, Any]], str],
                     render_empty: Callable[[dict[str, Any]], str]) -> AsyncIterator[str]:
    """The server-sent events of one open list: after each wake of ``feed``, the page is
    read again (``read``, in a worker thread) and an ``rows`` event sends ``changed``
    (thread_id -> the row's HTML, only rows whose HTML changed or that are new), ``order``
    (the page's thread_ids), ``empty`` (the empty page's HTML, when no row), ``total``,
    ``pages``, ``counts``, ``attention`` and ``versions``; nothing when nothing changed
    (a comment every 15 s keeps the stream open)."""
    from starlette.concurrency import run_in_threadpool
    shown: dict[str, str] = {}
    last_meta = None
    seen = -1
    quiet = time.monotonic()
    while not await is_disconnected():
        data = await run_in_threadpool(read)
        html = {r["thread_id"]: render_row(r) for r in data["rows"]}
        changed = {t: h for t, h in html.items() if shown.get(t) != h}
        meta = json.dumps({"total": data["total"], "pages": data["pages"],
                           "counts": data["counts"], "attention": data["attention"],
                           "versions": data["versions"], "order": list(html)})
        if changed or meta != last_meta:
            body = {**json.loads(meta), "changed": changed,
                    "empty": "" if html else render_empty(data)}
            shown, last_meta, quiet = html, meta, time.monotonic()
            yield f"event: rows\ndata: {json.dumps(body)}\n\n"
        elif time.monotonic() - quiet >= 15:
            quiet = time.monotonic()
            yield ": ping\n\n"
        seen = await feed.wait(seen, 15.0)
