"""What compaction folds away, kept in LangGraph's long-term memory store.

With ``memory_namespace`` (``SummaryBuffer``, ``CompactionMiddleware``) each successful
summary is also put in the store of the running graph (``builder.compile(store=...)``;
``langgraph.config.get_store()``), one item per compaction, so the folded conversation
stays searchable (``store.search(namespace, query=...)``) after it left the state. This
module talks to the store through ``langgraph.store.base.BaseStore`` only.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig
from langgraph.config import get_config, get_store
from langgraph.store.base import BaseStore

from ._messages import render_messages

MemoryNamespace = tuple[str, ...] | Callable[[RunnableConfig], tuple[str, ...]]
"""Where summaries go: a tuple of ``str.format`` templates filled from the run's
``config["configurable"]`` (``("summaries", "{thread_id}")``), or a function of the
run's ``RunnableConfig`` returning the namespace tuple."""


def check_namespace(spec: MemoryNamespace | None) -> MemoryNamespace | None:
    """Return ``spec`` after checking its shape; raises ``ValueError`` for an empty tuple,
    a non-string label or a value neither a tuple nor callable."""
    if spec is None or callable(spec):
        return spec
    if not isinstance(spec, tuple) or not spec or not all(
            isinstance(s, str) and s for s in spec):
        raise ValueError("memory_namespace must be a non-empty tuple of non-empty strings "
                         f"or a function of the run's config, got {spec!r}")
    return spec


def resolve_namespace(spec: MemoryNamespace, config: RunnableConfig) -> tuple[str, ...]:
    """The namespace of ``spec`` for the run of ``config``; raises ``ValueError`` naming
    a ``{placeholder}`` missing from ``config["configurable"]`` or a bad function result."""
    if callable(spec):
        namespace = spec(config)
        if not isinstance(namespace, tuple) or not namespace or not all(
                isinstance(s, str) and s for s in namespace):
            raise ValueError("memory_namespace function must return a non-empty tuple of "
                             f"non-empty strings, got {namespace!r}")
        return namespace
    configurable = dict(config.get("configurable") or {})
    try:
        return tuple(label.format_map(configurable) for label in spec)
    except KeyError as exc:
        raise ValueError(f"memory_namespace {spec!r}: {exc.args[0]!r} is not in the run's "
                         "config['configurable']") from None


def memory_item(summary: str, folded: list[BaseMessage], config: RunnableConfig
                ) -> tuple[str, dict[str, Any]]:
    """``(key, value)`` of the item for one compaction: the key is derived from the
    folded messages' ids (a retried compaction of the same messages overwrites its item;
    a random key when a message has no id); the value holds ``summary`` (the new
    summary), ``messages`` (the folded messages as text), ``message_ids`` and the run's
    ``thread_id``."""
    ids = [m.id for m in folded]
    if ids and all(ids):
        key = str(uuid.uuid5(uuid.NAMESPACE_URL, "compaction:" + "\x1f".join(
            str(i) for i in ids)))
    else:
        key = str(uuid.uuid4())
    configurable = config.get("configurable") or {}
    return key, {
        "summary": summary,
        "messages": render_messages(folded),
        "message_ids": [i for i in ids if i],
        "thread_id": configurable.get("thread_id"),
    }


def _target(spec: MemoryNamespace, summary: str, folded: list[BaseMessage]
            ) -> tuple[BaseStore, tuple[str, ...], str, dict[str, Any]]:
    try:
        config = get_config()
        store = get_store()
    except RuntimeError:
        raise ValueError("memory_namespace writes to the graph's store: run the compactor "
                         "inside a graph (node or middleware)") from None
    if store is None:
        raise ValueError("memory_namespace needs a store: compile the graph with store=... "
                         "(e.g. DurableStore)")
    namespace = resolve_namespace(spec, config)
    key, value = memory_item(summary, folded, config)
    return store, namespace, key, value


def remember(spec: MemoryNamespace, summary: str, folded: list[BaseMessage]) -> None:
    """Put one compaction's item (``memory_item``) in the running graph's store under
    ``spec``'s namespace. Raises ``ValueError`` outside a graph or without a store, and
    what the store's ``put`` raises."""
    store, namespace, key, value = _target(spec, summary, folded)
    store.put(namespace, key, value)


async def aremember(spec: MemoryNamespace, summary: str, folded: list[BaseMessage]) -> None:
    """Async ``remember`` (``store.aput``)."""
    store, namespace, key, value = _target(spec, summary, folded)
    await store.aput(namespace, key, value)
