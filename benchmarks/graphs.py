"""The graphs the workloads run: a ReAct-style agent with a scripted chat model, a
wide-state graph and a small loop graph. Everything is deterministic (seeded text), so
every saver sees the same bytes."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable
from typing import Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from typing_extensions import TypedDict

_WORDS = (
    "the agent checks order status shipping invoice customer refund policy account balance "
    "request tool result search weather forecast city temperature report summary detail "
    "product inventory warehouse delivery estimate tracking number payment method update "
    "record database query response latency error retry timeout success failure note "
    "meeting schedule calendar reminder email draft subject attachment document section"
).split()

# Sizes in characters, picked to look like a tool-calling chat agent's turn:
HUMAN_CHARS = (120, 400)
AI_TOOL_CALL_CHARS = (80, 240)     # the model's short "thinking" text before a tool call
TOOL_RESULT_CHARS = (800, 1600)    # a search/lookup result
AI_ANSWER_CHARS = (300, 900)       # the final answer of the turn
STEPS_PER_TURN = 4                 # input, agent (tool call), tools, agent (answer)


def text(rng: random.Random, lo_hi: tuple[int, int]) -> str:
    """Deterministic word salad of a length drawn from ``lo_hi`` characters."""
    want = rng.randint(*lo_hi)
    out: list[str] = []
    n = 0
    while n < want:
        w = rng.choice(_WORDS)
        out.append(w)
        n += len(w) + 1
    return " ".join(out)[:want]


def human(turn: int, seed: int = 0) -> HumanMessage:
    """The user message of ``turn``."""
    rng = random.Random(f"h{seed}-{turn}")
    return HumanMessage(text(rng, HUMAN_CHARS), id=f"h-{turn}")


def _script(turns: int, seed: int) -> list[AIMessage]:
    out = []
    for t in range(turns):
        rng = random.Random(f"a{seed}-{t}")
        out.append(AIMessage(
            text(rng, AI_TOOL_CALL_CHARS), id=f"ai-{t}-call",
            tool_calls=[{"name": "lookup", "id": f"call-{t}", "type": "tool_call",
                         "args": {"query": text(rng, (20, 60)), "top_k": 3}}]))
        out.append(AIMessage(text(rng, AI_ANSWER_CHARS), id=f"ai-{t}-answer"))
    return out


@tool
def lookup(query: str, top_k: int = 3) -> str:
    """Look ``query`` up in the knowledge base; returns the ``top_k`` best passages."""
    return text(random.Random(f"tool-{query}"), TOOL_RESULT_CHARS)


def build_agent(checkpointer: Any, turns: int, seed: int = 0, *,
                asynchronous: bool = False) -> Any:
    """ReAct agent: agent -> tools -> agent per turn; the scripted model makes exactly one
    tool call per turn and then answers (``STEPS_PER_TURN`` checkpoints per turn).
    ``asynchronous``: the agent node is a coroutine (for ``ainvoke``)."""
    model = GenericFakeChatModel(messages=iter(_script(turns, seed)))
    tools = ToolNode([lookup])

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    async def aagent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    b = StateGraph(MessagesState)
    b.add_node("agent", aagent if asynchronous else agent)
    b.add_node("tools", tools)
    b.add_edge(START, "agent")
    b.add_conditional_edges("agent", tools_condition)
    b.add_edge("tools", "agent")
    return b.compile(checkpointer=checkpointer)


# ---------------------------------------------------------------- W7: conversation

CONV_AI_CHARS = (560, 640)        # an AIMessage's text before its tool call (~600 chars)
CONV_TOOL_CHARS = (1400, 1600)    # the ToolMessage it gets back (~1,500 chars)


def _conv_script(turns: int, seed: int) -> list[AIMessage]:
    out = []
    for t in range(turns):
        rng = random.Random(f"c{seed}-{t}")
        out.append(AIMessage(
            text(rng, CONV_AI_CHARS), id=f"conv-ai-{t}",
            tool_calls=[{"name": "fetch_passage", "id": f"conv-call-{t}", "type": "tool_call",
                         "args": {"query": text(rng, (20, 60))}}]))
    return out


@tool
def fetch_passage(query: str) -> str:
    """A ~1,500-character passage for ``query`` (deterministic)."""
    return text(random.Random(f"conv-tool-{query}"), CONV_TOOL_CHARS)


def build_conversation(checkpointer: Any, turns: int, seed: int = 0, *,
                       asynchronous: bool = False) -> Any:
    """The issue-13 conversation (issue 22's agent loop): one ``invoke`` runs ``turns``
    turns of agent -> tools; per turn the agent adds one AIMessage (~600 chars, one tool
    call) and the tools node one ToolMessage (~1,500 chars); the graph ends after the last
    turn's ToolMessage. ``1 + 2 * turns`` super-steps after the input checkpoint (see
    ``conversation_input``); needs ``recursion_limit`` above ``2 * turns``.

    The agent's message for a turn is picked by the length of the history (turn =
    ``len(messages) // 2``), so one compiled graph serves any number of threads, at once
    or one after another, each seeing the same messages. ``asynchronous``: the agent node
    is a coroutine (for ``ainvoke``; the tools node runs its tool either way)."""
    script = _conv_script(turns, seed)
    tools = ToolNode([fetch_passage])

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [script[len(state["messages"]) // 2]]}

    async def aagent(state: MessagesState) -> dict[str, Any]:
        return agent(state)

    def more(state: MessagesState) -> str:
        return "agent" if len(state["messages"]) < 1 + 2 * turns else END

    b = StateGraph(MessagesState)
    b.add_node("agent", aagent if asynchronous else agent)
    b.add_node("tools", tools)
    b.add_edge(START, "agent")
    b.add_edge("agent", "tools")
    b.add_conditional_edges("tools", more, ["agent", END])
    return b.compile(checkpointer=checkpointer)


def conversation_input(seed: int = 0) -> dict[str, Any]:
    """The one HumanMessage that starts the W7 conversation."""
    return {"messages": [HumanMessage(text(random.Random(f"conv-h{seed}"), HUMAN_CHARS),
                                      id="conv-h")]}


# ---------------------------------------------------------------- W2: wide state

WIDE_CHANNELS = 10
WIDE_VALUE_CHARS = 10_000


class WideState(TypedDict, total=False):
    i: int
    c0: str
    c1: str
    c2: str
    c3: str
    c4: str
    c5: str
    c6: str
    c7: str
    c8: str
    c9: str


def wide_value(step: int) -> str:
    """A fresh ~10 KB value (hex of seeded random bytes; incompressible-ish)."""
    return random.Random(f"wide-{step}").randbytes(WIDE_VALUE_CHARS // 2).hex()


def wide_input() -> dict[str, Any]:
    return {"i": 0, **{f"c{k}": wide_value(-1 - k) for k in range(WIDE_CHANNELS)}}


def build_wide(checkpointer: Any, steps: int) -> Any:
    """Each super-step rewrites one of the 10 ~10 KB channels (round robin) and bumps the
    small counter ``i``; stops after ``steps`` super-steps."""

    def step(state: WideState) -> dict[str, Any]:
        i = state["i"]
        return {"i": i + 1, f"c{i % WIDE_CHANNELS}": wide_value(i)}

    b = StateGraph(WideState)
    b.add_node("step", step)
    b.add_edge(START, "step")
    b.add_conditional_edges("step", lambda s: END if s["i"] >= steps else "step")
    return b.compile(checkpointer=checkpointer)


# ---------------------------------------------------------------- W3/W4/W5: a loop


class LoopState(TypedDict, total=False):
    n: int
    until: int
    note: str


NOTE_CHARS = (300, 700)


def build_loop(checkpointer: Any, think_s: float = 0.0, *, asynchronous: bool = False,
               pace: Callable[[], Awaitable[None]] | None = None) -> Any:
    """One node that loops until ``n`` reaches ``until``, writing a small note each step
    (a typical small-state step: counter plus a few hundred bytes). ``asynchronous``: the
    node is a coroutine that first sleeps ``think_s`` (a model call's latency), or awaits
    ``pace()`` when given (W5: a rate shared by every thread)."""

    def step(state: LoopState) -> dict[str, Any]:
        n = state["n"] + 1
        return {"n": n, "note": text(random.Random(n), NOTE_CHARS)}

    async def astep(state: LoopState) -> dict[str, Any]:
        if pace is not None:
            await pace()
        elif think_s > 0:
            await asyncio.sleep(think_s)
        return step(state)

    b = StateGraph(LoopState)
    b.add_node("step", astep if asynchronous else step)
    b.add_edge(START, "step")
    b.add_conditional_edges("step", lambda s: END if s["n"] >= s["until"] else "step")
    return b.compile(checkpointer=checkpointer)


def loop_input(steps: int, start: int = 0) -> dict[str, Any]:
    return {"n": start, "until": start + steps, "note": ""}


__all__ = ["AIMessage", "HumanMessage", "END"]
