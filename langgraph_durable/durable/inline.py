"""Channel values inside the checkpoint document that introduced them (sans-I/O).

A ``put`` stores the checkpoint and the values of its ``new_versions``. In MongoDB each
of those values whose stored size (``len`` of its bytes; a manifest's digests) is at most
``INLINE_MAX_BYTES`` goes into the checkpoint document's array ``vals``, one entry per
value::

    {"k": doc_id(channel, version), "type": ..., "data": <binary>, "refs": [digests]}

(``refs`` only for a manifest, whose ``data`` is empty; ``type`` ``"empty"`` for a
channel without a value). Bigger values, and so every chunked one, stay one blobs
document each (``documents.blob_doc``). A checkpoint document with ``vals`` carries
``v = schema.INLINE_VERSION``, which older packages refuse; one without keeps its version.

A value belongs to the checkpoint that introduced it; later checkpoints name it in their
``blob_fields`` and find it where it is: a blobs document (``_id`` from
``documents.blob_ids``) or the ``vals`` entry ``k`` of an older checkpoint document of the
same thread and namespace, which the index ``thread_ns_vals`` (``thread_id``,
``checkpoint_ns``, ``vals.k``) finds. ``values_op`` asks both in one aggregate (the
checkpoints' entries, ``$unionWith`` the blobs), so a cold read costs the round trips it
cost before. Deleting a checkpoint document deletes its values: ``prune`` and
``delete_for_runs`` first copy those a remaining checkpoint may name into blobs
documents (``spill_docs``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..core.items import MANIFEST_TYPE, split_digests
from ..core.ops import Aggregate, Doc, DocView, Query, UpdateDoc
from ..core.records import CheckpointRecord, Typed, blob_field, split_field
from ..core.schema import INLINE_VERSION
from . import chunks
from .checks import damaged
from .documents import Collections, blob_doc, blob_ids, checkpoint_doc, doc_id, target

INLINE_MAX_BYTES = 2048
"""A new channel value whose stored bytes are at most this many goes into its checkpoint
document (``vals``) instead of a blobs document of its own (docs/storage.md, "Values
inside the checkpoint document", says what was measured). Read at every call: a negative
value writes every value as a blobs document, the form before (tests of data in that form
set it with ``monkeypatch``)."""

VALS = "vals"
"""The checkpoint document's array of the values it introduced."""


def val_key(channel: str, version: str) -> str:
    """The ``k`` of a ``vals`` entry: ``documents.doc_id(channel, version)``."""
    return doc_id(channel, version)


def split_key(key: str) -> tuple[str, str]:
    """``(channel, version)`` of a ``val_key``; ``ValueError`` when ``key`` is not one."""
    parts: list[str] = []
    rest = key
    while rest:
        n, colon, tail = rest.partition(":")
        if not colon or not n.isdigit() or len(tail) < int(n):
            raise ValueError(f"not a value key: {key!r}")
        parts.append(tail[:int(n)])
        rest = tail[int(n):]
        if rest:
            if rest[0] != "|":
                raise ValueError(f"not a value key: {key!r}")
            rest = rest[1:]
    if len(parts) != 2:
        raise ValueError(f"not a value key: {key!r}")
    return parts[0], parts[1]


def _entry(channel: str, version: str, value: Typed | None) -> Doc:
    if value is None:
        return {"k": val_key(channel, version), "type": "empty", "data": b""}
    if value[0] == MANIFEST_TYPE:
        return {"k": val_key(channel, version), "type": MANIFEST_TYPE, "data": b"",
                "refs": split_digests(value[1])}
    data = value[1] if type(value[1]) is bytes else bytes(value[1])
    return {"k": val_key(channel, version), "type": value[0], "data": data}


def inlined(value: Typed | None) -> bool:
    """Whether ``value`` (``None`` = empty) goes into its checkpoint document: at most
    ``INLINE_MAX_BYTES`` and never more than ``chunks.THRESHOLD_BYTES`` (a value to chunk
    keeps its blobs document)."""
    limit = min(INLINE_MAX_BYTES, chunks.THRESHOLD_BYTES)  # never a value to chunk
    return limit >= 0 and (value is None or len(value[1]) <= limit)


def checkpoint_docs(thread_id: str, rec: CheckpointRecord,
                    values: Iterable[tuple[str, Typed | None]], *, put_ms: int = 0
                    ) -> tuple[Doc, list[Doc]]:
    """``(checkpoint document, blobs documents)`` of a checkpoint ``rec`` and the values
    it introduced (``(Redis blob field, typed value or None for empty)``): the small ones
    (``inlined``) in the document's ``vals`` (then ``v`` is ``INLINE_VERSION``), the others
    as blobs documents. ``put_ms`` as in ``documents.checkpoint_doc``."""
    doc = checkpoint_doc(thread_id, rec, put_ms=put_ms)
    vals: list[Doc] = []
    blobs: list[Doc] = []
    for f, value in values:
        if inlined(value):
            _, ch, ver = split_field(f)
            vals.append(_entry(ch, ver, value))
        else:
            blobs.append(blob_doc(thread_id, f, value, put_ms=put_ms))
    if vals:
        doc[VALS] = vals
        doc["v"] = INLINE_VERSION
    return doc, blobs


def place_values(thread_id: str, cps: Sequence[Doc],
                 values: Mapping[str, Typed | None]) -> list[Doc]:
    """Put the small ``values`` (Redis blob field -> value) into the checkpoint documents
    ``cps`` (changed in place, ``v`` raised to ``INLINE_VERSION``), each into the earliest
    checkpoint of its namespace naming its version (the one whose ``put`` introduced it,
    where the flusher put it); returns blobs documents for the others (big ones, and those
    no checkpoint names). An import rebuilds what the flusher wrote this way."""
    first: dict[str, Doc] = {}
    for d in sorted(cps, key=lambda d: (d["checkpoint_ns"], d["checkpoint_id"]),
                    reverse=True):
        for ch, ver in d.get("blob_fields", ()):
            first[blob_field(d["checkpoint_ns"], ch, ver)] = d
    blobs: list[Doc] = []
    for f in sorted(values):
        owner = first.get(f)
        if owner is None or not inlined(values[f]):
            blobs.append(blob_doc(thread_id, f, values[f]))
            continue
        _, ch, ver = split_field(f)
        owner.setdefault(VALS, []).append(_entry(ch, ver, values[f]))
        owner["v"] = max(int(owner.get("v", 1)), INLINE_VERSION)
    return blobs


def upsert_checkpoint(doc: Doc) -> UpdateDoc:
    """The upsert of a checkpoint document already stored (a replayed outbox entry, a
    strict ``put`` and the flusher, a checkpoint put again under its own id: ``migrate-state``
    stores its migrated values under new versions): its fields set as ``documents.upsert``
    does, but the values it holds added to those already there (``$addToSet``: a value
    stored by an earlier write of the same checkpoint is never dropped) and ``v`` never
    lowered (``$max``: a document holding values stays ``INLINE_VERSION``)."""
    fields = {k: v for k, v in doc.items() if k not in ("_id", "put_ms", "v", VALS)}
    update: dict[str, Any] = {"$set": fields, "$setOnInsert": {"put_ms": doc.get("put_ms", 0)},
                              "$max": {"v": doc["v"]}}
    if doc.get(VALS):
        update["$addToSet"] = {VALS: {"$each": doc[VALS]}}
    return UpdateDoc(target(doc), update, upsert=True)


def _value(doc: DocView, e: object) -> tuple[str, Typed | None]:
    """``(Redis blob field, value)`` of the ``vals`` entry ``e`` of checkpoint ``doc``;
    ``CorruptRecordError`` naming the document when the entry is malformed."""
    if not isinstance(e, Mapping) or not isinstance(e.get("k"), str) \
            or not isinstance(e.get("type"), str):
        raise damaged(doc, "checkpoints", f"field {VALS!r} holds a malformed entry")
    try:
        ch, ver = split_key(e["k"])
    except ValueError as exc:
        raise damaged(doc, "checkpoints", f"field {VALS!r}: {exc}") from None
    f = blob_field(str(doc.get("checkpoint_ns", "")), ch, ver)
    t = e["type"]
    if t == "empty":
        return f, None
    if t == MANIFEST_TYPE:
        refs = e.get("refs") or []
        if not isinstance(refs, list) or not all(isinstance(r, bytes) for r in refs):
            raise damaged(doc, "checkpoints", f"value {e['k']!r} in {VALS!r} holds "
                                              "malformed refs")
        return f, (MANIFEST_TYPE, b"".join(bytes(r) for r in refs))
    if not isinstance(e.get("data"), bytes):
        raise damaged(doc, "checkpoints", f"value {e['k']!r} in {VALS!r} has no binary "
                                          "'data'")
    return f, (t, bytes(e["data"]))


def inline_values(doc: DocView) -> dict[str, Typed | None]:
    """The values a checkpoint document holds in ``vals``, by Redis blob field (``None``
    = empty); ``{}`` for a document without. ``CorruptRecordError`` naming the document
    when ``vals`` is not an array of well-formed entries, or holds two different values
    of one version."""
    vals = doc.get(VALS)
    if vals is None:
        return {}
    if not isinstance(vals, list):
        raise damaged(doc, "checkpoints", f"field {VALS!r} is not an array")
    out: dict[str, Typed | None] = {}
    for e in vals:
        f, v = _value(doc, e)
        _once(doc, out, f, v)
    return out


def _once(doc: DocView, into: dict[str, Typed | None], f: str, v: Typed | None) -> None:
    """``into[f] = v``; ``CorruptRecordError`` naming ``doc`` when ``into`` holds another
    value of ``f`` already (two ``vals`` entries of one version that differ: which one is
    the value cannot be told, and taking either would read a wrong state silently)."""
    if f in into and into[f] != v:
        raise damaged(doc, "checkpoints", f"field {VALS!r} holds two different values of "
                                          f"{split_field(f)[1]!r} version "
                                          f"{split_field(f)[2]!r}")
    into[f] = v


def inline_refs(doc: DocView) -> list[Any]:
    """The item digests the manifests in a checkpoint document's ``vals`` name (a
    projection ``{"vals.refs": 1}`` is enough)."""
    return [r for e in doc.get(VALS) or () if isinstance(e, Mapping)
            for r in e.get("refs") or ()]


def spill_docs(thread_id: str, doc: DocView, keep: set[str] | None = None
               ) -> list[Doc]:
    """Blobs documents holding the ``vals`` of the checkpoint document ``doc`` (only those
    whose Redis blob field is in ``keep``, when given), with ``doc``'s ``put_ms``: written
    before ``doc`` is deleted, they keep the values other checkpoints name."""
    put_ms = int(doc.get("put_ms") or 0)
    return [blob_doc(thread_id, f, v, put_ms=put_ms)
            for f, v in inline_values(doc).items() if keep is None or f in keep]


def values_op(cols: Collections, thread_id: str, fields: Sequence[str],
              join: Sequence[Query] = ()) -> Aggregate:
    """One aggregate reading the values of the Redis blob ``fields`` of ``thread_id``
    wherever they are: the ``vals`` entries of its checkpoint documents (one result per
    entry, ``{_id, thread_id, checkpoint_ns, checkpoint_id, "vals": entry}``: a damaged
    entry is named with its document) and, by ``$unionWith``, its blobs
    documents (as stored). ``join``: stages applied to both (the items ``$lookup`` of
    ``plans/read.py``, with ``localField`` ``refs``; for the entries it is given
    ``vals.refs``). Read the answer with ``split_values``."""
    by_ns: dict[str, list[str]] = {}
    for f in fields:
        ns, ch, ver = split_field(f)
        by_ns.setdefault(ns, []).append(val_key(ch, ver))
    match: list[Query] = [{"checkpoint_ns": ns, "vals.k": {"$in": ks}}
                          for ns, ks in by_ns.items()]
    which: Query = match[0] if len(match) == 1 else {"$or": match}
    entry_join = [_on_vals(s) for s in join]
    return Aggregate(cols.checkpoints, [
        {"$match": {"thread_id": thread_id, **which}},
        {"$project": {"thread_id": 1, "checkpoint_ns": 1, "checkpoint_id": 1, VALS: 1}},
        {"$unwind": f"${VALS}"},
        {"$match": which},
        *entry_join,
        {"$unionWith": {"coll": cols.blobs, "pipeline": [
            {"$match": {"_id": {"$in": blob_ids(thread_id, fields)}}}, *join]}},
    ])


def _on_vals(stage: Query) -> Query:
    """An items ``$lookup`` stage of ``join`` made to read the entry's ``vals.refs``."""
    look = stage.get("$lookup") if isinstance(stage, Mapping) else None
    if not isinstance(look, Mapping) or look.get("localField") != "refs":
        return stage
    return {"$lookup": {**look, "localField": f"{VALS}.refs"}}


def split_values(docs: Sequence[Doc]) -> tuple[list[Doc], dict[str, Typed | None]]:
    """``values_op``'s answer as ``(blobs documents, {Redis blob field: value of a vals
    entry})``; the blobs documents may be chunked (``chunks.load_plan``, then
    ``documents.blob_value_of``). ``CorruptRecordError`` naming the checkpoint document
    when an entry is malformed or one document holds two different values of a
    version."""
    blobs: list[Doc] = []
    inline: dict[str, Typed | None] = {}
    by_doc: dict[Any, dict[str, Typed | None]] = {}
    for d in docs:
        if VALS in d and "channel" not in d:
            f, v = _value(d, d[VALS])
            _once(d, by_doc.setdefault(d.get("_id"), {}), f, v)
            inline[f] = v
        else:
            blobs.append(d)
    return blobs, inline
