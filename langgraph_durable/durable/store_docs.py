"""MongoDB documents of the long-term memory store (sans-I/O): one document per item in
the collection ``<collection_prefix>store``.

``_id`` is ``doc_id(namespace text, key)`` (deterministic: a replayed outbox entry
rewrites the same document). A value's document holds ``namespace`` (the labels, an
array), ``ns`` (the labels joined by ``.`` with a final ``.``: a namespace prefix
``("a", "b")`` is the range ``"a.b." <= ns < "a.b/"``, an index scan of ``ns_key``),
``key`` (index ``ns_cseq_key``: search's order, ``plans/store_search.py``), the
record's versions ``seq``/``cseq``/``useq`` (us,
``core/store_records.py``), ``created_at`` and ``updated_at`` (UTC), ``exp`` (expiry,
ms; 0 = never; index ``exp`` for the TTL sweep), ``ttl`` (minutes), the serialized value
(``vt``/``vb``), its embeddings (``vec``: float32 bytes, one row per path of
``paths``) and, for an item put with an application state version, ``sv`` (the int;
absent otherwise: ``core/item_versions.py``). A delete leaves a *tombstone*: ``dead``
true, the ``seq`` of the delete and ``purge_at`` (when MongoDB's TTL monitor removes
it: the delete's time plus ``tombstone_ttl_s``), so a late copy of an older version never
brings the item back: every write is guarded by ``seq`` (``upsert_record``).

The collection is not sharded by ``thread_id`` (a store has no threads): on a sharded
cluster shard it by ``ns``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import timedelta

from ..core.ops import Doc, DocView, Query, ReplaceDoc
from ..core.store_records import (
    StoreBody,
    StoreRecord,
    item_field,
    ms_to_datetime,
    ns_text,
)
from .documents import doc_id


def store_id(namespace: tuple[str, ...], key: str) -> str:
    """The ``_id`` of the item's document."""
    return doc_id(ns_text(namespace), key)


def store_doc(rec: StoreRecord, tombstone_ttl_s: int) -> Doc:
    """The document of record ``rec`` (a value's or a tombstone)."""
    ns, key = rec.namespace, rec.key
    doc: Doc = {"_id": store_id(ns, key), "ns": ns_text(ns) + ".", "namespace": list(ns),
                "key": key, "seq": rec.seq}
    if rec.dead or rec.body is None:
        doc.update(dead=True, purge_at=ms_to_datetime(rec.seq // 1000)
                   + timedelta(seconds=tombstone_ttl_s))
        return doc
    body = rec.body
    doc.update(cseq=rec.cseq, useq=rec.useq, created_at=ms_to_datetime(rec.cseq // 1000),
               updated_at=ms_to_datetime(rec.useq // 1000), exp=rec.expires_ms,
               ttl=body.ttl_min, vt=body.value[0] if body.value else None,
               vb=body.value[1] if body.value else None, vec=body.vectors or None,
               paths=list(body.paths))
    if body.state_version is not None:
        doc["sv"] = body.state_version
    return doc


def upsert_record(doc: Doc) -> ReplaceDoc:
    """The write of ``doc``: replace the stored document only when it holds an older
    ``seq``, insert when none. A stored newer (or equal) version makes the upsert's insert
    a duplicate key error, which the writer ignores (``fence.bulk_ignoring_newer``)."""
    return ReplaceDoc({"_id": doc["_id"], "seq": {"$lt": doc["seq"]}}, doc, upsert=True)


def record_of(doc: DocView, *, vectors: bool = True) -> StoreRecord:
    """The ``StoreRecord`` a document holds (``raw`` empty); ``vectors`` False: the
    document was read without its embeddings (``WITHOUT_VECTORS``), the record is
    ``partial``."""
    field = item_field(tuple(doc["namespace"]), str(doc["key"]))
    if doc.get("dead"):
        return StoreRecord(field, int(doc["seq"]), 0, 0, True, 0, None)
    vt, vb = doc.get("vt"), doc.get("vb")
    sv = doc.get("sv")
    body = StoreBody((str(vt), bytes(vb or b"")) if vt is not None else None, doc.get("ttl"),
                     bytes(doc.get("vec") or b""), tuple(doc.get("paths") or ()),
                     None if sv is None else int(sv))
    return StoreRecord(field, int(doc["seq"]), int(doc["cseq"]), int(doc["useq"]), False,
                       int(doc.get("exp") or 0), body, partial=not vectors)


def prefix_range(prefix: tuple[str, ...]) -> dict[str, str]:
    """The ``ns`` range of the namespace ``prefix``: ``{"$gte": "a.b.", "$lt": "a.b/"}``
    (``/`` follows ``.``); ``{}`` for ``()`` (every namespace)."""
    if not prefix:
        return {}
    head = ns_text(prefix)
    return {"$gte": head + ".", "$lt": head + "/"}


def prefix_query(prefix: tuple[str, ...]) -> dict[str, object]:
    """The documents (tombstones and expired values too: the reader drops them) under
    the namespace ``prefix`` (every one for ``()``): one range of the ``ns_key`` index,
    a condition every server answers from the index alone."""
    rng = prefix_range(prefix)
    return {"ns": rng} if rng else {}


VALUES: dict[str, int] = {"$gte": 0}
"""The ``cseq`` condition of the documents holding a value: a tombstone has no ``cseq``
(every ``cseq`` is a time in microseconds, >= 0), so an index range on it leaves the
tombstones out at the server (MongoDB's index bounds skip them)."""


def values_under(prefix: tuple[str, ...]) -> dict[str, object]:
    """The documents holding a value (expired ones too: the reader drops them) under the
    namespace ``prefix`` (every namespace for ``()``): ``_values_in`` its range."""
    return _values_in(prefix_range(prefix))


def _values_in(ns: Mapping[str, str]) -> dict[str, object]:
    """The documents holding a value whose ``ns`` is in the range ``ns`` (``{}``: any):
    fields of the index ``ns_cseq_key`` only, ``ns`` first (SecantusDB walks its ``ns``
    range and filters; MongoDB bounds both fields)."""
    return {"ns": dict(ns) or {"$gte": ""}, "cseq": dict(VALUES)}


def live_query(now_ms: int) -> dict[str, object]:
    """The live documents: not deleted, not expired at ``now_ms``."""
    return {"dead": {"$exists": False}, "$or": [{"exp": 0}, {"exp": {"$gt": now_ms}}]}


def items_named(ids: Sequence[str]) -> dict[str, object]:
    """Filter of the documents of the items whose ``_id``s (``store_id``) are ``ids``."""
    return {"_id": {"$in": ids}}


LIVENESS: Query = {"ns": 1, "dead": 1, "exp": 1}
"""The projection ``is_live`` needs."""


def is_live(doc: Doc, now_ms: int) -> bool:
    """Whether ``doc`` is live at ``now_ms``: what ``live_query`` matches, decided here
    (a filter of ``_id`` alone is answered from the ``_id`` index by every server;
    SecantusDB scans the collection for one that adds ``live_query``)."""
    exp = doc.get("exp")
    return "dead" not in doc and exp is not None and (exp == 0 or exp > now_ms)


def live_per_namespace(now_ms: int) -> list[Query]:
    """Pipeline counting the documents live at ``now_ms`` per namespace, ``{_id: ns, n}``
    (``ns`` as stored: the namespace's text and a final ``.``)."""
    return [{"$match": live_query(now_ms)}, {"$group": {"_id": "$ns", "n": {"$sum": 1}}}]


def page_query(rng: Mapping[str, str], last: tuple[str, int, str] | None,
               stage: str) -> Query:
    """Filter of the next page of a keyset scan of the values (no tombstones:
    ``VALUES``) in the namespace range ``rng`` (``prefix_range``; ``{}``: every
    namespace), in ``SEARCH_SORT`` order, after the document ordered ``last`` (``(ns,
    cseq, key)``; None: the first page). ``stage`` ``"values"``: ``ns``'s values from
    ``cseq`` on (``$gte``: the reader drops those read); else the namespaces after ``ns``
    in the range."""
    if last is None:
        return _values_in(rng)
    ns, cseq, key = last
    if stage == "values":
        return {"ns": ns, "cseq": {"$gte": cseq}}
    after = {"$gt": ns}
    if "$lt" in rng:
        after["$lt"] = rng["$lt"]
    return _values_in(after)


def vectors_after(last: object | None) -> dict[str, object]:
    """Filter of the live documents holding embeddings (``vec``), with ``_id`` above
    ``last`` (None: from the first): a rebuild of the vector index reads them by
    ``_id``."""
    query: dict[str, object] = {"vec": {"$ne": None}, "dead": {"$exists": False}}
    return dict(query, _id={"$gt": last}) if last is not None else query


def vector_search_probe(dims: int) -> list[Query]:
    """Pipeline of one ``$vectorSearch`` stage over the index ``vec`` (a zero vector of
    ``dims``, one hit): whether the server runs the stage at all."""
    return [{"$vectorSearch": {"index": "vec", "path": "vec", "limit": 1,
                               "numCandidates": 10, "queryVector": [0.0] * dims}}]


WITHOUT_VECTORS: Query = {"vec": 0}
"""The projection of a search that needs no embeddings."""

SEARCH_SORT: tuple[tuple[str, int], ...] = (("ns", 1), ("cseq", 1), ("key", 1))
"""The search order (``plans/store_search.py``), served by the index ``ns_cseq_key``."""


def expired_query(now_ms: int) -> dict[str, object]:
    """Documents of values expired at ``now_ms`` (what the TTL sweep deletes)."""
    return {"exp": {"$gt": 0, "$lte": now_ms}, "dead": {"$exists": False}}
