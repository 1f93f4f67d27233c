"""Measurement (not a test): what keeping the thread summaries costs the flusher.

``python -m benchmarks.summary_cost [THREADS] [STEPS] [REPS]`` starts its own Redis and
SecantusDB (or uses REDIS_URL / MONGODB_URL); per repetition and per variant it writes
THREADS threads of STEPS checkpoints (a messages list growing by one message a step, one
pending write each) with no flusher running, then times one flusher draining the outbox
(``flush()`` of a saver with the in-process flusher), with the summaries kept (this
release) and with their upkeep switched off (``outbox.rounds._summary_facts`` answering
None, as before them). Prints milliseconds of flushing per checkpoint for each, and the
difference.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
import uuid
from contextlib import ExitStack
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.base.id import uuid6

from langgraph_durable import DurableSaver
from langgraph_durable.outbox import rounds
from langgraph_durable.testing import drop_key_prefix, mongo_server, redis_server


def _version(i: int) -> str:
    return f"{i:032}.0"


def write(saver: DurableSaver, threads: int, steps: int) -> None:
    """``threads`` threads of ``steps`` checkpoints, one message more each step."""
    for t in range(threads):
        cfg: Any = {"configurable": {"thread_id": f"t-{t:05d}", "checkpoint_ns": ""}}
        messages: list[Any] = []
        for i in range(steps):
            messages = [*messages, (HumanMessage if i % 2 == 0 else AIMessage)(
                f"message {i} of thread {t}", id=f"m-{t}-{i}")]
            cp = empty_checkpoint()
            cp["id"] = str(uuid6())
            cp["channel_values"] = {"messages": messages}
            versions = {"messages": _version(i + 1), "branch:to:agent": _version(i + 1)}
            cp["channel_versions"] = versions
            cp["updated_channels"] = ["messages", "branch:to:agent"]  # type: ignore[typeddict-unknown-key]
            cfg = saver.put(cfg, cp, {"step": i, "source": "loop"}, versions)
            saver.put_writes(cfg, [("count", i)], f"task-{i}")


def one(redis_url: str, mongo_url: str, threads: int, steps: int, keep: bool) -> float:
    """Seconds one flusher takes to drain ``threads`` x ``steps`` checkpoints."""
    tag = uuid.uuid4().hex[:8]
    opts: dict[str, Any] = {"key_prefix": f"sc{tag}", "database": f"bench_sum_{tag}"}
    original = rounds._summary_facts
    try:
        with DurableSaver.from_urls(redis_url, mongo_url, flusher="off", **opts) as s:
            write(s, threads, steps)
        if not keep:
            rounds._summary_facts = lambda *_a, **_k: None  # type: ignore[assignment]
        t0 = time.perf_counter()
        with DurableSaver.from_urls(redis_url, mongo_url, **opts) as s:
            s.flush(timeout_s=900)
            took = time.perf_counter() - t0
            kept = s.sync_clients.db[s.context.collections.threads].count_documents({})
            assert kept == (threads if keep else 0), kept
            drop_key_prefix(s.sync_clients.redis, opts["key_prefix"])
            s.sync_clients.db.client.drop_database(opts["database"])
        return took
    finally:
        rounds._summary_facts = original  # type: ignore[assignment]


def main() -> None:
    threads = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    reps = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    with ExitStack() as stack:
        redis_url, mongo_url = os.environ.get("REDIS_URL"), os.environ.get("MONGODB_URL")
        if not redis_url or not mongo_url:
            redis_url = stack.enter_context(redis_server()).url
            mongo_url = stack.enter_context(mongo_server()).url
        n = threads * steps
        out: dict[bool, list[float]] = {True: [], False: []}
        for _ in range(reps):  # alternated, so load drifts hit both
            for keep in (False, True):
                out[keep].append(one(redis_url, mongo_url, threads, steps, keep) * 1000 / n)
        off, on = statistics.median(out[False]), statistics.median(out[True])
        print(f"{threads} threads x {steps} checkpoints, median of {reps}: flushing "
              f"{off:.3f} ms/checkpoint without summaries, {on:.3f} with them "
              f"(+{on - off:.3f} ms, {100 * (on - off) / off:+.0f}%)")


if __name__ == "__main__":
    main()
