"""Support of the model-journal tests: chat models that count their calls, and graphs.

``Counting`` is a real ``BaseChatModel`` (no network) answering ``answer-<n>``, n the
number of calls made so far under its ``key`` (``CALLS[key]``), with usage metadata of 15
tokens. ``ToolCalling`` answers by its script: first a tool call, then text.
``crash_child`` is the program the crash test runs in a subprocess
(``python -m tests.model_journal_support``).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt
from pydantic import BaseModel
from typing_extensions import TypedDict

from langgraph_durable import journaled

CALLS: dict[str, int] = {}
_lock = threading.Lock()
USAGE = {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}


def calls(key: str) -> int:
    """Calls made of the models of ``key``."""
    return CALLS.get(key, 0)


class Counting(BaseChatModel):
    """Answers ``answer-<n>`` (n counts from 1 per key); ``kill_at`` kills the process
    (SIGKILL) when that call number is reached, before answering."""

    key: str
    kill_at: int = 0

    @property
    def _llm_type(self) -> str:
        return "counting"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"key": self.key}

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None,
                  **kwargs: Any) -> ChatResult:
        with _lock:
            n = CALLS[self.key] = CALLS.get(self.key, 0) + 1
        if self.kill_at and n == self.kill_at:
            os.kill(os.getpid(), signal.SIGKILL)
        message = AIMessage(content=f"answer-{n}", usage_metadata=dict(USAGE))  # type: ignore[arg-type]
        return ChatResult(generations=[ChatGeneration(message=message)])


class ToolCalling(Counting):
    """Call 1 asks for the tool ``send_email``; every later call answers text."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self.bind(tools=[getattr(t, "name", str(t)) for t in tools], **kwargs)

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None,
                  **kwargs: Any) -> ChatResult:
        with _lock:
            n = CALLS[self.key] = CALLS.get(self.key, 0) + 1
        if n == 1:
            message = AIMessage(content="", usage_metadata=dict(USAGE),  # type: ignore[arg-type]
                                tool_calls=[{"name": "send_email", "id": "call-1",
                                             "args": {"to": "bob", "body": "hi"}}])
        else:
            message = AIMessage(content=f"sent ({n})", usage_metadata=dict(USAGE))  # type: ignore[arg-type]
        return ChatResult(generations=[ChatGeneration(message=message)])


class State(TypedDict, total=False):
    prompt: str
    out: str
    ok: Any


def ask_twice_then_approve(checkpointer: Any, model: Any, calls_per_run: int = 2) -> Any:
    """One node: ``calls_per_run`` model calls (prompts ``<prompt> <i>``), then
    ``interrupt("approve <answers>?")``; the node returns the answers and the resume."""
    def node(state: State) -> dict[str, Any]:
        answers = [str(model.invoke([HumanMessage(f"{state['prompt']} {i}")]).content)
                   for i in range(calls_per_run)]
        text = " ".join(answers)
        return {"out": text, "ok": interrupt(f"approve {text}?")}

    g = StateGraph(State)
    g.add_node("node", node)
    g.add_edge(START, "node")
    g.add_edge("node", END)
    return g.compile(checkpointer=checkpointer)


def crash_child(redis_url: str, mongo_url: str, prefix: str, db: str, thread_id: str,
                key: str, kill_at: str) -> None:
    """Run ``ask_twice_then_approve`` (3 calls) on the thread; ``kill_at`` > 0 kills the
    process at that model call. Prints the interrupt's value when it gets there."""
    from langgraph_durable import DurableSaver

    options = {"key_prefix": prefix, "database": db}
    with DurableSaver.from_urls(redis_url, mongo_url, **options) as saver:
        model = journaled(Counting(key=key, kill_at=int(kill_at)))
        graph = ask_twice_then_approve(saver, model, calls_per_run=3)
        config = {"configurable": {"thread_id": thread_id}}
        result = graph.invoke({"prompt": "q"}, config)
        print(f"calls={calls(key)} interrupt={result['__interrupt__'][0].value}", flush=True)


if __name__ == "__main__":  # through the package's module: the model class's name is digested
    from tests.model_journal_support import crash_child as child

    child(*sys.argv[1:])


class Plan(BaseModel):
    """A structured output."""

    steps: list[str]
