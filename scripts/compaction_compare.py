"""Side by side: ``CompactionMiddleware`` and LangChain's ``SummarizationMiddleware``.

The same scripted 200-turn conversation (``scripts/compaction_figure.py``'s user messages of
60-400 characters and answers of 300-1500; a ``search`` tool call every third turn, two
parallel calls every sixth; results of 400-1200 characters) runs through
``langchain.agents.create_agent`` twice, on ``DurableSaver`` (real Redis and MongoDB-wire
servers from ``langgraph_durable.testing``), once with each middleware and the same options:
``trigger=("tokens", 4000)``, ``keep=("tokens", 2000)``, default token counter. The agent
model and the summariser are scripted (deterministic, no network); the summariser answers
both middlewares alike: one line per user turn it finds in its prompt (previous summary
included), the last 24 lines.

Per model call it records what the agent model received: approximate input tokens
(``count_tokens_approximately``, system prompt included), whether every tool call has its
results and every result its call, and whether the conversation after the system messages
starts on a user's turn. It writes a Markdown table between the ``compaction-compare``
markers of the doc, a PNG and, with ``--json``, every number.

    .venv/bin/python scripts/compaction_compare.py            # 200 turns -> docs/
    .venv/bin/python scripts/compaction_compare.py --turns 30 --out /tmp/x --doc /tmp/x/c.md
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pymongo
import redis
from compaction_figure import SYSTEM_PROMPT, human_text, mongo_bytes, prose, redis_bytes
from langchain.agents import create_agent
from langchain.agents.middleware import SummarizationMiddleware
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool

from langgraph_durable import DurableSaver
from langgraph_durable.compaction import CompactionMiddleware
from langgraph_durable.testing import mongo_server, redis_server

ROOT = Path(__file__).resolve().parent.parent
TRIGGER, KEEP = 4000, 2000
SUMMARY_LINES = 24
MARK_START = "<!-- compaction-compare:start -->"
MARK_END = "<!-- compaction-compare:end -->"
RUNS = {"ours": "CompactionMiddleware", "langchain": "SummarizationMiddleware"}


def turn_of(messages: Sequence[BaseMessage]) -> int:
    """The turn number of the last user message (ids ``h<n>``)."""
    for message in reversed(messages):
        if isinstance(message, HumanMessage) and str(message.id).startswith("h"):
            return int(str(message.id)[1:])
    raise ValueError("no user turn in the prompt")


def pairs_broken(prompt: Sequence[BaseMessage]) -> bool:
    """A tool call without its results right after it, or a result without its call."""
    open_calls: set[str] = set()
    for message in prompt:
        if isinstance(message, ToolMessage):
            if message.tool_call_id not in open_calls:
                return True
            open_calls.discard(message.tool_call_id)
            continue
        if open_calls:
            return True
        if isinstance(message, AIMessage):
            open_calls = {str(c["id"]) for c in message.tool_calls}
    return bool(open_calls)


def starts_on_user_turn(prompt: Sequence[BaseMessage]) -> bool:
    """After the system messages, the first message is a user's own message (``h<n>``)."""
    rest = [m for m in prompt if m.type != "system"]
    return bool(rest) and isinstance(rest[0], HumanMessage) and str(rest[0].id).startswith("h")


class ScriptedAgent(BaseChatModel):
    """The agent model: deterministic answers, and a record of every prompt's shape."""

    calls: list[dict[str, Any]] = []

    @property
    def _llm_type(self) -> str:
        return "scripted-agent"

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedAgent:
        return self

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        n = turn_of(messages)
        self.calls.append({
            "turn": n,
            "tokens": count_tokens_approximately(messages),
            "broken_pairs": pairs_broken(messages),
            "user_turn_first": starts_on_user_turn(messages),
            "role_human_first": [m.type for m in messages if m.type != "system"][:1] == ["human"],
        })
        if n % 3 == 0 and not isinstance(messages[-1], ToolMessage):
            calls = [{"name": "search", "args": {"query": f"topic {n}"}, "id": f"call{n}"}]
            if n % 6 == 0:
                calls.append({"name": "search", "args": {"query": f"more {n}"},
                              "id": f"call{n}b"})
            reply = AIMessage("Let me look that up.", tool_calls=calls, id=f"c{n}")
        else:
            reply = AIMessage(prose(f"ai-{n}", 300, 1500), id=f"a{n}")
        return ChatResult(generations=[ChatGeneration(message=reply)])


class ScriptedSummarizer(BaseChatModel):
    """One line per user turn named in the prompt (``[turn n]`` or ``- turn n:``), last 24."""

    calls: int = 0

    @property
    def _llm_type(self) -> str:
        return "scripted-summarizer"

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        self.calls += 1
        text = "\n".join(str(m.content) for m in messages)
        turns = sorted(_turns(text))
        lines = [f"- turn {t}: {human_text(t)[len(f'[turn {t}] '):][:60]}" for t in turns]
        summary = "\n".join(lines[-SUMMARY_LINES:]) or "- nothing yet"
        return ChatResult(generations=[ChatGeneration(message=AIMessage(summary))])


def _turns(text: str) -> set[int]:
    """Turn numbers named in ``text`` as ``[turn n]`` (user messages) or ``- turn n:``."""
    found: set[int] = set()
    for a, b in re.findall(r"\[turn (\d+)\]|- turn (\d+):", text):
        found.add(int(a or b))
    return found


@tool
def search(query: str) -> str:
    """Search travel information about ``query``."""
    return prose(f"tool-{query}", 400, 1200)


def middleware(name: str, summarizer: ScriptedSummarizer) -> Any:
    if name == "ours":
        return CompactionMiddleware(summarizer, trigger=("tokens", TRIGGER), keep=("tokens", KEEP))
    return SummarizationMiddleware(summarizer, trigger=("tokens", TRIGGER), keep=("tokens", KEEP))


def run_one(name: str, turns: int, urls: tuple[str, str]) -> dict[str, Any]:
    """Run the conversation with one middleware; return its per-call records and totals."""
    tag = uuid.uuid4().hex[:8]
    options = {"key_prefix": f"cmp{tag}", "database": f"compaction_cmp_{tag}"}
    model, summarizer = ScriptedAgent(calls=[]), ScriptedSummarizer()
    rclient = redis.Redis.from_url(urls[0])
    mclient: pymongo.MongoClient = pymongo.MongoClient(urls[1])
    config = {"configurable": {"thread_id": f"compare-{name}"}}
    started = time.perf_counter()
    try:
        with DurableSaver.from_urls(*urls, **options) as saver:
            agent = create_agent(model, [search], system_prompt=SYSTEM_PROMPT,
                                 middleware=[middleware(name, summarizer)], checkpointer=saver)
            for n in range(1, turns + 1):
                agent.invoke({"messages": [HumanMessage(human_text(n), id=f"h{n}")]}, config)
            saver.flush()
            stored_redis = redis_bytes(rclient, options["key_prefix"])
            stored_mongo = mongo_bytes(mclient, options["database"])
    finally:
        keys = list(rclient.scan_iter(match="{" + options["key_prefix"] + ":*", count=1000))
        if keys:
            rclient.delete(*keys)
        mclient.drop_database(options["database"])
        rclient.close()
        mclient.close()
    calls = model.calls
    tokens = [c["tokens"] for c in calls]
    per_turn = [max(c["tokens"] for c in calls if c["turn"] == n) for n in range(1, turns + 1)]
    return {
        "label": RUNS[name],
        "model_calls": len(calls),
        "max_tokens": max(tokens),
        "mean_tokens": sum(tokens) / len(tokens),
        "turn_max_tokens": per_turn,
        "summaries": summarizer.calls,
        "broken_pairs": sum(c["broken_pairs"] for c in calls),
        "not_user_turn_first": sum(not c["user_turn_first"] for c in calls),
        "not_role_human_first": sum(not c["role_human_first"] for c in calls),
        "redis_bytes": stored_redis,
        "mongo_bytes": stored_mongo,
        "seconds": round(time.perf_counter() - started, 1),
    }


def compare(turns: int, urls: tuple[str, str]) -> dict[str, Any]:
    """Both runs on the servers at ``urls``; returns ``{"turns", "runs": {name: run}}``."""
    runs = {name: run_one(name, turns, urls) for name in RUNS}
    return {"turns": turns, "trigger": TRIGGER, "keep": KEEP, "runs": runs}


ROWS = [
    ("model-call input tokens, max", "max_tokens", "{:,}"),
    ("model-call input tokens, mean", "mean_tokens", "{:,.0f}"),
    ("model calls", "model_calls", "{}"),
    ("summary calls", "summaries", "{}"),
    ("model calls with a broken tool-call pair", "broken_pairs", "{}"),
    ("model calls whose history does not start on a user turn", "not_user_turn_first", "{}"),
    ("... nor on any human-role message", "not_role_human_first", "{}"),
    ("Redis bytes after flush (MEMORY USAGE)", "redis_bytes", "{:,}"),
    ("MongoDB bytes (dbStats.dataSize)", "mongo_bytes", "{:,}"),
]


def table(results: dict[str, Any]) -> str:
    runs = results["runs"]
    head = "| | " + " | ".join(f"`{r['label']}`" for r in runs.values()) + " |"
    rows = [head, "|---|" + "---:|" * len(runs)]
    for label, key, fmt in ROWS:
        rows.append(f"| {label} | " + " | ".join(fmt.format(r[key]) for r in runs.values())
                    + " |")
    return "\n".join(rows)


def plot(results: dict[str, Any], path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    turns = range(1, results["turns"] + 1)
    fig, ax = plt.subplots(figsize=(9, 4))
    for run in results["runs"].values():
        ax.plot(turns, run["turn_max_tokens"], lw=1.1, label=run["label"])
    ax.axhline(results["trigger"], color="grey", lw=0.8, ls="--", label="trigger (4000 tokens)")
    ax.set_xlabel("turn")
    ax.set_ylabel("largest model-call input of the turn (tokens)")
    ax.set_title("What the agent model receives, same conversation")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def section(results: dict[str, Any], image: str) -> str:
    return f"""{MARK_START}
<!-- written by scripts/compaction_compare.py; edit the script, not this section -->

{results['turns']} turns, `trigger=("tokens", {TRIGGER})`, `keep=("tokens", {KEEP})` for both,
system prompt outside the state (`create_agent(system_prompt=...)`), `DurableSaver`.

{table(results)}

![Largest model-call input per turn]({image})
{MARK_END}"""


def write_doc(doc: Path, text: str) -> None:
    current = doc.read_text() if doc.exists() else ""
    if MARK_START in current and MARK_END in current:
        head, rest = current.split(MARK_START, 1)
        text = head + text + rest.split(MARK_END, 1)[1]
    else:
        text = current.rstrip() + "\n\n" + text + "\n"
    doc.write_text(text)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img")
    parser.add_argument("--doc", type=Path, default=ROOT / "docs" / "compaction.md")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    with redis_server() as rsrv, mongo_server() as msrv:
        results = compare(args.turns, (rsrv.url, msrv.url))
    for name, run in results["runs"].items():
        print(f"{name}: {run['seconds']} s", file=sys.stderr)
    image = plot(results, args.out / "compaction_vs_langchain.png")
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=1))
    write_doc(args.doc, section(results, os.path.relpath(image, args.doc.parent)))
    print(table(results))
    return results


if __name__ == "__main__":
    main()
