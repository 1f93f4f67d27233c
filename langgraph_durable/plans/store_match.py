"""What the memory store's reads compute once both tiers answered (sans-I/O): the
``filter`` of ``search`` and the match conditions of ``list_namespaces`` exactly as
LangGraph's ``InMemoryStore`` applies them (its helpers are private: reimplemented here,
same rules), and the vector-search step behind a small interface (``VectorScorer``) that
a server-side index can replace.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from langgraph.store.base import MatchCondition

if TYPE_CHECKING:
    import numpy as np


def compare_values(item_value: Any, filter_value: Any) -> bool:
    """Whether ``item_value`` matches ``filter_value`` (InMemoryStore's rules): a dict with
    ``$`` operators applies each (``$eq``, ``$ne``, ``$gt``, ``$gte``, ``$lt``, ``$lte``;
    the order operators compare as floats); another dict matches a dict key by key
    (nested); a list matches a list of the same length element-wise; else equality.
    Raises ``ValueError`` for an unknown operator."""
    if isinstance(filter_value, dict):
        if any(k.startswith("$") for k in filter_value):
            return all(_apply(item_value, op, v) for op, v in filter_value.items())
        if not isinstance(item_value, dict):
            return False
        return all(compare_values(item_value.get(k), v) for k, v in filter_value.items())
    if isinstance(filter_value, (list, tuple)):
        return (isinstance(item_value, (list, tuple)) and len(item_value) == len(filter_value)
                and all(compare_values(i, f) for i, f in zip(item_value, filter_value)))
    return bool(item_value == filter_value)


def _apply(value: Any, operator: str, operand: Any) -> bool:
    if operator == "$eq":
        return bool(value == operand)
    if operator == "$ne":
        return bool(value != operand)
    if operator == "$gt":
        return float(value) > float(operand)
    if operator == "$gte":
        return float(value) >= float(operand)
    if operator == "$lt":
        return float(value) < float(operand)
    if operator == "$lte":
        return float(value) <= float(operand)
    raise ValueError(f"Unsupported operator: {operator}")


def value_at(value: Mapping[str, Any], key: str) -> Any:
    """What a ``filter`` key names in ``value``: the top-level key when the value has it
    (InMemoryStore's rule), else a dotted path into nested dicts (``"user.access-level"``,
    as SqliteStore and PostgresStore read it); None when absent."""
    if key in value or "." not in key:
        return value.get(key)
    held: Any = value
    for part in key.split("."):
        if not isinstance(held, Mapping) or part not in held:
            return None
        held = held[part]
    return held


def matches_filter(value: Mapping[str, Any], filter: Mapping[str, Any] | None) -> bool:
    """Whether an item's ``value`` passes a ``search`` ``filter`` (None: every item); a
    key is read by ``value_at``."""
    return not filter or all(compare_values(value_at(value, k), v) for k, v in filter.items())


def namespace_matches(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    """Whether ``namespace`` meets a ``list_namespaces`` condition (``prefix`` or
    ``suffix`` path, ``*`` matching any label). Raises ``ValueError`` for another type."""
    path = condition.path
    if len(namespace) < len(path):
        return False
    if condition.match_type == "prefix":
        pairs = zip(namespace, path)
    elif condition.match_type == "suffix":
        pairs = zip(reversed(namespace), reversed(path))
    else:
        raise ValueError(f"Unsupported match type: {condition.match_type}")
    return all(p == "*" or n == p for n, p in pairs)


def list_namespaces(found: Iterable[tuple[str, ...]],
                    conditions: Sequence[MatchCondition] | None, max_depth: int | None,
                    limit: int, offset: int) -> list[tuple[str, ...]]:
    """``list_namespaces``' answer from the namespaces holding a live item: those meeting
    every condition, cut to ``max_depth`` labels (then distinct), sorted, sliced."""
    names = [ns for ns in found if all(namespace_matches(c, ns) for c in conditions or ())]
    if max_depth is not None:
        names = sorted({ns[:max_depth] for ns in names})
    else:
        names = sorted(set(names))
    return names[offset:offset + limit]


class VectorScorer(Protocol):
    """The vector-search step: given the query embedding and each candidate's embeddings
    (float32, shape ``(n_i, dims)``, 0 rows for an item not indexed), each candidate's
    score (None for one without embeddings). The embedded default is ``ExactScorer``; a
    server-side index (Redis Query Engine) can take its place."""

    def scores(self, query: np.ndarray, vectors: Sequence[np.ndarray]) -> list[float | None]:
        """One score per candidate, in order (higher = closer)."""


DISTANCES = ("cosine", "inner_product", "l2")
"""The ``distance_type`` values of an index (PostgresStore's names): cosine similarity,
the dot product, or the negated Euclidean distance (higher = closer in each)."""


class ExactScorer:
    """Exact scores in the application (NumPy) by ``distance_type`` (``DISTANCES``,
    default cosine, as InMemoryStore); a candidate's score is the best of its rows'
    (InMemoryStore's max pooling over an item's indexed paths). Raises ``ValueError``
    for another distance type."""

    def __init__(self, distance_type: str = "cosine") -> None:
        if distance_type not in DISTANCES:
            raise ValueError(f"distance_type {distance_type!r} is not one of {DISTANCES}")
        self.distance_type = distance_type

    def scores(self, query: np.ndarray, vectors: Sequence[np.ndarray]) -> list[float | None]:
        """The score of each candidate's best row (cosine: 0.0 against a zero vector),
        None for a candidate without rows."""
        import numpy as np  # only with an index (semantic search)

        rows = [v for v in vectors if len(v)]
        if not rows:
            return [None] * len(vectors)
        matrix = np.concatenate(rows).astype(np.float64)
        q = np.asarray(query, dtype=np.float64)
        if self.distance_type == "inner_product":
            sims = matrix @ q
        elif self.distance_type == "l2":
            sims = -np.linalg.norm(matrix - q, axis=1)
        else:
            norms = np.linalg.norm(matrix, axis=1) * np.linalg.norm(q)
            sims = np.zeros(len(matrix))
            mask = norms != 0
            sims[mask] = (matrix[mask] @ q) / norms[mask]
        out: list[float | None] = []
        at = 0
        for v in vectors:
            if not len(v):
                out.append(None)
                continue
            out.append(float(sims[at:at + len(v)].max()))
            at += len(v)
        return out


def ranked(scored: Sequence[tuple[float | None, Any]], limit: int,
           offset: int) -> list[tuple[float | None, Any]]:
    """A query's page (InMemoryStore's order): the scored candidates by score, highest
    first (ties keep their order), ``offset``/``limit`` applied; then, when the page has
    room, candidates without embeddings in their order, unscored."""
    with_score = sorted(((s, c) for s, c in scored if s is not None),
                        key=lambda sc: sc[0], reverse=True)
    kept: list[tuple[float | None, Any]] = list(with_score[offset:offset + limit])
    if len(kept) < limit:
        kept += [(None, c) for s, c in scored if s is None][:limit - len(kept)]
    return kept
