"""The thread summary's plans (``durable/summary_docs.py`` holds the document): its upkeep by
the flusher from what a round copies (``round_facts``, ``upkeep_plan``), its refresh
from a thread's latest checkpoint (deletes, ``copy_thread``, the rebuild command:
``refresh_plan``). Where a ``messages`` list's latest items and nodes are, read from its
manifest: ``plans/summary_lists.py``. A page of the thread list: ``plans/thread_list.py``.

Writers never lose each other's changes: each reads the summaries it updates, merges
(``durable/summary_docs.merge``) and writes with the ``rev`` it read in the filter; a writer that
lost the race gets a duplicate key and merges again (``ATTEMPTS`` times)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

import ormsgpack
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from ..core.items import MANIFEST_TYPE, NODE_SIZE, load_item
from ..core.ops import (
    BulkWrite,
    BulkWriteFailed,
    DeleteDoc,
    Find,
    InsertDoc,
    Plan,
    ReplaceDoc,
    WriteModel,
)
from ..core.records import CheckpointRecord, Typed, WriteRecord, blob_field
from ..core.thread_summary import (
    ERROR_CHANNEL,
    is_message,
    last_nodes,
    message_text,
    next_nodes,
    short,
    values_of,
)
from ..durable import summary_docs as S
from ..errors import CorruptRecordError
from . import summary_lists as L
from .context import NO_SERIALIZER, Context
from .read import page_plan
from .summary_lists import MESSAGES
from .summary_lists import Wanted as Wanted  # re-exported (outbox/rounds.py)
from .summary_lists import wanted_items as wanted_items

log = logging.getLogger("langgraph_durable.summaries")

ATTEMPTS = 5
"""Times a summary write that lost a race to another writer is merged and tried again
(after that the next round's write corrects it)."""

_FALLBACK = JsonPlusSerializer(allowed_msgpack_modules=None)
"""LangGraph's serializer made strict: only its ``SAFE_MSGPACK_TYPES`` (LangChain
messages, its own types) are revived, nothing else a stored value names is imported or
run; no pickle."""


def _serde(ctx: Context) -> Any:
    """The serializer a summary decodes with: the context's, or ``_FALLBACK`` for a
    flusher given none (every flusher: the saver's runtime and a standalone worker copy
    bytes without the application's serializer; an encrypted or external value stays
    undecoded and the summary ``stale`` until a reader refreshes it)."""
    return _FALLBACK if ctx.serde is NO_SERIALIZER else ctx.serde


def _error_text(value: Any) -> str:
    if isinstance(value, BaseException):
        return f"{type(value).__name__}: {value}"
    return str(value)


def _write_values(serde: Any, typed: Typed, items: Mapping[bytes, Typed]) -> list[Any]:
    """A pending write's values as ``values_of`` counts them. A list value stored as a
    manifest of items (``core/items.py``) is decoded from ``items`` when they hold every
    item of it, else counted by its digests, each value unknown (None); the serializer
    never sees the manifest (it raised ``NotImplementedError``, which left the summary
    stale, and a delete's refresh of it on a deleted checkpoint)."""
    if typed[0] != MANIFEST_TYPE:
        return values_of([("", "", serde.loads_typed(typed))], "")
    order = L.listed(typed[1], items)
    if order is None:
        return [None] * max(1, len(typed[1]) // 16)
    return [load_item(serde.loads_typed, items[d]) for d in order]


def _message_facts(facts: S.Facts, messages: Sequence[Any], count: int,
                   first: bool) -> None:
    """Title (when ``messages`` start the list: ``first``), text and count of a messages
    value."""
    facts.messages = count
    if first:
        human = next((m for m in messages if is_message(m) and m.type == "human"), None)
        facts.title = short(message_text(human), S.TITLE_CHARS) if human else None
    facts.recent = _recent(messages[-S.TEXT_MESSAGES:])


def _recent(messages: Sequence[Any]) -> list[list[str]]:
    return [[str(getattr(m, "id", None) or ""), short(message_text(m), 400)]
            for m in messages if is_message(m)]


def round_facts(ctx: Context, thread_id: str, recs: Iterable[CheckpointRecord],
                writes: Iterable[tuple[str, WriteRecord]], blobs: Mapping[str, Typed | None],
                items: Mapping[bytes, Typed], nodes: int | None = None) -> S.Facts | None:
    """What a flush round's records of ``thread_id`` say of its root namespace: its
    newest root checkpoint of ``recs`` (checkpoint and metadata decoded), the pending
    writes ``(checkpoint_id, record)`` on the error and interrupt channels, and, when the
    round holds that checkpoint's ``messages`` value, its length, title (the round holds
    the list's first item) and latest messages' text (from ``items``: the round's, and
    those ``wanted_items`` named, read for it; read from the end of the list up to the
    first item ``items`` lacks). The length counts the items of the manifest's full
    nodes (a manifest's digests do not tell a node from an item): told by a node met on
    that read, by the items ``items`` holds before those (``summary_lists.held_nodes``), or by
    ``nodes`` (the full nodes as the flusher found them in Redis: ``wanted_items``'
    probe), else not known (None: the summary keeps its count). None when nothing is of
    the root namespace. A value that does not decode
    leaves its fact unknown (logged by type)."""
    serde = _serde(ctx)
    root = [r for r in recs if r.ns == ""]
    facts = S.Facts()
    for cid, w in writes:
        if w.channel in S.WRITE_CHANNELS:
            vals: list[Any] = [None]
            text = None
            try:
                vals = _write_values(serde, w.value, items)
                text = (_error_text(vals[-1]) if w.channel == ERROR_CHANNEL
                        and vals and vals[-1] is not None else None)
            except Exception as exc:  # by type only: no stored value in the logs
                log.debug("summary of a thread: a write did not decode: %s",
                          type(exc).__name__)
                facts.stale = True
            facts.writes.setdefault(cid, {})[S.write_key(w.task_id, w.idx)] = S.write_fact(
                w.channel, vals, text if text is not None or w.channel != ERROR_CHANNEL
                else "(error not decoded)")
    if not root:
        if facts.stale:  # writes it could not read: a reader refreshes the summary
            facts.cid = max(facts.writes)
        return facts if facts.writes else None
    rec = max(root, key=lambda r: r.checkpoint_id)
    try:
        cp = serde.loads_typed(rec.checkpoint)
        md = dict(rec.md_query) or serde.loads_typed(rec.metadata) or {}
    except Exception as exc:
        log.debug("summary of thread %r: checkpoint %r did not decode: %s", thread_id,
                  rec.checkpoint_id, type(exc).__name__)
        facts.stale = True
    if facts.stale:
        facts.cid = max(rec.checkpoint_id, *facts.writes)
        return facts
    facts.cid, facts.ts = rec.checkpoint_id, cp.get("ts")
    facts.step, facts.source = md.get("step"), md.get("source")
    facts.graph, facts.sv = md.get("lgd_graph"), md.get("lgd_state_version")
    facts.md, facts.next, facts.last = S.metadata_facts(md), next_nodes(cp), last_nodes(cp)
    version = cp.get("channel_versions", {}).get(MESSAGES)
    typed = blobs.get(blob_field("", MESSAGES, version)) if version is not None else None
    if typed is not None:
        try:
            _round_messages(facts, serde, typed, items, nodes)
        except Exception as exc:
            log.debug("summary of thread %r: messages did not decode: %s", thread_id,
                      type(exc).__name__)
    return facts


def _round_messages(facts: S.Facts, serde: Any, typed: Typed,
                    items: Mapping[bytes, Typed], nodes: int | None = None) -> None:
    if typed[0] != MANIFEST_TYPE:
        value = serde.loads_typed(typed)
        if isinstance(value, list):
            _message_facts(facts, value, len(value), True)
        return
    refs = typed[1]
    order = L.listed(refs, items)
    if order is not None:  # every item in the round (a new thread, or nodes all present)
        _listed_facts(facts, serde, order, items)
        return
    # the round holds some items only (the others reached MongoDB in earlier rounds;
    # ``wanted_items`` had the flusher read the latest ones it lacked from Redis)
    digests = [refs[i:i + 16] for i in range(0, len(refs), 16)]
    tail, met = L.tail(digests, items)
    if met is not None:  # a node met: the full nodes are those up to it
        nodes = met
    else:  # told by the round's items before the latest ones, else as the flusher found
        held, _ = L.held_nodes(digests, items, len(digests) - len(tail))
        if held is not None:
            nodes = held
    if nodes is not None:  # the full nodes come first, NODE_SIZE items each
        facts.messages = nodes * (NODE_SIZE - 1) + len(digests)
    if tail:
        # the whole latest TEXT_MESSAGES (or the whole list); else the newest ones, after
        # a node the round lacks the items of: added to the ones kept
        facts.recent = _recent([_message(serde, items[d]) for d in tail])
        facts.appended = len(tail) < min(S.TEXT_MESSAGES, facts.messages or len(digests))


def readable_docs(docs: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Summary documents as readers may use them (``durable.summary_docs.readable``): a
    damaged field read as its empty value and the document marked ``stale``, logged
    (WARNING, naming the thread and the fields); a document whose ``thread_id`` is not
    text left out (logged)."""
    out = []
    for d in docs:
        clean, bad = S.readable(d)
        if bad:
            log.warning("thread summary %r is damaged (fields %s): %s", d.get("_id"),
                        ", ".join(bad), "read as stale, rewritten from the thread's latest "
                        "checkpoint when shown" if clean is not None else "left out")
        if clean is not None:
            out.append(clean)
    return out


class _Ext(NamedTuple):
    code: int
    data: Any


def _ext(code: int, data: bytes) -> _Ext:
    return _Ext(code, ormsgpack.unpackb(data, ext_hook=_ext, option=ormsgpack.OPT_NON_STR_KEYS))


class _Message(NamedTuple):
    """What a summary reads of a stored LangChain message (``is_message``,
    ``message_text``, its id), read from its bytes without making the message."""

    type: str
    content: Any
    id: Any


_MESSAGE_EXTS = (4, 5)
"""``JsonPlusSerializer``'s msgpack extension codes of a pydantic model (v1, v2): the
data is ``[module, class, fields, ...]``."""


def _message(serde: Any, typed: Typed) -> Any:
    """One stored item as the summary reads it: a LangChain message stored by
    ``JsonPlusSerializer`` (``msgpack``: an extension naming a class of
    ``langchain_core.messages`` with its fields) read as ``_Message`` without reviving
    anything (10-16 µs less per message than making the pydantic model); anything else
    decoded by ``serde`` (``load_item``)."""
    if typed[0] == "msgpack":
        try:
            got = ormsgpack.unpackb(typed[1], ext_hook=_ext,
                                    option=ormsgpack.OPT_NON_STR_KEYS)
        except Exception:
            got = None
        if type(got) is _Ext and got.code in _MESSAGE_EXTS and type(got.data) is list \
                and len(got.data) >= 3 and type(got.data[0]) is str \
                and got.data[0].startswith("langchain_core.messages") \
                and type(got.data[2]) is dict and type(got.data[2].get("type")) is str \
                and "content" in got.data[2]:
            fields = got.data[2]
            return _Message(fields["type"], fields["content"], fields.get("id"))
    return load_item(serde.loads_typed, typed)


def _listed_facts(facts: S.Facts, serde: Any, order: list[bytes],
                  items: Mapping[bytes, Typed]) -> None:
    """``_message_facts`` of the whole list ``order`` names, decoding only the items they
    read: from the start up to its first human message (the title) and the last
    ``TEXT_MESSAGES``."""
    loaded: dict[int, Any] = {}

    def at(i: int) -> Any:
        if i not in loaded:
            loaded[i] = _message(serde, items[order[i]])
        return loaded[i]

    facts.messages = len(order)
    human = next((m for m in map(at, range(len(order)))
                  if is_message(m) and m.type == "human"), None)
    facts.title = short(message_text(human), S.TITLE_CHARS) if human else None
    facts.recent = _recent([at(i) for i in range(max(0, len(order) - S.TEXT_MESSAGES),
                                                 len(order))])


def _kept(ctx: Context, facts: S.Facts) -> S.Facts:
    """``facts`` as the summary may store them: without message text and metadata when
    the context's metadata is not queryable (an encrypting serializer: no tier holds
    plaintext)."""
    if not ctx.queryable:
        facts.title = None
        facts.recent = [] if facts.recent is not None or facts.whole else None
        facts.md = {}
    return facts


_last_stamp = 0
_stamp_lock = threading.Lock()


def _stamp(ctx: Context) -> int:
    """A summary's ``u``: microseconds of ``ctx.clock``, strictly increasing in this
    process, so a reader asking for ``u >= its last`` gets back one summary, not a whole
    round written in the same millisecond."""
    global _last_stamp
    with _stamp_lock:
        _last_stamp = max(ctx.clock.time_ns() // 1000, _last_stamp + 1)
        return _last_stamp


def upkeep_plan(ctx: Context, facts: Mapping[str, S.Facts]) -> Plan[int]:
    """Merge ``facts`` (per thread) into the threads' summaries: one read of them, one
    bulk write of those that change; a write that lost a race to another writer is read
    and merged again (``ATTEMPTS``). Without queryable metadata (an encrypting serializer)
    no message text nor metadata is stored. Returns the summaries written."""
    todo = {tid: _kept(ctx, f) for tid, f in facts.items()}
    written = 0
    cols = ctx.collections
    for _attempt in range(ATTEMPTS):
        prevs = yield Find(cols.threads, S.summaries_of(todo))
        by_id = {d["_id"]: d for d in prevs}  # (by _id: a damaged thread_id is no key)
        docs: list[tuple[str, dict[str, Any], Any]] = []
        for tid, f in todo.items():
            prev = by_id.get(S.summary_id(tid))
            doc = S.merge(tid, prev, f, _stamp(ctx))
            if doc is not None:
                docs.append((tid, doc, prev))
        if not docs:
            return written
        # a new summary is an insert (SecantusDB: 4x cheaper than an upsert), a changed one
        # a replace guarded by the rev read; either fails with a duplicate key when another
        # writer got there first
        requests: list[WriteModel] = [
            InsertDoc(doc) if prev is None else ReplaceDoc(S.guard(doc, prev), doc, upsert=True)
            for _t, doc, prev in docs]
        try:
            yield BulkWrite(cols.threads, requests)
            return written + len(docs)
        except BulkWriteFailed as exc:
            if not exc.only_duplicates():
                raise
            lost = set(exc.duplicates())
            written += len(docs) - len(lost)
            todo = {docs[i][0]: todo[docs[i][0]] for i in lost}
    if todo:  # not reached without a lost race
        log.warning("thread summaries of %d threads lost %d races in a row; the next "
                    "write corrects them", len(todo), ATTEMPTS)
    return written


def latest_facts_plan(ctx: Context, thread_id: str) -> Plan[S.Facts | None]:
    """The whole facts of ``thread_id`` from its latest root checkpoint, both tiers
    merged (Redis first): ``round_facts`` of that checkpoint with its pending writes, its
    ``messages`` value and items (no other channel decoded: a DataFrame is not
    downloaded); None when it has none."""
    raw = yield from page_plan(ctx, thread_id, "", count=1, hot_first=True)
    if not raw.rows:
        return None
    rec, writes = raw.rows[0]
    facts = round_facts(ctx, thread_id, [rec], [(rec.checkpoint_id, w) for w in writes],
                        raw.blobs, raw.items)
    if facts is None:
        return None
    facts.whole = not facts.stale
    facts.writes.setdefault(rec.checkpoint_id, {})
    return facts


def facts_or_damage_plan(ctx: Context, thread_id: str,
                         damaged: dict[str, str] | None = None) -> Plan[S.Facts | None]:
    """``latest_facts_plan``, except that a thread whose records are damaged
    (``CorruptRecordError``) gives None, logged (WARNING, naming it) and, when given,
    recorded in ``damaged`` (thread_id -> the error's text): one damaged thread never
    stops the summaries of the others."""
    try:
        return (yield from latest_facts_plan(ctx, thread_id))
    except CorruptRecordError as exc:
        log.warning("thread summary of %r not refreshed: %s", thread_id, exc)
        if damaged is not None:
            damaged[thread_id] = str(exc)[:500]
        return None


def refresh_plan(ctx: Context, thread_ids: Iterable[str],
                 damaged: dict[str, str] | None = None) -> Plan[int]:
    """Set the summaries of ``thread_ids`` to what their latest root checkpoints say (after
    a delete, a prune, a copy; the rebuild), deleting those of threads without one. A
    thread whose records are damaged (``CorruptRecordError``) keeps its summary as it is,
    is logged and, when ``damaged`` is given, recorded there (thread_id -> the error's
    text); the others are refreshed. Returns the summaries written or deleted."""
    found: dict[str, S.Facts] = {}
    gone: list[str] = []
    for tid in dict.fromkeys(thread_ids):
        mark: dict[str, str] = {}
        facts = yield from facts_or_damage_plan(ctx, tid, mark)
        if mark:
            if damaged is not None:
                damaged.update(mark)
            continue
        if facts is None:
            gone.append(tid)
        else:
            found[tid] = facts
    n = (yield from upkeep_plan(ctx, found)) if found else 0
    if gone:
        yield from delete_plan(ctx, gone)
    return n + len(gone)


def refresh_quietly_plan(ctx: Context, thread_ids: Sequence[str]) -> Plan[None]:
    """``refresh_plan`` after a change that already succeeded (``delete_for_runs``,
    ``copy_thread``): a failure is logged by type, not raised (the summary is derived:
    ``langgraph-durable threads --rebuild-summary`` sets it again)."""
    try:
        yield from refresh_plan(ctx, thread_ids)
    except Exception as exc:
        log.warning("thread summaries of %d threads not refreshed: %s", len(thread_ids),
                    type(exc).__name__)


def delete_plan(ctx: Context, thread_ids: Sequence[str]) -> Plan[None]:
    """Delete the summaries of ``thread_ids`` (``delete_thread``)."""
    if thread_ids:
        yield BulkWrite(ctx.collections.threads, [
            DeleteDoc(S.summary_of(t)) for t in thread_ids])
