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
