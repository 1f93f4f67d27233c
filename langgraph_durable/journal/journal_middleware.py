"""``ModelJournalMiddleware``: the model-call journal for LangChain 1.x ``create_agent``.

Needs ``langchain`` (the ``agents`` extra). Each model call of the agent's model node is
journaled as ``journaled(model)`` journals one (``langgraph_durable.journal``): a resume
after ``HumanInTheLoopMiddleware``'s interrupt, a retry or a restart returns the recorded
``ModelResponse`` instead of calling the model again.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Any

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse

from .calls import EFFECT_PREFIX, OnChange, complete, describe, identity, run_async, run_sync
from .calls import digest as digest_of


def _request_digest(request: ModelRequest) -> str:
    fmt = request.response_format
    return digest_of(request.system_message, request.messages, request.tools,
                     request.tool_choice, fmt if fmt is None else repr(type(fmt).__name__)
                     + repr(getattr(fmt, "schema", None)), request.model_settings,
                     describe(request.model))


def _recorded(response: Any) -> dict[str, Any]:
    if isinstance(response, ModelResponse):
        return {"result": list(response.result),
                "structured_response": response.structured_response}
    return {"result": [response], "structured_response": None}  # an AIMessage


def _response(recorded: dict[str, Any]) -> ModelResponse:
    return ModelResponse(result=list(recorded["result"]),
                         structured_response=recorded.get("structured_response"))


class ModelJournalMiddleware(AgentMiddleware):  # type: ignore[type-arg]
    """Journal every model call of a ``create_agent`` agent in the effect journal of its
    ``DurableSaver``, so a resumed or restarted model step does not call the model again.

    Args:
        on_change: ``"call"`` (default) calls the model when the request differs from the
            journaled one (and journals the new answer); ``"raise"`` raises
            ``ModelCallChangedError``.
        strict: True raises ``ConfigurationError`` when the agent does not run with a
            ``DurableSaver`` (default: the model is called, logged once).
        name: the journal's name of the calls (``"model:" + name``); default the model's
            class and model name.

    Put it last in ``middleware`` (innermost), so what it journals is the model's answer
    and other middleware still runs around it. Raises ``ValueError`` for another
    ``on_change``.
    """

    def __init__(self, *, on_change: OnChange = "call", strict: bool = False,
                 name: str | None = None) -> None:
        super().__init__()
        if on_change not in ("call", "raise"):
            raise ValueError(f"on_change must be 'call' or 'raise', got {on_change!r}")
        self.on_change = on_change
        self.strict = strict
        self.journal_name = name

    def _effect(self, request: ModelRequest) -> str:
        return EFFECT_PREFIX + (self.journal_name or identity(request.model))

    def wrap_model_call(self, request: ModelRequest,
                        handler: Callable[[ModelRequest], ModelResponse]) -> ModelResponse:
        """The journaled response, or ``handler(request)``'s (journaled)."""
        effect = self._effect(request)

        def call() -> Iterator[Any]:
            yield _recorded(handler(request))

        gen = run_sync(f"ModelJournalMiddleware {effect!r}", effect,
                       _request_digest(request), self.on_change, self.strict, call)
        return _response(complete(gen)[1])

    async def awrap_model_call(self, request: ModelRequest,
                               handler: Callable[[ModelRequest], Awaitable[ModelResponse]]
                               ) -> ModelResponse:
        """Async ``wrap_model_call``."""
        effect = self._effect(request)

        async def call() -> AsyncIterator[Any]:
            yield _recorded(await handler(request))

        out: list[Any] = []
        async for _ in run_async(f"ModelJournalMiddleware {effect!r}", effect,
                                 _request_digest(request), self.on_change, self.strict,
                                 call, out):
            pass
        return _response(out[0][1])
