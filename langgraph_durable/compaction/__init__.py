"""History compaction for LangGraph message state.

Two strategies, each usable as a graph node (sync ``__call__``, async ``acall``, or
``as_runnable()`` for both) and as ``pre_model_hook`` of ``create_react_agent``
(``as_pre_model_hook()``):

* ``SummaryBuffer`` folds the oldest messages into an incremental summary written by a
  chat model.
* ``SlidingWindow`` drops the oldest messages without a model.

Both remove folded messages from the state with ``RemoveMessage`` so the checkpoint
itself shrinks, keep the leading system prompt and never split an ``AIMessage`` with
tool calls from its ``ToolMessage``s.

``CompactionMiddleware`` runs the same engine as middleware of LangChain 1.x agents
(``langchain.agents.create_agent``); it needs the ``agents`` extra and is imported lazily,
so this package does not import ``langchain`` until it is used. ``transcript`` and
``atranscript`` rebuild a thread's whole conversation from its checkpoints.
"""

from typing import TYPE_CHECKING, Any

from .base import BaseCompactor
from .schemas import (
    SUMMARY_MESSAGE_ID,
    CompactionInfo,
    SummaryAgentState,
    SummaryState,
    TokenCounter,
)
from .sliding import SlidingWindow
from .summary import DEFAULT_SUMMARY_MESSAGE, DEFAULT_SUMMARY_PROMPT, NO_SUMMARY, SummaryBuffer
from .transcript import atranscript, transcript

if TYPE_CHECKING:
    from .agent_middleware import CompactionAgentState, CompactionMiddleware

_LAZY = {"CompactionMiddleware", "CompactionAgentState"}


def __getattr__(name: str) -> Any:
    """Import ``CompactionMiddleware``/``CompactionAgentState`` (and ``langchain``) on use."""
    if name in _LAZY:
        from . import agent_middleware as middleware

        return getattr(middleware, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "DEFAULT_SUMMARY_MESSAGE",
    "DEFAULT_SUMMARY_PROMPT",
    "NO_SUMMARY",
    "SUMMARY_MESSAGE_ID",
    "BaseCompactor",
    "CompactionAgentState",
    "CompactionInfo",
    "CompactionMiddleware",
    "SlidingWindow",
    "SummaryAgentState",
    "SummaryBuffer",
    "SummaryState",
    "TokenCounter",
    "atranscript",
    "transcript",
]
