"""Writes notebooks/long_conversation_compaction.ipynb from the cell sources below.

Run it after editing the cells: ``.venv/bin/python scripts/nb_compaction.py``.
tests/test_notebooks.py executes the written notebook top to bottom against real servers.
"""

from __future__ import annotations

from nbkit import write

NAME = "long_conversation_compaction"

CELLS = [
    ("md", """# A long conversation, compacted, checkpointed by DurableSaver

A chat thread that is never trimmed grows without bound: every model call receives the
whole history, and every step stores the whole `messages` list again. This notebook runs
the same 80-turn conversation twice through `DurableSaver`, without compaction and with
`SummaryBuffer`, plots the tokens in the history after each turn, then resumes the compacted
thread from MongoDB alone, as a new process would after Redis lost it.

Models are scripted (deterministic, no API key). The servers come from
`langgraph_durable.testing`: `REDIS_URL` / `MONGODB_URL` when set, otherwise local
`redis-server` and SecantusDB processes on free ports."""),
    ("code", """%matplotlib inline
from contextlib import ExitStack

from langgraph_durable.testing import mongo_server, redis_server

servers = ExitStack()  # holds the context managers: a local server lives until servers.close()
redis_srv = servers.enter_context(redis_server())
mongo_srv = servers.enter_context(mongo_server())
print(redis_srv.url, mongo_srv.url)"""),
    ("md", """## Scripted models

`ScriptedChat` answers turn *n* with 300-1500 characters and, every third turn, first calls a
`search` tool. `ScriptedSummarizer` stands in for the summary model: it extends the previous
summary (which `SummaryBuffer` puts in its prompt) with one line per folded user message."""),
    ("code", """import random

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult

WORDS = ("train flight hotel museum ferry coast village ticket schedule weather luggage "
         "station transfer airport guide tour trail lake castle market gallery festival "
         "morning evening cheap quiet scenic historic local booking refund seat the a of "
         "to and in for with on from").split()


def prose(seed: str, low: int, high: int) -> str:
    rng = random.Random(seed)
    size = rng.randint(low, high)
    text = ""
    while len(text) < size:
        text += rng.choice(WORDS) + " "
    return text[:size].strip().capitalize() + "."


def turn_of(messages) -> int:
    return next(int(m.id[1:]) for m in reversed(messages) if isinstance(m, HumanMessage))


class ScriptedChat(BaseChatModel):
    @property
    def _llm_type(self) -> str:
        return "scripted-chat"

    def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
        n = turn_of(messages)
        if n % 3 == 0 and not isinstance(messages[-1], ToolMessage):
            call = {"name": "search", "args": {"query": f"topic {n}"}, "id": f"call{n}"}
            reply = AIMessage("Let me look that up.", tool_calls=[call], id=f"c{n}")
        else:
            reply = AIMessage(prose(f"ai-{n}", 300, 1500), id=f"a{n}")
        return ChatResult(generations=[ChatGeneration(message=reply)])


class ScriptedSummarizer(BaseChatModel):
    calls: int = 0

    @property
    def _llm_type(self) -> str:
        return "scripted-summarizer"

    def _generate(self, messages, stop=None, run_manager=None, **kwargs) -> ChatResult:
        self.calls += 1
        prompt = messages[0].content
        previous = prompt.split("Previous summary:\\n")[1].split("\\n\\nNew lines")[0]
        lines = [] if previous == "(none yet)" else previous.splitlines()
        new = prompt.split("New lines of conversation:\\n")[1].splitlines()
        lines += ["- user: " + line[6:60] for line in new if line.startswith("User: ")]
        text = "\\n".join(lines[-20:])  # a bounded summary
        return ChatResult(generations=[ChatGeneration(message=AIMessage(text))])"""),
    ("md", """## The graph

`compact` runs before every model call (also after a tool result). `SummaryState` is
`MessagesState` plus the `summary` and `compaction` keys the compactor writes."""),
    ("code", """from langgraph.graph import END, START, StateGraph

from langgraph_durable.compaction import SummaryBuffer, SummaryState

model = ScriptedChat()


def agent(state):
    return {"messages": [model.invoke(state["messages"])]}


def tools(state):
    calls = state["messages"][-1].tool_calls
    return {"messages": [ToolMessage(prose(c["id"], 400, 1200), tool_call_id=c["id"],
                                     name=c["name"], id="t" + c["id"]) for c in calls]}


def route(state):
    return "tools" if state["messages"][-1].tool_calls else END


def build(compactor, checkpointer):
    builder = StateGraph(SummaryState)
    builder.add_node("agent", agent)
    builder.add_node("tools", tools)
    builder.add_conditional_edges("agent", route, ["tools", END])
    entry = "agent"
    if compactor is not None:
        builder.add_node("compact", compactor.as_runnable())
        builder.add_edge("compact", "agent")
        entry = "compact"
    builder.add_edge(START, entry)
    builder.add_edge("tools", entry)
    return builder.compile(checkpointer=checkpointer)"""),
    ("md", """## 80 turns, twice

Each run gets its own Redis key prefix and MongoDB database. After every turn we count the
tokens of the checkpointed history with `count_tokens_approximately`."""),
    ("code", """import uuid

from langchain_core.messages import SystemMessage
from langchain_core.messages.utils import count_tokens_approximately

from langgraph_durable import DurableSaver

TURNS, MAX_TOKENS = 80, 3000
config = {"configurable": {"thread_id": "long-chat"}}


def converse(compactor, options):
    tokens = []
    with DurableSaver.from_urls(redis_srv.url, mongo_srv.url, **options) as saver:
        graph = build(compactor, saver)
        for n in range(1, TURNS + 1):
            new = [HumanMessage(prose(f"user-{n}", 60, 400), id=f"h{n}")]
            if n == 1:
                new.insert(0, SystemMessage("You plan trips.", id="sys"))
            values = graph.invoke({"messages": new}, config)
            tokens.append(count_tokens_approximately(values["messages"]))
    return tokens


def options_for(name):
    tag = uuid.uuid4().hex[:6]
    return {"key_prefix": f"nb-{name}-{tag}", "database": f"nb_{name}_{tag}"}


plain_options, summary_options = options_for("plain"), options_for("summary")
summarizer = ScriptedSummarizer()
buffer = SummaryBuffer(summarizer, max_tokens=MAX_TOKENS, keep_tokens=MAX_TOKENS // 2)

plain = converse(None, plain_options)
compacted = converse(buffer, summary_options)
print(f"last turn: {plain[-1]} tokens without compaction, {compacted[-1]} with SummaryBuffer "
      f"({summarizer.calls} summaries)")"""),
    ("code", """import matplotlib.pyplot as plt

turns = range(1, TURNS + 1)
fig, ax = plt.subplots(figsize=(8, 4))
ax.plot(turns, plain, label="no compaction")
ax.plot(turns, compacted, label="SummaryBuffer")
ax.axhline(MAX_TOKENS, color="grey", lw=0.8, ls="--", label="max_tokens")
ax.set_xlabel("turn")
ax.set_ylabel("tokens in the history")
ax.legend()
ax.grid(alpha=0.3)
plt.show()

budget_turn = next(i for i, t in enumerate(plain, 1) if t > MAX_TOKENS)
growth = [b - a for a, b in zip(plain, plain[1:])]
assert max(compacted[budget_turn:]) <= MAX_TOKENS + max(growth)
print("budget passed at turn", budget_turn, "| max after it:", max(compacted[budget_turn:]))"""),
    ("md", """## Resume from MongoDB alone

Leaving the `with` block drained the outbox to MongoDB. Now the compacted thread's Redis keys
are deleted (as if Redis had been replaced), and a new saver and a new summariser resume it:
the history, the summary message and the `summary` key come back from the durable tier, and
the next compaction extends the restored summary."""),
    ("code", """import redis

hot = redis.Redis.from_url(redis_srv.url)
keys = list(hot.scan_iter(match="{" + summary_options["key_prefix"] + ":*"))
hot.delete(*keys)
print("deleted", len(keys), "Redis keys")

summarizer2 = ScriptedSummarizer()
buffer2 = SummaryBuffer(summarizer2, max_tokens=MAX_TOKENS, keep_tokens=MAX_TOKENS // 2)
with DurableSaver.from_urls(redis_srv.url, mongo_srv.url, **summary_options) as saver:
    graph = build(buffer2, saver)
    values = graph.get_state(config).values
    tier = saver.last_read_tier
    print(f"{len(values['messages'])} messages, "
          f"{count_tokens_approximately(values['messages'])} tokens, from the {tier} tier")
    print(values["messages"][1].content[:300], "...")
    assert tier == "durable"
    assert count_tokens_approximately(values["messages"]) == compacted[-1]

    for n in range(TURNS + 1, TURNS + 11):
        values = graph.invoke({"messages": [HumanMessage(prose(f"user-{n}", 60, 400),
                                                         id=f"h{n}")]}, config)
    print(f"10 more turns: {count_tokens_approximately(values['messages'])} tokens, "
          f"{summarizer2.calls} new summaries; summary now has "
          f"{len(values['summary'].splitlines())} lines")
    assert summarizer2.calls >= 1"""),
    ("md", """## The whole conversation is still there

Compaction removes messages from the *current* state; the checkpoints written before keep
them. `transcript(saver, config)` walks the thread's checkpoints and rebuilds the full,
uncompacted conversation, each message once, in order (here from MongoDB, as Redis no
longer holds the thread)."""),
    ("code", """from langgraph_durable.compaction import transcript

with DurableSaver.from_urls(redis_srv.url, mongo_srv.url, **summary_options) as saver:
    full = transcript(saver, config)
    current = saver.get_tuple(config).checkpoint["channel_values"]["messages"]
users = [m for m in full if isinstance(m, HumanMessage)]
print(f"{len(full)} messages in the transcript ({len(users)} user turns), "
      f"{len(current)} in the compacted state")
assert [m.id for m in users] == [f"h{n}" for n in range(1, TURNS + 11)]"""),
    ("md", """## LangChain 1.x agents: `CompactionMiddleware` against `SummarizationMiddleware`

With `langchain.agents.create_agent`, compaction is middleware:
`create_agent(model, tools, middleware=[CompactionMiddleware(summary_model,
trigger=("tokens", 4000), keep=("tokens", 2000))], checkpointer=saver)`.
`scripts/compaction_compare.py` runs one scripted 200-turn conversation (tool calls every
third turn, two parallel ones every sixth) through `create_agent` twice on `DurableSaver`,
with ours and with LangChain's `SummarizationMiddleware`, same options, and records what the
agent model received on every call."""),
    ("code", """import sys
from pathlib import Path

from IPython.display import Markdown, display

sys.path.insert(0, str(Path.cwd().parent / "scripts"))
import compaction_compare

side = compaction_compare.compare(200, (redis_srv.url, mongo_srv.url))
display(Markdown(compaction_compare.table(side)))
ours, theirs = side["runs"]["ours"], side["runs"]["langchain"]
assert ours["max_tokens"] <= side["trigger"] and ours["broken_pairs"] == 0
assert ours["not_user_turn_first"] == 0"""),
    ("code", """fig, ax = plt.subplots(figsize=(8, 4))
for run in side["runs"].values():
    ax.plot(range(1, side["turns"] + 1), run["turn_max_tokens"], lw=1, label=run["label"])
ax.axhline(side["trigger"], color="grey", lw=0.8, ls="--", label="trigger")
ax.set_xlabel("turn")
ax.set_ylabel("largest model-call input of the turn (tokens)")
ax.legend()
ax.grid(alpha=0.3)
plt.show()"""),
    ("code", """import pymongo
from langgraph_durable.testing import drop_namespace

mongo = pymongo.MongoClient(mongo_srv.url)
for options in (plain_options, summary_options):
    size = mongo[options["database"]].command("dbStats")["dataSize"]
    print(f"{options['database']}: {size / 1e6:.1f} MB in MongoDB")
    drop_namespace(redis_srv.url, mongo_srv.url, options["key_prefix"], options["database"])
mongo.close()
hot.close()
servers.close()"""),
]




if __name__ == "__main__":
    print(write(NAME, CELLS))
