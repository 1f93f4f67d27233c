"""The thread summary (sans-I/O): one document per thread in ``<collection_prefix>threads``
holding what the thread list shows and filters on, so a page of it is one indexed query
whatever the tier. Kept by the flusher (``plans/summaries.py``), refreshed by deletes,
rebuilt by ``langgraph-durable threads --rebuild-summary``.

The document of a thread (its root namespace's latest checkpoint; subgraph namespaces do
not count):

- ``_id`` ``doc_id(thread_id)``, ``thread_id`` (the shard key), ``v`` (schema version);
- ``cid``, ``ts``, ``at``: the latest root checkpoint's id, ``ts`` text and ``ts`` as a
  UTC datetime (None when unreadable);
- ``step``, ``source``, ``graph`` (``lgd_graph``), ``sv`` (``lgd_state_version``),
  ``md`` (its top-level scalar metadata, for ``key=value`` filters);
- ``next``, ``last``: the nodes it triggers and the node(s) that ran last;
- ``pw_cid``, ``pw``: the pending writes on the error and interrupt channels of checkpoint
  ``pw_cid`` (``{"<task_id>~<idx>": {"c": channel, "n": values, "e": error text}}``);
  ``errors``, ``interrupts``, ``error``: what they count and say when ``pw_cid`` is
  ``cid``;
- ``state``: ``core.thread_summary.state_of`` (``active`` is running or stalled,
  decided when read by ``at``);
- ``messages`` (count of the ``messages`` channel), ``title`` (the first human message,
  trimmed), ``recent`` (``[id, text]`` of the latest messages), ``text`` (the title and
  their text, lower case, for search);
- ``stale`` (present when a flush round could not decode the checkpoint: only ``cid``
  and ``at`` are new; a reader with the serializer refreshes it);
- ``rev`` (bumped by every change: the writers' optimistic-concurrency guard) and ``u``
  (microseconds of the writer's clock, increasing: when it last changed, what a reader's
  census asks for).

Facts a round cannot know are kept from the document before (``merge``), and a round
never moves ``cid`` backwards: a round of an older checkpoint leaves it.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..core.records import checkpoint_time_s
from ..core.schema import SCHEMA_VERSION
from ..core.thread_summary import (
    ERROR_CHANNEL,
    INTERRUPT_CHANNEL,
    parse_ts,
    short,
    state_of,
)
from .documents import doc_id

TITLE_CHARS = 120
"""Characters of the first human message kept as a thread's title."""

TEXT_CHARS = 2000
"""Characters of message text kept for search (the title, then the latest messages)."""

TEXT_MESSAGES = 6
"""The latest messages whose text is kept for search."""

ERROR_CHARS = 300
"""Characters of an error's text kept."""

WRITE_CHANNELS = frozenset({ERROR_CHANNEL, INTERRUPT_CHANNEL})
"""Pending-write channels a summary keeps."""


def summary_id(thread_id: str) -> str:
    """``_id`` of ``thread_id``'s summary."""
    return doc_id(thread_id)


@dataclass
class Facts:
    """What one source (a flush round, or a read of the thread's latest checkpoint) knows
    of a thread's root namespace. ``cid`` None: it knows no checkpoint, only ``writes``.

    Attributes:
        cid, ts, step, source, graph, sv, md, next, last: of the latest root checkpoint.
        writes: ``{checkpoint_id: {"<task_id>~<idx>": {"c", "n", "e"}}}``, pending writes
            on ``WRITE_CHANNELS`` (``write_fact``).
        messages: the ``messages`` channel's length at ``cid`` (None: not known here).
        title: the first human message's text (None: not known here).
        recent: ``[message id, text]`` of the latest messages (None: not known here).
        appended: ``recent`` holds only the messages added (a flush round holding the
            newest items alone): ``merge`` appends them to the ones kept, by id.
        whole: the facts are the thread's whole state at ``cid`` (a read of the latest
            checkpoint with its pending writes): ``merge`` replaces, never keeps, writes.
        stale: the source could not decode what it holds (a flusher without the
            application's serializer, an encrypted or external value): only ``cid`` is
            known; the summary is marked ``stale`` until a reader that can decode
            refreshes it (the thread list does, for the rows it shows).
    """

    cid: str | None = None
    ts: str | None = None
    step: Any = None
    source: Any = None
    graph: Any = None
    sv: Any = None
    md: dict[str, Any] = field(default_factory=dict)
    next: list[str] = field(default_factory=list)
    last: list[str] = field(default_factory=list)
    writes: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)
    messages: int | None = None
    title: str | None = None
    recent: list[list[str]] | None = None
    appended: bool = False
    whole: bool = False
    stale: bool = False


def write_key(task_id: str, idx: int) -> str:
    """The field of a pending write in ``pw`` (no dot, no leading ``$``)."""
    return f"{task_id}~{idx}".replace(".", "_").lstrip("$")


def write_fact(channel: str, values: list[Any], error_text: str | None) -> dict[str, Any]:
    """One pending write's fact: channel ``c``, ``n`` values (a task's interrupts), error
    text ``e`` (None unless an error)."""
    return {"c": channel, "n": len(values),
            "e": None if error_text is None else short(error_text, ERROR_CHARS)}


def _scalar(v: Any) -> bool:
    return v is None or isinstance(v, (str, bool, int, float))


def metadata_facts(md: Mapping[str, Any]) -> dict[str, Any]:
    """The top-level scalar entries of checkpoint metadata (what ``key=value`` filters
    match), keys holding no ``.`` nor leading ``$``."""
    return {k: v for k, v in md.items() if isinstance(k, str) and _scalar(v)
            and "." not in k and not k.startswith("$") and
            not (isinstance(v, int) and not isinstance(v, bool) and abs(v) >= 2 ** 63)}


def merge(thread_id: str, prev: Mapping[str, Any] | None, facts: Facts,
          stamp: int) -> dict[str, Any] | None:
    """The summary document of ``thread_id`` after ``facts``, from ``prev`` (its document,
    None: none yet); None when nothing changes (a replayed round). A checkpoint older than
    ``prev``'s is ignored (a round of an older checkpoint finishing late); writes of an
    older checkpoint too. ``rev`` is ``prev``'s plus one, ``u`` is ``stamp`` (the writer's
    clock, microseconds, increasing)."""
    doc: dict[str, Any] = dict(prev) if prev else {
        "_id": summary_id(thread_id), "thread_id": thread_id, "rev": 0, "pw": {},
        "pw_cid": None, "cid": None}
    cur = doc.get("cid") or ""
    if facts.stale:
        if facts.cid is not None and facts.cid >= cur and (
                facts.cid != cur or not doc.get("state")):
            made = checkpoint_time_s(facts.cid)
            doc.update(cid=facts.cid, stale=True, at=None if made is None else _bson_time(
                datetime.datetime.fromtimestamp(made, tz=datetime.timezone.utc)))
    elif facts.cid is not None and (facts.whole or facts.cid >= cur):
        doc.pop("stale", None)
        new = facts.cid != doc.get("cid")
        doc.update(cid=facts.cid, ts=facts.ts, at=_bson_time(parse_ts(facts.ts)),
                   step=facts.step,
                   source=facts.source, graph=facts.graph, sv=facts.sv, md=facts.md,
                   next=list(facts.next), last=list(facts.last))
        if facts.whole:
            doc.update(pw_cid=facts.cid, pw=facts.writes.get(facts.cid, {}))
        elif new and doc.get("pw_cid") != facts.cid:
            doc.update(pw_cid=facts.cid, pw={})
        if facts.messages is not None or facts.whole:
            doc["messages"] = facts.messages
        if facts.whole or (facts.title and not doc.get("title")):
            doc["title"] = facts.title
        if facts.recent is not None or facts.whole:
            recent = facts.recent or []
            if facts.appended:
                ids = {i for i, _t in recent}
                recent = [r for r in doc.get("recent") or [] if r[0] not in ids] + recent
            doc["recent"] = [list(r) for r in recent[-TEXT_MESSAGES:]]
        doc["text"] = searchable(doc.get("title"), [t for _i, t in doc.get("recent") or []])
    if not facts.whole:
        for cid, writes in sorted(facts.writes.items()):
            if cid == doc.get("pw_cid"):
                doc["pw"] = {**doc.get("pw", {}), **writes}
            elif cid > (doc.get("pw_cid") or "") and cid >= (doc.get("cid") or ""):
                doc.update(pw_cid=cid, pw=dict(writes))  # ahead of its checkpoint
    shown = doc["pw"] if doc.get("pw_cid") == doc.get("cid") else {}
    errors = [w for _k, w in sorted(shown.items()) if w["c"] == ERROR_CHANNEL]
    doc["errors"] = len(errors)
    doc["interrupts"] = sum(w["n"] for w in shown.values() if w["c"] == INTERRUPT_CHANNEL)
    doc["error"] = errors[-1]["e"] if errors else None
    doc["state"] = (state_of(doc["errors"], doc["interrupts"], doc.get("next") or [],
                             doc.get("source")) if doc.get("cid") else None)
    doc["v"] = SCHEMA_VERSION
    if prev is not None and _same(prev, doc):
        return None
    doc["rev"] = int(doc.get("rev") or 0) + 1
    doc["u"] = stamp
    return doc


def _bson_time(when: datetime.datetime | None) -> datetime.datetime | None:
    """``when`` as MongoDB stores it: to the millisecond."""
    return None if when is None else when.replace(microsecond=when.microsecond // 1000 * 1000)


def _plain(v: Any) -> Any:
    # MongoDB gives datetimes back naive (UTC)
    if isinstance(v, datetime.datetime) and v.tzinfo is not None:
        return v.astimezone(datetime.timezone.utc).replace(tzinfo=None)
    return v


def _same(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    skip = {"rev", "u"}
    return ({k: _plain(v) for k, v in a.items() if k not in skip}
            == {k: _plain(v) for k, v in b.items() if k not in skip})


def guard(doc: Mapping[str, Any], prev: Mapping[str, Any] | None) -> dict[str, Any]:
    """The filter of the upsert writing ``doc`` over ``prev``: its ``_id``, the shard key
    and ``prev``'s ``rev`` (``-1``: no document before), so that a writer that read an
    older revision fails with a duplicate key instead of overwriting a newer one."""
    return {"_id": doc["_id"], "thread_id": doc["thread_id"],
            "rev": -1 if prev is None else prev.get("rev")}


# --------------------------------------------------------------------------- queries


@dataclass(frozen=True)
class ListQuery:
    """What a page of the thread list asks for.

    Attributes:
        status: one of ``core.thread_summary.STATUSES``, ``"attention"`` (interrupted,
            error and stalled, oldest first) or None (every thread, newest first).
        where: metadata ``key=value`` filters (``render.parse_where``'s output): each
            top-level metadata entry equal to the value.
        search: text the title or the latest messages contain (case-insensitive).
        q: text the thread_id contains (case-insensitive).
    """

    status: str | None = None
    where: Mapping[str, Any] = field(default_factory=dict)
    search: str = ""
    q: str = ""

    @property
    def oldest_first(self) -> bool:
        """The "needs attention" view lists the oldest first (else the newest first; then
        by thread_id)."""
        return self.status == "attention"


def list_filter(query: ListQuery) -> dict[str, Any]:
    """The MongoDB filter of ``query``'s metadata, text and thread_id conditions (all of
    them; its status is decided when read, ``plans/thread_list.py``)."""
    parts: list[dict[str, Any]] = [{f"md.{key}": value} for key, value in query.where.items()]
    if query.search.strip():
        parts.append({"text": {"$regex": re.escape(query.search.strip().lower())}})
    if query.q.strip():
        parts.append({"thread_id": {"$regex": re.escape(query.q.strip()), "$options": "i"}})
    return {} if not parts else parts[0] if len(parts) == 1 else {"$and": parts}


def matches(doc: Mapping[str, Any], query: ListQuery, status: str) -> bool:
    """Whether a summary ``doc`` whose status is ``status`` answers ``query`` (as
    ``list_filter`` selects in MongoDB: for summaries of threads MongoDB lacks yet)."""
    if query.status == "attention":
        if status not in ("interrupted", "error", "stalled"):
            return False
    elif query.status is not None and status != query.status:
        return False
    md = doc.get("md") or {}
    if any(key not in md or md[key] != value for key, value in query.where.items()):
        return False
    if query.search.strip() and query.search.strip().lower() not in (doc.get("text") or ""):
        return False
    return not (query.q.strip() and query.q.strip().lower() not in doc["thread_id"].lower())


def searchable(title: str | None, texts: Iterable[str]) -> str:
    """The ``text`` kept for search: the title and ``texts`` (the latest messages'), one
    line, lower case, at most ``TEXT_CHARS`` characters."""
    joined = " ".join([title or "", *texts])
    return " ".join(joined.split()).lower()[:TEXT_CHARS]
