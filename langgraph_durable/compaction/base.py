"""Shared machinery of the history-compaction strategies: planning and state updates."""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from langchain_core.messages import BaseMessage, RemoveMessage, convert_to_messages
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.runnables import Runnable, RunnableLambda
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from ._messages import Split, fit_window, pinned_start, split_history, window_start
from ._options import Clause, clause_met, resolve_start_on
from .schemas import CompactionInfo, TokenCounter

logger = logging.getLogger("langgraph_durable.compaction")


@dataclass(frozen=True)
class CompactionPlan:
    """What a compaction would do to one history (internal; not the storage plans of
    ``drivers.Plan``, which are generators of server operations)."""

    split: Split
    folded: list[BaseMessage]
    kept: list[BaseMessage]
    tokens_before: int
    previous_summary: str | None
    pinned: BaseMessage | None = None  # start_on message kept ahead of a pair-safe tail


def _get(state: Any, key: str) -> Any:
    if isinstance(state, Mapping):
        return state.get(key)
    return getattr(state, key, None)


class BaseCompactor:
    """Base class of the compaction strategies; not meant to be used directly.

    A compactor is a LangGraph node: call it with the graph state and it returns the state
    update (an empty dict when nothing has to change). Subclasses implement ``__call__`` and
    ``acall``.

    Updates remove folded messages by id. When the summary message has to be inserted or
    moved (the first compaction) or a folded message has no id, the update is
    ``[RemoveMessage(REMOVE_ALL_MESSAGES), *new_history]`` instead, so do not run a
    compactor in the same superstep as another node that writes messages.

    Args:
        max_tokens: Token budget of the whole history (system prompt and summary
            included). Nothing happens while the history is at or below it. ``None``:
            no token budget; then ``trigger`` decides alone (it must be given) and the
            kept window is set by ``keep_tokens``/``keep_last`` (one must be given).
        keep_tokens: Tokens of the most recent messages kept verbatim when compacting.
            Mutually exclusive with ``keep_last``.
        keep_last: Number of most recent messages kept verbatim instead of a token budget.
        token_counter: Counts the tokens of a list of messages.
        messages_key: State key of the message list.
        info_key: State key that receives the ``CompactionInfo`` report.
        trigger: Resolved extra trigger clauses (``{"tokens": n}`` and/or
            ``{"messages": n}``, all of a clause must be reached, any clause triggers);
            a history over ``max_tokens`` always triggers.
        start_on: ``"human"``: the kept conversation starts on a
            human message after the system prompt and the summary; ``None`` for no
            constraint. When no human start fits the budget (one long agent turn), the
            last human message before a pair-safe tail is kept pinned ahead of it.

    Attributes:
        reserve_tokens: Tokens the caller sends besides the history (e.g. a system prompt
            kept outside the state); the effective budget is ``max_tokens`` minus this.
            ``0`` unless set (``CompactionMiddleware`` sets it).

    Raises:
        ValueError: If a budget is not positive, ``keep_tokens`` exceeds ``max_tokens``,
            both ``keep_tokens`` and ``keep_last`` are given, ``max_tokens`` is ``None``
            without a ``trigger`` or a window size, or ``start_on`` is not an accepted
            value.
    """

    strategy: ClassVar[str] = "base"

    def __init__(
        self,
        *,
        max_tokens: int | None,
        keep_tokens: int | None,
        keep_last: int | None,
        token_counter: TokenCounter | None,
        messages_key: str,
        info_key: str,
        default_keep_tokens: int | None,
        trigger: list[Clause] | None = None,
        start_on: str | None = None,
    ) -> None:
        if max_tokens is not None and max_tokens <= 0:
            raise ValueError(f"max_tokens must be positive, got {max_tokens}")
        if max_tokens is None and not trigger:
            raise ValueError("max_tokens=None needs a trigger, e.g. ('messages', 60)")
        if keep_tokens is not None and keep_last is not None:
            raise ValueError("pass either keep_tokens or keep_last, not both")
        if keep_last is not None and keep_last < 1:
            raise ValueError(f"keep_last must be at least 1, got {keep_last}")
        if keep_last is None and keep_tokens is None:
            keep_tokens = default_keep_tokens
            if keep_tokens is None:
                raise ValueError("without max_tokens, pass keep_tokens or keep_last")
        if keep_tokens is not None and not (
            0 < keep_tokens and (max_tokens is None or keep_tokens <= max_tokens)
        ):
            raise ValueError(f"keep_tokens must be in 1..max_tokens, got {keep_tokens}")
        self.max_tokens = max_tokens
        self.keep_tokens = keep_tokens
        self.keep_last = keep_last
        self.token_counter: TokenCounter = token_counter or count_tokens_approximately
        self.messages_key = messages_key
        self.info_key = info_key
        self.trigger: list[Clause] = list(trigger or [])
        self.start_on = resolve_start_on(start_on)
        self.reserve_tokens = 0

    @property
    def budget(self) -> int:
        """Tokens the history may use: ``max_tokens - reserve_tokens`` (at least 1);
        ``sys.maxsize`` without ``max_tokens``."""
        if self.max_tokens is None:
            return sys.maxsize
        return max(1, self.max_tokens - self.reserve_tokens)

    def triggered(self, messages: list[BaseMessage], tokens: int) -> bool:
        """Whether a history of ``tokens`` tokens and ``len(messages)`` messages compacts."""
        if tokens > self.budget:
            return True
        return any(clause_met(c, tokens, len(messages)) for c in self.trigger)

    # -- planning -------------------------------------------------------------------------

    def _previous_summary(self, state: Any, split: Split) -> str | None:
        return None

    def _window_tokens(self, split: Split) -> int | None:
        """Token budget of the verbatim window (``None`` when ``keep_last`` is used)."""
        return self.keep_tokens

    def plan(self, state: Any) -> CompactionPlan | None:
        """Decide what to fold for ``state``; ``None`` when nothing has to change.

        Args:
            state: Graph state (mapping or object) holding the message list.

        Returns:
            The plan, or ``None`` when the history is within ``max_tokens`` or every
            remaining conversation message belongs to the verbatim window.
        """
        raw = _get(state, self.messages_key) or []
        messages: list[BaseMessage] = convert_to_messages(raw)
        if not messages:
            return None
        tokens = self.token_counter(messages)
        if not self.triggered(messages, tokens):
            return None
        split = split_history(messages)
        cut = self._cut(split, fit=False)
        if cut is None:
            logger.debug("history over budget (%d tokens) but nothing left to fold", tokens)
            return None
        folded, kept, pinned = cut
        return CompactionPlan(
            split=split,
            folded=folded,
            kept=kept,
            tokens_before=tokens,
            previous_summary=self._previous_summary(state, split),
            pinned=pinned,
        )

    def _cut(
        self, split: Split, *, fit: bool
    ) -> tuple[list[BaseMessage], list[BaseMessage], BaseMessage | None] | None:
        """Return ``(folded, kept, pinned)`` for ``split``, or ``None`` if nothing folds.

        The kept window is the verbatim window (``keep_tokens``/``keep_last``), pair-safe,
        starting on ``start_on``; with ``fit`` it is also cut to fit ``budget`` next to the
        existing head. When no ``start_on`` start both folds something and fits the
        budget (one long agent turn: its question is the only human message), the window
        becomes a pair-safe tail with the last ``start_on`` message before it pinned
        ahead of it (``pinned``); the messages in between are folded.
        """
        body = split.body
        head = [m for m in (split.system, split.summary) if m is not None]
        counter, budget = self.token_counter, self.budget
        keep_tokens, keep_last = self._window_tokens(split), self.keep_last
        start = window_start(
            body, counter, keep_tokens=keep_tokens, keep_last=keep_last, start_on=self.start_on
        )
        if fit:
            start = max(start, fit_window(head, body, counter, budget, self.start_on))
        if self.start_on is not None and (
            start == 0 or counter([*head, *body[start:]]) > budget
        ):
            tail = window_start(body, counter, keep_tokens=keep_tokens, keep_last=keep_last)
            if fit:
                tail = max(tail, fit_window(head, body, counter, budget, None))
            found = pinned_start(head, body, counter, budget, tail, self.start_on)
            if found is not None:
                anchor, tail = found
                folded = [m for i, m in enumerate(body[:tail]) if i != anchor]
                return folded, [body[anchor], *body[tail:]], body[anchor]
        if start == 0:
            return None
        return body[:start], body[start:], None

    def trimmed(self, plan: CompactionPlan) -> CompactionPlan:
        """``plan`` with the kept window cut to fit the budget next to the existing head.

        Used when no summary can be written: the system prompt and the existing summary
        message stay, and the kept window is the longest pair-safe tail (starting on
        ``start_on``, or after a pinned ``start_on`` message as in ``plan``) that fits
        ``budget`` together with them and is no longer than the verbatim window.
        """
        cut = self._cut(plan.split, fit=True)
        if cut is None:  # unreachable after a plan folded something; keep the plan
            return plan
        folded, kept, pinned = cut
        return CompactionPlan(
            split=plan.split,
            folded=folded,
            kept=kept,
            tokens_before=plan.tokens_before,
            previous_summary=plan.previous_summary,
            pinned=pinned,
        )

    # -- updates --------------------------------------------------------------------------

    def _messages_update(self, plan: CompactionPlan,
                         summary: BaseMessage | None) -> list[BaseMessage]:
        """Removals by id when possible, else ``REMOVE_ALL_MESSAGES`` and the new history."""
        split = plan.split
        ids_known = all(m.id for m in plan.folded)
        placed = split.summary_in_place if summary is not None else split.summary is None
        if ids_known and placed:
            update: list[BaseMessage] = [RemoveMessage(id=str(m.id)) for m in plan.folded]
            if summary is not None and summary is not split.summary:
                update.append(summary)  # same stable id: replaced in place
            return update
        head = [m for m in (split.system, summary) if m is not None]
        return [RemoveMessage(id=REMOVE_ALL_MESSAGES), *head, *plan.kept]

    def _success(
        self,
        plan: CompactionPlan,
        summary: BaseMessage | None,
        extra: dict[str, Any] | None = None,
        *,
        error: str | None = None,
    ) -> dict[str, Any]:
        head = [m for m in (plan.split.system, summary) if m is not None]
        tokens_after = self.token_counter([*head, *plan.kept])
        info: CompactionInfo = {
            "strategy": self.strategy,
            "error": error,
            "folded": len(plan.folded),
            "kept": len(plan.kept),
            "tokens_before": plan.tokens_before,
            "tokens_after": tokens_after,
            "over_budget": tokens_after > self.budget,
        }
        if error is not None:
            info["fallback"] = "trim"
        if plan.pinned is not None:
            info["pinned"] = plan.pinned.id
        logger.info(
            "%s%s%s: folded %d messages, kept %d, tokens %d -> %d",
            self.strategy,
            " (trim fallback)" if error is not None else "",
            f" (kept {plan.pinned.type} message pinned ahead of the window)"
            if plan.pinned is not None
            else "",
            len(plan.folded),
            len(plan.kept),
            plan.tokens_before,
            tokens_after,
        )
        update: dict[str, Any] = {self.messages_key: self._messages_update(plan, summary)}
        update.update(extra or {})
        update[self.info_key] = info
        return update

    # -- node interfaces ------------------------------------------------------------------

    def __call__(self, state: Any) -> dict[str, Any]:
        """Compact ``state`` synchronously and return the state update."""
        raise NotImplementedError

    async def acall(self, state: Any) -> dict[str, Any]:
        """Compact ``state`` asynchronously and return the state update."""
        raise NotImplementedError

    def as_runnable(self, name: str | None = None) -> Runnable[Any, dict[str, Any]]:
        """Wrap the compactor as a runnable with a sync and an async path.

        Use it as a graph node: ``builder.add_node("compact", compactor.as_runnable())``.
        ``invoke``/``stream`` call ``__call__``; ``ainvoke``/``astream`` call ``acall``.

        Args:
            name: Run name shown in traces; defaults to the strategy name.
        """

        def compact(state: Any) -> dict[str, Any]:
            return self(state)

        async def acompact(state: Any) -> dict[str, Any]:
            return await self.acall(state)

        return RunnableLambda(compact, afunc=acompact, name=name or self.strategy)

    def as_pre_model_hook(self, name: str | None = None) -> Runnable[Any, dict[str, Any]]:
        """Wrap the compactor as ``pre_model_hook`` of ``create_react_agent``.

        The hook rewrites ``messages`` in the state (so the checkpoint shrinks) and always
        returns a ``messages`` key, as the hook contract requires; it never sets
        ``llm_input_messages``. Use ``SummaryAgentState`` as ``state_schema`` to keep the
        ``summary`` and ``compaction`` keys.

        Args:
            name: Run name shown in traces; defaults to ``"<strategy>_hook"``.
        """

        def hook(state: Any) -> dict[str, Any]:
            return {self.messages_key: [], **self(state)}

        async def ahook(state: Any) -> dict[str, Any]:
            return {self.messages_key: [], **(await self.acall(state))}

        return RunnableLambda(hook, afunc=ahook, name=name or f"{self.strategy}_hook")
