"""The aggregation pipelines of the storage figures (sans-I/O): how many documents and
how many BSON bytes (``$bsonSize``) a collection, a thread, a channel or the inline values
of a thread's checkpoints take. Read by the storage footprint (``admin/extref_gc.py``),
the per-thread sizes (``inspection/storage.py``) and the thread's storage report
(``inspection/thread_size.py``); never by a saver's reads or writes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..core.ops import Query
from .documents import and_field


def _bson_bytes() -> dict[str, object]:
    """The ``$group`` accumulator of the documents' BSON size."""
    return {"$sum": {"$bsonSize": "$$ROOT"}}


def collection_size() -> list[Query]:
    """Pipeline of a whole collection's documents and bytes: one ``{_id: None, n, b}``."""
    return [{"$group": {"_id": None, "n": {"$sum": 1}, "b": _bson_bytes()}}]


def size_per_thread(thread_ids: Sequence[str] | None = None) -> list[Query]:
    """Pipeline of the documents and bytes of each thread (every thread, or only
    ``thread_ids``): ``{_id: thread_id, n, bytes}``."""
    match: list[Query] = [] if thread_ids is None else [
        {"$match": {"thread_id": {"$in": thread_ids}}}]
    return [*match, {"$group": {"_id": "$thread_id", "n": {"$sum": 1},
                                "bytes": _bson_bytes()}}]


def channel_sizes(thread_id: str) -> list[Query]:
    """Pipeline over the blobs: per namespace and channel of ``thread_id`` its versions
    and their bytes, ``{_id: {ns, ch}, n, bytes}``."""
    return [{"$match": {"thread_id": thread_id}},
            {"$group": {"_id": {"ns": "$checkpoint_ns", "ch": "$channel"}, "n": {"$sum": 1},
                        "bytes": _bson_bytes()}}]


def blob_sizes(blob_ids: Sequence[str]) -> list[Query]:
    """Pipeline over the blobs ``blob_ids``: per namespace and channel their bytes,
    ``{_id: {ns, ch}, bytes}``."""
    return [{"$match": {"_id": {"$in": blob_ids}}},
            {"$group": {"_id": {"ns": "$checkpoint_ns", "ch": "$channel"},
                        "bytes": _bson_bytes()}}]


def thread_size(thread_id: str, writes: bool = False) -> list[Query]:
    """Pipeline of the documents of ``thread_id`` in one collection and their bytes,
    ``{_id: None, n, bytes}``; ``writes``: ``n`` counts the pending writes, also those
    inside a document of one ``put_writes`` call (its array ``writes``)."""
    n: object = {"$cond": [{"$isArray": "$writes"}, {"$size": "$writes"}, 1]} if writes else 1
    return [{"$match": {"thread_id": thread_id}},
            {"$group": {"_id": None, "n": {"$sum": n}, "bytes": _bson_bytes()}}]


def inline_value_sizes(thread_id: str) -> list[Query]:
    """Pipeline over the checkpoints of ``thread_id``: one row per inline value
    (``inline.py``'s ``vals`` entries), ``{ns, k, bytes}``."""
    return [{"$match": {"thread_id": thread_id, "vals": {"$exists": True}}},
            {"$project": {"_id": 0, "checkpoint_ns": 1, "vals": 1}}, {"$unwind": "$vals"},
            {"$project": {"ns": "$checkpoint_ns", "k": "$vals.k",
                          "bytes": {"$bsonSize": "$vals"}}}]


def of_thread(thread_id: str, query: Mapping[str, object]) -> dict[str, object]:
    """``query`` (a referrer's, ``admin/referrers.py``) of the documents of
    ``thread_id``: ``and_field(query, "thread_id", thread_id)``."""
    return and_field(query, "thread_id", thread_id)
