"""Values too big for one MongoDB document (16 MiB BSON limit), stored in chunks (sans-I/O).

A binary field of a document the saver writes (blobs ``data``, writes ``data``,
checkpoints ``checkpoint`` and ``metadata``) longer than ``THRESHOLD_BYTES`` is cut into
pieces of at most ``THRESHOLD_BYTES`` stored in the ``{collection_prefix}chunks``
collection. The owning document keeps a small descriptor in that field,
``{"chunks": n, "size": bytes, "sha256": hex digest}``, lists the field under
``chunked`` and carries ``v = CHUNKED_VERSION`` (a checkpoint holding inline values keeps
its higher ``INLINE_VERSION``), so a package that predates chunking refuses it with
``SchemaVersionError`` instead of misreading the descriptor.

A chunk document is ``{_id, thread_id, checkpoint_ns, checkpoint_id, owner, field,
sha256, n, data, put_ms}`` (``checkpoint_id`` is None for a blob's chunks). Its ``_id`` is
``doc_id(owner _id, field, sha256, n)``: deterministic, so every flusher write stays an
idempotent upsert, and content-addressed, so two values of one document (an overwritten
special-channel write) never share a chunk. Chunks are written before the documents
that refer to them, and deleted after them, so a visible document always has its chunks.
The chunks of a value that lost an overwrite (or an insert-once write's second value)
stay until the checkpoint they belong to is deleted.

``put_ms`` is the latest ``put_ms`` of the owners written with the chunk (``$max``: an item
and its chunks are shared by every run that stores the same content, and a stalled round
may write them again with an older time). Every owner's ``put_ms`` is at most its chunks',
so a delete that keeps the documents stored after it began (``documents.stored_before``)
keeps their chunks with the same filter, whichever order the writes raced in. Chunks
stored before chunks had a ``put_ms`` have none, and count as stored before.

Reads call ``load_plan``: one extra query (by ``_id``) only when a document has chunked
fields, verifying size and digest. Tests lower the threshold with
``monkeypatch.setattr(chunks, "THRESHOLD_BYTES", n)`` (read at every call).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping, Sequence

from ..core.ops import BulkWrite, Doc, DocView, Find, Plan, ReplaceDoc, UpdateDoc, ask
from ..core.records import CHUNKED_VERSION, SCHEMA_VERSION
from ..errors import CorruptRecordError
from .documents import doc_id, target

THRESHOLD_BYTES = 8 * 1024 * 1024
"""Binary fields longer than this many bytes are chunked; also the size of one chunk.
8 MiB leaves a document and its other fields far under MongoDB's 16 MiB limit."""

FIELDS: dict[str, tuple[str, ...]] = {
    "checkpoints": ("checkpoint", "metadata"),
    "blobs": ("data",),
    "writes": ("data",),
    "items": ("data",),
}
"""Collection kind -> the binary fields that may be chunked."""


def chunk_id(owner: str, field: str, sha256: str, n: int) -> str:
    """``_id`` of chunk ``n`` of ``field`` of document ``owner`` holding bytes ``sha256``."""
    return doc_id(owner, field, sha256, n)


def split(kind: str, doc: Doc) -> tuple[Doc, list[Doc]]:
    """``(document to store, its chunk documents)`` for a ``kind`` document (checkpoints,
    blobs, writes): fields over ``THRESHOLD_BYTES`` become descriptors. A document with
    nothing to chunk is returned as it is, with no chunks."""
    size = THRESHOLD_BYTES
    big = [f for f in FIELDS[kind] if isinstance(doc.get(f), bytes)
           and len(doc[f]) > size]
    if not big:
        return doc, []
    out = dict(doc)
    chunks: list[Doc] = []
    for f in big:
        data = doc[f]  # bytes (or bson.Binary read back, a bytes subclass): no copy
        sha = hashlib.sha256(data).hexdigest()
        n = (len(data) + size - 1) // size
        out[f] = {"chunks": n, "size": len(data), "sha256": sha}
        view = memoryview(data)
        for i in range(n):
            chunks.append({
                "_id": chunk_id(doc["_id"], f, sha, i),
                "thread_id": doc["thread_id"],
                "checkpoint_ns": doc.get("checkpoint_ns", ""),
                "checkpoint_id": doc.get("checkpoint_id"),
                "owner": doc["_id"], "field": f, "sha256": sha, "n": i,
                "data": bytes(view[i * size:(i + 1) * size]),
                **({"put_ms": doc["put_ms"]} if "put_ms" in doc else {}),
            })
    out["chunked"] = big
    out["v"] = max(CHUNKED_VERSION, doc.get("v", SCHEMA_VERSION))  # inline values: theirs
    return out, chunks


def split_all(kind: str, docs: Iterable[Doc]
              ) -> tuple[list[Doc], list[Doc]]:
    """``split`` of many documents: ``(documents, all their chunks)``."""
    out, chunks = [], []
    for d in docs:
        doc, more = split(kind, d)
        out.append(doc)
        chunks += more
    return out, chunks


def upserts(chunks: Sequence[Doc]) -> list[ReplaceDoc | UpdateDoc]:
    """Idempotent upserts of chunk documents (content-addressed ``_id``; the filter holds
    ``thread_id`` too, the shard key: ``documents.target``); a chunk's ``put_ms`` only
    grows (``$max``)."""
    out: list[ReplaceDoc | UpdateDoc] = []
    for c in chunks:
        if "put_ms" not in c:
            out.append(ReplaceDoc(target(c), c, upsert=True))
            continue
        fields = {k: v for k, v in c.items() if k not in ("_id", "put_ms")}
        out.append(UpdateDoc(target(c), {"$set": fields, "$max": {"put_ms": c["put_ms"]}},
                             upsert=True))
    return out


def write_plan(collection: str, chunks: Sequence[Doc]) -> Plan[None]:
    """Upsert ``chunks`` into ``collection`` (nothing when empty); call it before writing
    the documents that refer to them."""
    if chunks:
        yield BulkWrite(collection, upserts(chunks))


def moved(chunks: Iterable[Doc], owners: Mapping[str, DocView]
          ) -> list[Doc]:
    """Copies of ``chunks`` for documents copied under new ``_id``s (``copy_thread``):
    ``owners`` maps a source document's ``_id`` to its copy, whose ``put_ms`` (the copy's
    time) the chunk's copy takes. A chunk whose value its owner no longer refers to (an
    overwritten write's) is left out."""
    out = []
    for c in chunks:
        doc = owners.get(c["owner"])
        desc = doc.get(c["field"]) if doc is not None else None
        if not isinstance(desc, Mapping) or desc.get("sha256") != c["sha256"]:
            continue
        copy = {**c, "_id": chunk_id(doc["_id"], c["field"], c["sha256"], c["n"]),  # type: ignore[index]
                "thread_id": doc["thread_id"], "owner": doc["_id"]}  # type: ignore[index]
        copy.pop("put_ms", None)
        if "put_ms" in doc:  # type: ignore[operator]
            copy["put_ms"] = doc["put_ms"]  # type: ignore[index]
        out.append(copy)
    return out


def _descriptors(doc: DocView) -> list[tuple[str, DocView]]:
    """The chunked fields present in ``doc`` (a projection may have left some out)."""
    return [(f, doc[f]) for f in doc.get("chunked") or ()
            if isinstance(doc.get(f), Mapping)]


def has_chunks(doc: DocView) -> bool:
    """True when ``doc`` holds a descriptor that ``load_plan`` must replace."""
    return bool(_descriptors(doc))


def load_plan(collection: str, docs: Sequence[Doc]) -> Plan[list[Doc]]:
    """``docs`` with every chunked field reassembled from ``collection`` (the chunks
    collection): one query, only when a document has chunks. Returns a list in the same
    order; reassembled documents are copies in the unchunked format (``v`` =
    ``SCHEMA_VERSION``). Raises ``CorruptRecordError`` naming thread, document, field and
    chunk when a chunk is missing or size or digest do not match."""
    wanted = [(i, d) for i, d in enumerate(docs) if has_chunks(d)]
    if not wanted:
        return list(docs)
    ids = [chunk_id(d["_id"], f, desc["sha256"], n)
           for _, d in wanted for f, desc in _descriptors(d) for n in range(int(desc["chunks"]))]
    found = yield from ask(Find(collection, {"_id": {"$in": ids}}))
    by_id = {c["_id"]: c["data"] for c in found}
    out = list(docs)
    for i, d in wanted:
        new = dict(d)
        for f, desc in _descriptors(d):
            new[f] = _join(d, f, desc, by_id)  # bytes: stored as BSON binary too
        del new["chunked"]
        if new.get("v") == CHUNKED_VERSION:
            new["v"] = SCHEMA_VERSION
        out[i] = new
    return out


def _join(doc: DocView, f: str, desc: DocView,
          by_id: DocView) -> bytes:
    where = (f"field {f!r} of MongoDB document {doc['_id']!r} (thread "
             f"{doc.get('thread_id')!r})")
    parts = []
    for n in range(int(desc["chunks"])):
        piece = by_id.get(chunk_id(doc["_id"], f, desc["sha256"], n))
        if piece is None:
            raise CorruptRecordError(f"chunk {n} of {desc['chunks']} of {where} is missing "
                                     f"(sha256 {desc['sha256']})")
        parts.append(piece)
    data = b"".join(parts)
    if len(data) != desc["size"] or hashlib.sha256(data).hexdigest() != desc["sha256"]:
        raise CorruptRecordError(
            f"the {desc['chunks']} chunks of {where} hold {len(data)} bytes with another "
            f"digest than the {desc['size']} bytes (sha256 {desc['sha256']}) it refers to")
    return data
