"""Rebuild the whole, uncompacted conversation of a thread from its checkpoint history.

Compaction removes messages from the *current* state only: every checkpoint written before
keeps the messages it held. ``transcript`` walks the thread's checkpoints from the first to
the one ``config`` points at (the latest by default) and collects every message once, by id,
in the order they entered the conversation.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from langchain_core.messages import BaseMessage, convert_to_messages
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple

from ..errors import CheckpointNotFoundError
from .schemas import SUMMARY_MESSAGE_ID


def _is_summary(message: BaseMessage) -> bool:
    """Our summary message, or the one LangChain's ``SummarizationMiddleware`` inserts."""
    if message.id == SUMMARY_MESSAGE_ID:
        return True
    return message.additional_kwargs.get("lc_source") == "summarization"


def _lineage(tuples: Iterable[CheckpointTuple], config: RunnableConfig) -> list[CheckpointTuple]:
    """The checkpoints from the thread's first to ``config``'s (or the latest), in order.

    Follows ``parent_config`` links, so sibling branches (forks, time travel) are left out.
    A thread without checkpoints gives ``[]``.

    Raises:
        CheckpointNotFoundError: When ``config`` names a ``checkpoint_id`` the thread
            does not hold.
    """
    by_id: dict[str, CheckpointTuple] = {}
    latest: CheckpointTuple | None = None
    for item in tuples:  # newest first, as ``list`` returns them
        by_id[item.checkpoint["id"]] = item
        if latest is None:
            latest = item
    wanted = config.get("configurable", {}).get("checkpoint_id")
    current = by_id.get(wanted) if wanted else latest
    if wanted and current is None:
        configurable = config.get("configurable", {})
        thread_id = str(configurable.get("thread_id"))
        checkpoint_ns = str(configurable.get("checkpoint_ns", ""))
        raise CheckpointNotFoundError(
            f"transcript: thread {thread_id!r} (checkpoint_ns {checkpoint_ns!r}) has no "
            f"checkpoint {wanted!r} ({len(by_id)} checkpoints listed)",
            thread_id=thread_id,
            checkpoint_ns=checkpoint_ns,
            checkpoint_id=str(wanted),
        )
    chain: list[CheckpointTuple] = []
    while current is not None:
        chain.append(current)
        parent = current.parent_config
        parent_id = parent["configurable"].get("checkpoint_id") if parent else None
        current = by_id.get(parent_id) if parent_id else None
    chain.reverse()
    return chain


def assemble(
    tuples: Iterable[CheckpointTuple],
    config: RunnableConfig,
    *,
    messages_key: str = "messages",
    include_summaries: bool = False,
) -> list[BaseMessage]:
    """Merge the message lists of a thread's checkpoints into one transcript (no I/O).

    Each message appears once, at the place it first appeared, in its latest version (a
    message rewritten under the same id shows the rewrite). A message that is new in a
    checkpoint is placed right after the message before it in that checkpoint's list.
    Messages without an id cannot be matched across checkpoints and are skipped.

    Raises:
        CheckpointNotFoundError: When ``config`` names a ``checkpoint_id`` that is not
            among ``tuples``.
    """
    order: list[str] = []
    latest: dict[str, BaseMessage] = {}
    for item in _lineage(tuples, config):
        raw: Sequence[Any] = item.checkpoint["channel_values"].get(messages_key) or []
        keyed = [
            m
            for m in convert_to_messages(raw)
            if m.id is not None and (include_summaries or not _is_summary(m))
        ]
        previous: str | None = None
        for i, message in enumerate(keyed):
            key = str(message.id)
            if key not in latest:
                if previous is not None:
                    at = order.index(previous) + 1
                else:  # first of the list: before the next known message, else at the end
                    follower = next((str(m.id) for m in keyed[i:] if m.id in latest), None)
                    at = order.index(follower) if follower is not None else len(order)
                order.insert(at, key)
            latest[key] = message
            previous = key
    return [latest[key] for key in order]


def _list_config(config: RunnableConfig) -> RunnableConfig:
    """``config`` without ``checkpoint_id``: ``list`` must return the whole thread."""
    configurable = dict(config.get("configurable", {}))
    configurable.pop("checkpoint_id", None)
    configurable.setdefault("checkpoint_ns", "")
    return {"configurable": configurable}


def transcript(
    saver: BaseCheckpointSaver[Any],
    config: RunnableConfig,
    *,
    messages_key: str = "messages",
    include_summaries: bool = False,
) -> list[BaseMessage]:
    """Return the full conversation of ``config``'s thread, as if it had never been compacted.

    Reads every checkpoint of the thread with ``saver.list`` (any LangGraph saver; with
    ``DurableSaver`` from Redis, or from MongoDB once Redis no longer holds the thread) and
    follows the parent links from the checkpoint ``config`` names (the latest when it names
    none) back to the first. The messages a compaction removed are found in the checkpoints
    written before it, so nothing is lost as long as those checkpoints are kept: ``prune``,
    ``delete_for_runs`` and a graph compiled with ``durability="exit"`` (which writes no
    intermediate checkpoints) remove what it can find.

    Args:
        saver: The thread's checkpointer.
        config: ``{"configurable": {"thread_id": ..., "checkpoint_ns"?: ...,
            "checkpoint_id"?: ...}}``.
        messages_key: State key of the message list.
        include_summaries: Keep the summary messages written by compaction (ours, or
            LangChain's ``SummarizationMiddleware``); left out by default.

    Returns:
        The messages, each once, in conversation order, in their latest version; ``[]``
        for a thread that has no checkpoint (an unknown ``thread_id``), as
        ``InMemorySaver``'s ``get_state`` gives empty values for one.

    Raises:
        CheckpointNotFoundError: When ``config`` names a ``checkpoint_id`` the thread
            (in its ``checkpoint_ns``) does not hold, e.g. one that was pruned; the
            message names the thread and the checkpoint.
    """
    return assemble(
        saver.list(_list_config(config)),
        config,
        messages_key=messages_key,
        include_summaries=include_summaries,
    )


async def atranscript(
    saver: BaseCheckpointSaver[Any],
    config: RunnableConfig,
    *,
    messages_key: str = "messages",
    include_summaries: bool = False,
) -> list[BaseMessage]:
    """Async ``transcript`` (reads with ``saver.alist``); same arguments, result and
    errors."""
    tuples = [item async for item in saver.alist(_list_config(config))]
    return assemble(
        tuples, config, messages_key=messages_key, include_summaries=include_summaries
    )
