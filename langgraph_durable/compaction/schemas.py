"""State schemas and constants shared by the history-compaction strategies."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Annotated

from langchain_core.messages import BaseMessage
from langgraph.graph import MessagesState
from langgraph.graph.message import add_messages
from langgraph.managed import RemainingSteps
from typing_extensions import NotRequired, TypedDict

SUMMARY_MESSAGE_ID = "langgraph_durable:summary"
"""Stable id of the ``SystemMessage`` that carries the running summary.

Because the id never changes, ``add_messages`` replaces the message in place on every
compaction instead of appending a new one."""

TokenCounter = Callable[[Sequence[BaseMessage]], int]
"""A callable that returns the number of tokens of a list of messages.

``langchain_core.messages.count_tokens_approximately`` is the default; a model's own
counter (for example ``chat_model.get_num_tokens_from_messages``) fits as well."""


class CompactionInfo(TypedDict, total=False):
    """What the last compaction did; written to the ``compaction`` state key.

    Keys:
        strategy: ``"summary_buffer"`` or ``"sliding_window"``.
        error: ``None`` on success, otherwise ``"ExceptionType: message"`` of the
            summarising model's failure or timeout.
        fallback: Present after a failure: ``"trim"`` when the history was trimmed to the
            budget instead (``on_failure="trim"``, the default; the summary stays as it
            was and the next compaction asks the model again), ``"keep"`` when it was
            left untouched (``on_failure="keep"``).
        pinned: Present when no ``start_on`` start fitted the budget (one long agent turn
            whose question is its only human message): the id of the ``start_on``
            message kept right after the system prompt and summary, ahead of a pair-safe
            tail; the messages between them were folded.
        folded: Number of messages removed from the history (summarised or dropped).
        kept: Number of conversation messages kept verbatim (the leading system prompt
            and the summary message are not counted; a pinned message is).
        pending: With ``fallback="keep"``, the number of messages that would have been
            folded.
        tokens_before: Tokens of the whole history before compaction.
        tokens_after: Tokens of the whole history after compaction (equal to
            ``tokens_before`` when left untouched).
        over_budget: ``True`` when the history is still larger than the budget
            (``max_tokens`` minus ``reserve_tokens``) after compaction (e.g. a single
            message larger than the budget).
    """

    strategy: str
    error: str | None
    fallback: str
    pinned: str | None
    folded: int
    kept: int
    pending: int
    tokens_before: int
    tokens_after: int
    over_budget: bool


class SummaryState(MessagesState):
    """``MessagesState`` plus the keys written by the compaction strategies.

    LangGraph silently ignores update keys that are not part of the state schema, so use
    this schema (or add ``summary`` and ``compaction`` to your own) to keep the summary
    text and the compaction report in the checkpoint.
    """

    summary: NotRequired[str]
    compaction: NotRequired[CompactionInfo]


class SummaryAgentState(TypedDict):
    """State schema for ``langgraph.prebuilt.create_react_agent`` with compaction keys.

    Mirrors the prebuilt ``AgentState`` (``messages`` and ``remaining_steps``) and adds
    ``summary`` and ``compaction``. Pass it as ``state_schema=`` together with
    ``pre_model_hook=SummaryBuffer(...).as_pre_model_hook()``.
    """

    messages: Annotated[Sequence[BaseMessage], add_messages]
    remaining_steps: NotRequired[RemainingSteps]
    summary: NotRequired[str]
    compaction: NotRequired[CompactionInfo]
