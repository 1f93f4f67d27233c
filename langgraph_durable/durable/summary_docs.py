"""The thread summary (sans-I/O): one document per thread in ``<collection_prefix>threads``
holding what the thread list shows and filters on, so a page of it is one indexed query
whatever the tier. Kept by the flusher (``plans/summary_upkeep.py``), refreshed by deletes,
rebuilt by ``langgraph-durable threads --rebuild-summary``.

The document of a thread (its root namespace's latest checkpoint; subgraph namespaces do
not count):

- ``_id`` ``doc_id(thread_id)`` (what every writer and reader of one thread's summary
  filters on), ``thread_id`` (the shard key), ``v`` (schema version);
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
    ACTIVE,
    ERROR_CHANNEL,
    INTERRUPT_CHANNEL,
    STATUSES,
    parse_ts,
    short,
    state_of,
)
from .documents import and_field, doc_id

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


def summaries_of(thread_ids: Iterable[str]) -> dict[str, Any]:
    """Filter of the summaries of ``thread_ids`` (by ``_id``)."""
    return {"_id": {"$in": [summary_id(t) for t in thread_ids]}}


def summaries_changed_since(u: int) -> dict[str, Any]:
    """Filter of the summaries written at or after ``u`` (their ``u``, the index ``u``)."""
    return {"u": {"$gte": u}}


def summary_of(thread_id: str) -> dict[str, Any]:
    """Filter of ``thread_id``'s summary: its ``_id`` (what finds it: the collection has
    no index on ``thread_id``) and the shard key."""
    return {"_id": summary_id(thread_id), "thread_id": thread_id}


def summary_on(thread_id: str, checkpoint_id: str) -> dict[str, Any]:
    """Filter of the summary of ``thread_id`` while it stands on ``checkpoint_id``."""
    return {**summary_of(thread_id), "cid": checkpoint_id}


def summary_on_writes_of(thread_id: str, checkpoint_id: str) -> list[dict[str, Any]]:
    """Filters of the summary of ``thread_id`` standing on ``checkpoint_id``, and of it
    made of pending writes on it alone (``cid`` None, ``pw_cid`` it): two filters, not
    one ``$or``, so that each is found by its ``_id`` (SecantusDB scans the collection
    for a top-level ``$or``)."""
    return [{**summary_of(thread_id), "cid": checkpoint_id},
            {**summary_of(thread_id), "cid": None, "pw_cid": checkpoint_id}]


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


def _md_key(key: Any) -> bool:
    """Whether metadata key ``key`` can be a key of a summary's ``md``."""
    return (isinstance(key, str) and bool(key) and "." not in key and "\x00" not in key
            and not key.startswith("$"))


def metadata_facts(md: Mapping[str, Any]) -> dict[str, Any]:
    """The top-level scalar entries of checkpoint metadata (what ``key=value`` filters
    match), keys holding no ``.`` nor leading ``$``."""
    return {k: v for k, v in md.items() if _md_key(k) and _scalar(v) and
            not (isinstance(v, int) and not isinstance(v, bool) and abs(v) >= 2 ** 63)}


def _text(v: Any) -> bool:
    return v is None or isinstance(v, str)


def _int(v: Any) -> bool:
    return v is None or isinstance(v, int) and not isinstance(v, bool)  # (bson's Int64)


def _texts(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def _recent_ok(v: Any) -> bool:
    return v is None or isinstance(v, list) and all(
        isinstance(r, (list, tuple)) and len(r) == 2 and all(isinstance(x, str) for x in r)
        for r in v)


def _pw_ok(v: Any) -> bool:
    return isinstance(v, Mapping) and all(
        isinstance(w, Mapping) and isinstance(w.get("c"), str) and _int(w.get("n"))
        and w.get("n") is not None and _text(w.get("e")) for w in v.values())


_STATES = frozenset({*STATUSES, ACTIVE}) - {"running", "stalled"}
"""What ``state_of`` answers: the ``state`` a summary may hold."""

_FIELD_CHECKS: dict[str, tuple[Any, Any]] = {
    # field: (check, the value a damaged field is read as)
    "cid": (_text, None), "pw_cid": (_text, None), "ts": (_text, None),
    "title": (_text, None), "error": (_text, None), "text": (_text, ""),
    "at": (lambda v: v is None or isinstance(v, datetime.datetime), None),
    "step": (_scalar, None),
    "source": (_scalar, None), "graph": (_scalar, None), "sv": (_scalar, None),
    "messages": (_int, None), "errors": (_int, 0), "interrupts": (_int, 0), "u": (_int, 0),
    "state": (lambda v: v is None or v in _STATES, None),
    "next": (_texts, []), "last": (_texts, []), "md": (lambda v: isinstance(v, dict), {}),
    "pw": (_pw_ok, {}), "recent": (_recent_ok, None),
    "stale": (lambda v: isinstance(v, bool), True),
}
"""Each field a reader of a summary relies on: its check and the value of a damaged one."""


def readable(doc: Mapping[str, Any]) -> tuple[dict[str, Any] | None, list[str]]:
    """``(doc as readers may use it, the fields found damaged)``: each field ``doc``
    holds (a projection holds a few) that is of another type than a summary's (text,
    counts, a date, a known ``state``, lists of node names, pending writes of the form
    ``write_fact`` makes) is read as its empty value, and a damaged document is marked
    ``stale`` (a reader with the serializer writes it again from the thread's latest
    checkpoint). ``(None, ["thread_id"])`` when ``thread_id`` is not text: no reader can
    place it. A summary is derived data: one damaged document never stops the list of the
    others nor the flush of its thread's records."""
    if not isinstance(doc.get("thread_id"), str):
        return None, ["thread_id"]
    bad = [k for k, (ok, _empty) in _FIELD_CHECKS.items() if k in doc and not ok(doc[k])]
    if not bad:
        return dict(doc), []
    out = dict(doc)
    for k in bad:
        out[k] = _FIELD_CHECKS[k][1]
    out["stale"] = True
    return out, bad


def merge(thread_id: str, prev: Mapping[str, Any] | None, facts: Facts,
          stamp: int) -> dict[str, Any] | None:
    """The summary document of ``thread_id`` after ``facts``, from ``prev`` (its document,
    None: none yet); None when nothing changes (a replayed round). A checkpoint older than
    ``prev``'s is ignored (a round of an older checkpoint finishing late); writes of an
    older checkpoint too. ``rev`` is ``prev``'s plus one, ``u`` is ``stamp`` (the writer's
    clock, microseconds, increasing). A damaged ``prev`` (``readable``) is merged as its
    readable fields and stays ``stale`` until ``facts`` are whole; its ``rev`` counts as
    0 when not an integer."""
    clean, bad = readable(prev) if prev else (None, [])
    doc: dict[str, Any] = clean if clean is not None else {
        "_id": summary_id(thread_id), "thread_id": thread_id, "rev": 0, "pw": {},
        "pw_cid": None, "cid": None}
    doc.setdefault("pw", {})
    cur = doc.get("cid") or ""
    if facts.stale:
        if facts.cid is not None and facts.cid >= cur and (
                facts.cid != cur or not doc.get("state")):
            made = checkpoint_time_s(facts.cid)
            doc.update(cid=facts.cid, stale=True, at=None if made is None else _bson_time(
                datetime.datetime.fromtimestamp(made, tz=datetime.timezone.utc)))
    elif facts.cid is not None and (facts.whole or facts.cid >= cur):
        if facts.whole or not bad:
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
    rev = doc.get("rev")
    doc["rev"] = (int(rev) if _int(rev) and rev is not None else 0) + 1
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


SEARCH_MAX_CHARS = 200
"""Most characters of a thread list's text or thread_id search (a regular expression on
the summaries: SecantusDB refuses patterns past 1,000 characters; a longer search would be
a server error, never a match)."""


@dataclass(frozen=True)
class ListQuery:
    """What a page of the thread list asks for.

    Attributes:
        status: one of ``core.thread_summary.STATUSES``, ``"attention"`` (interrupted,
            error and stalled, oldest first) or None (every thread, newest first).
        where: metadata ``key=value`` filters (``render.parse_where``'s output): each
            top-level metadata entry equal to the value (compared as a value, never read
            as a query operator: ``{"$gt": 2}`` matches metadata holding that object,
            which summaries never do).
        search: text the title or the latest messages contain (case-insensitive).
        q: text the thread_id contains (case-insensitive).

    Raises ``ValueError`` for a ``search`` or ``q`` longer than ``SEARCH_MAX_CHARS``.
    """

    status: str | None = None
    where: Mapping[str, Any] = field(default_factory=dict)
    search: str = ""
    q: str = ""

    def __post_init__(self) -> None:
        for name, text in (("search", self.search), ("thread_id search", self.q)):
            if len(text.strip()) > SEARCH_MAX_CHARS:
                raise ValueError(f"the {name} is {len(text.strip())} characters long; at "
                                 f"most {SEARCH_MAX_CHARS}")

    @property
    def oldest_first(self) -> bool:
        """The "needs attention" view lists the oldest first (else the newest first; then
        by thread_id)."""
        return self.status == "attention"


def list_filter(query: ListQuery) -> dict[str, Any]:
    """The MongoDB filter of ``query``'s metadata, text and thread_id conditions (all of
    them, one flat filter: ``and_field``; its status is decided when read,
    ``plans/thread_list.py``)."""
    # $eq: a value given as JSON ({"$ne": null}) is a value to match, never an operator;
    # a key summaries never hold (metadata_facts: no dot, no leading $) matches nothing
    parts: list[dict[str, Any]] = [
        {f"md.{key}": {"$eq": value}} if _md_key(key) else {"_id": {"$in": []}}
        for key, value in query.where.items()]
    if query.search.strip():
        parts.append({"text": {"$regex": re.escape(query.search.strip().lower())}})
    if query.q.strip():
        parts.append({"thread_id": {"$regex": re.escape(query.q.strip()), "$options": "i"}})
    combined: dict[str, Any] = {}
    for part in parts:
        ((field, condition),) = part.items()
        combined = and_field(combined, field, condition)
    return combined


def list_filter_without(query: ListQuery, thread_ids: list[str]) -> dict[str, Any]:
    """``list_filter(query)`` leaving out the threads ``thread_ids`` (those summarised
    from Redis instead): ``and_field(filter, "thread_id", {"$nin": ids})``, the filter
    alone when there are none."""
    base = list_filter(query)
    return and_field(base, "thread_id", {"$nin": thread_ids}) if thread_ids else base


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
