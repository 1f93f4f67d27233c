"""Compaction with memory: what the summary folds away stays searchable in the store.

A chat graph (a fake chat model, no network) keeps its history short with a
``SummaryBuffer`` node; ``memory_namespace=("summaries", "{thread_id}")`` also puts each
summary, with the messages it folded, in the graph's ``DurableStore`` (the saver's
clients, outbox and flusher). Later, in any process, ``store.search`` finds them.
Run against REDIS_URL and MONGODB_URL (and optional LGD_* options), like quickstart.py.
"""
import uuid

from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import START, StateGraph

from langgraph_durable import DurableSaver, DurableStore
from langgraph_durable.compaction import SummaryBuffer, SummaryState

summariser = FakeListChatModel(responses=[
    "Ada is planning a trip to Oslo in May.",
    "Ada is planning a trip to Oslo in May; she likes tea and hates early flights.",
])
compact = SummaryBuffer(summariser, max_tokens=None, trigger=("messages", 6), keep_last=2,
                        memory_namespace=("summaries", "{thread_id}"))


def reply(state: SummaryState) -> dict:
    return {"messages": [AIMessage(f"noted: {state['messages'][-1].content}")]}


builder = StateGraph(SummaryState)
builder.add_node("compact", compact)
builder.add_node("reply", reply)
builder.add_edge(START, "compact")
builder.add_edge("compact", "reply")
thread_id = f"memo-{uuid.uuid4().hex[:8]}"
config = {"configurable": {"thread_id": thread_id}}
turns = ["I plan a trip to Oslo", "in May", "I like tea", "I hate early flights",
         "book a hotel", "near the harbour"]

with DurableSaver.from_conn_string() as saver:
    graph = builder.compile(checkpointer=saver, store=saver.store())
    for text in turns:
        state = graph.invoke({"messages": [HumanMessage(text)]}, config)
    print(len(state["messages"]), "messages left; summary:", state["summary"])

with DurableStore.from_conn_string() as store:  # later, in any process
    for item in store.search(("summaries", thread_id)):
        print("found:", item.value["summary"], "| folded", len(item.value["message_ids"]))
