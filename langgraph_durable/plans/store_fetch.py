"""The last step of every read of store items by name (a get, a vector index's hits):
MongoDB's copies of the items Redis did not hold, then each item's live record."""

from __future__ import annotations

from collections.abc import Sequence

from ..core.ops import Find, Plan, ask
from ..core.store_records import StoreRecord, item_field
from ..durable import store_docs as S
from .context import Context


def live_records_plan(ctx: Context, items: Sequence[tuple[tuple[str, ...], str]],
                      found: dict[str, StoreRecord],
                      now_ms: int) -> Plan[list[StoreRecord | None]]:
    """The live record of each of ``items`` (``(namespace, key)``) at ``now_ms``: the one
    ``found`` holds (Redis's copies, by field; completed in place), else MongoDB's (one
    find for all those missing); None for an item deleted, expired or never stored."""
    fields = [item_field(ns, k) for ns, k in items]
    missing = [S.store_id(ns, k) for (ns, k), f in zip(items, fields) if f not in found]
    if missing:
        docs = yield from ask(Find(ctx.collections.store, S.items_named(missing)))
        for doc in docs:
            rec = S.record_of(doc)
            found[rec.field] = rec
    out: list[StoreRecord | None] = []
    for f in fields:
        held = found.get(f)
        out.append(held if held is not None and held.live(now_ms) else None)
    return out
