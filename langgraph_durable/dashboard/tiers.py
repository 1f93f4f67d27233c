"""The tiers page: outbox, flushers, dead letters, Redis memory, MongoDB sizes, and the
flush lag over the last hour (sampled by the dashboard while it runs)."""

from __future__ import annotations

import collections
import threading
import time
from typing import Any

import redis.exceptions

from ..inspection import health, storage
from ..outbox.group import dead_letter_key

WINDOW_S = 3600.0
"""How far back the flush-lag plot reaches (seconds)."""

DEAD_LETTERS_SHOWN = 20
"""Newest dead letters listed (entry id, thread_id, error; no stored value)."""


class LagSamples:
    """The flush lag (age of the oldest unflushed outbox entry, seconds; 0 when the
    outbox is empty) and the outbox length, sampled every ``every_s`` seconds by
    whoever calls ``maybe_sample`` (the app's sampler task), kept for ``window_s``."""

    def __init__(self, every_s: float = 10.0, window_s: float = WINDOW_S) -> None:
        self.every_s, self.window_s = every_s, window_s
        self._points: collections.deque[tuple[float, float, int]] = collections.deque()
        self._lock = threading.Lock()
        self._last = 0.0

    def add(self, at: float, lag_s: float, length: int) -> None:
        """Record one sample taken at ``at`` (UNIX seconds); drops those out of the window."""
        with self._lock:
            self._points.append((at, lag_s, length))
            while self._points and self._points[0][0] < at - self.window_s:
                self._points.popleft()
            self._last = at

    def due(self, now: float) -> bool:
        """Whether a sample is due at ``now``."""
        return now - self._last >= self.every_s

    def points(self) -> list[tuple[float, float, int]]:
        """``(at, lag_s, length)`` samples, oldest first."""
        with self._lock:
            return list(self._points)


def sample(saver: Any, samples: LagSamples,
           options: health.HealthOptions | None = None) -> None:
    """Read the outbox once and record its lag and length in ``samples``; judge the
    health (``inspection.health.check`` with ``options``) and record its value in the
    saver's metrics (the ``langgraph_durable.health`` gauge)."""
    out = storage.outbox_status(saver.context, saver.sync_clients.redis)
    samples.add(time.time(), float(out["oldest_age_s"] or 0.0), int(out["length"]))
    record_health(saver, health.check(saver.context, saver.sync_clients, options).value)


def record_health(saver: Any, value: int) -> None:
    """Give the verdict's ``value`` (0, 1, 2) to the saver's metrics (``metrics.Metrics.
    health``), when it has a runtime with metrics."""
    runtime = getattr(saver, "runtime", None)
    metrics = getattr(runtime, "metrics", None)
    if metrics is not None:
        metrics.health(value)


def _text(v: Any) -> str:
    return v.decode(errors="replace") if isinstance(v, bytes) else str(v)


def dead_letters(saver: Any, n: int = DEAD_LETTERS_SHOWN) -> list[dict[str, str]]:
    """The newest ``n`` dead letters: ``id`` (of the dead letter), ``entry`` (the outbox
    entry it was), ``thread`` and ``error`` (its type and message); none when the
    dead-letter stream holds another type (``storage.outbox_status`` names it)."""
    r = saver.sync_clients.redis
    out = []
    try:
        newest = r.xrevrange(dead_letter_key(saver.context), "+", "-", count=n)
    except redis.exceptions.ResponseError as exc:
        if not str(exc).startswith("WRONGTYPE"):
            raise
        return []
    for eid, fields in newest:
        f = {_text(k): _text(v) for k, v in fields.items()}
        out.append({"id": _text(eid), "entry": f.get("entry", ""),
                    "thread": f.get("thread", ""), "error": f.get("error", "")})
    return out


def tiers_data(saver: Any, samples: LagSamples | None = None,
               options: health.HealthOptions | None = None) -> dict[str, Any]:
    """Every figure of the tiers page, as JSON data: ``key_prefix``, ``database``,
    ``outbox`` (``storage.outbox_status``: length, pending, consumers with idle times
    and heartbeats, oldest entry's age), ``dead_letters`` (newest), ``hot``
    (``storage.hot_memory``), ``durable`` (``storage.durable_sizes``), ``lag`` (the
    samples of the last hour: ``[at, lag_s, length]``), ``down`` (a tier that did not
    answer: its error), ``health`` (``inspection.health``'s verdict with ``options``:
    ``verdict``, ``value``, ``reasons``)."""
    ctx, clients = saver.context, saver.sync_clients
    data: dict[str, Any] = {"key_prefix": ctx.config.key_prefix,
                            "database": ctx.config.database, "down": {}}
    facts: dict[str, Any] = {}

    def redis_part() -> dict[str, Any]:
        part = {"outbox": storage.outbox_status(ctx, clients.redis),
                "dead_letters": dead_letters(saver),
                "hot": storage.hot_memory(ctx, clients.redis)}
        facts["redis"] = health.redis_facts(ctx, clients.redis)
        return part

    def mongodb_part() -> dict[str, Any]:
        part = {"durable": storage.durable_sizes(ctx, clients.db)}
        facts["mongodb"] = health.mongodb_facts(ctx, clients.db)
        return part

    for tier, part in (("redis", redis_part), ("mongodb", mongodb_part)):
        try:  # a tier that does not answer is reported; the other is still shown
            data.update(part())
        except Exception as exc:  # noqa: BLE001 - shown on the page, named by tier
            data["down"][tier] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
    data["health"] = health.judge(ctx, down=data["down"], outbox=data.get("outbox"),
                                  redis=facts.get("redis"), mongodb=facts.get("mongodb"),
                                  options=options).as_dict()
    record_health(saver, data["health"]["value"])
    data["lag"] = [list(p) for p in (samples.points() if samples else [])]
    return data


def lag_plot(points: list[list[Any]], width: int = 640, height: int = 160,
             window_s: float = WINDOW_S) -> dict[str, Any]:
    """The flush-lag samples as an SVG polyline (drawn server-side: no chart library):
    ``points`` (``"x,y ..."``; x spans the samples' time, at most ``window_s``), ``max_s``
    (the y axis' top, at least 1 s), ``span_s`` (the x axis, seconds), ``width``,
    ``height``, ``n`` (samples)."""
    if not points:
        return {"points": "", "max_s": 0.0, "span_s": 0.0, "width": width, "height": height,
                "n": 0}
    end = points[-1][0]
    span = min(window_s, max(end - points[0][0], 1.0))
    top = max(1.0, max(p[1] for p in points))
    xy = []
    for at, lag, _n in points:
        x = width * (1 - (end - at) / span)
        y = height - (height - 20) * lag / top
        xy.append(f"{x:.1f},{y:.1f}")
    return {"points": " ".join(xy), "max_s": top, "span_s": span, "width": width,
            "height": height, "n": len(points)}
