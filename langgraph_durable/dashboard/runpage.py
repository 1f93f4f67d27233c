"""The thread page's run view, storage panel and retention line (``inspection.runview``,
``inspection.thread_size``, ``DurableSaver.thread_retention``): query arguments, the timeline
page, the size report and the thread's expiry as the templates show them."""

from __future__ import annotations

import datetime
import logging
from typing import Any

from ..inspection import runview, timeline
from ..inspection.thread_size import thread_size

log = logging.getLogger("langgraph_durable.dashboard")


def run_args(query: Any) -> dict[str, Any]:
    """The run view's query arguments: ``before`` (older page), ``step`` (jump to step;
    an integer, else ``ValueError`` naming it), ``all_channels`` (``1``: show internal
    channels)."""
    raw = (query.get("step") or "").strip()
    try:
        step = int(raw) if raw else None
    except ValueError:
        raise ValueError(f"step must be a step number, got {raw!r}") from None
    return {"before": query.get("before") or None, "step": step,
            "all_channels": query.get("all_channels") in ("1", "true", "on")}


def timeline_page(saver: Any, thread_id: str, ns: str, chosen: Any, *,
                  before: str | None = None, step: int | None = None,
                  all_channels: bool = False) -> dict[str, Any]:
    """The thread page's timeline: one page of ``runview.run_view`` (``timeline`` rows,
    ``lanes``, ``paging``)."""
    view = runview.run_view(saver, thread_id, ns, before=before, step=step,
                            all_channels=True, chosen=chosen)  # the page hides them
    rows = view["rows"]
    return {"timeline": rows, "lanes": 1 + max((r["lane"] for r in rows), default=0),
            "paging": {"next_before": view["next_before"], "first": view["first"],
                       "step": view["step"], "all_channels": all_channels,
                       "page_size": runview.PAGE}}


def status_of(latest: Any, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """``timeline.status`` of the namespace's latest checkpoint, its ``next`` with each
    ``Send`` resolved as the run view resolved it (when that row is on the page)."""
    st = timeline.status(latest)
    cid = latest.config["configurable"]["checkpoint_id"]
    for row in rows:
        if row["checkpoint_id"] == cid:
            st["next"] = row["next"]
    return st


def size_view(saver: Any, thread_id: str) -> dict[str, Any]:
    """``inspection.thread_size.thread_size`` as JSON data for the storage panel; on a failure,
    ``{"error": type name}`` (the rest of the page is still shown)."""
    try:
        return thread_size(saver, thread_id).as_dict()
    except Exception as exc:  # by type only: no stored value in the page or the logs
        log.warning("dashboard: the storage report failed: %s", type(exc).__name__)
        return {"error": type(exc).__name__}


def _utc(ms: int | None) -> str | None:
    if ms is None:
        return None
    at = datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc)
    return at.strftime("%Y-%m-%d %H:%M:%SZ")


def retention_view(saver: Any, thread_id: str) -> dict[str, Any]:
    """The thread's retention line: ``policy`` (strategy, default TTL and sweep interval
    in minutes; None without a ``ttl`` option), ``expires`` (UTC text, None: nothing
    expires it), ``minutes_left`` (negative once due), ``ttl`` (its own, minutes),
    ``pinned``, ``held`` (``interrupt``/``pruned``), ``recorded`` (False: no facts, e.g.
    written before the policy); ``{"error": type name}`` on a failure."""
    policy = saver.config.ttl
    out: dict[str, Any] = {"policy": None if policy is None else {
        "strategy": policy.strategy, "default_ttl": policy.default_ttl,
        "sweep_interval_minutes": policy.sweep_interval_minutes}}
    try:
        facts = saver.thread_retention(thread_id)
    except Exception as exc:  # by type only, as the storage panel
        log.warning("dashboard: the retention facts failed: %s", type(exc).__name__)
        return {**out, "error": type(exc).__name__}
    if facts is None:
        return {**out, "recorded": False}
    now_ms = datetime.datetime.now(datetime.timezone.utc).timestamp() * 1000
    left = None if facts.expires_ms is None else (facts.expires_ms - now_ms) / 60_000
    return {**out, "recorded": True, "expires": _utc(facts.expires_ms),
            "minutes_left": None if left is None else round(left, 1),
            "ttl": facts.ttl_minutes, "pinned": facts.pinned, "held": facts.held,
            "last_activity": _utc(facts.last_activity_ms)}
