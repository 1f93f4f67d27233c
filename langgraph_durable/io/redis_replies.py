"""Redis replies in the shape plans see them, whatever the protocol (RESP2 or RESP3):
a hash is a ``dict`` of bytes, a stream entry a ``(id, {field: value})`` pair."""

from __future__ import annotations

from typing import Any

from ..core.ops import Pipeline, StreamEntry


def _pairs(raw: Any) -> dict[bytes, bytes]:
    """A Redis hash reply (RESP3 map or RESP2 flat list) as a dict."""
    if raw is None:
        return {}
    if isinstance(raw, dict):
        return dict(raw)
    return dict(zip(raw[::2], raw[1::2]))


def _entries(raw: Any) -> list[StreamEntry]:
    return [(eid, _pairs(fields)) for eid, fields in raw or []]


def normalise(command: str, reply: Any) -> Any:
    """One Redis reply in the shape plans see, whatever the protocol:
    ``HGETALL`` -> ``dict``; ``XREADGROUP``/``XREAD`` -> ``list[StreamEntry]`` (the first
    stream's; ``[]`` for none); ``XAUTOCLAIM`` -> ``list[StreamEntry]`` (the claimed
    entries); ``XRANGE``/``XREVRANGE`` -> ``list[StreamEntry]``; ``HSCAN`` -> ``(cursor,
    dict)``; others unchanged."""
    if isinstance(reply, Exception):
        return reply
    if command == "HGETALL":
        return _pairs(reply)
    if command in ("XREADGROUP", "XREAD"):
        if not reply:
            return []
        if isinstance(reply, dict):  # RESP3: {stream: [entries]} (or [[entries]])
            first = next(iter(reply.values()))
            if first and isinstance(first[0], list) and first[0] and isinstance(
                    first[0][0], (list, tuple)):
                first = first[0]
            return _entries(first)
        return _entries(reply[0][1])
    if command == "XAUTOCLAIM":
        return _entries(reply[1]) if reply else []
    if command in ("XRANGE", "XREVRANGE"):
        return _entries(reply)
    if command == "HSCAN":
        return (reply[0], _pairs(reply[1]))
    return reply


def pipeline_replies(op: Pipeline, replies: list[Any]) -> list[Any]:
    """Each reply of ``op``'s commands ``normalise``d (an error reply left as it is)."""
    return [normalise(str(cmd[0]).upper(), r) for cmd, r in zip(op.commands, replies)]
