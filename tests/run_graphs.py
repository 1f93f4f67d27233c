"""A graph whose tool calls run through ``Send`` (LangGraph's push tasks), as
``create_agent`` runs them, for the run view's tests; the tool fails for "Atlantis"."""

from __future__ import annotations

import operator
from typing import Annotated, Any

from langchain_core.messages import AIMessage, AnyMessage, ToolMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Send
from typing_extensions import TypedDict


class State(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    log: Annotated[list[str], operator.add]


def _agent(state: State) -> dict[str, Any]:
    if any(m.type == "tool" for m in state["messages"]):
        return {"messages": [AIMessage("Oslo: 12 degrees.", id="ai-2")], "log": ["agent"]}
    city = state["messages"][0].content
    call = {"name": "weather", "args": {"city": city}, "id": "call-1", "type": "tool_call"}
    return {"messages": [AIMessage("", id="ai-1", tool_calls=[call])], "log": ["agent"]}


def _route(state: State) -> Any:
    last = state["messages"][-1]
    calls = getattr(last, "tool_calls", None) or []
    return [Send("weather_tool", c) for c in calls] or END


def _weather_tool(call: dict[str, Any]) -> dict[str, Any]:
    if call["args"]["city"] == "Atlantis":
        raise ValueError("the weather service does not know Atlantis")
    return {"messages": [ToolMessage("12 degrees", tool_call_id=call["id"], id="tool-1")],
            "log": ["weather_tool"]}


def send_graph(saver: Any) -> Any:
    """START -> agent -(Send per tool call)-> weather_tool -> agent -> END."""
    g = StateGraph(State)
    g.add_node("agent", _agent)
    g.add_node("weather_tool", _weather_tool)
    g.add_edge(START, "agent")
    g.add_conditional_edges("agent", _route, ["weather_tool", END])
    g.add_edge("weather_tool", "agent")
    return g.compile(checkpointer=saver)
