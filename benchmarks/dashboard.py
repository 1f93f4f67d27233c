"""Measurement (not a test): server time of the dashboard's heaviest pages.

``python -m benchmarks.dashboard [THREADS] [CHECKPOINTS]`` starts its own Redis and
SecantusDB (or uses REDIS_URL / MONGODB_URL), writes THREADS threads (default 10,000) of
one checkpoint each through the saver's ``put``/``put_writes`` (two messages each, a
``team`` metadata entry, every tenth with a pending error write) and one thread of
CHECKPOINTS checkpoints (default 1,000; a messages list growing by one message a step,
one pending write each), then times, over the served ASGI app (``create_app``, requests
through ``httpx``'s ASGI transport, so routing, the worker thread and Jinja rendering
count): the thread list's first and 100th page, a status-filtered page, "needs
attention", a metadata filter, a content search, a thread_id search, the JSON list, the
long thread's page and a diff, then the same with Redis holding nothing (MongoDB only,
after a flush). Prints the median and the worst of a few runs of each, in milliseconds,
and the MongoDB commands (PyMongo command monitoring) of one poll of the shared loop
with nothing changed, and of one open page's refresh after one thread changed.
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
from pymongo import monitoring

from langgraph_durable import DurableSaver
from langgraph_durable.dashboard import create_app, listing
from langgraph_durable.testing import (
    MongoCommandCounter,
    drop_key_prefix,
    mongo_server,
    redis_server,
)

RUNS = 5
LONG = 1_000


def _version(i: int) -> str:
    return f"{i:032}.0"


def many_threads(saver: DurableSaver, n: int) -> None:
    """``n`` threads of one checkpoint (step 0, two messages, metadata ``team``: one of
    ten); every tenth has a pending error write (status ``error``), the others are
    ``done``."""
    for i in range(n):
        cp = empty_checkpoint()
        cp["id"] = str(uuid6())
        cp["channel_values"] = {"count": i, "messages": [
            HumanMessage(f"question about topic {i}", id=f"q-{i}"),
            AIMessage(f"answer {i}", id=f"a-{i}")]}
        cp["channel_versions"] = {"count": _version(1), "messages": _version(1)}
        cfg = saver.put({"configurable": {"thread_id": f"user-{i:05d}", "checkpoint_ns": ""}},
                        cp, {"step": 0, "source": "loop", "team": f"t{i % 10}"},
                        {"count": _version(1), "messages": _version(1)})
        if i % 10 == 0:
            saver.put_writes(cfg, [("__error__", f"failure {i}")], f"task-{i}")


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




COMMANDS = MongoCommandCounter()


async def measure(saver: DurableSaver, label: str) -> None:
    """Each page through the app, then the commands of one refresh."""
    import httpx

    app = create_app(saver)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as client:
        await client.get("/")
        for name, url in (("thread list, page 1 (50 rows)", "/"),
                          ("thread list, page 100", "/?page=100"),
                          ("status filter: done, page 1", "/?status=done"),
                          ("status filter: error, page 1", "/?status=error"),
                          ("needs attention (oldest first)", "/?status=attention"),
                          ("metadata filter team=t3", "/?where=team%3Dt3"),
                          ("content search 'topic 4242'", "/?search=topic+4242"),
                          ("thread_id search 'user-0999'", "/?q=user-0999"),
                          ("thread list JSON", "/api/threads"),
                          ("long thread page", "/thread?thread_id=long"),
                          ("diff of the long thread's ends", "/diff?thread_id=long&a=0&b="
                           + str(LONG - 1))):
            report(label, name, await timed(client, url))
    feed = listing.ListFeed(saver, 1.0)
    await asyncio.to_thread(feed._look)  # the census's first read: every summary
    COMMANDS.names.clear()
    await asyncio.to_thread(feed._look)
    print(f"{label:12} one poll, nothing changed: MongoDB commands {COMMANDS.names}")
    args = listing.ListArgs()
    await asyncio.to_thread(listing.thread_list, saver, args, running_window_s=120.0,
                            census=feed.census)
    cfg: Any = {"configurable": {"thread_id": "user-00001", "checkpoint_ns": ""}}
    tup = saver.get_tuple(cfg)
    cp = dict(tup.checkpoint)
    cp["id"] = str(uuid6())
    saver.put(tup.config, cp, {"step": 1, "source": "loop"}, {})
    saver.flush()
    COMMANDS.names.clear()
    await asyncio.to_thread(feed._look)
    polled = list(COMMANDS.names)
    COMMANDS.names.clear()
    await asyncio.to_thread(listing.thread_list, saver, args, running_window_s=120.0,
                            census=feed.census)
    print(f"{label:12} one thread changed: poll {polled}, the open page's refresh "
          f"{COMMANDS.names} (whatever its 50 rows)")


def main() -> None:
    threads = int(sys.argv[1]) if len(sys.argv) > 1 else 10_000
    global LONG
    checkpoints = LONG = int(sys.argv[2]) if len(sys.argv) > 2 else 1_000
    monitoring.register(COMMANDS)
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
