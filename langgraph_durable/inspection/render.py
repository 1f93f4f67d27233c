"""Pure helpers of the CLI: decoded values as JSON data, short previews, sizes and times,
and the per-channel difference of two checkpoints. Nothing here talks to a server."""

from __future__ import annotations

import base64
import dataclasses
import datetime
import json
from collections.abc import Mapping
from typing import Any

from .strict import NotDecoded

INTERRUPT_CHANNEL = "__interrupt__"
"""LangGraph's channel of interrupt writes."""


def jsonable(value: Any, depth: int = 0) -> Any:
    """``value`` as JSON data: messages and pydantic models as dicts (empty fields
    dropped), dataclasses as dicts, bytes as ``{"$bytes": base64}``, a value the tools
    did not revive as ``{"$not_decoded": "os.system", "reason": "not in the allowlist"}``,
    anything else unknown as ``{"$type": name, "repr": ...}``."""
    if depth > 50:
        return "..."
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, NotDecoded):
        return {"$not_decoded": value.name, "reason": value.reason}
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else repr(value)
    if isinstance(value, (bytes, bytearray)):
        return {"$bytes": base64.b64encode(bytes(value)).decode()}
    if isinstance(value, Mapping):
        return {str(k): jsonable(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=repr) if isinstance(value, (set, frozenset)) else value
        return [jsonable(v, depth + 1) for v in items]
    if isinstance(value, (datetime.datetime, datetime.date)):
        return value.isoformat()
    shape = getattr(value, "shape", None)
    if isinstance(shape, tuple) and not isinstance(value, type):  # DataFrame, ndarray, ...
        out: dict[str, Any] = {"$type": type(value).__name__, "shape": list(shape)}
        columns = getattr(value, "columns", None)
        if columns is not None:
            out["columns"] = [str(c) for c in list(columns)[:50]]
        return out
    dump = getattr(value, "model_dump", None)
    if callable(dump):  # langchain messages, pydantic models
        data = {k: v for k, v in dump().items() if v not in (None, {}, [], "") or k == "content"}
        return jsonable(data, depth + 1)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
        return {"$type": type(value).__name__, **jsonable(fields, depth + 1)}
    slots = getattr(type(value), "__slots__", None)
    if slots:
        return {"$type": type(value).__name__,
                **{s: jsonable(getattr(value, s, None), depth + 1) for s in slots}}
    return {"$type": f"{type(value).__module__}.{type(value).__qualname__}",
            "repr": repr(value)[:500]}


def is_message(value: Any) -> bool:
    """True for a LangChain message (anything with ``type`` and ``content``)."""
    return hasattr(value, "content") and isinstance(getattr(value, "type", None), str)


def preview(value: Any, width: int = 70) -> str:
    """One line describing ``value``: a message list as count and last message, else
    compact JSON cut at ``width`` characters; a value not decoded as its placeholder
    (``<not decoded: os.system (not in the allowlist)>``)."""
    if isinstance(value, NotDecoded):  # recognizable whole, however narrow the room
        return _cut(repr(value), max(width, 100))
    shape = getattr(value, "shape", None)
    if isinstance(shape, tuple) and not isinstance(value, type):
        columns = [str(c) for c in list(getattr(value, "columns", []))]
        cols = f" ({', '.join(columns)})" if columns else ""
        return _cut(f"{type(value).__name__} {'x'.join(map(str, shape))}{cols}", width)
    if isinstance(value, list) and value and all(is_message(m) for m in value):
        last = value[-1]
        return f"{len(value)} messages; last {last.type}: {_cut(_text(last), width - 30)}"
    if is_message(value):
        return f"{value.type}: {_cut(_text(value), width - 10)}"
    return _cut(json.dumps(jsonable(value), ensure_ascii=False, default=str), width)


def _text(message: Any) -> str:
    content = message.content
    text = content if isinstance(content, str) else json.dumps(jsonable(content))
    calls = getattr(message, "tool_calls", None)
    if calls:
        text += " [calls " + ", ".join(c.get("name", "?") for c in calls) + "]"
    return text.replace("\n", " ")


def _cut(text: str, width: int) -> str:
    width = max(width, 10)
    return text if len(text) <= width else text[: width - 1] + "\u2026"


def human_bytes(n: int | float | None) -> str:
    """``1536`` -> ``"1.5 KiB"``; None -> ``"-"``."""
    if n is None:
        return "-"
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{int(size)} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} TiB"  # pragma: no cover


def utc(ts: str | None) -> str:
    """A checkpoint ``ts`` (ISO 8601) as ``YYYY-MM-DD HH:MM:SSZ`` in UTC."""
    if not ts:
        return "-"
    try:
        when = datetime.datetime.fromisoformat(ts)
    except ValueError:
        return ts
    if when.tzinfo is None:
        when = when.replace(tzinfo=datetime.timezone.utc)
    return when.astimezone(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%SZ")


def parse_where(pairs: list[str]) -> dict[str, Any]:
    """``["k=v", ...]`` -> ``{k: v}``; ``v`` is JSON when it parses (``step=3`` is the
    number 3, ``x=true`` a bool), else the text."""
    return parse_pairs(pairs, "--where", "key=value")


def parse_pairs(pairs: list[str], option: str, form: str, *,
                json_only: bool = False) -> dict[str, Any]:
    """``["k=v", ...]`` given with ``option`` -> ``{k: v}``: ``v`` is JSON when it parses,
    else the text (with ``json_only``, not JSON is an error). Raises ``ValueError``
    naming the option, the expected ``form`` and the pair."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"{option} expects {form}, got {pair!r}")
        try:
            out[key] = json.loads(raw)
        except ValueError as exc:
            if json_only:
                raise ValueError(f"{option} {key}: the value is not JSON ({exc})") from None
            out[key] = raw
    return out


# --------------------------------------------------------------------------- diff


def _key(item: Any, position: int) -> str:
    ident = getattr(item, "id", None) if is_message(item) else None
    if ident is None and isinstance(item, Mapping):
        ident = item.get("id")
    return str(ident) if ident is not None else f"#{position}:{_canon(item)}"


def _canon(value: Any) -> str:
    return json.dumps(jsonable(value), sort_keys=True, default=str)


def _label(item: Any) -> str:
    if is_message(item):
        ident = getattr(item, "id", None)
        if ident and len(str(ident)) <= 16:
            return f"{item.type} {ident}"
        return f"{item.type} {_cut(_text(item), 28)!r}"
    return preview(item, 40)


def diff_values(a: Any, b: Any) -> dict[str, Any] | None:
    """How channel value ``a`` became ``b``, or None when equal: for lists (message
    lists included, matched by message id) ``added``/``removed``/``changed`` items; for
    dicts the keys; otherwise ``before``/``after`` previews."""
    if _canon(a) == _canon(b):
        return None
    if isinstance(a, list) and isinstance(b, list):
        ka = {_key(x, i): x for i, x in enumerate(a)}
        kb = {_key(x, i): x for i, x in enumerate(b)}
        kind = "messages" if any(is_message(x) for x in a + b) else "list"
        return {
            "kind": kind,
            "added": [_label(kb[k]) for k in kb if k not in ka],
            "removed": [_label(ka[k]) for k in ka if k not in kb],
            "changed": [_label(kb[k]) for k in kb if k in ka and _canon(ka[k]) != _canon(kb[k])],
            "count": [len(a), len(b)],
        }
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return {
            "kind": "dict",
            "added": sorted(str(k) for k in b if k not in a),
            "removed": sorted(str(k) for k in a if k not in b),
            "changed": sorted(str(k) for k in b if k in a and _canon(a[k]) != _canon(b[k])),
        }
    return {"kind": "value", "before": preview(a, 60), "after": preview(b, 60)}


def diff_channels(a: Mapping[str, Any], b: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Per channel of two checkpoints' ``channel_values``: channels added/removed, and
    ``diff_values`` of those in both; unchanged channels are left out."""
    out = []
    for ch in sorted(set(a) | set(b)):
        if ch not in a:
            out.append({"channel": ch, "change": "added", "after": preview(b[ch], 60)})
        elif ch not in b:
            out.append({"channel": ch, "change": "removed", "before": preview(a[ch], 60)})
        else:
            d = diff_values(a[ch], b[ch])
            if d is not None:
                out.append({"channel": ch, "change": "changed", **d})
    return out


def describe_change(d: Mapping[str, Any]) -> str:
    """One cell of text for a ``diff_channels`` row."""
    if d["change"] == "added":
        return f"new channel: {d['after']}"
    if d["change"] == "removed":
        return f"channel removed (was {d['before']})"
    if d["kind"] == "value":
        return f"{d['before']} -> {d['after']}"
    parts = []
    for what in ("added", "removed", "changed"):
        items = d[what]
        if items:
            shown = ", ".join(items[:4]) + (f", +{len(items) - 4} more" if len(items) > 4 else "")
            parts.append(f"{what} {len(items)} ({shown})")
    if d["kind"] in ("messages", "list"):
        parts.append(f"{d['count'][0]} -> {d['count'][1]} items")
    return "; ".join(parts)


_UNITS_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_duration(text: str) -> float:
    """``"30d"`` -> 2592000.0 seconds: a number with a unit ``s``, ``m``, ``h``, ``d`` or
    ``w`` (a bare number is seconds). Raises ``ValueError`` naming the text otherwise."""
    raw = text.strip().lower()
    unit = raw[-1:] if raw[-1:] in _UNITS_S else "s"
    number = raw[:-1] if raw[-1:] in _UNITS_S else raw
    try:
        value = float(number)
    except ValueError:
        value = -1.0
    if not number or value < 0 or value != value or value == float("inf"):
        raise ValueError(f"expected a duration such as 30d, 12h, 15m or 90s, got {text!r}")
    return value * _UNITS_S[unit]
