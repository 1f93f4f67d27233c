"""``journaled(model)``: a chat model (or Runnable over one) whose calls are journaled."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

from langchain_core.runnables import Runnable, RunnableConfig

from ..core.drive import Steps
from .calls import (
    EFFECT_PREFIX,
    OnChange,
    as_chunk,
    complete,
    describe,
    digest,
    identity,
    messages_of,
    run_async,
    run_sync,
)


class JournaledModel(Runnable[Any, Any]):
    """A chat model (or Runnable over one) whose calls are journaled: see
    ``journaled``."""

    def __init__(self, inner: Runnable[Any, Any], *, name: str | None = None,
                 on_change: OnChange = "call", strict: bool = False) -> None:
        if on_change not in ("call", "raise"):
            raise ValueError(f"on_change must be 'call' or 'raise', got {on_change!r}")
        if not isinstance(inner, Runnable):
            raise TypeError(f"journaled() takes a LangChain chat model or Runnable, got "
                            f"{type(inner).__name__}")
        self.inner = inner
        self.effect = EFFECT_PREFIX + (name if name is not None else identity(inner))
        self.on_change = on_change
        self.strict = strict

    def _request(self, input: Any, kwargs: dict[str, Any]) -> str:
        return digest(messages_of(input), describe(self.inner), kwargs)

    def _what(self) -> str:
        return f"journaled model {self.effect!r}"

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any
               ) -> Any:
        """Call the model (``inner.invoke``) or return the journaled response: an
        ``AIMessage`` or the structured output. Raises ``ModelCallChangedError``
        (``on_change="raise"``), ``ConfigurationError`` (``strict`` outside a journaled
        task, or concurrent calls of one wrapper in a task), the journal's errors
        (``TierUnavailableError``, ``OutboxFullError``, ``SerializationError``) and
        whatever the model raises."""
        gen = run_sync(self._what(), self.effect, self._request(input, kwargs),
                       self.on_change, self.strict,
                       lambda: iter((self.inner.invoke(input, config, **kwargs),)))
        return complete(gen)[1]

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None,
                      **kwargs: Any) -> Any:
        """Async ``invoke``."""
        async def call() -> AsyncIterator[Any]:
            yield await self.inner.ainvoke(input, config, **kwargs)

        out: list[Any] = []
        async for _ in run_async(self._what(), self.effect, self._request(input, kwargs),
                                 self.on_change, self.strict, call, out):
            pass
        return out[0][1]

    def stream(self, input: Any, config: RunnableConfig | None = None,
               **kwargs: Any | None) -> Iterator[Any]:
        """Stream the model's chunks (journaled as their sum) or the journaled response
        as one chunk (an ``AIMessageChunk``). Raises as ``invoke``."""
        gen = run_sync(self._what(), self.effect, self._request(input, kwargs),
                       self.on_change, self.strict,
                       lambda: self.inner.stream(input, config, **kwargs))
        run = Steps(gen)
        yield from run  # a plain iterator: a throw() or close() does not reach gen
        assert run.value is not None
        replayed, response = run.value
        if replayed:
            yield as_chunk(response)

    async def astream(self, input: Any, config: RunnableConfig | None = None,
                      **kwargs: Any | None) -> AsyncIterator[Any]:
        """Async ``stream``."""
        out: list[Any] = []
        async for chunk in run_async(self._what(), self.effect,
                                     self._request(input, kwargs), self.on_change,
                                     self.strict,
                                     lambda: self.inner.astream(input, config, **kwargs),
                                     out):
            yield chunk
        if out and out[0][0]:
            yield as_chunk(out[0][1])

    def bind_tools(self, tools: Any, **kwargs: Any) -> JournaledModel:
        """``journaled(inner.bind_tools(tools, **kwargs))`` with this wrapper's options."""
        return self._wrap(self.inner.bind_tools(tools, **kwargs))  # type: ignore[attr-defined]

    def with_structured_output(self, schema: Any, **kwargs: Any) -> JournaledModel:
        """``journaled(inner.with_structured_output(schema, **kwargs))``, same options."""
        return self._wrap(
            self.inner.with_structured_output(schema, **kwargs))  # type: ignore[attr-defined]

    def _wrap(self, inner: Runnable[Any, Any]) -> JournaledModel:
        return JournaledModel(inner, name=self.effect[len(EFFECT_PREFIX):],
                              on_change=self.on_change, strict=self.strict)  # type: ignore[arg-type]


def journaled(model: Runnable[Any, Any], *, name: str | None = None,
              on_change: OnChange = "call", strict: bool = False) -> JournaledModel:
    """Wrap ``model`` so that a resumed, retried or restarted task does not call it again
    for the calls it already made (module docstring).

    Args:
        model: a LangChain chat model (``BaseChatModel``) or a ``Runnable`` over one
            (``bind_tools``/``with_structured_output`` results, a prompt piped into one).
        name: the journal's name of the calls (``"model:" + name``); default the chat
            model's class and model name. Calls of one name in a task are numbered in the
            order they are made: concurrent calls need wrappers of their own names.
        on_change: ``"call"`` (default): a call whose request differs from the one
            journaled under its number calls the model and journals the new answer;
            ``"raise"``: raises ``ModelCallChangedError`` instead.
        strict: False (default): outside a node/task of a graph with a ``DurableSaver``
            the model is called unjournaled (logged once); True raises
            ``ConfigurationError`` there.

    Raises ``TypeError`` when ``model`` is not a Runnable, ``ValueError`` for another
    ``on_change``. Responses must be serializable by the saver's serializer (AIMessage
    and pydantic outputs are).
    """
    return JournaledModel(model, name=name, on_change=on_change, strict=strict)
