"""Model-free sliding-window compaction: drop the oldest messages."""

from __future__ import annotations

from typing import Any

from ._messages import Split
from ._options import TriggerSpec, normalize_trigger
from .base import BaseCompactor
from .schemas import TokenCounter


class SlidingWindow(BaseCompactor):
    """Keep only the most recent messages once the history passes ``max_tokens``.

    Older messages are removed from the state with ``RemoveMessage`` (no model involved).
    The leading system prompt and an existing summary message (from an earlier
    ``SummaryBuffer``) are kept, and an ``AIMessage`` with tool calls is never separated
    from its ``ToolMessage``s. Running it twice in a row changes nothing the second time.

    Args:
        max_tokens: Token budget of the whole history; nothing happens at or below it.
            ``None``: no token budget, ``trigger`` alone decides (pass ``keep_last`` or
            ``keep_tokens`` then).
        keep_tokens: Tokens of recent messages kept when trimming; defaults to
            ``max_tokens``. The window never exceeds ``max_tokens`` minus the system prompt
            and summary, so the trimmed history fits the budget (unless the last message or
            tool-call group alone is larger). A smaller value trims less often.
            Mutually exclusive with ``keep_last``.
        keep_last: Number of recent messages kept instead of ``keep_tokens``.
        token_counter: Counts tokens of a message list; defaults to
            ``count_tokens_approximately``.
        messages_key: State key of the messages.
        info_key: State key that receives the ``CompactionInfo`` report.
        trigger: Extra conditions that trim before ``max_tokens`` is reached:
            ``("tokens", n)``, ``("messages", n)``, a dict of several (all must hold) or
            a list (any may hold). Fractions need a model profile and are refused here.
        start_on: ``"human"`` to start the kept conversation on a
            human message after the system prompt and the summary; ``None`` (default) for
            no constraint. See ``BaseCompactor`` for the long-turn fallback.

    Raises:
        ValueError: On invalid budgets (see ``BaseCompactor``), an invalid ``trigger`` or
            ``start_on``.
    """

    strategy = "sliding_window"

    def __init__(
        self,
        *,
        max_tokens: int | None,
        keep_tokens: int | None = None,
        keep_last: int | None = None,
        token_counter: TokenCounter | None = None,
        messages_key: str = "messages",
        info_key: str = "compaction",
        trigger: TriggerSpec | None = None,
        start_on: str | None = None,
    ) -> None:
        super().__init__(
            max_tokens=max_tokens,
            keep_tokens=keep_tokens,
            keep_last=keep_last,
            token_counter=token_counter,
            messages_key=messages_key,
            info_key=info_key,
            default_keep_tokens=max_tokens,
            trigger=normalize_trigger(trigger, None),
            start_on=start_on,
        )

    def _window_tokens(self, split: Split) -> int | None:
        if self.keep_tokens is None:
            return None
        head = [m for m in (split.system, split.summary) if m is not None]
        room = self.budget - (self.token_counter(head) if head else 0)
        return max(0, min(self.keep_tokens, room))

    def __call__(self, state: Any) -> dict[str, Any]:
        """Trim ``state``; return ``{}`` or the ``messages`` update and ``compaction`` report.

        Args:
            state: Graph state (mapping or object) with the message list.
        """
        plan = self.plan(state)
        if plan is None:
            return {}
        return self._success(plan, plan.split.summary)

    async def acall(self, state: Any) -> dict[str, Any]:
        """Async twin of ``__call__`` (no I/O is involved)."""
        return self(state)
