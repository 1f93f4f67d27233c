"""Bounded connections and background tasks across event loops (issue 31).

A saver called from many short event loops (``asyncio.run`` per call, as Celery tasks and
sync web views do) releases each loop's asyncio clients with the loop: its open sockets
stay bounded however many loops it met (before: one Redis socket per loop, never closed).
A saver on asyncio clients only, used inside ``asyncio.run`` and never closed, lets
``asyncio.run`` return (before: its flusher task swallowed the shutdown's cancel in about
one run of ten and ``asyncio.run`` never returned), and what it acknowledged reaches
MongoDB through another process's flusher."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from langgraph.checkpoint.base import empty_checkpoint

from langgraph_durable import DurableSaver
from langgraph_durable.testing import unique_options

ROOT = Path(__file__).resolve().parents[1]
LOOPS = 200
"""Event loops per leak test: 1,000 took about 25 s on the 2 shared cores (each loop makes
a Redis and a MongoDB asyncio client); the leak was one socket per loop, so 200 loops
show it as plainly (about 200 sockets more, against the bound of 10)."""


def open_fds() -> int:
    """File descriptors this process holds now (sockets among them)."""
    return len(os.listdir("/proc/self/fd"))


async def _put_and_get(saver: DurableSaver, thread: str, step: int) -> None:
    config = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    stored = await saver.aput(config, empty_checkpoint(), {"step": step}, {})
    found = await saver.aget_tuple(stored)
    assert found is not None and found.metadata["step"] == step


def test_the_clients_of_many_short_event_loops_are_released_with_their_loops(
        redis_url: str, mongo_url: str) -> None:
    with DurableSaver.from_urls(redis_url, mongo_url, **unique_options()) as saver:
        asyncio.run(_put_and_get(saver, "warm", 0))  # the saver's own sockets are open now
        before = open_fds()
        for step in range(LOOPS):
            asyncio.run(_put_and_get(saver, "short-loops", step))
        assert open_fds() <= before + 10  # was before + 200: a Redis socket per loop
        assert saver.runtime.clients.loops == 0  # each loop's clients left with it


def test_strict_writes_from_short_event_loops_release_mongodb_clients_too(
        redis_url: str, mongo_url: str) -> None:
    opts = unique_options(durability="strict")  # every aput also writes MongoDB
    with DurableSaver.from_urls(redis_url, mongo_url, **opts) as saver:
        asyncio.run(_put_and_get(saver, "warm", 0))
        before = open_fds()
        for step in range(LOOPS // 2):
            asyncio.run(_put_and_get(saver, "strict-loops", step))
        assert open_fds() <= before + 10
        assert saver.runtime.clients.loops == 0
        db = saver.sync_clients.db
        assert db["checkpoints"].count_documents({"thread_id": "strict-loops"}) == LOOPS // 2


def test_the_clients_of_a_loop_closed_without_shutting_down_go_at_the_next_loop(
        redis_url: str, mongo_url: str) -> None:
    with DurableSaver.from_urls(redis_url, mongo_url, **unique_options()) as saver:
        asyncio.run(_put_and_get(saver, "warm", 0))
        before = open_fds()
        for step in range(LOOPS // 2):
            loop = asyncio.new_event_loop()  # closed with no shutdown_asyncgens
            loop.run_until_complete(_put_and_get(saver, "closed-loops", step))
            loop.close()
        assert open_fds() <= before + 10
        assert saver.runtime.clients.loops <= 1  # the last loop's, dropped at the next
        asyncio.run(_put_and_get(saver, "closed-loops", LOOPS))
        assert saver.runtime.clients.loops == 0


CHILD = textwrap.dedent("""
    import asyncio, sys

    import pymongo, redis.asyncio
    from langgraph.checkpoint.base import empty_checkpoint

    from langgraph_durable import DurableSaver

    redis_url, mongo_url, key_prefix, database, process, runs = sys.argv[1:7]


    async def run(i):
        saver = DurableSaver(redis.asyncio.Redis.from_url(redis_url),
                             pymongo.AsyncMongoClient(mongo_url), key_prefix=key_prefix,
                             database=database)
        config = {"configurable": {"thread_id": f"p{process}-t{i}", "checkpoint_ns": ""}}
        for step in range(3):
            config = await saver.aput(config, empty_checkpoint(), {"step": step}, {})
        # no aclose(), no async with: asyncio.run cancels what the saver left running


    for i in range(int(runs)):
        asyncio.run(run(i))
    print("all returned", flush=True)
""")


def test_an_unclosed_saver_on_asyncio_clients_lets_asyncio_run_return(
        redis_url: str, mongo_url: str) -> None:
    opts = unique_options()
    processes, runs = 3, 20  # before the fix about half such processes hung for good
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for n in range(processes):
        try:
            done = subprocess.run(
                [sys.executable, "-c", CHILD, redis_url, mongo_url, opts["key_prefix"],
                 opts["database"], str(n), str(runs)],
                capture_output=True, text=True, timeout=15, env=env)
        except subprocess.TimeoutExpired as exc:
            raise AssertionError(f"process {n}: asyncio.run did not return within 15 s "
                                 f"(output: {exc.stdout!r})") from None
        assert (done.returncode, done.stdout) == (0, "all returned\n"), done.stderr[-2000:]
    # every put the processes acknowledged reaches MongoDB: what their flushers did not
    # carry before their loops ended stays in the outbox for this process's flusher
    with DurableSaver.from_urls(redis_url, mongo_url, **opts) as saver:
        saver.flush(timeout_s=30)
        db = saver.sync_clients.db
        per_thread = {d["_id"]: d["n"] for d in db["checkpoints"].aggregate(
            [{"$group": {"_id": "$thread_id", "n": {"$sum": 1}}}])}
    assert per_thread == {f"p{n}-t{i}": 3 for n in range(processes) for i in range(runs)}
