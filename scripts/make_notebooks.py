"""Writes the notebooks in notebooks/ from the cell sources below (run after editing them).

Keeping the source here keeps notebook diffs readable; tests/test_notebooks.py executes
the written .ipynb files top to bottom against real servers.
"""

from __future__ import annotations

from nbkit import write

QUICKSTART = [
    ("md", """# langgraph_durable quickstart

`DurableSaver` is a LangGraph checkpointer: pass it as `checkpointer=` where you used
`InMemorySaver`. Every checkpoint is committed to **Redis** before the call returns and reaches
**MongoDB** moments later through an outbox, so a thread survives the death of the process.

The servers below come from `langgraph_durable.testing`: `REDIS_URL` / `MONGODB_URL` when set,
otherwise local `redis-server` and SecantusDB processes on free ports."""),
    ("code", """from contextlib import ExitStack
from langgraph_durable.testing import redis_server, mongo_server

servers = ExitStack()  # keeps the servers running until servers.close()
redis_srv = servers.enter_context(redis_server())
mongo_srv = servers.enter_context(mongo_server())
print(redis_srv.url, mongo_srv.url)"""),
    ("md", "## A graph with a growing message history"),
    ("code", """from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import END, START, MessagesState, StateGraph

def reply(state: MessagesState):
    last = state["messages"][-1].content
    return {"messages": [AIMessage(content=f"you said: {last}")]}

builder = StateGraph(MessagesState)
builder.add_node("reply", reply)
builder.add_edge(START, "reply")
builder.add_edge("reply", END)"""),
    ("code", """import uuid
from langgraph_durable import DurableSaver

tag = uuid.uuid4().hex[:6]  # this notebook's own key prefix and database
options = {"key_prefix": "nb-" + tag, "database": "nb_quickstart_" + tag}
config = {"configurable": {"thread_id": "chat-1"}}

with DurableSaver.from_urls(redis_srv.url, mongo_srv.url, **options) as saver:
    graph = builder.compile(checkpointer=saver)
    for text in ["hello", "how are you?", "bye"]:
        graph.invoke({"messages": [HumanMessage(content=text)]}, config)
    state = graph.get_state(config)
    print(len(state.values["messages"]), "messages; served by the", saver.last_read_tier, "tier")
    print([s.metadata["step"] for s in graph.get_state_history(config)])"""),
    ("md", """## Resume anywhere, even with Redis emptied

Leaving the `with` block drained the outbox to MongoDB. A new saver (think: a new process on
another machine) resumes the thread; here this notebook's Redis keys are deleted first (its key
prefix only, never the whole Redis database: other applications may share the server), so
MongoDB answers."""),
    ("code", """import redis
from langgraph_durable.testing import drop_key_prefix

with redis.Redis.from_url(redis_srv.url) as r:
    print("deleted", drop_key_prefix(r, options["key_prefix"]), "Redis keys of this notebook")
with DurableSaver.from_urls(redis_srv.url, mongo_srv.url, **options) as saver:
    graph = builder.compile(checkpointer=saver)
    print("after deleting them:", len(graph.get_state(config).values["messages"]), "messages from",
          saver.last_read_tier)
    graph.invoke({"messages": [HumanMessage(content="I'm back")]}, config)
    print(graph.get_state(config).values["messages"][-1].content, "|", saver.last_read_tier)
    print(saver.stats())"""),
    ("md", "Clean up: remove this notebook's Redis keys and MongoDB database (nothing else)."),
    ("code", """from langgraph_durable.testing import drop_namespace

drop_namespace(redis_srv.url, mongo_srv.url, options["key_prefix"], options["database"])
servers.close()"""),
]




if __name__ == "__main__":
    print(write("quickstart", QUICKSTART))
