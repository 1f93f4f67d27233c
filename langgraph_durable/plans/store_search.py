"""The memory store's search, sans-I/O, in O(offset + limit) documents: ``ordered_plan``
streams the live items under a namespace prefix in the *search order* and stops once
the caller took enough; ``scored_plan`` (a query: vector search) ranks the candidates of
``candidates_plan`` (every item under the prefix: exact scores) and decodes values for
the page only.

Search order: ``(ns, cseq, key)``, ``ns`` being the namespace's labels joined by ``.``
with a final ``.`` (``durable/store_docs.py``), compared as text (code points: MongoDB's
binary UTF-8 order is the same). It equals the order of namespace tuples except where a
label holds a character below ``.`` (``"a-b."`` sorts before ``"a.b."``); InMemoryStore
answers in insertion order, so the order is DurableStore's to define, and this is the
one MongoDB's index ``ns_cseq_key`` serves.

MongoDB is read in pages of that order (sorted finds with a limit; each page twice the
previous one) resuming after the last document read (keyset pagination). Each page's
filter names only fields of the index, so every server answers it from the index
(SecantusDB routes a filter with any other field to a collection scan): within the
namespace of the last document, ``{ns, cseq: {$gte}}``, then the namespaces after it,
``{ns: {$gt, $lt}, cseq: {$gte: 0}}``. Tombstones (no ``cseq``) are left out by MongoDB:
every page asks for a ``cseq`` (a tombstone in MongoDB hides nothing a search could
return: the item's one document is the tombstone, and an unflushed record of the item
comes from the unflushed index). Expired values are dropped here, not by MongoDB.
MongoDB stops each find at its limit; SecantusDB (the test server) reads and sorts a
find's whole index range before the limit (its ``find_matching``), so there a search of
a broad prefix costs a scan of the range's documents per find (0.45 s at 10,000),
however small the page; a search within one namespace costs that namespace's range.

The unflushed index (``plans/store_items.py``'s ``unflushed_raw``) is read FIRST, MongoDB second
(the read-order argument of ``plans/store_items.py``'s module docstring): an item settled in
between is in MongoDB's pages. An item the unflushed index holds is taken from it and
its MongoDB document is skipped: the unflushed record was the item's newest when read
(MongoDB can hold a newer one only for a write that started after this read began, a
concurrent write, which a read may order either way). Its place in the stream is its own
``(ns, cseq, key)``: unflushed records are merged into MongoDB's pages in order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

from ..core.ops import Doc, Find, Pipeline, Plan, Query, ask
from ..core.store_records import SEP, StoreBody, StoreRecord, item_field, ns_text
from ..durable import store_docs as S
from ..hot.store_scripts import dirty_keys
from .context import Context
from .store_items import get_plan, unflushed_raw

Order = tuple[str, int, str]
"""A record's place in the search order: ``(ns text + ".", cseq, key)``; ``cseq`` -1
for a tombstone (MongoDB sorts a missing ``cseq`` before every number)."""

MAX_PAGE = 4096
"""The most documents one find of the stream asks for."""


def order_of(rec: StoreRecord) -> Order:
    """``rec``'s place in the search order."""
    return (ns_text(rec.namespace) + ".", -1 if rec.dead else rec.cseq, rec.key)


def _doc_order(doc: Doc) -> Order:
    return (str(doc["ns"]), int(doc["cseq"]), str(doc["key"]))


class Pending(NamedTuple):
    """An unflushed record not yet decoded: its place in the search ``order`` (read from
    its field and header alone), its ``field`` and stored bytes ``raw``."""

    order: Order
    field: str
    raw: bytes

    def record(self) -> StoreRecord:
        """The decoded record (``CorruptRecordError`` naming the item)."""
        return StoreRecord.of_redis(self.field, self.raw)


def _pending(field: str, raw: bytes) -> Pending:
    ns, _, key = field.partition(SEP)
    try:
        cseq = -1 if raw[48:49] == b"1" else int(raw[16:32])
    except ValueError:
        StoreRecord.of_redis(field, raw)  # raises CorruptRecordError naming the item
        raise
    return Pending((ns + ".", cseq, key), field, raw)


def overlay_plan(ctx: Context, prefix: tuple[str, ...]) -> Plan[list[Pending]]:
    """The unflushed records under ``prefix`` (every partition's unflushed index, one
    pipeline), in search order, decoded only when taken; dead and expired ones included
    (they hide MongoDB's version)."""
    replies = yield Pipeline([["HGETALL", k] for k in
                              dirty_keys(ctx.config.key_prefix, ctx.partitions)])
    return sorted(_pending(f, raw) for f, raw in unflushed_raw(replies, prefix))


def ordered_plan(ctx: Context, prefix: tuple[str, ...], now_ms: int,
                 accept: Callable[[StoreRecord], bool], wanted: int, *,
                 first_page: int = 64, vectors: bool = False) -> Plan[list[StoreRecord]]:
    """The first ``wanted`` live records (at ``now_ms``) under the namespace ``prefix``
    that ``accept`` takes, in search order (module docstring). ``accept`` sees each live
    record in order once (it may decode the value and apply a filter). Reads
    ``first_page`` documents first, twice as many each next page (at most
    ``MAX_PAGE``), and stops once ``wanted`` were taken or MongoDB has no more; with
    ``vectors`` the records carry their embeddings (else they are ``partial``)."""
    overlay = yield from overlay_plan(ctx, prefix)
    held = {r.field for r in overlay}
    out: list[StoreRecord] = []
    at = 0  # next overlay record to merge
    pages = _Pages(prefix, max(1, first_page))
    projection = None if vectors else S.WITHOUT_VECTORS
    while len(out) < wanted:
        docs: list[Doc] = []
        if not pages.done:
            docs = yield from ask(Find(ctx.collections.store, pages.query(),
                                       projection, S.SEARCH_SORT, pages.limit))
            docs = pages.took(docs)
        for doc in docs:
            place = _doc_order(doc)
            while at < len(overlay) and overlay[at].order < place:
                _take(overlay[at].record(), now_ms, accept, out)
                at += 1
                if len(out) >= wanted:
                    return out
            rec = S.record_of(doc, vectors=vectors)
            if rec.field not in held:
                _take(rec, now_ms, accept, out)
                if len(out) >= wanted:
                    return out
        if pages.done:
            for pending in overlay[at:]:
                _take(pending.record(), now_ms, accept, out)
                if len(out) >= wanted:
                    break
            return out
    return out


def _take(rec: StoreRecord, now_ms: int, accept: Callable[[StoreRecord], bool],
          out: list[StoreRecord]) -> None:
    if rec.live(now_ms) and accept(rec):
        out.append(rec)


class _Pages:
    """Where the stream of MongoDB documents under a prefix stands (keyset pagination:
    the module docstring): the next page's ``query`` and ``limit``; ``took`` the page
    read (drops what was already read, moves on)."""

    def __init__(self, prefix: tuple[str, ...], first: int) -> None:
        self.range = S.prefix_range(prefix)
        self.limit = first
        self.last: Order | None = None
        self.stage = "start"  # start | values | after
        self.done = False

    def query(self) -> Query:
        """The filter of the next page."""
        return S.page_query(self.range, self.last, self.stage)

    def took(self, docs: list[Doc]) -> list[Doc]:
        """The documents of the page just read that are new (a ``$gte`` page repeats
        those of the last ``cseq`` already read); moves to the next page."""
        full = len(docs) >= self.limit
        if self.last is not None and self.stage == "values":
            last = self.last
            docs = [d for d in docs if _doc_order(d) > last]
            if full and not docs:  # a page of one cseq, all read: a longer one
                self.limit *= 2
                return docs
        if docs:
            self.last = _doc_order(docs[-1])
        if full:
            self.stage = "values"
        elif self.stage == "values":
            self.stage = "after"
        else:
            self.done = True
        self.limit = min(self.limit * 2, MAX_PAGE)
        return docs


Scored = tuple[float | None, StoreRecord]
"""A vector-search candidate: its score (None: the item has no embeddings) and its record
(without its value when named by an index, ``candidate``: ``values_plan`` reads those).
The seam of a server-side index: it gives ``scored_plan`` its nearest candidates in this
shape in place of ``candidates_plan``."""


def candidates_plan(ctx: Context, prefix: tuple[str, ...], now_ms: int,
                    score: Callable[[Sequence[StoreRecord]], list[float | None]]
                    ) -> Plan[list[Scored]]:
    """Every live item under ``prefix`` scored by ``score`` (the exact path: one find of
    the documents holding a value under the prefix, whole: projecting the values out
    costs SecantusDB more than sending them, measured, and embeddings are most of a
    document; values are decoded for the page only), in search order; unflushed records
    (read first) replace MongoDB's as in ``ordered_plan``. A server-side index (Redis
    Query Engine) returns the same shape for its k nearest (``candidate``)."""
    overlay = yield from overlay_plan(ctx, prefix)
    held = {r.field for r in overlay}
    docs = yield from ask(Find(ctx.collections.store, S.values_under(prefix)))
    recs = [r for r in (S.record_of(d) for d in docs) if r.field not in held]
    recs += [p.record() for p in overlay]
    recs = sorted((r for r in recs if r.live(now_ms)), key=order_of)
    return list(zip(score(recs), recs))


def values_plan(ctx: Context, recs: Sequence[StoreRecord],
                now_ms: int) -> Plan[list[StoreRecord | None]]:
    """``recs`` with their values: those named by an index (``candidate``) read as a get
    reads them (``plans/store_items.py``'s ``get_plan``: Redis first, one pipeline; MongoDB
    for what Redis does not hold, one find), None for one deleted or expired since; the
    others as they are."""
    named = [r for r in recs if value_missing(r)]
    found: dict[str, StoreRecord] = {}
    if named:
        got = yield from get_plan(ctx, [(r.namespace, r.key) for r in named], now_ms)
        found = {r.field: g for r, g in zip(named, got) if g is not None}
    out: list[StoreRecord | None] = []
    for r in recs:
        held = found.get(r.field) if value_missing(r) else r
        out.append(held if held is not None and held.live(now_ms) else None)
    return out


def value_missing(rec: StoreRecord) -> bool:
    """Whether ``rec`` is a candidate without its value (named by an index:
    ``candidate``)."""
    return rec.body is not None and rec.body.value is None and rec.partial


def candidate(namespace: tuple[str, ...], key: str) -> StoreRecord:
    """The record of a candidate known by name only (a server-side vector index's hit;
    ``seq`` 0): ``values_plan`` reads it as a get does."""
    return StoreRecord(item_field(namespace, key), 0, 0, 0, False, 0, StoreBody(None),
                       partial=True)


def scored_plan(ctx: Context, candidates: Sequence[Scored], now_ms: int,
                accept: Callable[[StoreRecord], bool], limit: int, offset: int,
                batch: int) -> Plan[list[Scored]]:
    """A query's page from its ``candidates`` (InMemoryStore's ``ranked`` order: by
    score, highest first, ties in search order; ``offset``/``limit`` on those; then,
    when the page has room, candidates without embeddings in search order), reading
    values in that order, ``batch`` first, twice as many each time, until the page is full:
    ``accept`` takes a record with its value (the filter)."""
    batch = max(1, batch)
    with_score = sorted((c for c in candidates if c[0] is not None),
                        key=lambda c: c[0], reverse=True)  # type: ignore[arg-type,return-value]
    page: list[Scored] = []
    seen = 0  # scored candidates accepted, offset included
    queue: list[Scored] = list(with_score)
    at = 0
    while at < len(queue) and seen < offset + limit:
        chunk = queue[at:at + batch]
        at, batch = at + len(chunk), min(batch * 2, MAX_PAGE)
        full = yield from values_plan(ctx, [r for _, r in chunk], now_ms)
        for (s, _), rec in zip(chunk, full):
            if rec is None or not accept(rec):
                continue
            if seen >= offset:
                page.append((s, rec))
            seen += 1
            if seen >= offset + limit:
                break
    unscored = [r for s, r in candidates if s is None]
    at = 0
    while len(page) < limit and at < len(unscored):
        chunk_r = unscored[at:at + batch]
        at, batch = at + len(chunk_r), min(batch * 2, MAX_PAGE)
        full = yield from values_plan(ctx, chunk_r, now_ms)
        for rec in full:
            if rec is not None and accept(rec):
                page.append((None, rec))
                if len(page) >= limit:
                    break
    return page
