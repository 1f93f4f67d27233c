"""Internal message helpers: splitting a history, choosing the verbatim window, rendering."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, ToolMessage

from .schemas import SUMMARY_MESSAGE_ID, TokenCounter


@dataclass(frozen=True)
class Split:
    """A history cut into leading system prompt, summary message and conversation body."""

    system: BaseMessage | None
    summary: BaseMessage | None
    body: list[BaseMessage]
    summary_in_place: bool


def split_history(messages: Sequence[BaseMessage]) -> Split:
    """Separate the leading system prompt and the summary message from the conversation.

    The leading system prompt is ``messages[0]`` when it is a ``SystemMessage`` that is not
    the summary. The summary message is found by its stable id anywhere in the history;
    ``summary_in_place`` says whether exactly one sits right after the system prompt.
    """
    start = 0
    system: BaseMessage | None = None
    if messages and isinstance(messages[0], SystemMessage):
        if messages[0].id != SUMMARY_MESSAGE_ID:
            system = messages[0]
            start = 1
    positions = [i for i, m in enumerate(messages) if m.id == SUMMARY_MESSAGE_ID]
    summary = messages[positions[0]] if positions else None
    body = [m for m in messages[start:] if m.id != SUMMARY_MESSAGE_ID]
    return Split(system, summary, body, positions == [start])


def window_start(
    body: Sequence[BaseMessage],
    counter: TokenCounter,
    *,
    keep_tokens: int | None,
    keep_last: int | None,
    start_on: str | None = None,
) -> int:
    """Return the index of the first message of ``body`` that is kept verbatim.

    The window is the last ``keep_last`` messages and/or the longest tail of at most
    ``keep_tokens`` tokens (the shorter of the two when both are given). The last message
    is always kept. The start then moves back over ``ToolMessage``s so that an
    ``AIMessage`` with ``tool_calls`` stays with all of its tool results (the window may
    therefore be larger than asked for). With ``start_on`` (a message type such as
    ``"human"``) the start then moves forward to the next message of that type inside the
    window, or, when the window holds none, back to the previous one (so the window may
    again be larger than asked for).
    """
    if not body:
        return 0
    start = 0
    if keep_last is not None:
        start = max(start, len(body) - keep_last)
    if keep_tokens is not None:
        used = 0
        tail = len(body)
        for i in range(len(body) - 1, -1, -1):
            used += counter([body[i]])
            if used > keep_tokens:
                break
            tail = i
        start = max(start, tail)
    start = min(start, len(body) - 1)
    while start > 0 and isinstance(body[start], ToolMessage):
        start -= 1
    return align_start(body, start, start_on)


def align_start(body: Sequence[BaseMessage], start: int, start_on: str | None) -> int:
    """Move ``start`` onto a message of type ``start_on``: forward if one follows, else back.

    Returns ``start`` unchanged when ``start_on`` is ``None`` or ``body`` has no message of
    that type. A message of type ``"human"`` never sits inside a tool-call group, so the
    result stays pair-safe.
    """
    if start_on is None or not body:
        return start
    for i in range(start, len(body)):
        if body[i].type == start_on:
            return i
    for i in range(min(start, len(body) - 1), -1, -1):
        if body[i].type == start_on:
            return i
    return start


def _boundaries(body: Sequence[BaseMessage], start_on: str | None) -> list[int]:
    """Indexes where a kept window may begin without splitting a tool-call group."""
    out = []
    for i, message in enumerate(body):
        if isinstance(message, ToolMessage):
            continue
        if start_on is not None and message.type != start_on:
            continue
        out.append(i)
    return out


def fit_window(
    head: Sequence[BaseMessage],
    body: Sequence[BaseMessage],
    counter: TokenCounter,
    budget: int,
    start_on: str | None,
) -> int:
    """Return the earliest start of ``body`` such that ``head + body[start:]`` fits ``budget``.

    Only pair-safe starts (not a ``ToolMessage``; of type ``start_on`` when given) are
    considered, and the whole list is counted at once (``counter`` need not be additive).
    When even the last such start does not fit, that start is returned (the result is then
    over budget: a single turn larger than the budget is never cut in half). When ``body``
    has no such start at all, ``len(body) - 1`` (or ``0`` for an empty body) is returned.
    """
    starts = _boundaries(body, start_on)
    if not starts:
        starts = _boundaries(body, None) or [max(0, len(body) - 1)]
    lo, hi = 0, len(starts) - 1
    found = starts[-1]
    while lo <= hi:  # suffix tokens shrink as the start moves right: binary search
        mid = (lo + hi) // 2
        if counter([*head, *body[starts[mid] :]]) <= budget:
            found = starts[mid]
            hi = mid - 1
        else:
            lo = mid + 1
    return found


def pinned_start(
    head: Sequence[BaseMessage],
    body: Sequence[BaseMessage],
    counter: TokenCounter,
    budget: int,
    start: int,
    start_on: str,
) -> tuple[int, int] | None:
    """Fallback window when no ``start_on`` start of ``body`` fits ``budget``.

    Keeps the last ``start_on`` message before ``start`` (the *anchor*, e.g. the question
    that opened a long agent turn) followed by the pair-safe tail ``body[start:]``; the
    messages between them are folded. ``start`` is first moved back off ``ToolMessage``s,
    then forward (to pair-safe starts only) until ``head + anchor + tail`` fits ``budget``
    (or only the last tool-call group or message is left, which is kept whole).

    Returns:
        ``(anchor, start)``, or ``None`` when there is no ``start_on`` message before the
        tail or nothing lies between the anchor and the tail.
    """
    while start > 0 and isinstance(body[start], ToolMessage):
        start -= 1
    anchor = next((i for i in range(start - 1, -1, -1) if body[i].type == start_on), None)
    if anchor is None:
        return None
    pinned = [*head, body[anchor]]
    if counter([*pinned, *body[start:]]) > budget:
        rest = body[anchor + 1 :]
        start = max(start, anchor + 1 + fit_window(pinned, rest, counter, budget, None))
    if start <= anchor + 1:
        return None
    return anchor, start


def content_text(content: str | list[str | dict[Any, Any]]) -> str:
    """Flatten message content to text; non-text blocks become placeholders like ``[image]``.

    Base64 payloads and URLs of images, audio or files are never copied into the text.
    """
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
            continue
        kind = str(block.get("type", "unknown"))
        if kind == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif kind.startswith("image"):
            parts.append("[image]")
        else:
            parts.append(f"[{kind}]")
    return "\n".join(p for p in parts if p)


_ROLES = {"human": "User", "ai": "Assistant", "system": "System", "tool": "Tool result"}


def render_messages(messages: Sequence[BaseMessage]) -> str:
    """Render messages as ``Role: text`` lines for the summary prompt.

    Tool calls of an ``AIMessage`` are written out with their JSON arguments, and tool
    results carry the tool name, so the summary can mention what was looked up.
    """
    lines: list[str] = []
    for message in messages:
        role = _ROLES.get(message.type, message.type.capitalize())
        if isinstance(message, ToolMessage) and message.name:
            role = f"Tool result ({message.name})"
        text = content_text(message.content).strip()
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                args = json.dumps(call["args"], sort_keys=True, default=str)
                text += f"\n[called tool {call['name']} with {args}]"
        lines.append(f"{role}: {text.strip()}")
    return "\n".join(lines)
