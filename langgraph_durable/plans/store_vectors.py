"""Where the memory store's semantic search runs, and its Redis index kept in step
(sans-I/O plans).

``DurableStore(vector_search=...)`` (``DurableConfig.vector_search``, ``LGD_VECTOR_SEARCH``)
chooses at set-up (``resolve_plan``):

- ``"exact"``: the embedded default, every candidate under the prefix scored in the
  application (``plans/store_match.ExactScorer``, ``store/batch.py``); always available.
- ``"redis"``: the Redis Query Engine (Redis 8, Redis Stack's RediSearch, Valkey's
  valkey-search): an ``FT`` index over per-vector hashes (``hot/vector_index.py``),
  FLAT (default: exact) or HNSW (approximate). Refused (``ConfigurationError``) on a
  Redis without it.
- ``"auto"`` (default): ``"redis"`` when the Redis has the query engine, else ``"exact"``.
- ``"mongodb"``: MongoDB ``$vectorSearch``; not implemented: always refused, with what the
  server answered to a ``$vectorSearch`` (``mongodb_refusal_plan``).

**What the index holds.** Every flushed item's vectors (not only Redis's hot window), in
hashes without TTL, written by the flusher once MongoDB holds the version and before the
record leaves the unflushed index (``index_flushed_plan``, called by
``plans/store_items.flush_store_plan``): a put's own STORE_PUT cannot write them (another hash
slot on a Redis Cluster). A delete or an expiry removes them when its tombstone is
flushed.

**The index's state** is one Redis key, ``<key_prefix>:vidx:state`` (``IndexState``:
dims, metric, algorithm, ready). The flusher writes vectors only while it exists; a reader
uses the index only when it says ``ready``. Without it (a new index, or a Redis that lost
its data) the first search, or ``setup()``, rebuilds the index from MongoDB's documents
with vectors in bounded batches (``rebuild_plan``), state ``building`` meanwhile (with a
TTL, so a rebuild that died is started again), and searches answer exactly until then.

**A search** (``IndexedSearch.search_plan``) reads the unflushed index and asks the index
for the ``offset + limit`` nearest items under the prefix in one pipeline; index hits of
items with an unflushed record are left out and the unflushed records themselves (few)
are scored exactly instead, so a search sees every write that returned. The hits' records
are read as a ``get`` reads them (one pipeline of GETs, MongoDB for the items Redis no
longer holds; deleted and expired items dropped), the ``filter``
applied to their values, and the index asked for 4 times as many until ``offset + limit``
pass (and no item tied with the last one kept is left out: ties are ordered as the
exact path orders them) or the index has no more; only the hits as near as the page's
last item are read. Scores are computed exactly from the records' vectors, as the exact
path computes them: only the choice of candidates can differ (with HNSW,
approximate; FLAT is exact).
When the index has fewer matches than ``offset + limit``, the page has room for items
without vectors, which InMemoryStore appends unscored: they are read from MongoDB (the
documents under the prefix without ``vec``, one find) with the unflushed records.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from ..core.ops import Aggregate, CommandFailed, Find, Pipeline, Plan, ask
from ..core.store_records import StoreRecord, item_field, ns_text, split_field, store_tid
from ..durable import store_docs as S
from ..errors import ConfigurationError
from ..hot.store_scripts import StoreKeys, dirty_keys, store_tag
from ..hot.vector_index import (
    VectorIndexSpec,
    detect_query_engine,
    ensure_index,
    knn_command,
    parse_item_id,
    parse_knn_reply,
    upsert_many,
)
from .context import Context
from .store_fetch import live_records_plan
from .store_match import VectorScorer, matches_filter, ranked

if TYPE_CHECKING:
    import numpy as np
    from langgraph.store.base import SearchItem, SearchOp

VectorSearch = Literal["auto", "exact", "redis", "mongodb"]
"""The ``vector_search`` choices (the module docstring)."""

METRICS = {"cosine": "COSINE", "inner_product": "IP", "l2": "L2"}
"""The index metric whose order is each ``distance_type``'s."""

BUILDING_TTL_S = 120
"""Seconds the ``building`` state lives without a new batch of a rebuild (a rebuild that
died is started again by the next search after it)."""

TIE = 1e-6
"""Index similarities closer than this count as a tie: a search widens until the item
past the last one it keeps is farther by more (ties keep the exact path's order)."""

REBUILD_BATCH = 500
"""Documents a rebuild reads from MongoDB, and items it writes, per batch."""


def state_key(key_prefix: str) -> str:
    """The Redis key of the index's state: ``<key_prefix>:vidx:state``."""
    return f"{key_prefix}:vidx:state"


@dataclass(frozen=True)
class IndexState:
    """What ``state_key`` holds (JSON): the index's ``dims``, ``metric``, ``algorithm``
    and whether it is ``ready`` (False while a rebuild runs)."""

    dims: int
    metric: str
    algorithm: str
    ready: bool

    def dumps(self) -> str:
        """The JSON text stored."""
        return json.dumps({"dims": self.dims, "metric": self.metric,
                           "algorithm": self.algorithm, "ready": self.ready})

    @classmethod
    def of(cls, raw: Any) -> IndexState | None:
        """The state read (None when the key is absent or holds something else)."""
        if raw is None or isinstance(raw, Exception):
            return None
        try:
            d = json.loads(raw)
            return cls(int(d["dims"]), str(d["metric"]), str(d["algorithm"]),
                       bool(d["ready"]))
        except (TypeError, ValueError, KeyError):
            return None

    def spec(self, key_prefix: str) -> VectorIndexSpec:
        """The index spec this state describes."""
        return VectorIndexSpec(key_prefix, self.dims, algorithm=self.algorithm,  # type: ignore[arg-type]
                               metric=self.metric)  # type: ignore[arg-type]


def _state(spec: VectorIndexSpec, ready: bool) -> IndexState:
    return IndexState(spec.dims, spec.metric, spec.algorithm, ready)


# ------------------------------------------------------------------------ choosing


def resolve_plan(ctx: Context, mode: str, spec: VectorIndexSpec,
                 redis_name: str = "Redis", mongo_name: str = "MongoDB") -> Plan[str]:
    """Plan: the path of ``mode`` (``"exact"`` or ``"redis"``), checked against the
    servers: for ``"redis"`` and ``"auto"`` the query engine is detected (``FT._LIST``)
    and the index created unless it exists (``FT.CREATE``). Raises
    ``ConfigurationError`` naming the server for ``"redis"`` without the query engine,
    for an index of the key prefix made with other ``dims`` or metric, and always for
    ``"mongodb"`` (``mongodb_refusal_plan``)."""
    if mode == "exact":
        return "exact"
    if mode == "mongodb":
        yield from mongodb_refusal_plan(ctx, spec, mongo_name)
    engine = yield from detect_query_engine()
    if not engine.available:
        if mode == "redis":
            raise ConfigurationError(
                f"vector_search='redis': Redis {redis_name} has no query engine (FT._LIST "
                "is an unknown command there): use Redis 8, Redis Stack (RediSearch) or "
                "Valkey with valkey-search, or vector_search='auto'/'exact' to search in "
                "the application")
        return "exact"
    (raw,) = yield from ask(Pipeline([["GET", state_key(spec.key_prefix)]]))
    held = IndexState.of(raw)
    if held is not None and (held.dims, held.metric) != (spec.dims, spec.metric):
        raise ConfigurationError(
            f"the vector index of key prefix {spec.key_prefix!r} on Redis {redis_name} "
            f"holds {held.dims}-dim vectors by {held.metric}, this store's index has "
            f"dims={spec.dims} and metric {spec.metric} (distance_type); use another "
            f"key_prefix, or drop the index (FT.DROPINDEX {spec.key_prefix}:vidx DD, "
            f"DEL {state_key(spec.key_prefix)}) to rebuild it")
    yield from ensure_index(spec)
    return "redis"


def mongodb_refusal_plan(ctx: Context, spec: VectorIndexSpec,
                         mongo_name: str = "MongoDB") -> Plan[None]:
    """Plan: ``vector_search='mongodb'`` refused with ``ConfigurationError``, saying what
    the server answered to a ``$vectorSearch`` stage on the store's collection (a server
    without it: MongoDB Community before 8.2 without mongot, SecantusDB, refuses the
    stage). The store does not search through it even where it runs: its ``vec`` field
    holds float32 rows as plain bytes, which a vector search index does not read."""
    try:
        yield from ask(Aggregate(ctx.collections.store, S.vector_search_probe(spec.dims)))
    except CommandFailed as exc:
        raise ConfigurationError(
            f"vector_search='mongodb': MongoDB {mongo_name} cannot run $vectorSearch "
            f"({exc}); use vector_search='redis' (Redis Query Engine) or 'exact'") from None
    raise ConfigurationError(
        f"vector_search='mongodb': MongoDB {mongo_name} accepts $vectorSearch, but "
        "DurableStore does not search through it yet (its vectors are stored as float32 "
        "bytes, not the arrays a vector search index reads); use 'redis' or 'exact'")


# ------------------------------------------------------------------------ keeping in step


def _rows(rec: StoreRecord, dims: int) -> list[bytes]:
    """A live value's vectors as packed rows; none for a delete or an unindexed item."""
    if rec.dead or rec.body is None or not rec.body.vectors:
        return []
    raw = rec.body.vectors
    width = dims * 4
    if len(raw) % width:
        return []  # embedded with other dims: the index cannot hold it
    return [raw[i:i + width] for i in range(0, len(raw), width)]


def index_flushed_plan(ctx: Context, records: Sequence[StoreRecord]) -> Plan[int]:
    """Plan (the flusher's, after MongoDB holds ``records`` and before they leave the
    unflushed index): make the index hold each record's vectors (none for a delete, an
    expiry or a put without embeddings). Reads the index's state first (one round trip)
    and does nothing more without one. Returns the items written."""
    if not records:
        return 0
    (raw,) = yield from ask(Pipeline([["GET", state_key(ctx.config.key_prefix)]]))
    held = IndexState.of(raw)
    if held is None:
        return 0
    spec = held.spec(ctx.config.key_prefix)
    items = [(rec.namespace, rec.key, _rows(rec, spec.dims)) for rec in records]
    yield from upsert_many(spec, items, [rec.seq for rec in records])
    return len(items)


def rebuild_plan(ctx: Context, spec: VectorIndexSpec, batch: int = REBUILD_BATCH
                 ) -> Plan[int]:
    """Plan: fill the index from MongoDB (after Redis lost its data, or for an index made
    after items exist): state ``building`` (the flusher writes vectors from then on), the
    index created unless it exists, every live document with vectors read by ``_id`` in
    batches of ``batch`` and written (``upsert_many``), then state ``ready``. Returns the
    items written. Items written while it runs are the flusher's (both idempotent, and
    neither replaces a newer version's vectors: ``upsert_many``'s ``seqs``)."""
    key = state_key(spec.key_prefix)
    building = _state(spec, ready=False).dumps()
    yield from ask(Pipeline([["SET", key, building, "EX", BUILDING_TTL_S]]))
    yield from ensure_index(spec)
    written = 0
    last: Any = None
    while True:
        docs = yield from ask(Find(ctx.collections.store, S.vectors_after(last),
                                   {"namespace": 1, "key": 1, "vec": 1, "paths": 1,
                                    "seq": 1}, sort=[("_id", 1)], limit=batch))
        items, seqs = [], []
        for doc in docs:
            rec = S.record_of(dict(doc, cseq=0, useq=0))
            items.append((rec.namespace, rec.key, _rows(rec, spec.dims)))
            seqs.append(rec.seq)
        yield from upsert_many(spec, items, seqs)
        written += len(items)
        yield from ask(Pipeline([["SET", key, building, "EX", BUILDING_TTL_S]]))
        if len(docs) < batch:
            break
        last = docs[-1]["_id"]
    yield from ask(Pipeline([["SET", key, _state(spec, ready=True).dumps()]]))
    return written


# ------------------------------------------------------------------------ searching


def _overlay(replies: Iterable[Any], prefix: tuple[str, ...]) -> dict[str, StoreRecord]:
    """The unflushed records (HGETALL replies) of the namespaces under ``prefix``."""
    head = (ns_text(prefix) + ".").encode() if prefix else b""
    out: dict[str, StoreRecord] = {}
    for raw in replies:
        if isinstance(raw, Exception):
            raise raw
        for f, v in raw.items():
            name = f if isinstance(f, bytes) else f.encode()
            if head and not (name.partition(b"\x00")[0] + b".").startswith(head):
                continue
            field = name.decode("utf-8", "surrogateescape")
            out[field] = StoreRecord.of_redis(field, bytes(v))
    return out


class IndexedSearch:
    """The vector step through the Redis index: a ``VectorScorer`` (``scores`` are the
    ``exact`` scorer's, so a page's scores equal the exact path's) whose
    ``search_plan`` answers a query's search from the index (``store/batch.py`` asks it
    first). ``spec``: the index; ``exact``: the scorer of the records' vectors."""

    def __init__(self, spec: VectorIndexSpec, exact: VectorScorer) -> None:
        self.spec, self.exact = spec, exact

    def scores(self, query: np.ndarray, vectors: Sequence[np.ndarray]) -> list[float | None]:
        """The exact scorer's scores."""
        return self.exact.scores(query, vectors)

    def search_plan(self, ctx: Context, answers: Any, op: SearchOp, query: np.ndarray,
                    dims: int, now_ms: int
                    ) -> Plan[list[tuple[SearchItem, StoreRecord]] | None]:
        """Plan: the page of ``op`` (a search with a query whose embedding is ``query``)
        as ``(SearchItem, record)``, best first, from the index (the module docstring);
        None when the exact path must answer: the index is not ready (being rebuilt by
        another process, or gone). Rebuilds the index first when it has no state
        (``rebuild_plan``)."""
        spec, prefix = self.spec, tuple(op.namespace_prefix)
        want = op.offset + op.limit
        if want < 1:
            return []
        dirty = [["HGETALL", k] for k in dirty_keys(ctx.config.key_prefix, ctx.partitions)]
        vector = [float(x) for x in query]
        k = want * 4  # room for ties and filtered-out hits in the first round trip
        for attempt in (0, 1):
            replies = yield from ask(Pipeline(
                [["GET", state_key(spec.key_prefix)], *dirty,
                 knn_command(spec, prefix, vector, k)], raise_on_error=False))
            state = IndexState.of(replies[0])
            if state is None and attempt == 0:
                yield from rebuild_plan(ctx, spec)
                continue
            if state is None or not state.ready:
                return None
            break
        reply = replies[-1]
        if isinstance(reply, Exception):  # the index is gone: rebuilt by the next search
            yield from ask(Pipeline([["DEL", state_key(spec.key_prefix)]]))
            return None
        overlay = _overlay(replies[1:-1], prefix)
        found: dict[str, tuple[StoreRecord, dict[str, Any] | None]] = {}
        seen: set[str] = set()
        near: dict[str, float] = {}  # the index's similarity of each item kept
        while True:
            rows = [(item_field(*parse_item_id(raw)), sim) for raw, sim in parse_knn_reply(reply)]
            best = dict(reversed(rows))  # an item's best vector (rows are nearest first)
            todo = [(f, sim) for f, sim in best.items() if f not in seen and f not in overlay]
            todo.sort(key=lambda fs: -fs[1])
            while todo:  # read the fewest hits that can make the page, ties included
                need = want - len(found)
                cut = todo[min(need, len(todo)) - 1][1] if need > 0 else _kth(near, found, want)
                if need <= 0 and todo[0][1] < cut - TIE:
                    break  # the next hit is farther than the page's last item
                n = next((i for i, (_, sim) in enumerate(todo) if sim < cut - TIE), len(todo))
                take, todo = todo[:n], todo[n:]
                for f, sim in take:
                    seen.add(f)
                    near[f] = sim
                recs = yield from _records_plan(ctx, [split_field(f) for f, _ in take], now_ms)
                for rec in recs:
                    if rec is not None:
                        _keep(found, rec, answers, op.filter)
            if todo or len(rows) < k:
                break  # the page is decided, or the index has no more under the prefix
            k *= 4
            (reply,) = yield from ask(Pipeline([knn_command(spec, prefix, vector, k)]))
        for rec in overlay.values():
            if rec.live(now_ms):
                _keep(found, rec, answers, op.filter)
        if len(rows) < k and len(found) < want:  # room for items without vectors
            yield from _unscored_plan(ctx, op, overlay, found, answers, now_ms)
        kept = sorted(found.values(), key=lambda rv: (rv[0].namespace, rv[0].cseq,
                                                      rv[0].key))
        scores = self.scores(query, [_vectors(r, dims) for r, _ in kept])
        top = ranked(list(zip(scores, kept)), op.limit, op.offset)
        return [(answers.search_item(r, answers.value(r) if v is None else v, s), r)
                for s, (r, v) in top]


def _keep(found: dict[str, tuple[StoreRecord, dict[str, Any] | None]], rec: StoreRecord,
          answers: Any, filter: Any) -> None:
    """Put ``rec`` in ``found`` when its value passes ``filter`` (decoded only to test a
    filter; the page's values are decoded at the end)."""
    if not filter:
        found[rec.field] = (rec, None)
        return
    value = answers.value(rec)
    if matches_filter(value, filter):
        found[rec.field] = (rec, value)


def _records_plan(ctx: Context, items: Sequence[tuple[tuple[str, ...], str]],
                  now_ms: int) -> Plan[list[StoreRecord | None]]:
    """The live records of ``items``, as ``plans/store_items.get_plan`` reads them (Redis's
    copy, else MongoDB's; None for an item deleted, expired or gone) but with Redis's
    copies read by one pipeline of GETs (what STORE_GET does), not one script each."""
    fields = [item_field(ns, k) for ns, k in items]
    prefix, parts = ctx.config.key_prefix, ctx.partitions
    raws = yield from ask(Pipeline([["GET", StoreKeys(store_tag(prefix, store_tid(ns),
                                                                parts)).item(f)]
                                    for (ns, _), f in zip(items, fields)]))
    found = {f: StoreRecord.of_redis(f, bytes(raw))
             for f, raw in zip(fields, raws) if raw is not None}
    return (yield from live_records_plan(ctx, items, found, now_ms))


def _kth(near: dict[str, float], found: dict[str, Any], want: int) -> float:
    """The index similarity of the ``want``-th best item found (-inf while fewer)."""
    if len(found) < want:
        return float("-inf")
    return sorted((near[f] for f in found), reverse=True)[want - 1]


def _unscored_plan(ctx: Context, op: SearchOp, overlay: dict[str, StoreRecord],
                   found: dict[str, tuple[StoreRecord, dict[str, Any] | None]],
                   answers: Any,
                   now_ms: int) -> Plan[None]:
    """Add to ``found`` the live items under the prefix that MongoDB holds without
    vectors and that pass the filter (unflushed ones are in ``overlay``: already seen)."""
    query = dict(S.prefix_query(tuple(op.namespace_prefix)), vec=None)
    docs = yield from ask(Find(ctx.collections.store, query, S.WITHOUT_VECTORS))
    for doc in docs:
        rec = S.record_of(doc, vectors=False)
        if rec.field in overlay or rec.field in found or not rec.live(now_ms):
            continue
        _keep(found, rec, answers, op.filter)


def _vectors(rec: StoreRecord, dims: int) -> np.ndarray:
    """A record's embeddings as float32 rows (0 rows when it has none)."""
    import numpy as np  # only with an index (semantic search)

    if rec.body is None or not rec.body.vectors:
        return np.zeros((0, dims), dtype=np.float32)
    return np.frombuffer(rec.body.vectors, dtype=np.float32).reshape(-1, dims)
