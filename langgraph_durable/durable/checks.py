"""Checks of MongoDB documents before a read decodes them (sans-I/O): every field a read
needs is there and of its type, else ``CorruptRecordError`` naming the document (its
``_id``, thread, namespace and checkpoint) and the field (``documents._check`` runs
``checked`` after upgrading an older format)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..core.items import MANIFEST_TYPE, NODE_TYPE
from ..core.ops import DocView
from ..errors import CorruptRecordError

_STR, _BYTES, _INT, _LIST = (str,), (bytes,), (int,), (list,)
_OPT_STR = (str, type(None))

_FIELDS: dict[str, dict[str, tuple[type, ...]]] = {
    "checkpoints": {"checkpoint_ns": _STR, "checkpoint_id": _STR, "type": _STR,
                    "checkpoint": _BYTES, "metadata_type": _STR, "metadata": _BYTES,
                    "blob_fields": _LIST},
    "blobs": {"checkpoint_ns": _STR, "channel": _STR, "version": _STR, "type": _STR},
    "writes": {"checkpoint_ns": _STR, "checkpoint_id": _STR, "task_id": _STR, "idx": _INT,
               "channel": _STR, "type": _STR},
    "items": {"d": _BYTES, "type": _STR},
}
"""The fields a document of each collection must hold to be read, and their types
(``_checked``); ``data`` (bytes) too, unless the value is a manifest, a node or empty."""

_OPTIONAL: dict[str, tuple[type, ...]] = {
    "parent_checkpoint_id": _OPT_STR, "run_id": _OPT_STR, "md": _LIST, "refs": _LIST,
    "task_path": _STR, "seq": _INT, "v": _INT, "vals": _LIST}
"""Fields a document may lack, and their types when present."""

_TYPE_NAMES = {str: "a string", bytes: "binary data", int: "an integer", list: "an array",
               type(None): "null"}


def damaged(doc: DocView, kind: str, problem: str) -> CorruptRecordError:
    """``CorruptRecordError`` naming the ``kind`` document ``doc`` (its ``_id``, thread,
    namespace and checkpoint, as far as it holds them) and ``problem``."""
    def text(name: str) -> str | None:
        v = doc.get(name) if isinstance(doc, Mapping) else None
        return v if isinstance(v, str) else None

    tid, ns, cid = text("thread_id"), text("checkpoint_ns"), text("checkpoint_id")
    where = ", ".join(f"{n} {v!r}" for n, v in (("thread", tid), ("ns", ns),
                                               ("checkpoint", cid)) if v is not None)
    _id = doc.get("_id") if isinstance(doc, Mapping) else None
    return CorruptRecordError(
        f"MongoDB {kind} document {_id!r}" + (f" ({where})" if where else "")
        + f" is damaged: {problem}", tier="durable", thread_id=tid, checkpoint_ns=ns,
        checkpoint_id=cid, key=str(_id) if _id is not None else None)


_SPECS = {kind: tuple((name, types, name in want)
                      for name, types in (*want.items(), *_OPTIONAL.items()))
          for kind, want in _FIELDS.items()}
"""Per kind, ``(field, types, required)`` of every field ``checked`` looks at."""

_MISSING = object()


def checked(doc: DocView, kind: str) -> DocView:
    """``doc`` when it holds every field ``_FIELDS`` names for ``kind`` with its type (and
    ``_OPTIONAL`` ones with theirs); else ``CorruptRecordError`` naming the document and
    the field (about 4 us a checkpoints document)."""
    for name, types, required in _SPECS[kind]:
        v = doc.get(name, _MISSING)
        if v is _MISSING:
            if required:
                raise damaged(doc, kind, f"field {name!r} is missing")
        elif not isinstance(v, types) or v is True or v is False:
            expected = " or ".join(_TYPE_NAMES[t] for t in types)
            raise damaged(doc, kind, f"field {name!r} holds {type(v).__name__} "
                                      f"{short(v)}, not {expected}")
    if kind != "checkpoints" and doc["type"] not in (MANIFEST_TYPE, NODE_TYPE, "empty") \
            and not isinstance(doc.get("data"), bytes):
        raise damaged(doc, kind, "field 'data' is missing" if "data" not in doc else
                       f"field 'data' holds {type(doc['data']).__name__}, not binary data")
    for name in ("refs", "md", "blob_fields"):
        entries = doc.get(name)
        if entries and not all(_entry_ok(name, e) for e in entries):
            raise damaged(doc, kind, f"field {name!r} holds a malformed entry")
    return doc


def _entry_ok(name: str, e: object) -> bool:
    if name == "refs":
        return isinstance(e, bytes)
    if name == "md":
        return isinstance(e, Mapping) and isinstance(e.get("k"), str) and "v" in e
    return isinstance(e, list) and len(e) == 2 and all(isinstance(x, str) for x in e)


def short(v: object) -> str:
    """``repr(v)``, cut to 60 characters."""
    return repr(v) if len(repr(v)) <= 60 else repr(v)[:57] + "..."


def chain_link_of(doc: DocView) -> tuple[str, str | None, list[tuple[str, str]]]:
    """``(checkpoint_id, parent checkpoint_id or None, [(channel, version)])`` of a
    checkpoints document read with only those fields (the walk of
    ``plans/delta.py``); ``CorruptRecordError`` naming the document when one is missing
    or of the wrong type."""
    cid, parent, fields = (doc.get("checkpoint_id"), doc.get("parent_checkpoint_id"),
                           doc.get("blob_fields"))
    if not isinstance(cid, str):
        raise damaged(doc, "checkpoints", "field 'checkpoint_id' is missing or not a string")
    if not isinstance(parent, _OPT_STR):
        raise damaged(doc, "checkpoints", "field 'parent_checkpoint_id' is not a string")
    if not isinstance(fields, list) or not all(_entry_ok("blob_fields", e) for e in fields):
        raise damaged(doc, "checkpoints", "field 'blob_fields' is missing or malformed")
    return cid, parent, [(ch, ver) for ch, ver in fields]


def identity_of(doc: DocView, kind: str, names: Iterable[str]) -> list[Any]:
    """The values of the fields ``names`` of a ``kind`` document (what its ``_id`` is made
    of), for a copy under another thread (``copy_thread``); ``CorruptRecordError`` naming
    the document when one is missing or of the wrong type."""
    out = []
    for name in names:
        types = _FIELDS[kind].get(name, _STR)
        if not isinstance(doc.get(name), types):
            raise damaged(doc, kind, f"field {name!r} is missing or of the wrong type")
        out.append(doc[name])
    return out
