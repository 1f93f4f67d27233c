"""Measure history tokens and stored bytes of a long conversation, with and without compaction.

A scripted chat model (deterministic, no network) answers ``--turns`` user turns with 300-1500
characters; every third turn it first calls a ``search`` tool whose result is 400-1200
characters. The same conversation runs through ``DurableSaver`` (real Redis and MongoDB-wire
servers from ``langgraph_durable.testing``, which honor ``REDIS_URL`` / ``MONGODB_URL``) as:

* ``none``: plain ``add_messages`` state, no compaction;
* ``summary``: ``SummaryBuffer`` (a deterministic scripted summariser) before every model call;
* ``sliding``: ``SlidingWindow`` before every model call;
* ``delta``: the messages channel declared as LangGraph's ``DeltaChannel`` (no compaction);
* ``delta_summary``: ``DeltaChannel`` and ``SummaryBuffer`` together.

Per turn it records the tokens of the history (``count_tokens_approximately``) and, once
flushed, the bytes the saver's Redis keys use (sum of ``MEMORY USAGE <key> SAMPLES 0`` over
the thread's keys; the outbox stream, a transient queue, is left out). Every few turns it
reads MongoDB's ``dbStats.dataSize`` (SecantusDB and MongoDB both report the summed BSON size
of the documents there, indexes not included). It writes two PNGs, the results section of
the Markdown page (between the ``compaction-figure`` markers) and, with ``--json``, every
number.

    .venv/bin/python scripts/compaction_figure.py              # 200 turns -> docs/
    .venv/bin/python scripts/compaction_figure.py --quick --out /tmp/x --doc /tmp/x/c.md \
        --json /tmp/x/results.json
"""

import argparse
import json
import os
import random
import re
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated, Any

import pymongo
import redis
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.messages.utils import count_tokens_approximately
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.channels import DeltaChannel
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from typing_extensions import NotRequired, TypedDict

from langgraph_durable import DurableSaver
from langgraph_durable.compaction import (
    BaseCompactor,
    CompactionInfo,
    SlidingWindow,
    SummaryBuffer,
    SummaryState,
)
from langgraph_durable.testing import mongo_server, redis_server

ROOT = Path(__file__).resolve().parent.parent
MAX_TOKENS = 4000
KEEP_TOKENS = 2000
TOOL_EVERY = 3
SUMMARY_LINES = 24
MARK_START = "<!-- compaction-figure:start -->"
MARK_END = "<!-- compaction-figure:end -->"
SYSTEM_PROMPT = (
    "You are a travel-planning assistant. Answer in detail, cite what the search tool "
    "returned and keep track of the user's constraints across the whole conversation."
)
WORDS = (
    "itinerary budget train flight hotel museum ferry coast mountain village harbour "
    "breakfast dinner reservation ticket schedule weather forecast luggage passport visa "
    "station platform connection transfer airport terminal gate boarding window aisle "
    "guide tour walking cycling hiking trail summit lake river bridge castle cathedral "
    "market square gallery theatre concert festival season spring summer autumn winter "
    "morning afternoon evening night early late cheap expensive comfortable quiet busy "
    "crowded scenic historic modern local regional national border currency exchange "
    "card cash refund insurance delay cancellation upgrade seat booking confirmation "
    "the a of to and in for with on at from by about over after before between during"
).split()


# -- the scripted conversation ----------------------------------------------------------


def prose(seed: str, low: int, high: int) -> str:
    """Deterministic text of ``low``..``high`` characters (sentences of vocabulary words)."""
    rng = random.Random(seed)
    target = rng.randint(low, high)
    words: list[str] = []
    size = 0
    while size < target:
        word = rng.choice(WORDS)
        words.append(word)
        size += len(word) + 1
    text = " ".join(words)[:target].rstrip()
    sentences = re.sub(r"((?:\S+ ){11}\S+) ", r"\1. ", text)
    return sentences[0].upper() + sentences[1:] + "."


def human_text(turn: int) -> str:
    return f"[turn {turn}] " + prose(f"human-{turn}", 60, 400)


def turn_of(messages: Sequence[BaseMessage]) -> int:
    for message in reversed(messages):
        if isinstance(message, HumanMessage) and str(message.id).startswith("h"):
            return int(str(message.id)[1:])
    raise ValueError("no user turn in the prompt")


class ScriptedChatModel(BaseChatModel):
    """Answers turn ``n`` deterministically; every third turn it first calls ``search``."""

    calls: int = 0
    max_prompt_tokens: int = 0

    @property
    def _llm_type(self) -> str:
        return "scripted-chat"

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        self.calls += 1
        self.max_prompt_tokens = max(self.max_prompt_tokens,
                                     count_tokens_approximately(messages))
        n = turn_of(messages)
        if n % TOOL_EVERY == 0 and not isinstance(messages[-1], ToolMessage):
            query = " ".join(prose(f"query-{n}", 20, 40).split()[:4]).rstrip(".")
            call = {"name": "search", "args": {"query": query}, "id": f"call{n}"}
            message = AIMessage("Let me look that up.", tool_calls=[call], id=f"c{n}")
        else:
            message = AIMessage(prose(f"ai-{n}", 300, 1500), id=f"a{n}")
        return ChatResult(generations=[ChatGeneration(message=message)])


class ScriptedSummarizer(BaseChatModel):
    """Summariser without a model: previous summary lines plus one line per folded user or
    tool message, keeping the last ``SUMMARY_LINES`` lines (so the summary stays bounded)."""

    calls: int = 0

    @property
    def _llm_type(self) -> str:
        return "scripted-summarizer"

    def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None,
                  **kwargs: Any) -> ChatResult:
        self.calls += 1
        prompt = str(messages[0].content)
        previous = prompt.split("Previous summary:\n", 1)[1].split("\n\nNew lines", 1)[0]
        lines = [] if previous.strip() == "(none yet)" else previous.strip().splitlines()
        for line in prompt.split("New lines of conversation:\n", 1)[1].splitlines():
            if line.startswith("User: "):
                lines.append("- user: " + line[6:70])
            elif line.startswith("Tool result"):
                lines.append("- found: " + line.split(": ", 1)[1][:60])
        text = "\n".join(lines[-SUMMARY_LINES:]) or "- small talk only"
        return ChatResult(generations=[ChatGeneration(message=AIMessage(text))])


# -- graphs -----------------------------------------------------------------------------


def add_messages_batch(state: list[AnyMessage], writes: Sequence[Any]) -> list[AnyMessage]:
    """``DeltaChannel`` reducer built on the public ``add_messages``: a left fold over the
    batch, hence batching-invariant as ``DeltaChannel`` requires (every message has an id)."""
    result: Any = state
    for write in writes:
        result = add_messages(result, write)
    return list(result)


class DeltaState(TypedDict):
    """Messages stored as deltas: checkpoints keep writes, plus a snapshot every 100 updates."""

    messages: Annotated[list[AnyMessage], DeltaChannel(add_messages_batch)]
    summary: NotRequired[str]
    compaction: NotRequired[CompactionInfo]


def build_graph(schema: Any, model: ScriptedChatModel, compactor: BaseCompactor | None,
                saver: DurableSaver) -> Any:
    """START -> [compact] -> agent -> (tools -> [compact] -> agent)* -> END."""

    def agent(state: Any) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    def tools(state: Any) -> dict[str, Any]:
        calls = state["messages"][-1].tool_calls
        return {"messages": [
            ToolMessage(prose(f"tool-{c['id']}", 400, 1200), tool_call_id=c["id"],
                        name=c["name"], id=f"t{c['id'][4:]}")
            for c in calls
        ]}

    def route(state: Any) -> str:
        last = state["messages"][-1]
        return "tools" if isinstance(last, AIMessage) and last.tool_calls else END

    builder = StateGraph(schema)
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
    return builder.compile(checkpointer=saver)


def summary_buffer() -> SummaryBuffer:
    return SummaryBuffer(ScriptedSummarizer(), max_tokens=MAX_TOKENS, keep_tokens=KEEP_TOKENS)


def sliding_window() -> SlidingWindow:
    return SlidingWindow(max_tokens=MAX_TOKENS, keep_tokens=KEEP_TOKENS)


RUNS: dict[str, tuple[str, Any, Callable[[], BaseCompactor | None]]] = {
    "none": ("no compaction", SummaryState, lambda: None),
    "summary": ("SummaryBuffer", SummaryState, summary_buffer),
    "sliding": ("SlidingWindow", SummaryState, sliding_window),
    "delta": ("DeltaChannel", DeltaState, lambda: None),
    "delta_summary": ("DeltaChannel + SummaryBuffer", DeltaState, summary_buffer),
}


# -- measuring --------------------------------------------------------------------------


def redis_bytes(client: redis.Redis, prefix: str) -> int:
    """Sum of ``MEMORY USAGE key SAMPLES 0`` over the saver's keys, outbox stream excluded."""
    total = 0
    outbox = ("{" + prefix + ":outbox}").encode()
    for key in client.scan_iter(match="{" + prefix + ":*", count=1000):
        if key != outbox:
            total += int(client.memory_usage(key, samples=0) or 0)
    return total


def mongo_bytes(client: pymongo.MongoClient, database: str) -> int:
    """``dbStats.dataSize``: the summed BSON size of the documents (indexes excluded)."""
    return int(client[database].command("dbStats")["dataSize"])


def run_one(name: str, turns: int, urls: tuple[str, str], sample_every: int) -> dict[str, Any]:
    label, schema, make_compactor = RUNS[name]
    compactor = make_compactor()
    model = ScriptedChatModel()
    tag = uuid.uuid4().hex[:8]
    options = {"key_prefix": f"fig{tag}", "database": f"compaction_fig_{tag}"}
    rclient = redis.Redis.from_url(urls[0])
    mclient: pymongo.MongoClient = pymongo.MongoClient(urls[1])
    config = {"configurable": {"thread_id": f"long-chat-{name}"}}
    tokens: list[int] = []
    seconds_series: list[float] = []
    redis_series: list[int] = []
    mongo_series: list[tuple[int, int]] = []
    started = time.perf_counter()
    try:
        with DurableSaver.from_urls(*urls, **options) as saver:
            graph = build_graph(schema, model, compactor, saver)
            for n in range(1, turns + 1):
                new: list[BaseMessage] = [HumanMessage(human_text(n), id=f"h{n}")]
                if n == 1:
                    new.insert(0, SystemMessage(SYSTEM_PROMPT, id="sys"))
                began = time.perf_counter()
                out = graph.invoke({"messages": new}, config)
                seconds_series.append(time.perf_counter() - began)
                tokens.append(count_tokens_approximately(out["messages"]))
                # measured once flushed: what is still on its way to MongoDB (and the hot
                # window it trims) would make Redis's size depend on the flusher's timing
                saver.flush()
                redis_series.append(redis_bytes(rclient, options["key_prefix"]))
                if n % sample_every == 0 or n == turns:
                    mongo_series.append((n, mongo_bytes(mclient, options["database"])))
            seconds = time.perf_counter() - started
            final_messages = len(out["messages"])
        summariser = getattr(compactor, "model", None)
        return {
            "label": label,
            "tokens": tokens,
            "redis_bytes": redis_series,
            "mongo_bytes": mongo_series,
            "redis_final": redis_series[-1],
            "mongo_final": mongo_series[-1][1],
            "final_messages": final_messages,
            "model_calls": model.calls,
            "max_prompt_tokens": model.max_prompt_tokens,
            "summaries": getattr(summariser, "calls", 0),
            "seconds": round(seconds, 2),
            "turn_seconds": seconds_series,
        }
    finally:
        keys = list(rclient.scan_iter(match="{" + options["key_prefix"] + ":*", count=1000))
        if keys:
            rclient.delete(*keys)
        mclient.drop_database(options["database"])
        rclient.close()
        mclient.close()


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def summarise_run(run: dict[str, Any], budget_turn: int, turns: int) -> None:
    """Add per-turn deltas and the early/late mean bytes per turn after the budget turn.

    Both windows are a multiple of the tool period long, so each holds as many tool turns.
    """
    series = run["redis_bytes"]
    deltas = [series[0]] + [b - a for a, b in zip(series, series[1:])]
    run["redis_delta"] = deltas
    width = TOOL_EVERY * max(1, (turns - budget_turn) // (3 * TOOL_EVERY))
    run["window"] = width
    run["bytes_per_turn_early"] = mean(deltas[budget_turn:budget_turn + width])
    run["bytes_per_turn_late"] = mean(deltas[turns - width:])
    run["turn_ms_early"] = 1e3 * mean(run["turn_seconds"][budget_turn:budget_turn + width])
    run["turn_ms_late"] = 1e3 * mean(run["turn_seconds"][turns - width:])
    after = run["tokens"][budget_turn:]
    run["max_tokens_after_budget"] = max(after) if after else 0


# -- output -----------------------------------------------------------------------------


def plot(results: dict[str, Any], out: Path) -> dict[str, Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = results["runs"]
    turns = range(1, results["turns"] + 1)
    styles = {"none": "-", "summary": "-", "sliding": "--", "delta": ":", "delta_summary": "-."}
    paths = {"tokens": out / "compaction_tokens.png", "storage": out / "compaction_storage.png"}

    limit = results["max_tokens"]
    fig, (full, zoom) = plt.subplots(1, 2, figsize=(12, 4.5))
    for name, run in runs.items():
        for ax in (full, zoom):
            ax.plot(turns, run["tokens"], styles.get(name, "-"), lw=1.1, label=run["label"])
    for ax in (full, zoom):
        ax.axhline(limit, color="grey", lw=0.8)
        ax.annotate(f"max_tokens = {limit}", (1, limit), textcoords="offset points",
                    xytext=(2, 4), fontsize=8, color="grey")
        ax.set_xlabel("turn")
        ax.grid(alpha=0.3)
    full.set_ylabel("tokens in the history after the turn (approximate)")
    full.set_title(f"History size over a {results['turns']}-turn conversation")
    full.legend(fontsize=8)
    zoom.set_ylim(0, 1.6 * limit)
    zoom.set_title("The same, up to 1.6 x max_tokens")
    fig.tight_layout()
    fig.savefig(paths["tokens"], dpi=110)
    plt.close(fig)

    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5))
    for name, run in runs.items():
        style = styles.get(name, "-")
        (line,) = left.plot(turns, [b / 1e6 for b in run["redis_bytes"]], style,
                            label=run["label"])
        left.plot([t for t, _ in run["mongo_bytes"]], [b / 1e6 for _, b in run["mongo_bytes"]],
                  "o", ms=3, color=line.get_color())
        deltas = run["redis_delta"]  # mean over TOOL_EVERY turns: one tool turn in each
        smooth = [mean(deltas[max(0, i - TOOL_EVERY + 1):i + 1]) for i in range(len(deltas))]
        right.plot(turns, [max(d, 1.0) / 1e3 for d in smooth], style, lw=1.1,
                   color=line.get_color(), label=run["label"])
    left.set_xlabel("turn")
    left.set_ylabel("MB stored for the thread")
    left.set_title("Cumulative: lines Redis (MEMORY USAGE), dots MongoDB (dataSize)",
                   fontsize=10)
    left.legend(fontsize=8)
    left.grid(alpha=0.3)
    right.set_xlabel("turn")
    right.set_ylabel(f"kB added to Redis per turn (mean of {TOOL_EVERY} turns)")
    right.set_title("Bytes stored per turn (log scale)", fontsize=10)
    right.set_yscale("log")
    right.grid(alpha=0.3, which="both")
    fig.tight_layout()
    fig.savefig(paths["storage"], dpi=110)
    plt.close(fig)
    return paths


def table(results: dict[str, Any]) -> str:
    rows = [
        "| run | history tokens, last turn | max after budget | model calls / summaries "
        "| Redis MB | MongoDB MB | Redis kB/turn early -> late | ms/turn early -> late |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for run in results["runs"].values():
        rows.append(
            f"| {run['label']} | {run['tokens'][-1]:,} | {run['max_tokens_after_budget']:,} "
            f"| {run['model_calls']} / {run['summaries']} "
            f"| {run['redis_final'] / 1e6:.2f} | {run['mongo_final'] / 1e6:.2f} "
            f"| {run['bytes_per_turn_early'] / 1e3:.1f} -> {run['bytes_per_turn_late'] / 1e3:.1f} "
            f"| {run['turn_ms_early']:.0f} -> {run['turn_ms_late']:.0f} |"
        )
    return "\n".join(rows)


def section(results: dict[str, Any], images: dict[str, Path], doc: Path) -> str:
    rel = {k: os.path.relpath(p, doc.parent) for k, p in images.items()}
    b, w = results["budget_turn"], results["runs"]["none"]["window"]
    return f"""{MARK_START}
<!-- written by scripts/compaction_figure.py; edit the script, not this section -->

{results['turns']} turns, `max_tokens={results['max_tokens']}`, `keep_tokens={KEEP_TOKENS}`
(both strategies), a tool call every {TOOL_EVERY} turns. The uncompacted history passes the
budget at turn {b}. "early -> late" are means per turn over turns {b + 1}-{b + w} and over the
last {w} turns: bytes added to Redis, and wall time of `graph.invoke`. Redis MB is the sum of
`MEMORY USAGE <key> SAMPLES 0` over the thread's keys (outbox stream excluded); MongoDB MB is
`dbStats.dataSize` (summed BSON size of the documents, indexes excluded) after `flush()`.

{table(results)}

![History tokens per turn]({rel['tokens']})

![Cumulative and per-turn stored bytes]({rel['storage']})
{MARK_END}"""


def write_doc(doc: Path, text: str) -> None:
    if doc.exists():
        current = doc.read_text()
        if MARK_START in current and MARK_END in current:
            head, rest = current.split(MARK_START, 1)
            text = head + text + rest.split(MARK_END, 1)[1]
        else:
            text = current.rstrip() + "\n\n" + text + "\n"
    else:
        text = "# History compaction: measurements\n\n" + text + "\n"
    doc.parent.mkdir(parents=True, exist_ok=True)
    doc.write_text(text)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--quick", action="store_true", help="30 turns (a smoke run)")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img",
                        help="folder of the two PNGs")
    parser.add_argument("--doc", type=Path, default=ROOT / "docs" / "compaction.md")
    parser.add_argument("--json", type=Path, default=None, help="also write every number here")
    parser.add_argument("--runs", default=",".join(RUNS), help="comma-separated run names")
    args = parser.parse_args(argv)
    turns = 30 if args.quick else args.turns
    names = [n for n in args.runs.split(",") if n]
    if "none" not in names or any(n not in RUNS for n in names):
        parser.error(f"--runs must include 'none' and name only {', '.join(RUNS)}")
    sample_every = max(1, turns // 10)
    args.out.mkdir(parents=True, exist_ok=True)

    with redis_server() as rsrv, mongo_server() as msrv:
        urls = (rsrv.url, msrv.url)
        runs = {}
        for name in names:
            runs[name] = run_one(name, turns, urls, sample_every)
            print(f"{name}: {runs[name]['seconds']} s, last turn {runs[name]['tokens'][-1]} "
                  f"tokens, Redis {runs[name]['redis_final']:,} B, MongoDB "
                  f"{runs[name]['mongo_final']:,} B", file=sys.stderr)

    base = runs["none"]["tokens"]
    over = [i for i, t in enumerate(base, 1) if t > MAX_TOKENS]
    budget_turn = over[0] if over else turns
    turn_tokens = [base[0]] + [b - a for a, b in zip(base, base[1:])]
    for run in runs.values():
        summarise_run(run, budget_turn, turns)
    results = {"turns": turns, "max_tokens": MAX_TOKENS, "keep_tokens": KEEP_TOKENS,
               "budget_turn": budget_turn, "turn_tokens": turn_tokens, "runs": runs,
               "redis_measure": "sum of MEMORY USAGE key SAMPLES 0 (outbox excluded)",
               "mongo_measure": "dbStats dataSize (summed BSON document size)"}
    images = plot(results, args.out)
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=1))
    write_doc(args.doc, section(results, images, args.doc))
    print(table(results))
    return results


if __name__ == "__main__":
    main()
