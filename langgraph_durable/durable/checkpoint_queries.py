"""The queries of a thread's checkpoints, blobs, writes, items and chunks documents
(sans-I/O): every filter and aggregation pipeline the plans send about them, built here
once and named by what it selects (the documents themselves: ``documents.py``).

Each builder returns exactly the dict the plans sent before they were named: the same
fields in the same order (``thread_id`` first, then ``checkpoint_ns``, then
``checkpoint_id``), so MongoDB picks the same index (``documents.INDEXES``):
``thread_ns_checkpoint`` for the checkpoints and the writes, ``thread_ns_checkpoint_owner``
for the chunks, ``thread_digest`` for the items.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from ..core.ops import Query
from .documents import and_field, doc_id

# ------------------------------------------------------------------------ checkpoints


def checkpoints_page(thread_id: str, ns: str, *, exact: str | None = None,
                     before: str | None = None,
                     metadata: Mapping[str, object] | None = None) -> dict[str, object]:
    """Filter of the checkpoints of ``(thread_id, ns)`` a page of ``list``/``get_tuple``
    reads: the one ``exact`` id, else those below ``before`` (``$lt``), else all; then
    ``metadata`` (``documents.metadata_query``'s clauses, ``{}`` adds nothing).
    ``{"thread_id": t, "checkpoint_ns": ns, "checkpoint_id": {"$lt": before}, ...}``."""
    q: dict[str, object] = {"thread_id": thread_id, "checkpoint_ns": ns}
    if exact:
        q["checkpoint_id"] = exact
    elif before:
        q["checkpoint_id"] = {"$lt": before}
    if metadata:
        q.update(metadata)
    return q


def checkpoints_before(thread_id: str, ns: str, before_id: str) -> dict[str, object]:
    """Filter of the checkpoints of ``(thread_id, ns)`` older than ``before_id``."""
    return checkpoints_page(thread_id, ns, before=before_id)


def excluding(query: Query, checkpoint_ids: Iterable[str]) -> dict[str, object]:
    """``query`` without the checkpoints ``checkpoint_ids`` (those Redis answered):
    ``and_field(query, "checkpoint_id", {"$nin": sorted ids})``."""
    return and_field(query, "checkpoint_id", {"$nin": sorted(checkpoint_ids)})


def checkpoints_up_to(thread_id: str, ns: str, checkpoint_id: str) -> dict[str, object]:
    """Filter of the checkpoints of ``(thread_id, ns)`` at or below ``checkpoint_id``
    (``$lte``: a walk of ancestors from it, newest first)."""
    return {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": {"$lte": checkpoint_id}}


def checkpoints_between(thread_id: str, ns: str, lo: str, hi: str) -> dict[str, object]:
    """Filter of the checkpoints of ``(thread_id, ns)`` with ids from ``lo`` to ``hi``
    (both included)."""
    return {"thread_id": thread_id, "checkpoint_ns": ns,
            "checkpoint_id": {"$gte": lo, "$lte": hi}}


def checkpoints_of_runs(run_ids: Iterable[object]) -> dict[str, object]:
    """Filter of every thread's checkpoints whose metadata ``run_id`` is one of
    ``run_ids`` (each as ``str``; the sparse index ``run_id``)."""
    return {"run_id": {"$in": [str(r) for r in run_ids]}}


def inline_manifests_of(thread_id: str) -> dict[str, object]:
    """Filter of the checkpoints of ``thread_id`` holding a manifest among their inline
    values (``vals.refs``: ``inline.py``)."""
    return {"thread_id": thread_id, "vals.refs": {"$exists": True}}


def first_per_namespace(thread_id: str) -> list[Query]:
    """Pipeline over the checkpoints: per namespace of ``thread_id`` its smallest
    checkpoint id, ``{_id: checkpoint_ns, first}``."""
    return [{"$match": {"thread_id": thread_id}},
            {"$group": {"_id": "$checkpoint_ns", "first": {"$min": "$checkpoint_id"}}}]


def first_per_thread() -> list[Query]:
    """Pipeline over the checkpoints: per thread its smallest checkpoint id,
    ``{_id: thread_id, first}``."""
    return [{"$group": {"_id": "$thread_id", "first": {"$min": "$checkpoint_id"}}}]


def each_thread() -> list[Query]:
    """Pipeline of every ``thread_id`` of a collection (checkpoints, tombstones), one
    ``{_id: thread_id}`` each."""
    return [{"$group": {"_id": "$thread_id"}}]


def thread_ids_after(cursor: str | None, limit: int) -> list[Query]:
    """Pipeline over the checkpoints: the first ``limit`` thread ids above ``cursor``
    (None: from the first) in order, ``{_id: thread_id}`` each."""
    above: dict[str, object] = {"thread_id": {"$gt": cursor}} if cursor is not None else {}
    return [{"$match": above}, {"$group": {"_id": "$thread_id"}}, {"$sort": {"_id": 1}},
            {"$limit": limit}]


def namespace_counts(cursor: str | None, last: str) -> list[Query]:
    """Pipeline over the checkpoints of the threads above ``cursor`` (None: from the
    first) up to ``last``: per thread and namespace the checkpoints and the newest id,
    ``{_id: {t, ns}, n, last}``."""
    span = {"$lte": last, **({"$gt": cursor} if cursor is not None else {})}
    return [{"$match": {"thread_id": span}},
            {"$group": {"_id": {"t": "$thread_id", "ns": "$checkpoint_ns"}, "n": {"$sum": 1},
                        "last": {"$max": "$checkpoint_id"}}}]


# ------------------------------------------------------------------------ writes, blobs


def writes_of(thread_id: str, ns: str, checkpoint_ids: Sequence[str]) -> dict[str, object]:
    """Filter of the pending writes of the checkpoints ``checkpoint_ids`` of
    ``(thread_id, ns)``."""
    return {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": {"$in": checkpoint_ids}}


def writes_pipeline(thread_id: str, ns: str, checkpoint_ids: Sequence[str],
                    join: Sequence[Query] = ()) -> list[Query]:
    """Pipeline of ``writes_of`` followed by the stages ``join`` (``item_lookup``)."""
    return [{"$match": writes_of(thread_id, ns, checkpoint_ids)}, *join]


def manifests_of(thread_id: str) -> dict[str, object]:
    """Filter of the blobs or writes of ``thread_id`` whose value is a manifest
    (``refs``)."""
    return {"thread_id": thread_id, "refs": {"$exists": True}}


# ------------------------------------------------------------------------ items


def item_lookup(items: str, thread_id: str, nested: bool = True) -> dict[str, dict[str, object]]:
    """``$lookup`` stage joining, from the collection ``items``, the items of
    ``thread_id`` a document's ``refs`` name (and, ``nested``, the items of those that
    are nodes) as ``found`` (each with ``sub``)."""
    pipeline: list[Query] = [{"$match": {"thread_id": thread_id}}]
    stage: dict[str, object] = {"from": items, "localField": "refs",
                                "foreignField": "d", "as": "found", "pipeline": pipeline}
    if nested:
        inner = item_lookup(items, thread_id, nested=False)["$lookup"]
        pipeline.append({"$lookup": {**inner, "as": "sub"}})
    return {"$lookup": stage}


def items_pipeline(items: str, thread_id: str, digests: Iterable[bytes]) -> list[Query]:
    """Pipeline over the collection ``items``: the items and nodes ``digests`` of
    ``thread_id``, each node with its items as ``sub``."""
    return [
        {"$match": {"thread_id": thread_id, "d": {"$in": [bytes(d) for d in digests]}}},
        {"$lookup": {**item_lookup(items, thread_id, nested=False)["$lookup"], "as": "sub"}},
    ]


def items_stored_before(thread_id: str, digests: Iterable[bytes],
                        at_ms: int) -> dict[str, object]:
    """Filter of the items ``digests`` of ``thread_id`` that no write stored after
    ``at_ms`` (``put_ms``)."""
    return {"_id": {"$in": [doc_id(thread_id, d.hex()) for d in digests]},
            "put_ms": {"$not": {"$gt": at_ms}}}


# ------------------------------------------------------------------------ chunks


def chunks_of_checkpoints(thread_id: str, ns: str,
                          checkpoint_ids: Sequence[str]) -> dict[str, object]:
    """Filter of the chunks of the checkpoints (and their writes) ``checkpoint_ids`` of
    ``(thread_id, ns)``."""
    return {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": {"$in": checkpoint_ids}}


def chunks_of_owners(thread_id: str, owners: Sequence[str]) -> dict[str, object]:
    """Filter of the chunks of ``thread_id`` whose owning documents' ``_id``s are
    ``owners``."""
    return {"thread_id": thread_id, "owner": {"$in": owners}}


def id_stored_before(doc_id: str, at_ms: int | None) -> dict[str, object]:
    """Filter of the document ``doc_id``, only when no write stored it after ``at_ms``
    (``put_ms``; None: whenever stored)."""
    if at_ms is None:
        return {"_id": doc_id}
    return {"_id": doc_id, "put_ms": {"$not": {"$gt": at_ms}}}


def chunks_stored_before(thread_id: str, at_ms: int, *, owners: Sequence[str] = (),
                         checkpoint: tuple[str, str] | None = None) -> dict[str, object]:
    """Filter of the chunks of ``thread_id`` that no write stored after ``at_ms``
    (``put_ms``, ``durable/chunks.py``), either of the documents whose ``_id``s are
    ``owners``, or of checkpoint ``(checkpoint_ns, checkpoint_id)`` and its writes."""
    where: dict[str, object] = ({"checkpoint_ns": checkpoint[0], "checkpoint_id": checkpoint[1]}
                                if checkpoint else {"owner": {"$in": list(owners)}})
    return {"thread_id": thread_id, **where, "put_ms": {"$not": {"$gt": at_ms}}}


def chunks_of_threads(thread_ids: Sequence[str], owners: Sequence[str]) -> dict[str, object]:
    """Filter of the chunks of ``thread_ids`` whose owning documents' ``_id``s are
    ``owners``."""
    return {"thread_id": {"$in": thread_ids}, "owner": {"$in": owners}}
