"""A store's vectors in the Redis Query Engine (sans-I/O: command lists and plans).

For ``DurableStore``'s semantic search on a Redis that has the query engine (Redis 8,
Redis Stack's RediSearch, Valkey's valkey-search): the store puts each vector of an item
in a Redis hash that an ``FT`` index covers, and asks that index for the nearest ones.
Nothing here talks to a server: the functions return Redis commands (lists of words) and
plans that ``yield`` :class:`~langgraph_durable.core.ops.Pipeline` operations, which
``io.drivers`` runs with blocking or asyncio clients.

**Layout.** One hash per (item, vector): the ``i``-th vector of the item (one per embedded
field path, in the order the store embedded them) is at ``vector_key(spec, item, i)``
(``<key_prefix>:vec:<sha256 of the item id, 32 hex>:<i>``), with the fields ``item`` (the
item id, :func:`item_id`), ``ns`` (the namespace's prefixes as TAGs), ``vec`` (FLOAT32
little-endian bytes, ``dims`` of them) and, on vector 0 only, ``n`` (how many vectors the
item has, so the next upsert or delete knows what to remove). The index
``<key_prefix>:vidx`` covers every hash whose key starts with ``<key_prefix>:vec:``.

**Namespace prefixes.** ``("a", "b", "c")`` is tagged ``a``, ``a.b``, ``a.b.c`` (labels
cannot hold ``.``: LangGraph refuses them), joined by :data:`TAG_SEP` (``\\x1f``, the
index's TAG separator); the TAG field is case-sensitive, as namespaces are. A search under
prefix ``("a", "b")`` is the tag filter ``@ns:{a\\.b}`` (every character but letters,
digits and ``_`` escaped with ``\\``); the empty prefix filters nothing.

**Scores.** The index uses COSINE distance ``d = 1 - cos``; :func:`knn` reports
``1 - d``, the cosine similarity, higher is better: ``InMemoryStore``'s convention. An
item with several vectors scores its best one (as InMemoryStore does); :func:`knn` asks
for more neighbours until it has ``k`` distinct items or the index has no more.
"""

from __future__ import annotations

import hashlib
import json
import re
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from ..core.ops import Pipeline, Plan, RedisReply, ask

__all__ = ["TAG_SEP", "QueryEngine", "VectorIndexSpec", "create_index", "delete_vectors"]
__all__ += ["detect_query_engine", "ensure_index", "escape_tag", "index_name", "item_id"]
__all__ += ["knn", "knn_command", "namespace_tags", "parse_item_id", "parse_knn_reply"]
__all__ += ["tag_filter", "upsert_many", "upsert_vectors", "vector_bytes", "vector_key"]

TAG_SEP = "\x1f"
"""Separator of the namespace-prefix TAGs in a hash's ``ns`` field (ASCII unit separator:
no namespace label holds it in practice, and none needs escaping in a TAG query)."""

_NOT_WORD = re.compile(r"[^0-9A-Za-z_]", re.ASCII)


@dataclass(frozen=True)
class VectorIndexSpec:
    """One store's vector index: ``key_prefix`` (the store's Redis key prefix), ``dims``
    (the embedding's length), ``algorithm`` (``"HNSW"``: approximate, fast at any size;
    ``"FLAT"``: exact brute force inside Redis), HNSW's ``m`` and ``ef_construction``
    (graph degree and build beam), ``ef_runtime`` (the search beam: higher gives more
    recall for more time) and ``hybrid_policy``, how a search under a namespace prefix
    combines the tag filter with the vectors: ``None`` lets the server choose,
    ``"BATCHES"`` walks the HNSW graph and drops what the filter refuses (fast when the
    prefix holds a large share of the items), ``"ADHOC_BF"`` computes the distance of every
    vector the filter keeps (exact; time grows with the prefix's items). Measured
    (benchmarks/store_vectors.py): RediSearch 2.10 chooses ADHOC_BF for a prefix that holds
    every item, 9 ms at p50 for 10,000 vectors of 256 dims where BATCHES takes 1.3 ms.
    ``metric``: the index's distance (``"COSINE"``: 1 - cosine similarity, ``"IP"``: 1 -
    the dot product, ``"L2"``: the squared Euclidean distance), so that its order is the
    order of the store's ``distance_type`` (``cosine``, ``inner_product``, ``l2``).
    Raises ``ValueError`` for ``dims`` < 1 or another algorithm, policy or metric."""

    key_prefix: str
    dims: int
    algorithm: Literal["HNSW", "FLAT"] = "HNSW"
    m: int = 16
    ef_construction: int = 200
    ef_runtime: int = 64
    hybrid_policy: Literal["BATCHES", "ADHOC_BF"] | None = None
    metric: Literal["COSINE", "IP", "L2"] = "COSINE"

    def __post_init__(self) -> None:
        if self.dims < 1:
            raise ValueError(f"vector index of {self.key_prefix!r}: dims must be >= 1, "
                             f"got {self.dims}")  # fmt: skip
        if self.algorithm not in ("HNSW", "FLAT"):
            raise ValueError(f"vector index of {self.key_prefix!r}: algorithm must be "
                             f"'HNSW' or 'FLAT', got {self.algorithm!r}")  # fmt: skip
        if self.metric not in ("COSINE", "IP", "L2"):
            raise ValueError(f"vector index of {self.key_prefix!r}: metric must be 'COSINE', "
                             f"'IP' or 'L2', got {self.metric!r}")
        if self.hybrid_policy not in (None, "BATCHES", "ADHOC_BF"):
            raise ValueError(f"vector index of {self.key_prefix!r}: hybrid_policy must be "
                             f"None, 'BATCHES' or 'ADHOC_BF', got {self.hybrid_policy!r}")


def index_name(spec: VectorIndexSpec) -> str:
    """The ``FT`` index's name: ``<key_prefix>:vidx``."""
    return f"{spec.key_prefix}:vidx"


def _doc_prefix(spec: VectorIndexSpec) -> str:
    return f"{spec.key_prefix}:vec:"


def item_id(namespace: Sequence[str], key: str) -> str:
    """The id of the item ``(namespace, key)`` in the index: JSON ``[[labels...], key]``
    (unambiguous whatever the labels hold; :func:`parse_item_id` reads it back)."""
    return json.dumps([list(namespace), key], ensure_ascii=False, separators=(",", ":"))


def parse_item_id(raw: str | bytes) -> tuple[tuple[str, ...], str]:
    """``(namespace, key)`` of an item id made by :func:`item_id`; raises ``ValueError``
    when ``raw`` is not one."""
    try:
        namespace, key = json.loads(raw)
        if not isinstance(key, str) or not all(isinstance(x, str) for x in namespace):
            raise TypeError
    except (TypeError, ValueError) as exc:
        raise ValueError(f"not an item id of the vector index: {raw!r}") from exc
    return tuple(namespace), key


def vector_key(spec: VectorIndexSpec, item: str, i: int) -> str:
    """The Redis key of vector ``i`` of item ``item`` (an :func:`item_id`)."""
    digest = hashlib.sha256(item.encode()).hexdigest()[:32]
    return f"{_doc_prefix(spec)}{digest}:{i}"


def namespace_tags(namespace: Sequence[str]) -> str:
    """The ``ns`` field of a namespace: its prefixes joined by ``.``, separated by
    :data:`TAG_SEP` (``("a", "b")`` -> ``"a\\x1fa.b"``)."""
    return TAG_SEP.join(".".join(namespace[: i + 1]) for i in range(len(namespace)))


def escape_tag(value: str) -> str:
    """``value`` for a TAG query: every character but ASCII letters, digits and ``_``
    preceded by ``\\`` (``"a.b c"`` -> ``"a\\.b\\ c"``)."""
    return _NOT_WORD.sub(lambda m: "\\" + m.group(0), value)


def tag_filter(prefix: Sequence[str]) -> str:
    """The query filter of a search under namespace ``prefix``: ``@ns:{...}``, or ``*``
    for the empty prefix (every item)."""
    if not prefix:
        return "*"
    return "@ns:{" + escape_tag(".".join(prefix)) + "}"


def vector_bytes(vector: Sequence[float], dims: int) -> bytes:
    """``vector`` as ``dims`` little-endian FLOAT32s; raises ``ValueError`` for another
    length."""
    if len(vector) != dims:
        raise ValueError(f"vector of length {len(vector)} for an index of {dims} dims")
    return struct.pack(f"<{dims}f", *vector)


# ------------------------------------------------------------------------ detection, set-up


@dataclass(frozen=True)
class QueryEngine:
    """Whether the server has the query engine: ``available``, and the ``module`` that
    provides it as ``MODULE LIST`` names it (``"search"`` for RediSearch and Redis 8,
    ``"search"``/``"valkey-search"`` for Valkey; ``None`` when built in or unlisted)."""

    available: bool
    module: str | None = None


def detect_query_engine() -> Plan[QueryEngine]:
    """Plan: ``FT._LIST`` (answered only with the query engine) and ``MODULE LIST`` in one
    pipeline, errors returned in place; returns the :class:`QueryEngine`."""
    replies = yield from ask(Pipeline([["FT._LIST"], ["MODULE", "LIST"]], raise_on_error=False))
    listed, modules = replies
    module = None
    if not isinstance(modules, Exception):
        for entry in modules or []:
            fields = entry if isinstance(entry, dict) else dict(zip(entry[::2], entry[1::2]))
            name = fields.get(b"name", fields.get("name"))
            name = name.decode() if isinstance(name, bytes) else name
            if name and "search" in str(name).lower():
                module = str(name)
    return QueryEngine(available=not isinstance(listed, Exception), module=module)


def create_index(spec: VectorIndexSpec) -> list[object]:
    """The ``FT.CREATE`` command of ``spec``'s index: ON HASH with the key prefix
    ``<key_prefix>:vec:``, a case-sensitive TAG ``ns`` (separator :data:`TAG_SEP`) and the
    VECTOR ``vec`` (FLOAT32, ``dims``, ``metric``; HNSW with M, EF_CONSTRUCTION and
    EF_RUNTIME, or FLAT)."""
    params: list[object] = ["TYPE", "FLOAT32", "DIM", spec.dims, "DISTANCE_METRIC", spec.metric]
    if spec.algorithm == "HNSW":
        params += ["M", spec.m, "EF_CONSTRUCTION", spec.ef_construction,
                   "EF_RUNTIME", spec.ef_runtime]  # fmt: skip
    return ["FT.CREATE", index_name(spec), "ON", "HASH", "PREFIX", 1, _doc_prefix(spec),
            "SCHEMA", "ns", "TAG", "SEPARATOR", TAG_SEP, "CASESENSITIVE",
            "vec", "VECTOR", spec.algorithm, len(params), *params]  # fmt: skip


def ensure_index(spec: VectorIndexSpec) -> Plan[bool]:
    """Plan: create ``spec``'s index unless it exists (idempotent, also when another
    process creates it at the same time); returns True when this call created it. Raises
    the server's error for anything but "exists" (e.g. no query engine: check
    :func:`detect_query_engine` first)."""
    (created,) = yield from ask(Pipeline([create_index(spec)], raise_on_error=False))
    if isinstance(created, Exception):
        if "already exists" in str(created).lower():
            return False
        raise created
    return True


# ------------------------------------------------------------------------ writes


def upsert_vectors(spec: VectorIndexSpec, namespace: Sequence[str], key: str,
                   vectors: Sequence[Sequence[float]]) -> Plan[int]:
    """Plan: make ``vectors`` (one per embedded field path) the item's vectors: reads the
    item's old count (one round trip), then writes the new hashes and deletes the old
    ones past the new count (one pipeline). No vectors deletes the item's. Returns how
    many hashes were deleted. Raises ``ValueError`` for a vector of the wrong length."""
    packed = [vector_bytes(v, spec.dims) for v in vectors]
    return (yield from upsert_many(spec, [(namespace, key, packed)]))


def upsert_many(spec: VectorIndexSpec,
                items: Sequence[tuple[Sequence[str], str, Sequence[bytes]]],
                seqs: Sequence[int] | None = None) -> Plan[int]:
    """Plan: :func:`upsert_vectors` of many items in two pipelines (their old counts, then
    every write), each item's vectors given packed (``dims`` little-endian FLOAT32s each,
    ``vector_bytes`` or a float32 array's rows); an item with none loses its vectors.
    ``seqs``: each item's version (the store's record ``seq``), kept on vector 0 as
    ``seq``; an item whose stored ``seq`` is higher is left as it is (a late write of an
    older version, e.g. by a stalled flusher, does not replace a newer one; what two
    writers do between the two pipelines is not guarded). Returns how many hashes were
    deleted. Raises ``ValueError`` for a row of another length than ``dims`` * 4 bytes."""
    if not items:
        return 0
    ids = [item_id(ns, key) for ns, key, _ in items]
    olds = yield from ask(Pipeline([["HMGET", vector_key(spec, i, 0), "n", "seq"]
                                    for i in ids]))
    commands: list[list[object]] = []
    deleted = 0
    for at, (item, (namespace, _key, rows), old) in enumerate(zip(ids, items, olds)):
        old_n, old_seq = old
        if seqs is not None and old_seq is not None and int(old_seq) > seqs[at]:
            continue
        tags = namespace_tags(namespace)
        for i, vec in enumerate(rows):
            if len(vec) != spec.dims * 4:
                raise ValueError(f"vector of {len(vec)} bytes for an index of {spec.dims} "
                                 f"dims (item {item})")  # fmt: skip
            fields: list[object] = ["item", item, "ns", tags, "vec", bytes(vec)]
            if i == 0:
                fields += ["n", len(rows)]
                if seqs is not None:
                    fields += ["seq", seqs[at]]
            commands.append(["HSET", vector_key(spec, item, i), *fields])
        stale = [vector_key(spec, item, i) for i in range(len(rows), int(old_n or 0))]
        if stale:
            commands.append(["DEL", *stale])
            deleted += len(stale)
    if commands:
        yield from ask(Pipeline(commands))
    return deleted


def delete_vectors(spec: VectorIndexSpec, namespace: Sequence[str], key: str) -> Plan[int]:
    """Plan: delete every vector of the item (the store's delete, or a put with
    ``index=False``); returns how many hashes were deleted."""
    return (yield from upsert_vectors(spec, namespace, key, []))


# ------------------------------------------------------------------------ search


def knn_command(spec: VectorIndexSpec, prefix: Sequence[str], query: Sequence[float],
                k: int) -> list[object]:
    """The ``FT.SEARCH`` command for the ``k`` nearest vectors to ``query`` under
    namespace ``prefix``: returns each hash's ``item`` and its distance ``d``, nearest
    first (``DIALECT 2``; HNSW with ``EF_RUNTIME`` = max(ef_runtime, k) unless brute
    force; ``HYBRID_POLICY`` when ``spec`` names one and there is a filter)."""
    knn = f"KNN {k} @vec $q"
    policy = spec.hybrid_policy if prefix else None
    if spec.algorithm == "HNSW" and policy != "ADHOC_BF":
        knn += f" EF_RUNTIME {max(spec.ef_runtime, k)}"
    if policy:
        knn += f" HYBRID_POLICY {policy}"
    text = f"({tag_filter(prefix)})=>[{knn} AS d]"
    return ["FT.SEARCH", index_name(spec), text, "PARAMS", 2, "q",
            vector_bytes(query, spec.dims), "SORTBY", "d", "ASC", "RETURN", 2, "item", "d",
            "LIMIT", 0, k, "DIALECT", 2]  # fmt: skip


def _text(raw: Any) -> str:
    return raw.decode() if isinstance(raw, bytes) else str(raw)


def parse_knn_reply(reply: RedisReply) -> list[tuple[str, float]]:
    """``(item id, cosine similarity)`` of each hash in an ``FT.SEARCH`` reply of
    :func:`knn_command`, in the reply's order; reads RESP2's flat list and RESP3's map."""
    rows: list[tuple[str, float]] = []
    if isinstance(reply, dict):  # RESP3, or redis-py's parsed search reply
        hits = reply.get(b"results", reply.get("results")) or []
        for hit in hits:
            attrs = hit.get(b"extra_attributes", hit.get("extra_attributes", {}))
            attrs = {_text(k): v for k, v in attrs.items()}
            rows.append((_text(attrs["item"]), 1.0 - float(attrs["d"])))
        return rows
    for fields in reply[2::2]:
        attrs = {_text(k): v for k, v in zip(fields[::2], fields[1::2])}
        rows.append((_text(attrs["item"]), 1.0 - float(attrs["d"])))
    return rows


def knn(spec: VectorIndexSpec, prefix: Sequence[str], query: Sequence[float],
        k: int) -> Plan[list[tuple[str, float]]]:
    """Plan: the ``k`` best items under namespace ``prefix`` for ``query``, as ``(item id,
    score)`` with the cosine similarity (higher is better), best first; an item scores
    its best vector. One round trip when no item has several vectors among the nearest;
    otherwise asks again for twice as many neighbours until ``k`` distinct items are found
    or the index returned fewer than it was asked for. ``k`` < 1 gives ``[]``."""
    if k < 1:
        return []
    asked = k
    while True:
        (reply,) = yield from ask(Pipeline([knn_command(spec, prefix, query, asked)]))
        rows = parse_knn_reply(reply)
        best: dict[str, float] = {}
        for item, score in rows:
            if item not in best or score > best[item]:
                best[item] = score
        if len(best) >= k or len(rows) < asked:
            ranked = sorted(best.items(), key=lambda pair: -pair[1])
            return ranked[:k]
        asked *= 2
