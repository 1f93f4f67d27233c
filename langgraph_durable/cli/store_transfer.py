"""``export --store`` / ``import FILE``: the long-term memory store's items (``DurableStore``)
as JSON Lines, beside the thread exports of ``cli/transfer.py``.

The store is not part of any thread (every thread of the key prefix shares it), so a
thread's export never carries it: ``export --store`` writes the store alone (every item,
or those under ``--namespace``), and ``import`` tells the two kinds of file apart by the
header. The header is ``{"format": "langgraph-durable-export", "format_version": 5 (6),
"schema_version": N, "store": {"namespace_prefix": [labels]}, "exported_at": ...,
"counts": {"store_item": n}}``; then one record a line, sorted by namespace and key:

``{"type": "store_item", "v": N, "namespace": [labels], "key": ..., "value": [serializer
type, base64 bytes], "cseq": us, "useq": us, "exp": ms, "ttl": minutes or null,
"vectors": base64 or null, "paths": [...]}``: ``cseq``/``useq`` are the item's
``created_at``/``updated_at`` (microseconds since the epoch), ``exp`` when it expires (ms
since the epoch, 0 = never), ``ttl`` its TTL (refreshed on reads), ``vectors`` its
embeddings (float32, one row per path of ``paths``: the indexed fields), so a store with
the same index searches the imported items without embedding them again. An item put
with an application state version (``DurableStore(state_version=N)``) has ``"sv": N``
(absent otherwise), and a file holding one has ``format_version`` 6, so a release that
does not know item versions refuses it instead of importing those items unversioned
(they would then be migrated again); a file without one is format 5, as before.

Values are copied, never decoded (no serializer, no constructor of the stored data runs);
``import`` checks every record before it writes anything (``check_item``: the namespace
and key as ``DurableStore`` checks them, every number, the embeddings' shape) and writes
each item as a new version through the store's own write (STORE_PUT ``import``: Redis and
the outbox, then MongoDB by the command's flusher), keeping its times, TTL, expiry and
embeddings. It replaces items of the same namespace and key (asking first) and deletes
nothing; items expired by the time of the import are left out (counted).
"""

from __future__ import annotations

import base64
import datetime
import json
from collections.abc import Iterator
from typing import Any

from ..core.schema import SCHEMA_VERSION, check_not_newer, fits_int64
from ..core.store_records import SEP, StoreBody
from ..durable.store_docs import live_query, prefix_query, record_of
from ..plans import store_items as P
from .session import CliError, confirm

FORMAT = "langgraph-durable-export"
STORE_FORMAT_VERSION = 6
"""Format version of a store export holding an item with a state version (``sv``); one
without any is written as ``UNVERSIONED_FORMAT_VERSION`` (a thread export's are 1 to 4)."""

UNVERSIONED_FORMAT_VERSION = 5
"""Format version of a store export whose items have no state version (readable by the
releases before item versions)."""

CHUNK = 500
"""Items written per round trip (and flushed to MongoDB after) by an import."""


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def is_store_export(header: Any) -> bool:
    """True when ``header`` (the first line, decoded) is a store export's."""
    return isinstance(header, dict) and header.get("format") == FORMAT and "store" in header


def export_lines(db: Any, collection: str, prefix: tuple[str, ...], now_ms: int
                 ) -> Iterator[str]:
    """The export of the store's live items under ``prefix`` (every one for ``()``) that
    MongoDB's ``collection`` holds at ``now_ms`` (flush first), header first."""
    docs = list(db[collection].find({**prefix_query(prefix), **live_query(now_ms)},
                                    sort=[("ns", 1), ("key", 1)]))
    versioned = any(d.get("sv") is not None for d in docs)
    yield json.dumps({
        "format": FORMAT,
        "format_version": STORE_FORMAT_VERSION if versioned else UNVERSIONED_FORMAT_VERSION,
        "schema_version": SCHEMA_VERSION, "store": {"namespace_prefix": list(prefix)},
        "exported_at": datetime.datetime.now(datetime.timezone.utc).isoformat(),
        "counts": {"store_item": len(docs)}})
    for doc in docs:
        rec = record_of(doc)
        body = rec.body
        assert body is not None and body.value is not None  # live: a value
        out: dict[str, Any] = {
            "type": "store_item", "v": SCHEMA_VERSION, "namespace": list(rec.namespace),
            "key": rec.key, "value": [body.value[0], _b64(body.value[1])],
            "cseq": rec.cseq, "useq": rec.useq, "exp": rec.expires_ms, "ttl": body.ttl_min,
            "vectors": _b64(body.vectors) if body.vectors else None,
            "paths": list(body.paths)}
        if body.state_version is not None:
            out["sv"] = body.state_version
        yield json.dumps(out)


# ------------------------------------------------------------------ checks


def _labels(what: str, value: object, *, empty: bool) -> tuple[str, ...]:
    """A namespace as the export writes it: a list of labels, each a non-empty ``str``
    holding neither ``.`` nor NUL (LangGraph's rule and ``DurableStore``'s)."""
    if not isinstance(value, list) or (not value and not empty):
        raise ValueError(f"{what} must be a {'' if empty else 'non-empty '}list of labels, "
                         f"got {value!r:.80}")
    for label in value:
        if not isinstance(label, str) or not label or "." in label or SEP in label:
            raise ValueError(f"{what}: label {label!r:.80} is not a namespace label (a "
                             "non-empty str without '.' or NUL)")
    return tuple(value)


def _integer(what: str, value: object, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not fits_int64(value) \
            or value < low:
        raise ValueError(f"{what} must be a 64-bit integer >= {low}, got {value!r:.80}")
    return value


def _base64(what: str, value: object) -> bytes:
    if not isinstance(value, str):
        raise ValueError(f"{what} must be base64 text, got {value!r:.80}")
    return base64.b64decode(value, validate=True)


def check_item(r: dict[str, Any], prefix: tuple[str, ...]) -> tuple[tuple[str, ...], str, int]:
    """Check a ``store_item`` record; returns its ``(namespace, key, dims)`` (``dims``: the
    floats of each embedding, 0 without). Raises ``ValueError`` or ``KeyError`` (a missing
    field) naming what is wrong."""
    ns = _labels("namespace", r["namespace"], empty=False)
    if ns[:len(prefix)] != prefix:
        raise ValueError(f"namespace {ns!r} is not under the header's namespace_prefix "
                         f"{prefix!r}")
    key = r["key"]
    if not isinstance(key, str) or SEP in key:
        raise ValueError(f"key must be a str without NUL, got {key!r:.80}")
    value = r["value"]
    if not (isinstance(value, list) and len(value) == 2 and isinstance(value[0], str)):
        raise ValueError(f"value must be [type, base64 bytes], got {value!r:.80}")
    _base64("value", value[1])
    _integer("cseq", r["cseq"], 1)
    _integer("useq", r["useq"], 1)
    _integer("exp", r["exp"], 0)
    ttl = r["ttl"]
    if ttl is not None and (isinstance(ttl, bool) or not isinstance(ttl, (int, float))
                            or not ttl > 0):
        raise ValueError(f"ttl must be null or minutes > 0, got {ttl!r:.80}")
    paths = r["paths"]
    if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
        raise ValueError(f"paths must be a list of str, got {paths!r:.80}")
    if r.get("sv") is not None:
        _integer("sv", r["sv"], 1)
    vectors = b"" if r["vectors"] is None else _base64("vectors", r["vectors"])
    if bool(vectors) != bool(paths) or (paths and len(vectors) % (4 * len(paths))):
        raise ValueError(f"vectors ({len(vectors)} bytes) are not {len(paths)} float32 "
                         "rows of one length (one per path)")
    return ns, key, len(vectors) // 4 // len(paths) if paths else 0


def parse(lines: list[str], where: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Validate a store export: ``(header, records)``. Raises ``CliError`` naming the line
    and the item before anything is written."""
    rows = [(n, line) for n, line in enumerate(lines, 1) if line.strip()]
    if not rows:
        raise CliError(f"{where} is empty")
    header = json.loads(rows[0][1])
    version = header.get("format_version")
    if isinstance(version, bool) or not isinstance(version, int):
        raise CliError(f"{where}:1: header: format_version must be an integer, got "
                       f"{version!r:.80} (nothing written)")
    if version > STORE_FORMAT_VERSION:
        raise CliError(f"{where} has export format {version}, newer than "
                       f"{STORE_FORMAT_VERSION}; upgrade langgraph_durable")
    store, counts = header.get("store"), header.get("counts")
    try:
        if not isinstance(store, dict) or not isinstance(counts, dict):
            raise ValueError("store and counts must be objects")
        prefix = _labels("namespace_prefix", store.get("namespace_prefix"), empty=True)
    except ValueError as exc:
        raise CliError(f"{where}:1: header: {exc} (nothing written)") from None
    records: list[dict[str, Any]] = []
    seen: set[tuple[tuple[str, ...], str]] = set()
    dims: tuple[int, int] | None = None  # (floats per embedding, the first line with it)
    for n, line in rows[1:]:
        try:
            rec = json.loads(line)
            kind, v = rec["type"], rec["v"]
        except (ValueError, KeyError, TypeError, RecursionError) as exc:
            raise CliError(f"{where}:{n}: malformed record ({type(exc).__name__}: {exc})") \
                from None
        if isinstance(v, bool) or not isinstance(v, int):
            raise CliError(f"{where}:{n}: malformed record (no integer version 'v')")
        check_not_newer(v, f"{where}:{n}: record", then=" (nothing written)")
        if kind != "store_item" or v < SCHEMA_VERSION:
            raise CliError(f"{where}:{n}: unsupported record in a store export (type "
                           f"{kind!r:.40}, version {v})")
        named = f" ({rec.get('namespace')!r:.60}, key {rec.get('key')!r:.60})"
        try:
            ns, key, width = check_item(rec, prefix)
        except (KeyError, TypeError, ValueError) as exc:
            problem = f"missing field {exc}" if type(exc) is KeyError else str(exc)
            raise CliError(f"{where}:{n}: store_item{named}: {problem} (nothing written)") \
                from None
        if width and dims is None:
            dims = (width, n)
        elif width and dims is not None and width != dims[0]:  # one index, one width
            raise CliError(f"{where}:{n}: store_item{named}: embeddings of {width} floats, "
                           f"line {dims[1]}'s of {dims[0]} (nothing written)")
        item = (ns, key)
        if item in seen:
            raise CliError(f"{where}:{n}: store_item {item[1]!r} of namespace {item[0]!r} "
                           "appears twice (nothing written)")
        seen.add(item)
        records.append(rec)
    if counts.get("store_item") != len(records) or set(counts) != {"store_item"}:
        raise CliError(f"{where}: header counts {counts!r:.80}, file has {len(records)} "
                       "store_item records (truncated?)")
    return header, records


# ------------------------------------------------------------------ import


def import_store(saver: Any, records: list[dict[str, Any]], where: str, yes: bool) -> str:
    """Write the (checked) ``records`` into the store of ``saver`` (a saver with its
    flusher: every chunk is in MongoDB before the next is sent): each item a new version
    with the file's times, TTL, expiry and embeddings; items expired now are left out.
    Asks first when items of the same namespace and key exist (``yes``: do not ask).
    Returns the line to print."""
    ctx = saver.context
    now_ms = ctx.clock.time_ns() // 1_000_000  # DurableStore's clock of expiry
    kept = [r for r in records if not (r["exp"] and r["exp"] <= now_ms)]
    items = [(tuple(r["namespace"]), str(r["key"])) for r in kept]
    existing = 0
    for i in range(0, len(items), CHUNK):
        found = saver.runtime.run(P.get_plan(ctx, items[i:i + CHUNK], now_ms))
        existing += sum(rec is not None for rec in found)
    if existing:
        confirm(f"{existing} of the {len(items)} items of {where} exist in the store; "
                "replace them?", yes)
    for i in range(0, len(kept), CHUNK):
        ops = []
        for r in kept[i:i + CHUNK]:
            value = (str(r["value"][0]), base64.b64decode(r["value"][1], validate=True))
            vectors = base64.b64decode(r["vectors"], validate=True) if r["vectors"] else b""
            body = StoreBody(value, r["ttl"], vectors, tuple(r["paths"]),
                             r.get("sv")).pack()
            ops.append(P.write_op(ctx, tuple(r["namespace"]), str(r["key"]), "import", body,
                                  int(r["exp"]), cseq=int(r["cseq"]), useq=int(r["useq"]),
                                  now_ms=now_ms))
        saver.runtime.run(P.write_plan(ctx, ops))
        saver.flush()
    left = len(records) - len(kept)
    return (f"imported {len(kept)} store items" + (f" ({existing} replaced)" if existing
                                                   else "")
            + (f"; {left} expired items left out" if left else ""))

