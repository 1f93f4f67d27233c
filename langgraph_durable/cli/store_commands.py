"""``store namespaces|get|search|put|delete|reindex``: the long-term memory store
(``DurableStore``) of the key prefix, through LangGraph's ``BaseStore`` API on the
session's saver. A namespace is written as its labels joined by ``.``
(``users.alice.memories``: LangGraph's labels hold no ``.``). Values are decoded with
the tools' strict serializer (``inspection.strict``): the store's serializer is
``--serde`` (its inner one for an ``ExternalRefSerializer``: the store never writes
blobs), else LangGraph's ``JsonPlusSerializer``, as ``DurableStore``'s default."""

from __future__ import annotations

import json
from typing import Any

import typer
from rich.table import Table

from ..hot.vector_index import VectorIndexSpec, detect_query_engine
from ..inspection import store_view as store_info
from ..io.drivers import run_sync
from ..plans.store_vectors import METRICS, IndexState, rebuild_plan, state_key
from ..store import DurableStore
from .session import CliError, Session, command, confirm, console, echo_json, session_of

app = typer.Typer(name="store", no_args_is_help=True, add_completion=False,
                  help="Read and write the long-term memory store (DurableStore): "
                  "namespaces, get, search, put, delete, reindex.")

YES = typer.Option(False, "--yes", "-y", help="do not ask for confirmation")
JSON = typer.Option(False, "--json", help="print JSON")
NAMESPACE = typer.Argument(..., metavar="NAMESPACE", show_default=False,
                           help="labels joined by '.', e.g. users.alice.memories")


def parse_namespace(text: str, *, what: str = "namespace", empty: bool = False
                    ) -> tuple[str, ...]:
    """``inspection.store_view.parse_namespace``, its ``ValueError`` as a ``CliError``."""
    try:
        return store_info.parse_namespace(text, what=what, empty=empty)
    except ValueError as exc:
        raise CliError(str(exc)) from None


def open_store(session: Session, *, write: bool = False, tolerant: bool | None = None
               ) -> DurableStore:
    """A ``DurableStore`` on the session's saver (reads: no flusher; writes: with the
    command's flusher, so the write is in MongoDB when the command ends). ``tolerant``
    (default: for reads) shows an undecodable value instead of raising. Values are shown
    as stored (the tools have no ``state_migrations``); a put records the configured
    ``state_version`` (``LGD_STATE_VERSION``), if any, with the item."""
    saver = session.saver(flusher=True) if write else session.saver(tolerant=True)
    serde = store_info.tool_store_serde(session.serde(), session.allow_types,
                                        tolerant=not write if tolerant is None else tolerant)
    return DurableStore(saver, serde=serde, read_as_stored=True)


def _item(item: Any) -> dict[str, Any]:
    """An item (or search item) as JSON (``score`` for a search item)."""
    out = {"namespace": ".".join(item.namespace), "key": item.key, "value": item.value,
           "created_at": item.created_at.isoformat(), "updated_at": item.updated_at.isoformat()}
    if hasattr(item, "score"):
        out["score"] = item.score
    return out


def _text(value: Any) -> str:
    return json.dumps(value, default=str, ensure_ascii=False)


def _table(items: list[Any]) -> None:
    t = Table("namespace", "key", "value", "created (UTC)", "updated (UTC)")
    for i in items:
        t.add_row(".".join(i.namespace), i.key, _text(i.value),
                  i.created_at.strftime("%Y-%m-%d %H:%M:%S"),
                  i.updated_at.strftime("%Y-%m-%d %H:%M:%S"))
    console().print(t)


@command
def namespaces(ctx: typer.Context,
               prefix: str = typer.Option("", "--prefix", help="only namespaces starting "
                                          "with these labels (a.b)"),
               suffix: str = typer.Option("", "--suffix", help="only namespaces ending with "
                                          "these labels"),
               max_depth: int | None = typer.Option(None, "--max-depth", min=1,
                                                    help="cut namespaces to this many labels"),
               limit: int = typer.Option(100, "--limit", min=1, help="at most this many"),
               offset: int = typer.Option(0, "--offset", min=0, help="skip this many"),
               as_json: bool = JSON) -> None:
    """The store's namespaces (those holding an item), sorted, one a line."""
    pre = parse_namespace(prefix, what="--prefix", empty=True)
    suf = parse_namespace(suffix, what="--suffix", empty=True)
    store = open_store(session_of(ctx))
    found = store.list_namespaces(prefix=pre or None, suffix=suf or None,
                                  max_depth=max_depth, limit=limit, offset=offset)
    if as_json:
        echo_json([".".join(ns) for ns in found])
        return
    for ns in found:
        typer.echo(".".join(ns))
    typer.echo(f"{len(found)} namespaces", err=True)


@command
def get(ctx: typer.Context, namespace: str = NAMESPACE,
        key: str = typer.Argument(..., metavar="KEY", show_default=False),
        as_json: bool = JSON) -> None:
    """One item: its value, created and updated times. Exit 1 when there is none."""
    ns = parse_namespace(namespace)
    item = open_store(session_of(ctx)).get(ns, key, refresh_ttl=False)
    if item is None:
        raise CliError(f"no item {key!r} in namespace {namespace!r}")
    if as_json:
        echo_json(_item(item))
    else:
        _table([item])


@command
def search(ctx: typer.Context,
           prefix: str = typer.Argument("", metavar="NAMESPACE_PREFIX", show_default=False,
                                        help="labels joined by '.' (none: every item)"),
           query: str | None = typer.Option(None, "--query", help="semantic search text "
                                            "(needs a store with an index)"),
           filter_: str | None = typer.Option(None, "--filter", help="JSON object of "
                                              "value fields to match, e.g. "
                                              "'{\"kind\": \"note\"}' ($eq, $ne, $gt, ...)"),
           limit: int = typer.Option(10, "--limit", min=1, help="at most this many"),
           offset: int = typer.Option(0, "--offset", min=0, help="skip this many"),
           as_json: bool = JSON) -> None:
    """Items under a namespace prefix, oldest first, matching --filter."""
    pre = parse_namespace(prefix, what="NAMESPACE_PREFIX", empty=True)
    if query is not None:
        raise CliError("--query needs semantic search, which needs the store's index (an "
                       "embedding model, DurableStore(index=...)): the CLI opens the store "
                       "without one; use --filter, or search from your application")
    match: dict[str, Any] | None = None
    if filter_ is not None:
        try:
            match = json.loads(filter_)
        except json.JSONDecodeError as exc:
            raise CliError(f"--filter is not JSON: {exc}") from None
        if not isinstance(match, dict):
            raise CliError("--filter must be a JSON object, e.g. '{\"kind\": \"note\"}'")
    found = open_store(session_of(ctx)).search(pre, filter=match, limit=limit,
                                               offset=offset, refresh_ttl=False)
    if as_json:
        echo_json([_item(i) for i in found])
        return
    _table(found)
    typer.echo(f"{len(found)} items", err=True)


@command
def put(ctx: typer.Context, namespace: str = NAMESPACE,
        key: str = typer.Argument(..., metavar="KEY", show_default=False),
        value: str = typer.Argument(..., metavar="JSON", show_default=False,
                                    help="the value: a JSON object"),
        ttl: float | None = typer.Option(None, "--ttl", min=0, help="expire after this "
                                         "many minutes (default: never)"),
        yes: bool = YES) -> None:
    """Put an item (replacing the key's value): written to Redis and the outbox, then
    flushed to MongoDB before the command ends."""
    ns = parse_namespace(namespace)
    try:
        doc = json.loads(value)
    except json.JSONDecodeError as exc:
        raise CliError(f"JSON value is not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise CliError("the value must be a JSON object (LangGraph's store holds dicts)")
    confirm(f"put {key!r} in namespace {namespace!r}?", yes)
    open_store(session_of(ctx), write=True).put(ns, key, doc, index=False, ttl=ttl)
    typer.echo(f"put {key!r} in {namespace}", err=True)


@command
def delete(ctx: typer.Context, namespace: str = NAMESPACE,
           key: str = typer.Argument(..., metavar="KEY", show_default=False),
           yes: bool = YES) -> None:
    """Delete an item (from both tiers: Redis at once, MongoDB by the flush before the
    command ends). Exit 1 when there is none."""
    ns = parse_namespace(namespace)
    store = open_store(session_of(ctx), write=True, tolerant=True)  # an undecodable value too
    if store.get(ns, key, refresh_ttl=False) is None:
        raise CliError(f"no item {key!r} in namespace {namespace!r}")
    confirm(f"delete {key!r} from namespace {namespace!r}?", yes)
    store.delete(ns, key)
    typer.echo(f"deleted {key!r} from {namespace}", err=True)


@command
def reindex(ctx: typer.Context,
            dims: int | None = typer.Option(None, "--dims", min=1, help="the embedding's "
                                            "length, when Redis holds no index state"),
            distance_type: str = typer.Option("cosine", "--distance-type",
                                              help="cosine | inner_product | l2 (with --dims)"),
            algorithm: str = typer.Option("FLAT", "--algorithm", help="FLAT | HNSW (with "
                                          "--dims)"),
            yes: bool = YES) -> None:
    """Rebuild the store's Redis vector index (DurableStore vector_search='redis') from
    MongoDB's items with vectors, in batches: after Redis lost its data, or for items
    stored before the index existed (a search also does it by itself when the index has
    no state). The index's dims, metric and algorithm are read from Redis; when Redis
    holds none, give --dims (and --distance-type, --algorithm). Exit 1 on a Redis without
    the query engine."""
    session = session_of(ctx)
    saver = session.saver(tolerant=True)
    c, sctx = session.clients, saver.context
    prefix = sctx.config.key_prefix
    if not run_sync(detect_query_engine(), c).available:
        raise CliError(f"Redis {c.redis_name} has no query engine (FT._LIST is an unknown "
                       "command there): there is no vector index to rebuild")
    state = IndexState.of(c.redis.get(state_key(prefix)))
    if state is not None:
        spec = state.spec(prefix)
    elif dims is None:
        raise CliError(f"Redis holds no vector index state for key prefix {prefix!r}: give "
                       "--dims (the embedding's length; and --distance-type, --algorithm)")
    elif distance_type not in METRICS or algorithm not in ("FLAT", "HNSW"):
        raise CliError(f"--distance-type must be one of {sorted(METRICS)} and --algorithm "
                       "FLAT or HNSW")
    else:
        spec = VectorIndexSpec(prefix, dims, algorithm=algorithm,  # type: ignore[arg-type]
                               metric=METRICS[distance_type])  # type: ignore[arg-type]
    confirm(f"rebuild the vector index {prefix}:vidx ({spec.algorithm}, {spec.dims} dims) "
            "from MongoDB?", yes)
    written = run_sync(rebuild_plan(sctx, spec), c)
    typer.echo(f"rebuilt the vector index {prefix}:vidx from {written} items", err=True)
