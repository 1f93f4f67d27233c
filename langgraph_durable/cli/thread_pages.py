"""``langgraph-durable threads`` read from the thread summaries (``durable/summary_docs.py``):
a page of threads by status, metadata, message text or "needs attention" in one indexed
query (plus the threads not flushed yet, summarised from Redis), and the rebuild of the
summaries for data written without them (``--rebuild-summary``)."""

from __future__ import annotations

import datetime
from typing import Any

from rich.markup import escape
from rich.table import Table

from ..dashboard.listing import ListArgs, row_of
from ..durable.summary_docs import ListQuery
from ..inspection import render, timeline, versions
from ..plans import summary_upkeep as P
from ..plans import thread_list as L
from .session import console, echo_json

REBUILD_BATCH = 200
"""Threads a rebuild reads and writes per batch (one ``list_threads`` page)."""


def summary_rows(saver: Any, args: ListArgs, limit: int) -> dict[str, Any]:
    """Page ``args.page`` of ``limit`` threads from the summaries
    (``plans.thread_list.list_page_plan``): ``{"threads": rows (``listing.row_of``),
    "total", "page", "pages", "counts"}``."""
    now = datetime.datetime.now(datetime.timezone.utc)
    query: ListQuery = args.query()
    found = saver.run(L.list_page_plan(saver.context, query, args.page, limit, now=now,
                                       running_window_s=timeline.RUNNING_WINDOW_S))
    return {"threads": [row_of(d, now) for d in found.rows], "total": found.total,
            "page": args.page, "pages": max(1, -(-found.total // limit)),
            "counts": found.counts}


def print_summary_rows(data: dict[str, Any], as_json: bool) -> None:
    """``summary_rows``'s answer as JSON or as a table (thread, status, step, last node,
    state version, age, title, messages)."""
    if as_json:
        echo_json({**data, "threads": [{k: render.jsonable(v) for k, v in r.items()}
                                       for r in data["threads"]]})
        return
    rows = data["threads"]
    table = Table(title=f"threads ({len(rows)} of {data['total']}, page {data['page']} of "
                        f"{data['pages']})")
    for col, just in (("thread", "left"), ("status", "left"), ("step", "right"),
                      ("last node", "left"), ("state", "right"), ("age", "right"),
                      ("title", "left"), ("messages", "right")):
        table.add_column(col, justify=just)  # type: ignore[arg-type]
    for r in rows:  # thread ids, node names, error and message text: never rich markup
        status = r["status"] + (f" ({r['detail']})" if r["detail"] else "")
        table.add_row(escape(r["thread_id"]), escape(status),
                      "-" if r["step"] is None else escape(str(r["step"])),
                      escape(", ".join(r["last"]) or "-"),
                      escape(versions.shown(r["state_version"])), _age(r["age_s"]),
                      escape((r["title"] or "")[:60]),
                      "-" if r["messages"] is None else str(r["messages"]))
    console().print(table)
    counts = ", ".join(f"{s} {n}" for s, n in data["counts"].items())
    console().print(f"by status: {counts}", highlight=False)


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    s = int(seconds)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= size:
            return f"{s // size}{unit}"
    return f"{s}s"


def rebuild(saver: Any, after: str | None, batch: int = REBUILD_BATCH,
            limit: int | None = None) -> tuple[int, str | None]:
    """Write the summary of every thread with ``thread_id`` above ``after`` (None: from
    the first), ``batch`` threads at a time (``list_threads`` pages, then
    ``plans.summary_upkeep.refresh_plan``), at most ``limit`` threads (None: all); each batch
    prints its count and the last thread_id done (pass it as ``after`` to resume).
    A thread whose records are damaged keeps its summary and is named on stderr (the
    others go on). Returns the threads done and the last thread_id (None: none)."""
    done, last, cursor = 0, after, after
    while limit is None or done < limit:
        size = batch if limit is None else min(batch, limit - done)
        page = saver.list_threads(limit=size, cursor=cursor)
        ids = [t.thread_id for t in page.threads]
        if not ids:
            break
        damaged: dict[str, str] = {}
        saver.run(P.refresh_plan(saver.context, ids, damaged))
        for tid, error in damaged.items():
            console(stderr=True).print(f"not summarised (damaged records): {tid!r}: {error}",
                                       highlight=False, markup=False)
        done += len(ids)
        last = ids[-1]
        console().print(f"summarised {done} thread(s); last {last!r} "
                        f"(resume: --rebuild-summary --after {last})", highlight=False,
                        markup=False)
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    return done, last
