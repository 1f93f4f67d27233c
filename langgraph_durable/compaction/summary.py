"""Summary-buffer compaction: fold the oldest messages into a running summary."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
from typing import Any, Literal

from langchain_core.language_models import LanguageModelInput
from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage
from langchain_core.runnables import Runnable, RunnableConfig
from langgraph.constants import TAG_NOSTREAM
from langgraph.errors import GraphBubbleUp

from ._messages import Split, content_text, render_messages
from ._options import TriggerSpec, normalize_trigger, profile_limit
from .base import BaseCompactor, CompactionPlan, _get, logger
from .folded_memory import MemoryNamespace, aremember, check_namespace, remember
from .schemas import SUMMARY_MESSAGE_ID, CompactionInfo, TokenCounter

DEFAULT_SUMMARY_PROMPT = """\
You maintain a running summary of a conversation between a user and an AI assistant.
Extend the previous summary with the new lines of conversation. Keep every fact, decision,
name, number, open question and tool result that later turns may need; drop small talk.
Answer with the new summary only.

Previous summary:
{summary}

New lines of conversation:
{messages}
"""
"""Default summary prompt; ``{summary}`` and ``{messages}`` are filled by ``str.format``."""

DEFAULT_SUMMARY_MESSAGE = "Summary of the earlier conversation:\n{summary}"
"""Default content of the summary ``SystemMessage``; ``{summary}`` is the summary text."""

NO_SUMMARY = "(none yet)"
"""Text passed as ``{summary}`` to the prompt before the first compaction."""


class SummaryBuffer(BaseCompactor):
    """Keep recent messages verbatim and fold older ones into an incremental summary.

    When the history is larger than ``max_tokens``, the messages older than the verbatim
    window are sent, together with the previous summary, to ``model``; its answer becomes
    the new summary. The folded messages are removed from the state with ``RemoveMessage``
    so the checkpoint shrinks; the summary is stored in ``summary`` and as a
    ``SystemMessage`` with id ``SUMMARY_MESSAGE_ID`` right after the leading system prompt.
    An ``AIMessage`` with tool calls is never separated from its ``ToolMessage``s.

    If the model raises, times out or answers with empty text, the failure is logged
    (message content only at DEBUG) and reported in the ``compaction`` state key, and with
    ``on_failure="trim"`` (the default) the history is trimmed like ``SlidingWindow`` would:
    the oldest messages are dropped until the rest fits the budget and the verbatim
    window, pair-safe and starting on ``start_on``; the summary stays as it was and the
    next compaction asks the model again. The dropped messages remain in the thread's
    earlier checkpoints (see ``transcript``). The graph continues either way. Running it
    twice in a row changes nothing the second time.

    Args:
        model: Chat model that writes the summary (``invoke``/``ainvoke`` are used).
        max_tokens: Token budget of the whole history, system prompt and summary included;
            ``None``: no token budget, ``trigger`` alone decides (pass ``keep_last`` or
            ``keep_tokens`` then).
        keep_tokens: Tokens of recent messages kept verbatim; defaults to
            ``max_tokens // 2``. Mutually exclusive with ``keep_last``.
        keep_last: Number of recent messages kept verbatim instead of ``keep_tokens``.
        token_counter: Counts tokens of a message list; defaults to
            ``count_tokens_approximately``. Pass e.g. ``model.get_num_tokens_from_messages``.
        prompt: Summary prompt, a ``str.format`` template with ``{summary}`` (previous
            summary or ``NO_SUMMARY``) and ``{messages}`` (the messages being folded).
        summary_message: Template of the summary ``SystemMessage`` content, with
            ``{summary}``.
        timeout_s: Seconds to wait for the model; ``None`` waits forever. On the sync
            path the call runs in a worker thread that is abandoned (not killed) on timeout.
        messages_key: State key of the messages.
        summary_key: State key that receives the summary text.
        info_key: State key that receives the ``CompactionInfo`` report.
        trigger: Extra conditions that compact before ``max_tokens`` is reached, in
            LangChain's forms: ``("tokens", n)``, ``("messages", n)``,
            ``("fraction", f)`` of ``model.profile["max_input_tokens"]``, a dict of
            several (all must hold) or a list (any may hold).
        start_on: ``"human"`` to start the kept conversation on a
            human message after the system prompt and the summary; ``None`` (default) for
            no constraint. See ``BaseCompactor`` for the long-turn fallback.
        on_failure: ``"trim"`` (default) drops the oldest messages to fit the budget when
            no summary comes; ``"keep"`` leaves the history untouched.
        memory_namespace: Also put each new summary, with the messages it folds, in the
            graph's store (``compile(store=...)``) under this namespace: a tuple of
            ``str.format`` templates filled from ``config["configurable"]``
            (``("summaries", "{thread_id}")``) or a function of the run's config. One
            item per compaction (see ``compaction.folded_memory.memory_item``), written before
            the node returns; a failed put fails the node. ``None`` (default): no writes.

    Raises:
        ValueError: On invalid budgets (see ``BaseCompactor``), a non-positive
            ``timeout_s``, templates missing their placeholders, an invalid ``trigger``
            an invalid ``start_on``, an unknown ``on_failure`` or a malformed
            ``memory_namespace``. At a compaction with ``memory_namespace``: outside a
            graph, without a store, or with a placeholder missing from the config.
    """

    strategy = "summary_buffer"

    def __init__(
        self,
        model: Runnable[LanguageModelInput, Any],
        *,
        max_tokens: int | None,
        keep_tokens: int | None = None,
        keep_last: int | None = None,
        token_counter: TokenCounter | None = None,
        prompt: str = DEFAULT_SUMMARY_PROMPT,
        summary_message: str = DEFAULT_SUMMARY_MESSAGE,
        timeout_s: float | None = None,
        messages_key: str = "messages",
        summary_key: str = "summary",
        info_key: str = "compaction",
        trigger: TriggerSpec | None = None,
        start_on: str | None = None,
        on_failure: Literal["trim", "keep"] = "trim",
        memory_namespace: MemoryNamespace | None = None,
    ) -> None:
        super().__init__(
            max_tokens=max_tokens,
            keep_tokens=keep_tokens,
            keep_last=keep_last,
            token_counter=token_counter,
            messages_key=messages_key,
            info_key=info_key,
            default_keep_tokens=max(1, max_tokens // 2) if max_tokens else None,
            trigger=normalize_trigger(trigger, profile_limit(model)),
            start_on=start_on,
        )
        if on_failure not in ("trim", "keep"):
            raise ValueError(f"on_failure must be 'trim' or 'keep', got {on_failure!r}")
        self.on_failure = on_failure
        if "{summary}" not in prompt or "{messages}" not in prompt:
            raise ValueError("prompt must contain the {summary} and {messages} placeholders")
        if "{summary}" not in summary_message:
            raise ValueError("summary_message must contain the {summary} placeholder")
        if timeout_s is not None and timeout_s <= 0:
            raise ValueError(f"timeout_s must be positive, got {timeout_s}")
        self.model = model
        self.prompt = prompt
        self.summary_message = summary_message
        self.timeout_s = timeout_s
        self.summary_key = summary_key
        self.memory_namespace = check_namespace(memory_namespace)

    # -- summary text ---------------------------------------------------------------------

    def _previous_summary(self, state: Any, split: Split) -> str | None:
        stored = _get(state, self.summary_key)
        if isinstance(stored, str) and stored.strip():
            return stored
        if split.summary is None:
            return None
        text = content_text(split.summary.content)
        prefix, _, suffix = self.summary_message.partition("{summary}")
        if text.startswith(prefix) and text.endswith(suffix):
            text = text[len(prefix) : len(text) - len(suffix)]
        return text.strip() or None

    def build_prompt(self, plan: CompactionPlan) -> list[BaseMessage]:
        """Return the messages sent to the model for ``plan`` (previous summary + folded)."""
        text = self.prompt.format(
            summary=plan.previous_summary or NO_SUMMARY,
            messages=render_messages(plan.folded),
        )
        return [HumanMessage(content=text)]

    def _config(self) -> RunnableConfig:
        # TAG_NOSTREAM keeps the summary out of the graph's stream_mode="messages" output.
        return {"tags": [TAG_NOSTREAM], "run_name": "langgraph_durable_summary"}

    @staticmethod
    def _answer_text(answer: Any) -> str:
        content = answer.content if isinstance(answer, BaseMessage) else answer
        text = content_text(content) if isinstance(content, (str, list)) else ""
        if not text.strip():
            raise ValueError("summary model returned no text")
        return text.strip()

    def _summarise(self, prompt: list[BaseMessage]) -> str:
        if self.timeout_s is None:
            return self._answer_text(self.model.invoke(prompt, config=self._config()))
        context = contextvars.copy_context()
        pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="summary-buffer")
        try:
            future = pool.submit(context.run, self.model.invoke, prompt, self._config())
            try:
                answer = future.result(timeout=self.timeout_s)
            except concurrent.futures.TimeoutError:
                future.cancel()
                raise TimeoutError(f"no summary within {self.timeout_s} s") from None
        finally:
            pool.shutdown(wait=False)
        return self._answer_text(answer)

    async def _asummarise(self, prompt: list[BaseMessage]) -> str:
        call = self.model.ainvoke(prompt, config=self._config())
        if self.timeout_s is None:
            return self._answer_text(await call)
        try:
            answer = await asyncio.wait_for(call, self.timeout_s)
        except asyncio.TimeoutError:
            raise TimeoutError(f"no summary within {self.timeout_s} s") from None
        return self._answer_text(answer)

    # -- results --------------------------------------------------------------------------

    def _failure(self, plan: CompactionPlan, exc: Exception) -> dict[str, Any]:
        error = f"{type(exc).__name__}: {exc}"
        logger.debug("summary compaction failure detail", exc_info=exc)
        if self.on_failure == "trim":
            logger.warning(
                "summary compaction failed (%s); trimming the history to the budget instead",
                type(exc).__name__,
            )
            return self._success(self.trimmed(plan), plan.split.summary, error=error)
        info: CompactionInfo = {
            "strategy": self.strategy,
            "error": error,
            "fallback": "keep",
            "folded": 0,
            "kept": len(plan.split.body),
            "pending": len(plan.folded),
            "tokens_before": plan.tokens_before,
            "tokens_after": plan.tokens_before,
            "over_budget": True,
        }
        logger.warning(
            "summary compaction failed (%s); history left untouched (%d messages, %d tokens)",
            type(exc).__name__,
            len(plan.split.body),
            plan.tokens_before,
        )
        return {self.info_key: info}

    def _finish(self, plan: CompactionPlan, summary: str) -> dict[str, Any]:
        message = SystemMessage(
            content=self.summary_message.format(summary=summary), id=SUMMARY_MESSAGE_ID
        )
        return self._success(plan, message, {self.summary_key: summary})

    def __call__(self, state: Any) -> dict[str, Any]:
        """Compact ``state`` with ``model.invoke``; return the state update.

        Args:
            state: Graph state (mapping or object) with the message list.

        Returns:
            ``{}`` when nothing has to change; on success the ``messages`` update, the new
            ``summary`` and the ``compaction`` report; on model failure only the report.
        """
        plan = self.plan(state)
        if plan is None:
            return {}
        try:
            summary = self._summarise(self.build_prompt(plan))
        except GraphBubbleUp:
            raise
        except Exception as exc:
            return self._failure(plan, exc)
        if self.memory_namespace is not None:
            remember(self.memory_namespace, summary, plan.folded)
        return self._finish(plan, summary)

    async def acall(self, state: Any) -> dict[str, Any]:
        """Compact ``state`` with ``model.ainvoke``; same result as ``__call__``."""
        plan = self.plan(state)
        if plan is None:
            return {}
        try:
            summary = await self._asummarise(self.build_prompt(plan))
        except GraphBubbleUp:
            raise
        except Exception as exc:
            return self._failure(plan, exc)
        if self.memory_namespace is not None:
            await aremember(self.memory_namespace, summary, plan.folded)
        return self._finish(plan, summary)
