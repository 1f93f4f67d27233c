"""Compaction as middleware of LangChain 1.x agents (``langchain.agents.create_agent``).

Needs the optional ``agents`` extra (``pip install "langgraph-durable[agents]"``); this is
the only module of the package that imports ``langchain``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal

from langchain.agents.middleware.types import (
    AgentMiddleware,
    AgentState,
    ModelRequest,
    ModelResponse,
)
from langchain.chat_models import BaseChatModel, init_chat_model
from langchain_core.messages import BaseMessage
from langgraph.runtime import Runtime
from typing_extensions import NotRequired

from ._messages import fit_window, pinned_start, split_history
from ._options import (
    ContextSize,
    TriggerSpec,
    normalize_trigger,
    profile_limit,
    resolve_keep,
    token_threshold,
)
from .base import BaseCompactor, logger
from .folded_memory import MemoryNamespace
from .schemas import CompactionInfo, TokenCounter
from .sliding import SlidingWindow
from .summary import DEFAULT_SUMMARY_MESSAGE, DEFAULT_SUMMARY_PROMPT, SummaryBuffer


class CompactionAgentState(AgentState[Any]):
    """``create_agent`` state plus the keys written by ``CompactionMiddleware``.

    ``summary`` holds the running summary text, ``compaction`` the ``CompactionInfo`` report
    of the last compaction. The middleware registers this schema itself.
    """

    summary: NotRequired[str]
    compaction: NotRequired[CompactionInfo]


class CompactionMiddleware(AgentMiddleware[CompactionAgentState, Any, Any]):
    """Bounded, pair-safe history compaction for ``create_agent`` agents.

    ``before_model`` runs the same engine as the ``SummaryBuffer`` node (or ``SlidingWindow``
    when ``model`` is ``None``) on the agent state: past the trigger, the oldest messages
    are folded into an incremental summary (a ``SystemMessage`` with id
    ``SUMMARY_MESSAGE_ID`` at the head of ``messages``, the text also in ``summary``) and
    removed from the state with ``RemoveMessage``, so the checkpoint shrinks too. An
    ``AIMessage`` is never separated from its ``ToolMessage``s (parallel calls included),
    and the kept conversation starts on a ``start_on`` message. Within one long agent turn
    (its question is the only human message, then many tool rounds) no human start fits
    the budget: the question is then kept pinned right after the system prompt and
    summary, followed by a pair-safe tail, and the tool rounds between are folded
    (``compaction["pinned"]`` names the question's id). When the summary model
    raises or passes ``timeout_s``, the history is trimmed to the budget instead (reported
    in ``compaction`` with ``fallback="trim"``) and the model is asked again at the next
    compaction. The removed messages stay in the thread's earlier checkpoints:
    ``transcript(saver, config)`` rebuilds the whole conversation.

    ``wrap_model_call`` guards every model call: the system prompt plus the messages sent
    must fit ``max_tokens``; if not (for instance on the first call after a restart, before
    the system prompt's size is known), the oldest messages of that request only are left
    out, with the same pair and ``start_on`` rules (and the same pinned-question fallback).
    It also records the system prompt's tokens as the engine's ``reserve_tokens``, so the
    state is compacted to leave room for it. Only the message list is counted, not the
    tool schemas. Without a token budget (a messages-only ``trigger`` and no
    ``max_tokens`` or profile) the guard sends every request unchanged: the history is
    then bounded in messages (the trigger plus one model step), not in tokens.

    Args:
        model: Chat model that writes the summary: an instance, a model string for
            ``langchain.chat_models.init_chat_model`` (e.g. ``"openai:gpt-4.1-mini"``), or
            ``None`` to drop old messages without a summary (``SlidingWindow``).
        trigger: When to compact, in ``SummarizationMiddleware``'s forms:
            ``("tokens", n)``, ``("messages", n)``, ``("fraction", f)`` of the profile's
            ``max_input_tokens``, a dict of several (all must hold) or a list (any).
            A history over ``max_tokens`` always compacts.
        keep: What is kept verbatim: ``("messages", n)``, ``("tokens", n)`` or
            ``("fraction", f)``; defaults to ``("tokens", max_tokens // 2)`` with a
            ``model``, to as much as fits ``max_tokens`` without one; without a token
            budget to ``("messages", min(20, n // 2))`` for the smallest messages
            threshold ``n`` of ``trigger``.
        max_tokens: Budget (tokens) of every model call's messages, system prompt
            included. Defaults to the smallest token threshold of ``trigger``, else the
            profile's ``max_input_tokens``, else none (allowed only with a
            ``("messages", n)`` trigger).
        token_counter: Counts the tokens of a message list; defaults to
            ``count_tokens_approximately``.
        summary_prompt: Summary prompt, a ``str.format`` template with ``{summary}`` (the
            previous summary) and ``{messages}`` (the messages being folded).
        summary_message: Template of the summary message content, with ``{summary}``.
        start_on: ``"human"`` (default): the kept conversation starts on a human message
            after the system prompt and summary; ``None`` for no constraint. Any other
            value raises ``ValueError``.
        timeout_s: Seconds to wait for the summary model; ``None`` waits forever.
        on_failure: ``"trim"`` (default) or ``"keep"`` the history when no summary comes.
        profile_model: Model whose ``profile["max_input_tokens"]`` resolves fractions;
            defaults to ``model``. Pass the agent's model when the summariser differs.
        memory_namespace: Also put each summary, with the messages it folds, in the
            agent's store (``create_agent(..., store=...)``) under this namespace, as
            ``SummaryBuffer``'s; needs a ``model``.

    Raises:
        ValueError: On an invalid ``trigger``/``keep`` (the message shows the accepted
            forms), a fraction without a model profile, neither a trigger nor a token
            budget, an invalid ``start_on``, or the engine's own checks (see
            ``SummaryBuffer``).
    """

    state_schema = CompactionAgentState

    def __init__(
        self,
        model: str | BaseChatModel | None = None,
        *,
        trigger: TriggerSpec | None = None,
        keep: ContextSize | None = None,
        max_tokens: int | None = None,
        token_counter: TokenCounter | None = None,
        summary_prompt: str = DEFAULT_SUMMARY_PROMPT,
        summary_message: str = DEFAULT_SUMMARY_MESSAGE,
        start_on: str | None = "human",
        timeout_s: float | None = None,
        on_failure: Literal["trim", "keep"] = "trim",
        profile_model: BaseChatModel | None = None,
        memory_namespace: MemoryNamespace | None = None,
    ) -> None:
        super().__init__()
        if isinstance(model, str):
            model = init_chat_model(model)
        limit = profile_limit(profile_model if profile_model is not None else model)
        clauses = normalize_trigger(trigger, limit)
        if max_tokens is None:
            max_tokens = token_threshold(clauses) or limit
        message_counts = [c["messages"] for c in clauses if "messages" in c]
        if max_tokens is None and not message_counts:
            raise ValueError(
                "CompactionMiddleware needs a trigger or a token budget: pass max_tokens, "
                "a tokens, messages or fraction trigger, or a model whose profile has "
                "max_input_tokens"
            )
        keep_tokens: int | None = None
        keep_last: int | None = None
        if keep is not None:
            kind, value = resolve_keep(keep, limit)
            if kind == "messages":
                keep_last = value
            else:
                keep_tokens = value
        elif max_tokens is None:  # messages-only trigger: keep about half of it
            keep_last = max(1, min(20, min(message_counts) // 2))
        engine: BaseCompactor
        common: dict[str, Any] = {
            "max_tokens": max_tokens,
            "keep_tokens": keep_tokens,
            "keep_last": keep_last,
            "token_counter": token_counter,
            "trigger": clauses,
            "start_on": start_on,
        }
        if model is None:
            if memory_namespace is not None:
                raise ValueError("memory_namespace keeps summaries: it needs a model")
            engine = SlidingWindow(**common)
        else:
            engine = SummaryBuffer(
                model,
                prompt=summary_prompt,
                summary_message=summary_message,
                timeout_s=timeout_s,
                on_failure=on_failure,
                memory_namespace=memory_namespace,
                **common,
            )
        self.engine = engine
        self.max_tokens = max_tokens
        self.start_on = engine.start_on

    # -- state hooks: the compaction itself ---------------------------------------------

    def before_model(
        self, state: CompactionAgentState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Compact the agent state before a model call; ``None`` when nothing changes."""
        return self.engine(state) or None

    async def abefore_model(
        self, state: CompactionAgentState, runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """Async ``before_model`` (the summary model is called with ``ainvoke``)."""
        return (await self.engine.acall(state)) or None

    # -- model-call guard ---------------------------------------------------------------

    def fit(self, request: ModelRequest[Any]) -> ModelRequest[Any]:
        """Return ``request`` with its messages cut to fit ``max_tokens`` (system included).

        Records the system prompt's tokens as ``engine.reserve_tokens``. The request is
        returned unchanged when it fits; otherwise the oldest conversation messages are
        left out of this request (the state is not changed), keeping the summary message,
        tool-call groups and the ``start_on`` rule; when no ``start_on`` start fits, the
        last human message is kept ahead of a pair-safe tail. A last message or tool-call
        group larger than the budget on its own is sent whole, and a request is sent
        unchanged when there is no token budget (``max_tokens`` is ``None``).
        """
        counter = self.engine.token_counter
        system = [request.system_message] if request.system_message is not None else []
        self.engine.reserve_tokens = counter(system) if system else 0
        messages: list[BaseMessage] = list(request.messages)
        budget = self.max_tokens
        if budget is None:  # messages-only trigger: no token budget to hold
            return request
        tokens = counter([*system, *messages])
        if tokens <= budget:
            return request
        split = split_history(messages)
        head = [*system, *(m for m in (split.system, split.summary) if m is not None)]
        body = split.body
        start = fit_window(head, body, counter, budget, self.start_on)
        kept: list[BaseMessage] = body[start:]
        if self.start_on is not None and counter([*head, *kept]) > budget:
            tail = fit_window(head, body, counter, budget, None)
            found = pinned_start(head, body, counter, budget, tail, self.start_on)
            if found is not None:  # one long turn: its question, then a pair-safe tail
                anchor, start = found
                kept = [body[anchor], *body[start:]]
        left_out = len(body) - len(kept)
        after = counter([*head, *kept])
        if left_out == 0:
            logger.warning(
                "model request over budget (%d > %d tokens) and nothing can be left out "
                "(its last message or tool-call group alone is too large); sent whole",
                tokens,
                budget,
            )
            return request
        logger.warning(
            "model request over budget (%d > %d tokens); left out %d of its messages for "
            "this call only, %d tokens sent",
            tokens,
            budget,
            left_out,
            after,
        )
        sent: list[Any] = [*head[len(system) :], *kept]
        return request.override(messages=sent)

    def wrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], ModelResponse[Any]],
    ) -> Any:
        """Call the model with ``fit(request)``."""
        return handler(self.fit(request))

    async def awrap_model_call(
        self,
        request: ModelRequest[Any],
        handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]],
    ) -> Any:
        """Async ``wrap_model_call``."""
        return await handler(self.fit(request))
