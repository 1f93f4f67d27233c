"""The dashboard's Memory page as plain data: the long-term memory store's
(``DurableStore``) namespaces with their item counts, and one namespace's items (key,
value, created and updated), read through LangGraph's ``BaseStore`` API (both tiers:
unflushed items too) with the tools' strict decoding (``inspection.store_view``). Blocking
reads: the app runs them in a worker thread. No HTML here: the templates escape it all."""

from __future__ import annotations

from collections import Counter
from typing import Any

from ..inspection.store_view import parse_namespace, tool_store_serde
from ..store import DurableStore
from .views import value_view

SCAN_ITEMS = 10_000
"""Most items read to count the namespaces' items (the page says when there were more)."""

SHOWN_ITEMS = 200
"""Most items of one namespace shown."""


def memory_store(saver: Any, allow_types: Any = ()) -> DurableStore:
    """A read-only ``DurableStore`` on ``saver``'s runtime whose values are decoded by
    ``tool_store_serde`` of its serializer (never reviving a type outside the
    allowlist), shown as stored (``read_as_stored``: neither migrated to nor checked
    against a state version)."""
    return DurableStore(saver, serde=tool_store_serde(getattr(saver, "serde", None),
                                                      allow_types), read_as_stored=True)


def memory_view(store: DurableStore, ns: str = "") -> dict[str, Any]:
    """The page's data: ``namespaces`` (``[{"ns": "a.b", "count": n}]``, sorted),
    ``complete`` (False when the store holds over ``SCAN_ITEMS`` items: the counts are
    of the first ones), ``ns`` the chosen namespace and its ``items`` (``key``,
    ``value`` as ``views.value_view``, ``created``/``updated`` UTC text; at most
    ``SHOWN_ITEMS``, ``more`` when it holds more). Raises ``ValueError`` for a malformed
    ``ns`` (an empty label, a NUL)."""
    chosen = parse_namespace(ns, empty=True)
    found = store.search((), limit=SCAN_ITEMS + 1, refresh_ttl=False)  # one read: no paging
    complete = len(found) <= SCAN_ITEMS
    counts = Counter(i.namespace for i in found[:SCAN_ITEMS])
    items: list[dict[str, Any]] = []
    if chosen:
        under = found if complete else store.search(chosen, limit=SCAN_ITEMS,
                                                    refresh_ttl=False)
        mine = [i for i in under if i.namespace == chosen]
        items = [_row(i) for i in mine[:SHOWN_ITEMS + 1]]
    more, items = len(items) > SHOWN_ITEMS, items[:SHOWN_ITEMS]
    return {"namespaces": [{"ns": ".".join(k), "count": n} for k, n in sorted(counts.items())],
            "complete": complete, "scanned": min(len(found), SCAN_ITEMS), "ns": ".".join(chosen),
            "items": items, "more": more}


def _row(item: Any) -> dict[str, Any]:
    return {"key": item.key, "value": value_view(item.value),
            "created": item.created_at.strftime("%Y-%m-%d %H:%M:%S"),
            "updated": item.updated_at.strftime("%Y-%m-%d %H:%M:%S")}
