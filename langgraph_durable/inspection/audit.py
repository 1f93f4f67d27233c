"""The audit log of the operators' actions on threads (answering an interrupt, a retry, a
run of a fork, from the dashboard or the CLI): one MongoDB document per action in the
saver's database, collection ``<collection_prefix>audit`` (``Collections.audit``, its
index ``thread_at`` made by ``setup()``, thread_id first as every collection's shard
key). Nothing else is read or written here.

A document: ``thread_id``, ``at`` (UTC datetime the action was asked), ``who`` (the
dashboard token's identity, ``who_of_token``, or the CLI's ``user@host``), ``via``
(``"dashboard"`` or ``"cli"``), ``action`` (``resume``, ``retry``, ``run``), ``graph``
(the name of the graph run), ``input`` (JSON text of what was given: the value and the
interrupt id), ``from_checkpoint`` (the checkpoint the run started from), ``state``
(``queued``, ``running``, ``done``, ``failed``, ``refused``, ``cancelled``), ``result``
(``{"status", "step", "checkpoint_id"}`` of the thread after the run), ``error`` (one
line: the refusal or the run's exception), ``ended`` (UTC datetime)."""

from __future__ import annotations

import datetime
import getpass
import hashlib
import json
import socket
from collections.abc import Mapping
from typing import Any

from bson import ObjectId

STATES = ("queued", "running", "done", "failed", "refused", "cancelled")
"""The states of an audit entry; the last four are final."""

ERROR_CHARS = 500
"""An error is kept as its first line, cut to this many characters."""


def now() -> datetime.datetime:
    """The current time, UTC, at millisecond precision (as MongoDB keeps it)."""
    t = datetime.datetime.now(datetime.timezone.utc)
    return t.replace(microsecond=t.microsecond // 1000 * 1000)


def who_of_token(token: str | None) -> str:
    """The identity recorded for an action through the dashboard: ``"token:<8 hex>"``
    (the first 8 hex digits of the token's SHA-256: names which token acted without
    storing it), ``"local"`` without a token."""
    if not token:
        return "local"
    return "token:" + hashlib.sha256(token.encode()).hexdigest()[:8]


def who_of_cli() -> str:
    """The identity recorded for an action through the CLI: ``cli:<user>@<host>``."""
    try:
        user = getpass.getuser()
    except Exception:  # no user name in this environment
        user = "?"
    return f"cli:{user}@{socket.gethostname()}"


def one_line(exc: BaseException | str) -> str:
    """An error as one line (its type named for an exception), at most ``ERROR_CHARS``."""
    text = exc if isinstance(exc, str) else f"{type(exc).__name__}: {exc}"
    lines = text.strip().splitlines()
    first = lines[0] if lines else text
    return first if len(first) <= ERROR_CHARS else first[: ERROR_CHARS - 3] + "..."


def record(db: Any, collection: str, *, thread_id: str, who: str, via: str, action: str,
           graph: str | None, given: Mapping[str, Any] | None, from_checkpoint: str | None,
           state: str, error: str | None = None) -> str:
    """Insert one entry (``state`` one of ``STATES``) and return its id (hex). ``given``
    is stored as JSON text (any JSON value, keys never interpreted by MongoDB)."""
    if state not in STATES:
        raise ValueError(f"audit state must be one of {', '.join(STATES)}, got {state!r}")
    doc: dict[str, Any] = {
        "thread_id": thread_id, "at": now(), "who": who, "via": via, "action": action,
        "graph": graph, "input": json.dumps(dict(given or {}), ensure_ascii=False),
        "from_checkpoint": from_checkpoint, "state": state, "result": None,
        "error": error, "ended": now() if state in STATES[2:] else None}
    return str(db[collection].insert_one(doc).inserted_id)


def update(db: Any, collection: str, entry_id: str, thread_id: str, *, state: str,
           result: Mapping[str, Any] | None = None, error: str | None = None) -> None:
    """Set an entry's ``state`` (and ``result``, ``error``; ``ended`` when final)."""
    if state not in STATES:
        raise ValueError(f"audit state must be one of {', '.join(STATES)}, got {state!r}")
    fields: dict[str, Any] = {"state": state}
    if result is not None:
        fields["result"] = dict(result)
    if error is not None:
        fields["error"] = error
    if state in STATES[2:]:
        fields["ended"] = now()
    db[collection].update_one({"_id": ObjectId(entry_id), "thread_id": thread_id},
                              {"$set": fields})


def entries(db: Any, collection: str, thread_id: str | None = None,
            limit: int = 100) -> list[dict[str, Any]]:
    """The newest ``limit`` entries (of ``thread_id``, or of every thread), newest first,
    as plain dicts: ``id`` (hex) instead of ``_id``, ``input`` parsed back from JSON."""
    query = {} if thread_id is None else {"thread_id": thread_id}
    out = []
    for doc in db[collection].find(query).sort([("at", -1), ("_id", -1)]).limit(limit):
        doc["id"] = str(doc.pop("_id"))
        try:
            doc["input"] = json.loads(doc.get("input") or "{}")
        except ValueError:
            pass  # shown as stored
        for key in ("at", "ended"):
            when = doc.get(key)
            if isinstance(when, datetime.datetime) and when.tzinfo is None:
                doc[key] = when.replace(tzinfo=datetime.timezone.utc)
        out.append(doc)
    return out
