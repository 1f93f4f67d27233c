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
"""

from .base import BaseCompactor
from .sliding import SlidingWindow
from .state import (
    SUMMARY_MESSAGE_ID,
    CompactionInfo,
    SummaryAgentState,
    SummaryState,
    TokenCounter,
)
from .summary import DEFAULT_SUMMARY_MESSAGE, DEFAULT_SUMMARY_PROMPT, NO_SUMMARY, SummaryBuffer

__all__ = [
    "DEFAULT_SUMMARY_MESSAGE",
    "DEFAULT_SUMMARY_PROMPT",
    "NO_SUMMARY",
    "SUMMARY_MESSAGE_ID",
    "BaseCompactor",
    "CompactionInfo",
    "SlidingWindow",
    "SummaryAgentState",
    "SummaryBuffer",
    "SummaryState",
    "TokenCounter",
]
