"""Measurement (not a test): server time of the dashboard's two heaviest pages.

``python -m benchmarks.dashboard [THREADS] [CHECKPOINTS]`` starts its own Redis and
SecantusDB (or uses REDIS_URL / MONGODB_URL), writes THREADS threads (default 10,000) of
one checkpoint each and one thread of CHECKPOINTS checkpoints (default 1,000; a
messages list growing by one message a step, one pending write each), then times, over
the served ASGI app (``create_app``, requests through ``httpx``'s ASGI transport, so
routing, the worker thread and Jinja rendering count): the list of every thread (read in
the background), the thread list's first and 100th page, a search, the JSON list, the
long thread's page (timeline of every checkpoint and the state at the latest) and a diff,
then the same with Redis holding nothing (MongoDB only, after a flush). Prints the
median and the worst of a few runs of each, in milliseconds.
"""

from __future__ import annotations

import asyncio
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
from langgraph_durable.dashboard import create_app
from langgraph_durable.inspection import storage
from langgraph_durable.testing import drop_key_prefix, mongo_server, redis_server

RUNS = 5
LONG = 1_000


def _version(i: int) -> str:
    return f"{i:032}.0"


def many_threads(saver: DurableSaver, n: int) -> None:
    """``n`` threads of one checkpoint (step 0, a small state)."""
    for i in range(n):
        cp = empty_checkpoint()
        cp["id"] = str(uuid6())
        cp["channel_values"] = {"count": i}
        cp["channel_versions"] = {"count": _version(1)}
        saver.put({"configurable": {"thread_id": f"user-{i:05d}", "checkpoint_ns": ""}},
                  cp, {"step": 0, "source": "loop"}, {"count": _version(1)})


def long_thread(saver: DurableSaver, thread: str, n: int) -> None:
    """One thread of ``n`` checkpoints, its messages list one message longer each step."""
    cfg: Any = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    messages: list[Any] = []
    for i in range(n):
        messages = [*messages, (HumanMessage if i % 2 == 0 else AIMessage)(
            f"message {i} " + "words " * 20, id=f"m-{i}")]
        cp = empty_checkpoint()
        cp["id"] = str(uuid6())
        cp["channel_values"] = {"messages": messages, "count": i}
        versions = {"messages": _version(i + 1), "count": _version(i + 1),
                    "branch:to:agent": _version(i + 1)}
        cp["channel_versions"] = versions
        cp["updated_channels"] = ["messages", "count", "branch:to:agent"]  # type: ignore[typeddict-unknown-key]
        cfg = saver.put(cfg, cp, {"step": i, "source": "loop"}, versions)
        saver.put_writes(cfg, [("count", i + 1)], f"task-{i}")


async def timed(client: Any, url: str) -> list[float]:
    out = []
    for _ in range(RUNS):
        t0 = time.perf_counter()
        r = await client.get(url)
        out.append((time.perf_counter() - t0) * 1000)
        if r.status_code != 200:
            raise RuntimeError(f"{url}: HTTP {r.status_code}")
    return out


def report(label: str, name: str, ms: list[float]) -> None:
    print(f"{label:12} {name:42} median {statistics.median(ms):8.1f} ms   "
          f"worst {max(ms):8.1f} ms", flush=True)


async def measure(saver: DurableSaver, label: str) -> None:
    """The list of every thread (``storage.all_threads``, which the app re-reads in the
    background every ``index_ttl_s``), then each page through the app with that list
    read."""
    import httpx

    ms = []
    for _ in range(3):
        t0 = time.perf_counter()
        await asyncio.to_thread(storage.all_threads, saver)
        ms.append((time.perf_counter() - t0) * 1000)
    report(label, "list of every thread (background)", ms)
    app = create_app(saver, index_ttl_s=3600)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://bench") as client:
        await client.get("/")  # the first page reads the list of threads
        for name, url in (("thread list, page 1 (50 rows)", "/"),
                          ("thread list, page 100", "/?page=100"),
                          ("thread list, search 'user-0999'", "/?q=user-0999"),
                          ("thread list JSON", "/api/threads"),
                          ("long thread page (timeline + state)", "/thread?thread_id=long"),
                          ("diff of the long thread's ends", "/diff?thread_id=long&a=0&b="
                           + str(LONG - 1))):
            report(label, name, await timed(client, url))


def main() -> None:
    threads = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    global LONG
    checkpoints = LONG = int(sys.argv[2]) if len(sys.argv) > 2 else 1_000
    with ExitStack() as stack:
        redis_url, mongo_url = os.environ.get("REDIS_URL"), os.environ.get("MONGODB_URL")
        if not redis_url or not mongo_url:
            redis_url = stack.enter_context(redis_server()).url
            mongo_url = stack.enter_context(mongo_server()).url
        tag = uuid.uuid4().hex[:8]
        prefix, database = f"bd{tag}", f"bench_dash_{tag}"
        with DurableSaver.from_urls(redis_url, mongo_url, key_prefix=prefix,
                                    database=database) as saver:
            try:
                t0 = time.perf_counter()
                many_threads(saver, threads)
                long_thread(saver, "long", checkpoints)
                saver.flush(timeout_s=900)
                print(f"wrote {threads} threads and one of {checkpoints} checkpoints "
                      f"(flushed) in {time.perf_counter() - t0:.1f} s")
                asyncio.run(measure(saver, "hot+durable"))
                drop_key_prefix(saver.sync_clients.redis, prefix)
                asyncio.run(measure(saver, "MongoDB only"))
            finally:
                drop_key_prefix(saver.sync_clients.redis, prefix)
                saver.sync_clients.db.client.drop_database(database)


if __name__ == "__main__":
    main()
