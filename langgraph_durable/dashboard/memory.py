"""The dashboard's Memory page as plain data: the long-term memory store's
(``DurableStore``) namespaces with their item counts, and one namespace's items (key,
value, created and updated), read through LangGraph's ``BaseStore`` API (both tiers:
unflushed items too) with the tools' strict decoding (``inspection.store``). Blocking
reads: the app runs them in a worker thread. No HTML here: the templates escape it all."""

from __future__ import annotations

from collections import Counter
from typing import Any

from ..inspection.store import parse_namespace, tool_store_serde
from ..store import DurableStore
from .views import value_view

SCAN_ITEMS = 10_000
"""Most items read to count the namespaces' items (the page says when there were more)."""

PAGE = 500
"""Items per read of the scan."""

SHOWN_ITEMS = 200
"""Most items of one namespace shown."""


def memory_store(saver: Any, allow_types: Any = ()) -> DurableStore:
    """A read-only ``DurableStore`` on ``saver``'s runtime whose values are decoded by
    ``tool_store_serde`` of its serializer (never reviving a type outside the
    allowlist)."""
    return DurableStore(saver, serde=tool_store_serde(getattr(saver, "serde", None),
                                                      allow_types))


def memory_view(store: DurableStore, ns: str = "") -> dict[str, Any]:
    """The page's data: ``namespaces`` (``[{"ns": "a.b", "count": n}]``, sorted),
    ``complete`` (False when the store holds over ``SCAN_ITEMS`` items: the counts are
    of the first ones), ``ns`` the chosen namespace and its ``items`` (``key``,
    ``value`` as ``views.value_view``, ``created``/``updated`` UTC text; at most
    ``SHOWN_ITEMS``, ``more`` when it holds more). Raises ``ValueError`` for a malformed
    ``ns`` (an empty label, a NUL)."""
    chosen = parse_namespace(ns, empty=True)
    counts: Counter[tuple[str, ...]] = Counter()
    offset = 0
    while offset < SCAN_ITEMS:
        batch = store.search((), limit=min(PAGE, SCAN_ITEMS - offset), offset=offset,
                             refresh_ttl=False)
        counts.update(i.namespace for i in batch)
        offset += len(batch)
        if len(batch) < PAGE:
            break
    items: list[dict[str, Any]] = []
    more = False
    if chosen:
        at = 0
        while len(items) <= SHOWN_ITEMS:
            batch = store.search(chosen, limit=PAGE, offset=at, refresh_ttl=False)
            items += [_row(i) for i in batch if i.namespace == chosen]
            at += len(batch)
            if len(batch) < PAGE:
                break
        more, items = len(items) > SHOWN_ITEMS, items[:SHOWN_ITEMS]
    return {"namespaces": [{"ns": ".".join(k), "count": n} for k, n in sorted(counts.items())],
            "complete": offset < SCAN_ITEMS, "scanned": offset, "ns": ".".join(chosen),
            "items": items, "more": more}


def _row(item: Any) -> dict[str, Any]:
    return {"key": item.key, "value": value_view(item.value),
            "created": item.created_at.strftime("%Y-%m-%d %H:%M:%S"),
            "updated": item.updated_at.strftime("%Y-%m-%d %H:%M:%S")}
