"""Where a ``DurableStore``'s semantic search runs, resolved once per store (the plans
are ``plans/store_vectors.py``; this is their sync and async shell)."""

from __future__ import annotations

import logging
import typing
from typing import Any

from ..core.ops import Pipeline, Plan, ask
from ..errors import ConfigurationError, TierUnavailableError
from ..hot.vector_index import VectorIndexSpec
from ..plans.store_match import VectorScorer
from ..plans.store_vectors import (
    METRICS,
    IndexedSearch,
    VectorSearch,
    rebuild_plan,
    resolve_plan,
    state_key,
)
from ..runtime.base import SaverRuntime

log = logging.getLogger("langgraph_durable.store")

MODES = typing.get_args(VectorSearch)
"""The ``vector_search`` values."""


class StoreVectors:
    """The vector step of one store: ``mode`` (``vector_search`` asked), ``path`` (what
    it resolved to: ``"redis"``, ``"exact"``, ``"none"`` without an index; None before),
    and the scorer a search uses (``IndexedSearch`` on the Redis path, else ``exact``).
    Raises ``ConfigurationError`` for an unknown ``mode`` or ``algorithm``."""

    def __init__(self, runtime: SaverRuntime, index: dict[str, Any] | None,
                 exact: VectorScorer, mode: str, algorithm: str) -> None:
        if mode not in MODES:
            raise ConfigurationError(f"vector_search={mode!r} is not one of {MODES}")
        if algorithm not in ("HNSW", "FLAT"):
            raise ConfigurationError(f"vector_algorithm={algorithm!r} is not 'HNSW' or "
                                     "'FLAT'")
        self.runtime, self.mode, self.exact = runtime, mode, exact
        self.path: str | None = None if index else "none"
        self.spec: VectorIndexSpec | None = None
        if index:
            metric = METRICS.get(str(index.get("distance_type") or "cosine"), "COSINE")
            self.spec = VectorIndexSpec(runtime.config.key_prefix, int(index["dims"]),
                                        algorithm=algorithm,  # type: ignore[arg-type]
                                        metric=metric)  # type: ignore[arg-type]
        self._indexed = IndexedSearch(self.spec, exact) if self.spec else None

    def _names(self) -> tuple[str, str]:
        sync = self.runtime.clients.sync
        found = sync if sync is not None else getattr(self.runtime.clients, "async_", None)
        return (getattr(found, "redis_name", "Redis"), getattr(found, "mongo_name", "MongoDB"))

    def _chosen(self, path: str) -> VectorScorer:
        if self.path != path:
            self.path = path
            assert self.spec is not None
            where = (f"the Redis Query Engine ({self.spec.algorithm} index "
                     f"{self.spec.key_prefix}:vidx)" if path == "redis"
                     else "the application (exact, NumPy)")
            log.info("DurableStore (key prefix %r): vector_search=%r searches in %s",
                     self.spec.key_prefix, self.mode, where)
        return self.scorer

    @property
    def scorer(self) -> VectorScorer:
        """The scorer searches use now."""
        if self.path == "redis" and self._indexed is not None:
            return self._indexed
        return self.exact

    def resolve(self, rebuild: bool = False, tolerant: bool = False) -> VectorScorer:
        """Resolve ``path`` unless done (``rebuild``: also fill a Redis index that has no
        state from MongoDB now; ``tolerant``: a MongoDB that does not answer then leaves
        the rebuild to the first search, logged); returns the scorer."""
        if self.spec is None or (self.path is not None and not rebuild):
            return self.scorer
        return self._chosen(self.runtime.run(self._resolve_plan(rebuild, tolerant)))

    async def aresolve(self, rebuild: bool = False, tolerant: bool = False) -> VectorScorer:
        """Async ``resolve``."""
        if self.spec is None or (self.path is not None and not rebuild):
            return self.scorer
        return self._chosen(await self.runtime.arun(self._resolve_plan(rebuild, tolerant)))

    def _resolve_plan(self, rebuild: bool, tolerant: bool) -> Plan[str]:
        """Plan of ``resolve``: the path, and the rebuild of a stateless Redis index."""
        assert self.spec is not None
        redis_name, mongo_name = self._names()
        path: str = yield from resolve_plan(self.runtime.context, self.mode, self.spec,
                                            redis_name, mongo_name)
        if rebuild and path == "redis":
            try:
                yield from _rebuild_if_stateless(self.runtime, self.spec)
            except TierUnavailableError as exc:
                if not tolerant:
                    raise
                log.warning("the store's vector index is rebuilt at the first search: %s",
                            exc)
        return path

    def _check_redis(self) -> VectorIndexSpec:
        if self.path != "redis" or self.spec is None:
            raise ConfigurationError(
                f"the store searches vectors through {self.path or 'nothing yet'!r}, not "
                "the Redis index: there is no index to rebuild (vector_search='redis' or "
                "'auto' on a Redis with the query engine, and an index=...)")
        return self.spec

    def rebuild(self) -> int:
        """Fill the Redis index from MongoDB now; returns the items written."""
        self.resolve()
        return self.runtime.run(rebuild_plan(self.runtime.context, self._check_redis()))

    async def arebuild(self) -> int:
        """Async ``rebuild``."""
        await self.aresolve()
        return await self.runtime.arun(rebuild_plan(self.runtime.context,
                                                    self._check_redis()))


def _rebuild_if_stateless(runtime: SaverRuntime, spec: VectorIndexSpec) -> Any:
    """Plan: ``rebuild_plan`` when the index has no state (never built, or Redis lost
    its data); returns the items written (0 when it had one)."""
    (raw,) = yield from ask(Pipeline([["GET", state_key(spec.key_prefix)]]))
    if raw is not None:
        return 0
    return (yield from rebuild_plan(runtime.context, spec))
