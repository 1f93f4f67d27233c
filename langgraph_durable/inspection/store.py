"""Read-only counts of the long-term memory store (``DurableStore``) for the tools
(``status``, the dashboard): its live documents in MongoDB, its unflushed items in
Redis and its entries in the outbox. Nothing here writes; values are never decoded."""

from __future__ import annotations

import time
from typing import Any

from ..core.store_records import SEP
from ..durable.store import live_query
from ..hot.store import dirty_keys
from ..plans.context import Context

OUTBOX_SCAN = 10_000
"""Most outbox entries per stream ``store_counts`` reads to tell the store's apart."""

STORE_TID = SEP + "s"
"""How the thread field (``t``) of a store entry starts (``core/store_records.py``)."""


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
