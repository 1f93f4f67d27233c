"""Quick start: a graph whose checkpoints live in Redis and reach MongoDB moments later."""
import operator
import uuid
from typing import Annotated, TypedDict

from langgraph.graph import END, START, StateGraph

from langgraph_durable import DurableSaver


class State(TypedDict):
    steps: Annotated[list[str], operator.add]


builder = StateGraph(State)
builder.add_node("plan", lambda state: {"steps": ["plan"]})
builder.add_node("act", lambda state: {"steps": ["act"]})
builder.add_edge(START, "plan")
builder.add_edge("plan", "act")
builder.add_edge("act", END)
config = {"configurable": {"thread_id": f"quickstart-{uuid.uuid4().hex[:8]}"}}

# the servers: REDIS_URL and MONGODB_URL (or pass both URLs to from_conn_string)
with DurableSaver.from_conn_string() as saver:
    graph = builder.compile(checkpointer=saver)
    print(graph.invoke({"steps": ["start"]}, config))
# leaving `with` waited until MongoDB had every checkpoint (close_drain_timeout_s)

with DurableSaver.from_conn_string() as saver:  # later, in any process
    graph = builder.compile(checkpointer=saver)
    print(graph.invoke({"steps": ["again"]}, config))  # the thread goes on
    state = graph.get_state(config)
    print("step", state.metadata["step"], "of", len(list(graph.get_state_history(config))),
          "checkpoints; the latest read from", saver.last_read_tier)
