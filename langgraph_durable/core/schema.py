"""The stored format: its version numbers, the rule for the queryable ``md`` copy of
metadata, and the in-memory upgrade of records written by older versions.

Every Redis envelope starts with its format version and every MongoDB document carries
``v`` (``SCHEMA_VERSION`` when written). Reading a record of an older version upgrades it
in memory through a chain of small steps, one per version, registered in
``ENVELOPE_STEPS`` (Redis envelopes, by kind ``cp``/``w``/``bl``) and ``DOCUMENT_STEPS``
(MongoDB documents, by collection kind). A record of a newer version than this package
knows raises ``SchemaVersionError`` (``check_not_newer`` for Redis envelopes and export
records; ``check_document_version`` for MongoDB documents, whose newest readable ``v`` is
``NEWEST_DOCUMENT_VERSION``: the forms above ``SCHEMA_VERSION`` are that format plus
chunks, a manifest or inline values) and is never rewritten. The bulk rewrite of stored
documents is ``plans/migrations.py``.

Version 0 is the pre-release format, kept so the chain is exercised: checkpoint documents
held the checkpoint under ``checkpoint_bytes`` and the metadata inline (a plain document,
not serialized); writes had no ``task_path``/``seq``. In Redis, a v0 checkpoint envelope
was ``[0, parent, type, bytes, metadata]`` and a v0 write ``[0, task, idx, channel, type,
bytes]``.

This module imports nothing else from the package but ``errors``: records, documents
and migrations depend on it, never the other way.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import ormsgpack

from ..errors import CorruptRecordError, SchemaVersionError
from .ops import Doc, DocView

SCHEMA_VERSION = 1
"""Format version written into every stored record (Redis envelope, MongoDB document)."""

CHUNKED_VERSION = 2
"""``v`` of a MongoDB document whose large fields live in the chunks collection
(``durable/chunks.py``): the ``SCHEMA_VERSION`` format with descriptors in those fields.
Packages older than chunking know only version 1 and refuse such a document with
``SchemaVersionError`` (their "newer than ... upgrade the package") instead of misreading
a descriptor as the value; this package reassembles it (``chunks.load_plan``) into the
``SCHEMA_VERSION`` format before decoding."""


ITEMS_VERSION = 3
"""``v`` of a MongoDB blob or write document whose value is a manifest of items
(``core/items.py``: ``type`` ``"lgd.items"``, digests in ``refs``): the ``SCHEMA_VERSION``
format otherwise. Older packages refuse it with ``SchemaVersionError`` instead of
decoding an empty value. In Redis a manifest envelope starts with the byte ``0xc1``,
which older packages report as an undecodable record (``CorruptRecordError``)."""

INLINE_VERSION = 4
"""``v`` of a MongoDB checkpoint document holding the small channel values it introduced
in its array ``vals`` (``durable/inline.py``): the ``SCHEMA_VERSION`` format otherwise.
Older packages refuse it with ``SchemaVersionError`` instead of reading a checkpoint whose
values they cannot find. Checkpoint documents without ``vals`` keep their version."""

WRITES_GROUP_VERSION = 5
"""``v`` of a MongoDB writes document holding every pending write of one ``put_writes``
call (``durable/write_groups.py``: the writes as the array ``writes``, their manifests'
digests also in the document's ``refs``). Older packages refuse it with
``SchemaVersionError`` instead of reading a write without ``idx`` or ``channel``."""

HOSTED_NODE_VERSION = 6
"""``v`` of a MongoDB items document that also holds the node its item completes
(``durable/item_docs.py``: ``d`` the array ``[item digest, node digest]``, ``refs`` the
node's item digests), so a node costs no document of its own. Older packages refuse it
with ``SchemaVersionError`` instead of reading an array as a digest."""

NEWEST_DOCUMENT_VERSION = HOSTED_NODE_VERSION
"""The newest ``v`` of a MongoDB document this package reads (``check_document_version``):
``SCHEMA_VERSION`` and the forms above it (``CHUNKED_VERSION``, ``ITEMS_VERSION``,
``INLINE_VERSION``, ``WRITES_GROUP_VERSION``, ``HOSTED_NODE_VERSION``), each read as its
own fields say. A document
with a higher ``v`` was written by a newer package and is refused. A new document form
raises it."""


def check_document_version(version: object, what: str) -> None:
    """Raise ``SchemaVersionError`` naming ``what`` (``"MongoDB document '<_id>'"``) when
    ``version`` is an ``int`` above ``NEWEST_DOCUMENT_VERSION``; nothing is changed."""
    if type(version) is int and version > NEWEST_DOCUMENT_VERSION:
        raise SchemaVersionError(
            f"{what} has schema version {version}, newer than {NEWEST_DOCUMENT_VERSION} "
            "understood by this langgraph_durable; upgrade the package")


def check_not_newer(version: object, what: str, *, then: str = "") -> None:
    """Raise ``SchemaVersionError`` naming ``what`` (e.g. ``"record at <Redis key>"``,
    ``"MongoDB document '<_id>'"``) when ``version`` is an ``int`` newer than
    ``SCHEMA_VERSION``, the newest this package reads; ``then`` ends the message (e.g.
    ``" (nothing written)"``). Nothing stored is changed."""
    if type(version) is int and version > SCHEMA_VERSION:
        raise SchemaVersionError(
            f"{what} has schema version {version}, newer than {SCHEMA_VERSION} understood by "
            f"this langgraph_durable; upgrade the package{then}")


# --------------------------------------------------------------------------- queryable md

MD_QUERY_MAX_CHARS = 1024
"""Longest metadata string copied into the queryable ``md`` pairs of a MongoDB document."""


def fits_int64(value: int | float) -> bool:
    """Whether a number lies in MongoDB's 64-bit integer range (``-2**63 <= v < 2**63``)."""
    return -(2**63) <= value < 2**63


def md_query_of(metadata: Mapping[str, object]) -> tuple[tuple[str, object], ...]:
    """Top-level metadata pairs whose values MongoDB compares as Python does: ``str`` keys
    with values of exactly ``None``, ``bool``, ``int`` (64-bit), ``float`` or ``str`` (up to
    ``MD_QUERY_MAX_CHARS``). Other pairs are left out and always pass the server-side
    narrowing (``documents.metadata_query``), to be matched after decoding."""
    out = []
    for k, v in metadata.items():
        if type(k) is not str:
            continue
        kind = type(v)
        if type(v) is str and len(v) > MD_QUERY_MAX_CHARS:
            continue  # long text is not worth an index entry; filters re-check after decoding
        if v is None or kind in (str, bool, float) or (type(v) is int and fits_int64(v)):
            out.append((k, v))
    return tuple(out)


# --------------------------------------------------------------------------- steps v0 -> v1

MsgpackValue = Any
"""A value msgpack decodes from a stored record (str, int, float, bool, None, bytes, or a
list or map of these): its shape is the record's kind and version (see the steps below
and ``records``), which their readers unpack it as (a malformed one raising
``CorruptRecordError``); ``Any`` because that shape depends on the stored data."""

Envelope = list[MsgpackValue]
"""A Redis record envelope as msgpack decodes it: ``[version, field, ...]`` (the fields
of each kind and version are the steps' docstrings' and ``records``')."""


def _inline_metadata(md: Mapping[str, object] | None) -> tuple[str, bytes]:
    """v0 metadata was stored inline; v1 stores it serialized. ``("msgpack", ...)`` is
    what ``JsonPlusSerializer`` (and so ``EncryptedSerializer``) reads for a plain dict."""
    return "msgpack", ormsgpack.packb(dict(md or {}))


def _run_id(md: Mapping[str, object] | None) -> str | None:
    rid = (md or {}).get("run_id")
    return None if rid is None else str(rid)


def _checkpoint_doc_0(doc: Doc) -> Doc:
    md = doc.pop("metadata", None) or {}
    doc["checkpoint"] = doc.pop("checkpoint_bytes")
    mt, mb = _inline_metadata(md)
    doc["metadata_type"], doc["metadata"] = mt, mb
    doc["run_id"] = doc.get("run_id") or _run_id(md)
    doc["md"] = [{"k": k, "v": v} for k, v in md_query_of(md)]
    doc["v"] = 1
    return doc


def _write_doc_0(doc: Doc) -> Doc:
    doc.setdefault("task_path", "")
    doc.setdefault("seq", 0)
    doc["v"] = 1
    return doc


def _bump_doc(doc: Doc) -> Doc:
    doc["v"] = doc.get("v", 0) + 1
    return doc


def _cp_envelope_0(v: Envelope) -> Envelope:
    _, parent, ct, cb, md = v
    mt, mb = _inline_metadata(md)
    return [1, parent, ct, cb, mt, mb, _run_id(md), [list(kv) for kv in md_query_of(md or {})]]


def _w_envelope_0(v: Envelope) -> Envelope:
    _, task_id, idx, channel, t, b = v
    return [1, task_id, idx, channel, t, b, "", 0]


def _bump_envelope(v: Envelope) -> Envelope:
    return [v[0] + 1, *v[1:]]


DOCUMENT_STEPS: dict[str, dict[int, Callable[[Doc], Doc]]] = {
    "checkpoints": {0: _checkpoint_doc_0},
    "blobs": {0: _bump_doc},
    "writes": {0: _write_doc_0},
}
"""Collection kind -> {version n: function turning a version-n document into n+1}."""

ENVELOPE_STEPS: dict[str, dict[int, Callable[[Envelope], Envelope]]] = {
    "cp": {0: _cp_envelope_0},
    "w": {0: _w_envelope_0},
    "bl": {0: _bump_envelope},
}
"""Redis envelope kind -> {version n: function turning a version-n envelope into n+1}."""


def upgrade_document(kind: str, doc: DocView) -> Doc:
    """``doc`` (a ``kind`` document: checkpoints, blobs or writes) in the current format,
    upgraded step by step; a copy, the argument is not changed. A document without ``v``
    is version 1. Raises ``SchemaVersionError`` for a newer version and
    ``CorruptRecordError`` when a step cannot read it."""
    out = dict(doc)
    v = out.get("v", 1)
    check_not_newer(v, f"MongoDB document {doc.get('_id')!r}")
    while v < SCHEMA_VERSION:
        step = DOCUMENT_STEPS[kind].get(v)
        if step is None:
            raise SchemaVersionError(f"no migration of {kind} documents from version {v} "
                                     f"(document {doc.get('_id')!r})")
        try:
            out = step(out)
        except (KeyError, TypeError, ValueError) as exc:
            raise CorruptRecordError(f"{kind} document {doc.get('_id')!r} of version {v} "
                                     f"cannot be upgraded: {type(exc).__name__}: {exc}") from exc
        v = out["v"]
    return out


def upgrade_envelope(kind: str, value: Envelope, where: str) -> Envelope:
    """A decoded Redis envelope of an older version, upgraded to the current one.
    Raises ``CorruptRecordError`` (naming ``where``) when a step cannot read it."""
    v = value[0]
    while v < SCHEMA_VERSION:
        step = ENVELOPE_STEPS[kind].get(v)
        if step is None:
            raise SchemaVersionError(f"no migration of record at {where} from version {v}")
        try:
            value = step(value)
        except (TypeError, ValueError) as exc:
            raise CorruptRecordError(f"record at {where} of version {v} cannot be upgraded: "
                                     f"{type(exc).__name__}: {exc}") from exc
        v = value[0]
    return value
