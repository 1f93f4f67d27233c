"""Pending writes in MongoDB: one document per ``put_writes`` call (sans-I/O).

A task's writes arrive together in one ``put_writes`` call, all with the call's ``seq``
(``plans/write.py``). The flusher stores them as one writes document (``group_doc``),
``_id`` ``doc_id(thread_id, ns, checkpoint_id, task_id, "call", seq)``, ``v``
``schema.WRITES_GROUP_VERSION``::

    {_id, v: 5, thread_id, checkpoint_ns, checkpoint_id, task_id, task_path, seq,
     writes: [{idx, channel, type, data}, ...],   # a manifest: type "lgd.items", refs
     refs: [digest, ...],                         # every manifest's digests (if any)
     put_ms}

``refs`` at the top repeats the digests of the manifests among the writes, so the items
``$lookup`` of a read (``plans/read.py``), ``prune``'s item collection and ``migrate``
see them as they see a blob's. A call whose values hold more than
``chunks.THRESHOLD_BYTES`` keeps one document per write (``documents.write_doc``, its
values chunked as before): the 16 MiB limit is never near a grouped document.

Older data holds one document per write (``_id`` ``doc_id(..., task_id, idx)``); both
forms are read everywhere, even for one checkpoint (``records_of``, ``pending_of``).

LangGraph's rule holds across documents as each tier applies it (``keep``): a write
``(task_id, idx)`` with idx >= 0 is insert-once, so the earliest ``seq`` stored wins; a
special channel's (idx < 0: ``WRITES_IDX_MAP``) is overwritten, so the newest ``seq``
wins. The flusher copies what Redis holds (the first ordinary write, the latest special
one) under the ``seq`` of the call that wrote it, so a replayed entry makes the same
documents; a document already stored only gains the entries it lacked (``upsert_group``:
an earlier call's entry may have stored part of a later call's document).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from ..core.items import MANIFEST_TYPE, split_digests
from ..core.ops import Doc, DocView, UpdateDoc, WriteModel
from ..core.records import Typed, WriteRecord
from ..core.schema import (
    ITEMS_VERSION,
    NEWEST_DOCUMENT_VERSION,
    SCHEMA_VERSION,
    WRITES_GROUP_VERSION,
)
from ..errors import SchemaVersionError
from . import chunks as C
from .checks import damaged, short
from .checks import identity_of as identity_of_fields
from .documents import _value_of, doc_id, target, upsert_write, write_doc, write_of
from .documents import check_document as plain_check_document

Writes = dict[tuple[str, int], WriteRecord]
"""Pending writes of one checkpoint by ``(task_id, idx)``."""


def group_id(thread_id: str, ns: str, checkpoint_id: str, task_id: str, seq: int) -> str:
    """``_id`` of the writes document of the ``put_writes`` call ``seq`` of ``task_id``
    (a part ``"call"`` more than a per-write ``_id``, so the two never meet)."""
    return doc_id(thread_id, ns, checkpoint_id, task_id, "call", seq)


def _entry(w: WriteRecord) -> Doc:
    t, b = w.value
    if t == MANIFEST_TYPE:
        return {"idx": w.idx, "channel": w.channel, "type": t, "data": b"",
                "refs": split_digests(b)}
    return {"idx": w.idx, "channel": w.channel, "type": t,
            "data": b if type(b) is bytes else bytes(b)}


def group_doc(thread_id: str, ns: str, checkpoint_id: str, recs: Sequence[WriteRecord], *,
              put_ms: int = 0) -> Doc:
    """The writes document of one call: ``recs`` (non-empty) all of one ``task_id`` and
    ``seq``, stored in idx order; ``put_ms`` as in ``documents.checkpoint_doc``."""
    first = recs[0]
    entries = [_entry(w) for w in sorted(recs, key=lambda w: w.idx)]
    doc: Doc = {
        "_id": group_id(thread_id, ns, checkpoint_id, first.task_id, first.seq),
        "v": WRITES_GROUP_VERSION,
        "thread_id": thread_id,
        "checkpoint_ns": ns,
        "checkpoint_id": checkpoint_id,
        "task_id": first.task_id,
        "task_path": first.task_path,
        "seq": first.seq,
        "writes": entries,
    }
    refs = [r for e in entries for r in e.get("refs", ())]
    if refs:
        doc["refs"] = list(dict.fromkeys(refs))
    doc["put_ms"] = put_ms
    return doc


def write_docs(thread_id: str, ns: str, checkpoint_id: str, recs: Sequence[WriteRecord], *,
               put_ms: int = 0, times: Sequence[int] | None = None) -> list[Doc]:
    """The writes documents of pending writes of one checkpoint: one document per call
    (``task_id``, ``seq``) in first-seen order; a call whose values hold more than
    ``chunks.THRESHOLD_BYTES`` one document per write (``documents.write_doc``, for
    ``chunks.split`` to chunk as before). ``put_ms`` as in
    ``documents.checkpoint_doc``; or ``times``, one per record (the flusher's: its
    outbox entry's time), a call's document taking the latest of its records'."""
    calls: dict[tuple[str, int], list[WriteRecord]] = {}
    at: dict[tuple[str, int], int] = {}
    for n, w in enumerate(recs):
        key = (w.task_id, w.seq)
        calls.setdefault(key, []).append(w)
        at[key] = max(at.get(key, 0), put_ms if times is None else times[n])
    docs: list[Doc] = []
    for key, group in calls.items():
        if sum(len(w.value[1]) for w in group) <= C.THRESHOLD_BYTES:
            docs.append(group_doc(thread_id, ns, checkpoint_id, group, put_ms=at[key]))
        else:
            docs += [write_doc(thread_id, ns, checkpoint_id, w, put_ms=at[key])
                     for w in group]
    return docs


def is_group(doc: DocView) -> bool:
    """Whether ``doc`` is a writes document of the grouped form (``v`` at least
    ``WRITES_GROUP_VERSION``; a newer one is refused when read)."""
    v = doc.get("v")
    return type(v) is int and v >= WRITES_GROUP_VERSION


def upsert_group(doc: Doc) -> UpdateDoc:
    """Upsert of a grouped writes document that merges: its ``writes`` (and ``refs``)
    entries are added to the stored document's (``$addToSet``: an entry already there,
    from a replayed entry or another flusher's copy, is not repeated), the other fields
    (``put_ms`` too: a replay changes nothing) are set on insert. A call's document can
    be stored from two outbox entries: an earlier call's entry names a special channel's
    write that this call has overwritten in Redis since, so the flusher copies it under
    this call's ``seq``, before this call's own entry brings the rest of the call's
    writes. One call's entry for an ``idx`` is always the same (its ``seq`` names the
    call), so the merge never holds two entries of one ``idx``."""
    fixed = {k: v for k, v in doc.items() if k not in ("writes", "refs")}
    update: dict[str, object] = {
        "$setOnInsert": fixed,
        "$addToSet": {"writes": {"$each": doc["writes"]},
                      **({"refs": {"$each": doc["refs"]}} if doc.get("refs") else {})}}
    return UpdateDoc(target(doc), update, upsert=True)


def per_write_docs(after: object = None) -> dict[str, object]:
    """Filter of the per-write documents (``documents.write_doc``, not chunked, of the
    versions before calls were grouped) with ``_id`` above ``after`` (None: from the
    first): what ``admin/write_regroup.py`` regroups."""
    q: dict[str, object] = {"idx": {"$exists": True}, "chunked": {"$exists": False},
                            "v": {"$in": [SCHEMA_VERSION, ITEMS_VERSION]}}
    if after is not None:
        q["_id"] = {"$gt": after}
    return q


def calls_stored_before(thread_id: str, ns: str, checkpoint_id: str, task_ids: Sequence[str],
                        at_ms: int) -> dict[str, object]:
    """Filter of the call documents (``WRITES_GROUP_VERSION``) of the tasks ``task_ids``
    on checkpoint ``(thread_id, ns, checkpoint_id)`` stored at or before ``at_ms``
    (``put_ms``)."""
    return {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": checkpoint_id,
            "task_id": {"$in": task_ids}, "v": WRITES_GROUP_VERSION,
            "put_ms": {"$not": {"$gt": at_ms}}}


def upsert_any(doc: Doc) -> WriteModel:
    """The upsert of a writes document of either form (``upsert_group`` or
    ``documents.upsert_write``)."""
    return upsert_group(doc) if is_group(doc) else upsert_write(doc)


_GROUP_FIELDS = (("checkpoint_ns", str, "a string"), ("checkpoint_id", str, "a string"),
                 ("task_id", str, "a string"), ("task_path", str, "a string"),
                 ("seq", int, "an integer"), ("writes", list, "an array"))


def _checked_group(doc: DocView) -> DocView:
    """``doc`` when it is a readable grouped document; ``SchemaVersionError`` for a newer
    version, ``CorruptRecordError`` naming the document and the field otherwise (a field
    of another type, an entry of ``writes`` malformed or repeating an ``idx``)."""
    v = doc["v"]
    if v > NEWEST_DOCUMENT_VERSION:
        raise SchemaVersionError(
            f"MongoDB document {doc.get('_id')!r} has schema version {v}, newer than "
            f"{NEWEST_DOCUMENT_VERSION} understood by this langgraph_durable; upgrade the "
            "package")
    for name, kind, what in _GROUP_FIELDS:
        value = doc.get(name)
        if not isinstance(value, kind) or type(value) is bool:
            raise damaged(doc, "writes", f"field {name!r} holds {short(value)}, not {what}")
    seen: set[int] = set()
    for n, e in enumerate(doc["writes"]):
        problem = _entry_problem(e)
        if problem is None and e["idx"] in seen:  # one call writes each idx once: a
            problem = f"repeats idx {e['idx']}"  # second would hide a write silently
        if problem:
            raise damaged(doc, "writes", f"write {n} of field 'writes' {problem}")
        seen.add(e["idx"])
    return doc


def _entry_problem(e: object) -> str | None:
    if not isinstance(e, Mapping):
        return f"is {short(e)}, not a document"
    if type(e.get("idx")) is not int:
        return f"has idx {short(e.get('idx'))}, not an integer"
    if not isinstance(e.get("channel"), str) or not isinstance(e.get("type"), str):
        return "lacks its channel or type (strings)"
    if e["type"] == MANIFEST_TYPE:
        refs = e.get("refs")
        if not isinstance(refs, list) or not all(isinstance(r, bytes) for r in refs):
            return "holds a manifest without its refs (binary digests)"
    elif not isinstance(e.get("data"), bytes):
        return f"has data {short(e.get('data'))}, not binary data"
    return None


def records_of(doc: DocView) -> list[WriteRecord]:
    """The ``WriteRecord``s a writes document holds, of either form (a per-write
    document: one); ``CorruptRecordError`` naming the document and the field, and
    ``SchemaVersionError`` for a version newer than this package reads."""
    if not isinstance(doc, Mapping) or not is_group(doc):
        return [write_of(doc)]
    doc = _checked_group(doc)
    task_id, task_path, seq = doc["task_id"], doc["task_path"], doc["seq"]
    out = []
    for e in doc["writes"]:
        value: Typed = _value_of(e)
        out.append(WriteRecord(task_id, e["idx"], e["channel"], value, task_path, seq))
    return out


def keep(into: Writes, w: WriteRecord) -> None:
    """Add ``w`` to ``into`` by LangGraph's rule: an ordinary write (idx >= 0) keeps the
    earliest ``seq`` (insert-once), a special channel's (idx < 0) the newest."""
    key = (w.task_id, w.idx)
    have = into.get(key)
    if have is None or (w.seq > have.seq if w.idx < 0 else w.seq < have.seq):
        into[key] = w


def pending_of(docs: Iterable[DocView]) -> Writes:
    """The pending writes of writes documents of one checkpoint (either form, chunks
    reassembled), by ``(task_id, idx)`` after ``keep``'s rule."""
    out: Writes = {}
    for d in docs:
        for w in records_of(d):
            keep(out, w)
    return out


def pending_by_checkpoint(docs: Iterable[DocView], checkpoint_ids: Iterable[str]
                          ) -> dict[str, Writes]:
    """``pending_of`` per checkpoint: ``{checkpoint_id: writes}`` for every id of
    ``checkpoint_ids`` (empty when no document names it)."""
    out: dict[str, Writes] = {c: {} for c in checkpoint_ids}
    for d in docs:
        into = out.setdefault(d["checkpoint_id"], {})
        for w in records_of(d):
            keep(into, w)
    return out


def identity_of(doc: DocView, kind: str, names: Sequence[str]) -> list[object]:
    """``checks.identity_of`` (what the ``_id`` of a ``kind`` document is made of after
    its thread, for a copy under another thread: ``copy_thread``), also for a writes
    document of one call (``names``, the per-write form's fields, do not apply: its
    ``_id``'s are ``group_id``'s); ``CorruptRecordError`` naming the document when a
    field is missing or of the wrong type."""
    if kind == "writes" and is_group(doc):
        _checked_group(doc)
        return [doc["checkpoint_ns"], doc["checkpoint_id"], doc["task_id"], "call",
                doc["seq"]]
    return identity_of_fields(doc, kind, names)


def check_document(doc: DocView, kind: str) -> None:
    """``documents.check_document`` (raise when the ``kind`` document ``doc``, not
    chunked, cannot be read: ``copy_thread`` checks what it copies without decoding it),
    for a writes document of either form (``records_of``)."""
    if kind == "writes":
        records_of(doc)
    else:
        plain_check_document(doc, kind)
