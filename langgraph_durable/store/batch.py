"""One ``batch`` of the memory store as a sans-I/O plan (``batch_plan``): LangGraph's
operations (``GetOp``, ``SearchOp``, ``ListNamespacesOp``, ``PutOp``) answered as
``InMemoryStore`` answers them, on the plans of ``plans/store_items.py``; and what a put sends
(``prepare_put``: the serialized value and its embeddings, computed by the caller, which
owns the sync or async embedding call).

As in ``InMemoryStore.batch``, the reads of a batch see the store as it was before the
batch, and of several puts of one item in a batch the last one counts.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.store.base import (
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

from ..core.item_versions import ItemVersions
from ..core.ops import Op as IoOp
from ..core.ops import Plan
from ..core.store_records import SEP, StoreRecord
from ..errors import InvalidIdentifierError, SerializationError
from ..plans import store_items as P
from ..plans import store_search as Q
from ..plans.context import Context
from ..plans.store_match import (
    VectorScorer,
    list_namespaces,
    matches_filter,
)
from ..plans.store_vectors import IndexedSearch

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)

if TYPE_CHECKING:
    import numpy as np


def us_to_datetime(us: int) -> datetime:
    """A UTC datetime of ``us`` microseconds since the epoch (exact)."""
    return _EPOCH + timedelta(microseconds=us)


class Prepared:
    """A put ready to send: ``namespace``, ``key``, the packed ``body`` (``b""`` for a
    delete) and ``expires_ms`` (0 = never)."""

    __slots__ = ("namespace", "key", "body", "expires_ms")

    def __init__(self, namespace: tuple[str, ...], key: str, body: bytes,
                 expires_ms: int) -> None:
        self.namespace, self.key, self.body, self.expires_ms = (namespace, key, body,
                                                                expires_ms)


def check_op(op: Op) -> None:
    """Refuse what the store cannot name, before anything is written or read: a
    namespace label holding NUL (``InvalidNamespaceError``, as LangGraph's own checks
    of ``.`` and empty labels, ``validate_op_namespace``, which the caller runs too)
    and an item key holding NUL (``InvalidIdentifierError``), the separator of the
    store's Redis fields and outbox members (``core/store_records.item_field``)."""
    if isinstance(op, (GetOp, PutOp)):
        labels: tuple[str, ...] = op.namespace
    elif isinstance(op, SearchOp):
        labels = op.namespace_prefix
    else:
        return
    for label in labels:
        if isinstance(label, str) and (SEP in label or not _utf8(label)):
            raise InvalidNamespaceError(
                f"Invalid namespace label {label!r} found in {labels}: namespace labels "
                "cannot contain NUL ('\\x00') or a lone surrogate (no UTF-8 form)")
    if isinstance(op, SearchOp):
        return
    if not isinstance(op.key, str):
        raise InvalidIdentifierError(
            f"store item key {op.key!r} of namespace {op.namespace!r} is of type "
            f"{type(op.key).__name__}, not str")
    if SEP in op.key or not _utf8(op.key):
        raise InvalidIdentifierError(
            f"store item key {op.key!r} of namespace {op.namespace!r} holds a NUL "
            "('\\x00'), which separates namespace and key in the store's Redis fields and "
            "outbox entries, or a lone surrogate (no UTF-8 form): DurableStore cannot "
            "store it")
    if isinstance(op, PutOp) and op.value is not None and op.ttl is not None:
        problem = ttl_problem(op.ttl)
        if problem:
            raise ValueError(f"store item {op.key!r} of namespace {op.namespace!r}: "
                             f"ttl={op.ttl!r} {problem}")


def _utf8(text: str) -> bool:
    try:
        text.encode()
    except UnicodeEncodeError:
        return False
    return True


MAX_TTL_MINUTES = 1_000_000_000
"""Longest TTL of a store item, minutes (about 1,900 years): its expiry must fit the
record's 16-digit millisecond field (``hot/lua/store_put.lua``) and a ``datetime``."""

MAX_ITEM_BYTES = 16 * 1024 * 1024 - 64 * 1024
"""Largest item a put takes (its serialized value, embeddings, namespace and key, bytes):
the item is one MongoDB document (16 MiB at most, with room for its other fields)."""


def ttl_problem(ttl: object) -> str | None:
    """What is wrong with ``ttl`` as a TTL in minutes (a number from 0, which means none
    as before, to ``MAX_TTL_MINUTES``), or None when nothing is."""
    if isinstance(ttl, bool) or not isinstance(ttl, (int, float)):
        return "is not a number of minutes (None: no expiry)"
    if not 0 <= ttl <= MAX_TTL_MINUTES:  # NaN fails both comparisons
        return (f"is not a number of minutes from 0 to {MAX_TTL_MINUTES:,} "
                "(None: no expiry)")
    return None


def prepare_put(op: PutOp, serde: SerializerProtocol, now_ms: int,
                vectors: np.ndarray | None = None, paths: Sequence[str] = (),
                state_version: int | None = None) -> Prepared:
    """What ``op`` sends: its value serialized by ``serde``, its embeddings (float32
    rows, one per path of ``paths``), its expiry ``op.ttl`` minutes after ``now_ms`` and
    the store's ``state_version`` (None: none recorded, the four-element body)."""
    if op.value is None:
        return Prepared(op.namespace, op.key, b"", 0)
    try:
        typed = serde.dumps_typed(dict(op.value))
    except (TypeError, ValueError) as exc:
        raise SerializationError(f"store item {op.key!r} of namespace {op.namespace!r}: "
                                 f"its value cannot be serialized ({exc})") from exc
    raw = b""
    if vectors is not None:
        import numpy as np  # only with an index (semantic search)

        raw = np.asarray(vectors, dtype=np.float32).tobytes()
    size = (len(typed[1]) + len(raw) + 2 * len(SEP.join(op.namespace).encode())
            + len(op.key.encode()))
    if size > MAX_ITEM_BYTES:
        raise SerializationError(
            f"store item {op.key!r} of namespace {op.namespace!r} is {size:,} bytes "
            f"serialized (value, embeddings, namespace and key), over {MAX_ITEM_BYTES:,}: "
            "an item is one MongoDB document (16 MiB at most). Keep big data elsewhere "
            "(object storage, a checkpointed state) and a reference to it in the item")
    ttl = op.ttl if op.ttl else None
    expires = now_ms + round(ttl * 60_000) if ttl else 0
    return Prepared(op.namespace, op.key, P.put_body(typed, ttl, raw, paths, state_version),
                    expires)


class Answers:
    """Turns records into LangGraph's items: ``serde`` decodes values, ``versions`` (the
    store's state versions, ``core/item_versions.py``) migrates those of an older
    version."""

    def __init__(self, serde: SerializerProtocol,
                 versions: ItemVersions | None = None) -> None:
        self.serde = serde
        self.versions = versions or ItemVersions()

    def value(self, rec: StoreRecord) -> dict[str, Any]:
        """The item's value (a dict) as the store's running state version sees it
        (migrated in memory when older); raises ``StateVersionError`` /
        ``StateMigrationError`` as ``ItemVersions.migrate``."""
        body = rec.body
        assert body is not None and body.value is not None
        value: dict[str, Any] = self.serde.loads_typed(body.value)
        if self.versions.current is None or body.state_version == self.versions.current:
            return value
        return self.versions.migrate(rec.namespace, rec.key, body.state_version, value)

    def item(self, rec: StoreRecord, value: dict[str, Any] | None = None) -> Item:
        """The ``Item`` of a live record."""
        return Item(value=self.value(rec) if value is None else value, key=rec.key,
                    namespace=rec.namespace, created_at=us_to_datetime(rec.cseq),
                    updated_at=us_to_datetime(rec.useq))

    def search_item(self, rec: StoreRecord, value: dict[str, Any],
                    score: float | None) -> SearchItem:
        """The ``SearchItem`` of a live record."""
        return SearchItem(namespace=rec.namespace, key=rec.key, value=value,
                          created_at=us_to_datetime(rec.cseq),
                          updated_at=us_to_datetime(rec.useq), score=score)


def vectors_of(rec: StoreRecord, dims: int) -> np.ndarray:
    """A record's embeddings as float32 rows (0 rows when it has none)."""
    import numpy as np

    if rec.body is None or not rec.body.vectors:
        return np.zeros((0, dims), dtype=np.float32)
    return np.frombuffer(rec.body.vectors, dtype=np.float32).reshape(-1, dims)


def batch_plan(ctx: Context, answers: Answers, ops: Sequence[Op],
               puts: Sequence[Prepared], queries: dict[str, np.ndarray],
               scorer: VectorScorer, dims: int, now_ms: int) -> Plan[list[Result]]:
    """Answer ``ops`` in order (None for a ``PutOp``) and then write ``puts`` (the batch's
    puts, one per item, prepared by ``prepare_put``). ``queries``: the embedding of each
    search query (empty without an index: a query then orders nothing). Reads refresh
    the TTL of what they return when their ``refresh_ttl`` says so. Raises
    ``OutboxFullError`` when the outbox is full (the puts refused are not stored)."""
    results: list[Result] = [None] * len(ops)
    touched: list[StoreRecord] = []
    gets = [(i, op) for i, op in enumerate(ops) if isinstance(op, GetOp)]
    if gets:
        recs = yield from P.get_plan(ctx, [(op.namespace, op.key) for _, op in gets], now_ms)
        for (i, op), rec in zip(gets, recs):
            if rec is not None:
                results[i] = answers.item(rec)
                if op.refresh_ttl:
                    touched.append(rec)
    for i, any_op in enumerate(ops):
        if isinstance(any_op, SearchOp):
            found = yield from _search_plan(ctx, answers, any_op, queries, scorer, dims,
                                            now_ms)
            results[i] = [item for item, _ in found]
            if any_op.refresh_ttl:
                touched += [rec for _, rec in found]
        elif isinstance(any_op, ListNamespacesOp):
            names = yield from P.namespaces_plan(ctx, now_ms)
            results[i] = list_namespaces(names, any_op.match_conditions, any_op.max_depth,
                                         any_op.limit, any_op.offset)
        elif not isinstance(any_op, (GetOp, PutOp)):
            raise ValueError(f"Unknown operation type: {type(any_op)}")
    writes: list[IoOp[Any]] = yield from P.touch_plan(ctx, touched, now_ms)
    for p in puts:
        mode = "put" if p.body else "del"
        writes.append(P.write_op(ctx, p.namespace, p.key, mode, p.body, p.expires_ms,
                                 now_ms=now_ms))
    yield from P.write_plan(ctx, writes)
    return results


def _search_plan(ctx: Context, answers: Answers, op: SearchOp,
                 queries: dict[str, np.ndarray], scorer: VectorScorer, dims: int,
                 now_ms: int) -> Plan[list[tuple[SearchItem, StoreRecord]]]:
    """One search's page (``plans/store_search.py``): without a query the first
    ``offset + limit`` items passing the filter in search order, each value decoded
    once; with one, the candidates ranked by ``scorer`` (values read for the page only)."""
    query = queries.get(op.query) if op.query else None
    if query is not None and isinstance(scorer, IndexedSearch):  # the Redis index
        indexed = yield from scorer.search_plan(ctx, answers, op, query, dims, now_ms)
        if indexed is not None:
            return indexed
    values: dict[str, dict[str, Any]] = {}

    def accept(rec: StoreRecord) -> bool:
        value = answers.value(rec)
        if not matches_filter(value, op.filter):
            return False
        values[rec.field] = value
        return True

    prefix = op.namespace_prefix
    if query is None:
        wanted = op.offset + op.limit
        # with a filter, a first page of 256 holds the page at 1 match in 25 (and on
        # SecantusDB, whose every find costs its whole index range, saves finds)
        first = wanted + 16 if not op.filter else max(4 * wanted, 256)
        recs = yield from Q.ordered_plan(ctx, prefix, now_ms, accept, wanted,
                                         first_page=first)
        return [(answers.search_item(r, values[r.field], None), r)
                for r in recs[op.offset:]]

    def score(recs: Sequence[StoreRecord]) -> list[float | None]:
        return scorer.scores(query, [vectors_of(r, dims) for r in recs])

    candidates = yield from Q.candidates_plan(ctx, prefix, now_ms, score)
    wanted = op.offset + op.limit
    batch = wanted if not op.filter else max(2 * wanted, 32)
    page = yield from Q.scored_plan(ctx, candidates, now_ms, accept, op.limit, op.offset,
                                    batch)
    return [(answers.search_item(r, values[r.field], s), r) for s, r in page]
