"""What a ``DurableStore`` embeds for semantic search (LangGraph's ``IndexConfig``): the
index configuration checked once, the texts of a batch's puts at the configured paths,
their vectors as rows of each put, and the distinct queries of a batch's searches. Pure
data in, data out: the store calls its embedder (sync or async) between these steps."""

from __future__ import annotations

import operator
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from langchain_core.embeddings import Embeddings
from langgraph.checkpoint.serde.base import SerializerProtocol
from langgraph.store.base import (
    IndexConfig,
    Op,
    PutOp,
    SearchOp,
    ensure_embeddings,
    get_text_at_path,
    tokenize_path,
)

from ..errors import ConfigurationError
from .batch import Prepared, prepare_put

if TYPE_CHECKING:
    import numpy as np

Embedded = tuple[PutOp, list[str], list[str]]
"""A put to embed: the op, its paths (``text``, ``tags.0``, ...) and their texts, in the
same order."""


def index_config(index: IndexConfig) -> tuple[dict[str, Any], Embeddings]:
    """``index`` as the store keeps it (``__tokenized_fields`` added: each path of
    ``fields``, default ``"$"``, with its tokens) and its embedder. Raises
    ``ConfigurationError`` without ``dims`` or ``embed`` and without NumPy installed (the
    ``memory`` extra)."""
    if not isinstance(index, Mapping) or not index.get("dims") or not index.get("embed"):
        raise ConfigurationError(f"DurableStore index={index!r:.80}: an IndexConfig "
                                 "mapping with 'dims' and 'embed'")
    dims = index["dims"]
    try:
        whole = not isinstance(dims, bool) and operator.index(dims) >= 1  # NumPy's too
    except TypeError:
        whole = False
    if not whole:
        raise ConfigurationError(f"DurableStore index: dims={dims!r} (a whole number over 0)")
    try:
        import numpy  # noqa: F401  (the vector step: plans/store_match.py)
    except ImportError:
        raise ConfigurationError(
            "DurableStore's semantic search (index=...) needs NumPy: pip install "
            "'langgraph-durable[memory]'") from None
    cfg: dict[str, Any] = dict(index)
    cfg["__tokenized_fields"] = [(p, tokenize_path(p)) if p != "$" else (p, p)
                                 for p in (cfg.get("fields") or ["$"])]
    return cfg, ensure_embeddings(cfg["embed"])


def texts_of(config: dict[str, Any] | None, puts: Iterable[PutOp]) -> list[Embedded]:
    """Per put to embed (a value, ``index`` not False, some text found): the op, its
    paths and texts; ``op.index`` overrides the configured fields. ``[]`` without an
    index (``config`` None)."""
    if config is None:
        return []
    out = []
    for op in puts:
        if op.value is None or op.index is False:
            continue
        fields = (config["__tokenized_fields"] if op.index is None
                  else [(p, tokenize_path(p)) for p in op.index])
        paths, texts = [], []
        for path, tokens in fields:
            found = get_text_at_path(op.value, tokens)
            if len(found) > 1:
                paths += [f"{path}.{i}" for i in range(len(found))]
            else:
                paths += [path] * len(found)
            texts += found
        if texts:
            out.append((op, paths, texts))
    return out


def prepared_puts(puts: dict[tuple[tuple[str, ...], str], PutOp], embedded: list[Embedded],
                  vectors: list[list[float]], now_ms: int, serde: SerializerProtocol,
                  state_version: int | None, dims: int) -> list[Prepared]:
    """Every put of ``puts`` prepared (``batch.prepare_put``), with its rows of
    ``vectors`` (the embeddings of ``embedded``'s texts, in their order) as float32.
    Raises ``ConfigurationError`` (a ``ValueError``) before anything is written when the
    embedder gave another number of vectors than texts, or a vector of another length
    than ``dims``: stored, it would break every search reaching the item."""
    import numpy as np  # only with an index (semantic search)

    wanted = sum(len(texts) for _, _, texts in embedded)
    if len(vectors) != wanted:
        raise ConfigurationError(
            f"DurableStore index: the embedder returned {len(vectors)} embeddings for "
            f"{wanted} texts")
    rows: dict[int, tuple[np.ndarray, list[str]]] = {}
    at = 0
    for op, paths, texts in embedded:
        own = vectors[at:at + len(texts)]
        for path, vector in zip(paths, own):
            _check_dims(vector, dims, f"the text at {path!r} of store item {op.key!r} "
                        f"of namespace {op.namespace!r}")
        rows[id(op)] = (np.asarray(own, dtype=np.float32), paths)
        at += len(texts)
    out = []
    for op in puts.values():
        vec, paths = rows.get(id(op), (None, []))
        out.append(prepare_put(op, serde, now_ms, vec, paths, state_version))
    return out


def queries_of(embeddings: Embeddings | None, ops: list[Op]) -> list[str]:
    """The distinct queries of ``ops``' searches, sorted; ``[]`` without an embedder."""
    if embeddings is None:
        return []
    return sorted({op.query for op in ops if isinstance(op, SearchOp) and op.query})


def as_floats(vector: list[float], dims: int, query: str) -> np.ndarray:
    """The embedding of the search query ``query`` as a float32 array. Raises
    ``ConfigurationError`` when it does not hold ``dims`` numbers."""
    import numpy as np

    _check_dims(vector, dims, f"the search query {query!r}")
    return np.asarray(vector, dtype=np.float32)


def _check_dims(vector: object, dims: int, what: str) -> None:
    try:
        n = len(vector)  # type: ignore[arg-type]
    except TypeError:
        n = -1
    if n != dims:
        shown = f"{n} numbers" if n >= 0 else f"a {type(vector).__name__}"
        raise ConfigurationError(
            f"DurableStore index: the embedder returned {shown} for {what}; the index "
            f"has dims={dims}")
