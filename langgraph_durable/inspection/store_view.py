"""The long-term memory store (``DurableStore``) for the tools (the CLI, ``status``, the
dashboard): how they name a namespace (``parse_namespace``), the serializer they read
values with (``tool_store_serde``) and read-only counts: its live documents in MongoDB,
its unflushed items in Redis and its entries in the outbox (values never decoded)."""

from __future__ import annotations

import time
from typing import Any

from ..core.store_records import SEP
from ..durable.store_docs import live_query
from ..hot.store_scripts import dirty_keys
from ..plans.context import Context
from ..plans.store_vectors import IndexState, state_key
from ..serde.external import ExternalRefSerializer
from .strict import strict_serde
from .tolerant import TolerantSerde

OUTBOX_SCAN = 10_000
"""Most outbox entries per stream ``store_counts`` reads to tell the store's apart."""

STORE_TID = SEP + "s"
"""How the thread field (``t``) of a store entry starts (``core/store_records.py``)."""


def parse_namespace(text: str, *, what: str = "namespace", empty: bool = False
                    ) -> tuple[str, ...]:
    """The namespace ``text`` names (its labels joined by ``.``: LangGraph's labels hold
    none); ``()`` for ``""`` when ``empty``. Raises ``ValueError`` naming ``what``, the
    text and the label for an empty label (``a..b``, a leading or trailing ``.``), a
    label holding a NUL, and ``""`` unless ``empty``."""
    if text == "":
        if empty:
            return ()
        raise ValueError(f"{what} is empty: give its labels joined by '.', e.g. users.alice")
    labels = tuple(text.split("."))
    for i, label in enumerate(labels):
        if not label:
            raise ValueError(f"{what} {text!r}: label {i + 1} is empty (labels are joined "
                             "by a single '.', with none at either end)")
        if "\x00" in label:
            raise ValueError(f"{what} {text!r}: label {i + 1} ({label!r}) holds a NUL "
                             "character, which no label may hold")
    return labels


def tool_store_serde(serde: Any, allow_types: Any = (), *, tolerant: bool = True) -> Any:
    """The serializer the tools read (and the CLI writes) store values with: the strict
    version (``strict_serde``) of the application's serializer ``serde`` (None:
    LangGraph's ``JsonPlusSerializer``, ``DurableStore``'s default; an
    ``ExternalRefSerializer``'s inner one, a ``TolerantSerde``'s inner one: the store
    never writes blobs), in a ``TolerantSerde`` with ``tolerant`` (an undecodable value
    is shown, not raised). An ``EncryptedSerializer`` also reads values stored
    unencrypted. Raises ``ValueError`` as ``strict_serde`` does."""
    if isinstance(serde, TolerantSerde):
        serde = serde.inner
    if isinstance(serde, ExternalRefSerializer):
        serde = serde.inner
    strict = strict_serde(serde, allow_types)
    return TolerantSerde(strict) if tolerant else strict


def store_mongodb_items(ctx: Context, db: Any) -> int:
    """The store's live items in MongoDB (neither deleted nor expired now; an item
    written since the last flush is not counted: ``store_unflushed``)."""
    now_ms = int(time.time() * 1000)
    return int(db[ctx.collections.store].count_documents(live_query(now_ms)))


def store_unflushed(ctx: Context, r: Any) -> int:
    """The store's items whose newest version MongoDB may lack (the unflushed index of
    every partition, HLEN), deletes included."""
    return sum(int(r.hlen(k)) for k in dirty_keys(ctx.config.key_prefix, ctx.partitions))


def store_outbox_entries(ctx: Context, r: Any, scan: int = OUTBOX_SCAN) -> dict[str, Any]:
    """The store's entries in the outbox: ``entries`` among the first ``scan`` of each
    stream (thread field starting with NUL + ``s``), ``scanned`` how many were read and
    ``complete`` whether that was every entry."""
    found = scanned = 0
    complete = True
    for stream in ctx.outboxes:
        rows = r.xrange(stream, "-", "+", count=scan)
        scanned += len(rows)
        complete = complete and len(rows) < scan
        for _id, fields in rows:
            t = fields.get(b"t", fields.get("t", b""))
            if isinstance(t, str):
                t = t.encode()
            found += bytes(t).startswith(STORE_TID.encode())
    return {"entries": found, "scanned": scanned, "complete": complete}


def store_vector_index(ctx: Context, redis: Any) -> dict[str, Any] | None:
    """The store's Redis vector index (``plans/store_vectors.py``), None when the key
    prefix has none: ``algorithm``, ``dims``, ``metric``, ``ready`` (False while it is
    rebuilt from MongoDB) and ``vectors`` (the index's documents, ``FT.INFO num_docs``;
    None when the server does not answer it). Two commands; nothing decoded."""
    state = IndexState.of(redis.get(state_key(ctx.config.key_prefix)))
    if state is None:
        return None
    vectors = None
    try:
        info = redis.execute_command("FT.INFO", f"{ctx.config.key_prefix}:vidx")
        fields = info if isinstance(info, dict) else dict(zip(info[::2], info[1::2]))
        raw = fields.get(b"num_docs", fields.get("num_docs"))
        vectors = int(float(raw)) if raw is not None else None
    except Exception:  # the index is gone (the next search rebuilds it)
        vectors = None
    return {"algorithm": state.algorithm, "dims": state.dims, "metric": state.metric,
            "ready": state.ready, "vectors": vectors}
