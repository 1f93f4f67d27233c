"""Deterministic fakes and helpers for the compaction tests."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from typing import Any, cast

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models.fake_chat_models import (
    FakeListChatModel,
    GenericFakeChatModel,
)
from langchain_core.messages import BaseMessage
from langchain_core.outputs import ChatResult
from langgraph.graph.message import add_messages
from pydantic import ConfigDict


def ten_per_message(messages: Sequence[BaseMessage]) -> int:
    """Token counter that charges exactly 10 tokens per message."""
    return 10 * len(list(messages))


class PromptRecorder(BaseCallbackHandler):
    """Callback handler that records every prompt sent to a chat model."""

    def __init__(self) -> None:
        self.prompts: list[list[BaseMessage]] = []

    def on_chat_model_start(
        self, serialized: dict[str, Any], messages: list[list[BaseMessage]], **kwargs: Any
    ) -> None:
        self.prompts.extend(list(batch) for batch in messages)

    @property
    def texts(self) -> list[str]:
        """The text of the first message of each recorded prompt."""
        return [str(prompt[0].content) for prompt in self.prompts]


def summariser(*responses: str) -> tuple[FakeListChatModel, PromptRecorder]:
    """A ``FakeListChatModel`` answering ``responses`` in order, with its prompt recorder."""
    recorder = PromptRecorder()
    return FakeListChatModel(responses=list(responses), callbacks=[recorder]), recorder


class FailingChatModel(GenericFakeChatModel):
    """Chat model whose every call raises ``RuntimeError("provider down")``."""

    messages: Any = iter(())

    def _generate(self, *args: Any, **kwargs: Any) -> ChatResult:
        raise RuntimeError("provider down")


class BlockingChatModel(GenericFakeChatModel):
    """Chat model that never answers until ``gate`` is set (used for timeouts)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    messages: Any = iter(())
    gate: threading.Event

    def _generate(self, *args: Any, **kwargs: Any) -> ChatResult:
        self.gate.wait()
        raise RuntimeError("released")

    async def _agenerate(self, *args: Any, **kwargs: Any) -> ChatResult:
        await asyncio.Event().wait()  # never set: only the timeout ends this
        raise AssertionError("unreachable")


class AsyncOnlyChatModel(GenericFakeChatModel):
    """Generic fake whose sync path raises, proving that ``ainvoke`` was used."""

    def _generate(self, *args: Any, **kwargs: Any) -> ChatResult:
        raise AssertionError("sync path used")

    async def _agenerate(self, *args: Any, **kwargs: Any) -> ChatResult:
        return super()._generate(*args, **kwargs)


class ToolCallingFakeChatModel(GenericFakeChatModel):
    """Generic fake that accepts ``bind_tools`` (needed by ``create_react_agent``)."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> ToolCallingFakeChatModel:
        return self


def apply(messages: list[BaseMessage], update: dict[str, Any]) -> list[BaseMessage]:
    """Apply a node update's ``messages`` to ``messages`` like the graph would."""
    if "messages" not in update:
        return list(messages)
    merged: Any = add_messages(cast(Any, messages), update["messages"])
    return list(merged)


class ScriptedAgentModel(GenericFakeChatModel):
    """Agent model for ``create_agent`` tests: answers turn ``n`` (the id ``h<n>`` of the
    last user message it received) and records every prompt it was sent.

    Every third turn it first calls ``lookup`` (``c<n>``, call ids ``call<n>``), every sixth
    turn with two parallel calls (``call<n>``, ``call<n>b``); the answer is ``a<n>`` with
    ``pad`` characters of text.
    """

    messages: Any = iter(())
    pad: int = 200
    prompts: list[list[BaseMessage]] = []

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedAgentModel:
        return self

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
        from langchain_core.outputs import ChatGeneration

        self.prompts.append(list(messages))
        humans = [m for m in messages if isinstance(m, HumanMessage)]
        n = int(str(humans[-1].id)[1:])
        if n % 3 == 0 and not isinstance(messages[-1], ToolMessage):
            calls = [{"name": "lookup", "args": {"q": f"q{n}"}, "id": f"call{n}"}]
            if n % 6 == 0:
                calls.append({"name": "lookup", "args": {"q": f"r{n}"}, "id": f"call{n}b"})
            reply = AIMessage("", tool_calls=calls, id=f"c{n}")
        else:
            reply = AIMessage(f"a{n} " + "x" * self.pad, id=f"a{n}")
        return ChatResult(generations=[ChatGeneration(message=reply)])

    async def _agenerate(self, *args: Any, **kwargs: Any) -> ChatResult:
        return self._generate(*args, **kwargs)


def pairs_intact(prompt: Sequence[BaseMessage]) -> bool:
    """Every tool call of an ``AIMessage`` in ``prompt`` has its ``ToolMessage`` right after
    it (before the next non-tool message), and every ``ToolMessage`` follows its call."""
    from langchain_core.messages import AIMessage, ToolMessage

    open_calls: set[str] = set()
    for message in prompt:
        if isinstance(message, ToolMessage):
            if message.tool_call_id not in open_calls:
                return False
            open_calls.discard(message.tool_call_id)
            continue
        if open_calls:
            return False
        if isinstance(message, AIMessage):
            open_calls = {str(c["id"]) for c in message.tool_calls}
    return not open_calls


def starts_on_human_turn(prompt: Sequence[BaseMessage]) -> bool:
    """The first message after system messages (prompt, summary) is a user's ``h<n>``."""
    from langchain_core.messages import HumanMessage

    rest = [m for m in prompt if m.type != "system"]
    return bool(rest) and isinstance(rest[0], HumanMessage) and str(rest[0].id).startswith("h")
