"""flusher="process": the saver's flusher runs as one child process it supervises."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest
import redis
from langgraph.checkpoint.base import empty_checkpoint

from langgraph_durable import DurableSaver
from langgraph_durable.errors import ConfigurationError
from langgraph_durable.testing import unique_options, wait_for


def _gone(pid: int) -> bool:
    """True once ``pid`` has exited (no process, or a zombie nobody reaped yet)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def _put(saver: DurableSaver, thread_id: str, n: int) -> None:
    cfg = {"configurable": {"thread_id": thread_id, "checkpoint_ns": ""}}
    for step in range(n):
        cfg = saver.put(cfg, empty_checkpoint(), {"step": step}, {})


def _in_mongodb(saver: DurableSaver, thread_id: str) -> int:
    cps = saver.sync_clients.db[saver.context.collections.checkpoints]
    return cps.count_documents({"thread_id": thread_id})


def test_the_process_flusher_drains_restarts_after_sigkill_and_stops_on_close(
    redis_url: str, mongo_url: str
) -> None:
    with DurableSaver.from_urls(redis_url, mongo_url,
                                **unique_options(flusher="process")) as saver:
        first = saver.stats()["flusher"]["pid"]
        assert first != os.getpid() and not _gone(first)
        _put(saver, "p1", 6)
        saver.flush(timeout_s=20)
        assert _in_mongodb(saver, "p1") == 6
        wait_for(lambda: saver.stats()["flusher"]["entries"] == 6, 10,
                 "the child's counters (reported once a second)")

        os.kill(first, signal.SIGKILL)
        wait_for(lambda: saver.stats()["flusher"]["restarts"] == 1, 30,
                 "a new flusher process")
        second = saver.stats()["flusher"]["pid"]
        assert second not in (None, first) and _gone(first)
        _put(saver, "p2", 4)
        saver.flush(timeout_s=20)
        assert _in_mongodb(saver, "p2") == 4
        wait_for(lambda: saver.stats()["flusher"]["entries"] == 10, 10,
                 "the counters of both children added up")
    assert _gone(first) and _gone(second)


async def test_the_process_flusher_serves_an_async_saver_and_aclose_stops_it(
    redis_url: str, mongo_url: str
) -> None:
    async with DurableSaver.from_urls(redis_url, mongo_url,
                                      **unique_options(flusher="process")) as saver:
        pid = (await saver.astats())["flusher"]["pid"]
        cfg = {"configurable": {"thread_id": "a1", "checkpoint_ns": ""}}
        for step in range(3):
            cfg = await saver.aput(cfg, empty_checkpoint(), {"step": step}, {})
        await saver.aflush(timeout_s=20)
        assert _in_mongodb(saver, "a1") == 3
    assert _gone(pid)


APP = textwrap.dedent("""
    import sys, time
    from langgraph_durable import DurableSaver
    saver = DurableSaver.from_urls(sys.argv[1], sys.argv[2], key_prefix=sys.argv[3],
                                   database=sys.argv[4], flusher="process")
    saver.setup()
    print(saver.stats()["flusher"]["pid"], flush=True)
    time.sleep(600)
""")


def test_the_flusher_process_exits_when_its_app_is_sigkilled(
    redis_url: str, mongo_url: str
) -> None:
    opts = unique_options()
    app = subprocess.Popen([sys.executable, "-c", APP, redis_url, mongo_url,
                            opts["key_prefix"], opts["database"]],
                           stdout=subprocess.PIPE, text=True)
    try:
        assert app.stdout is not None
        child = int(app.stdout.readline())
        assert not _gone(child)
    finally:
        app.kill()
        app.wait(10)
    wait_for(lambda: _gone(child), 30, "the orphaned flusher process to exit")


def test_a_flusher_process_refused_by_the_binding_raises_configuration_error_in_the_app(
    redis_url: str, mongo_url: str
) -> None:
    opts = unique_options(flusher="process")
    saver = DurableSaver.from_urls(redis_url, mongo_url, **opts)
    try:
        saver.check_deployment()  # nothing bound yet; the flusher starts on the first call
        other = {**opts, "database": opts["database"] + "_other", "flusher": "off"}
        with DurableSaver.from_urls(redis_url, mongo_url, **other):
            pass  # binds the key prefix to the other database
        with pytest.raises(ConfigurationError) as err:
            _put(saver, "c1", 1)
        text = str(err.value)
        assert text.startswith("the flusher process of the saver (key prefix "
                               f"{opts['key_prefix']!r}")
        assert opts["database"] + "_other" in text and "did not start" in text
        assert saver.stats()["flusher"] is None
    finally:
        saver.close(drain_timeout_s=0)


def test_flusher_process_needs_a_saver_made_from_urls(redis_url: str, mongo_url: str) -> None:
    import pymongo

    r, m = redis.Redis.from_url(redis_url), pymongo.MongoClient(mongo_url)
    try:
        with pytest.raises(ConfigurationError, match=r"flusher='process' \(key prefix "
                           r"'t[0-9a-f]+'\) starts a flusher process that connects with "
                           r"the saver's server URLs, and a saver made from clients has none"):
            DurableSaver(r, m, **unique_options(flusher="process"))
    finally:
        r.close()
        m.close()


def test_close_ends_the_process_flushers_wait_between_rounds(
        redis_url: str, mongo_url: str) -> None:
    """With several outbox streams the child waits ``flush_interval_s`` (here 30 s) after
    an empty round; ``close()`` ends that wait (SIGTERM, then ``wake`` on its stdin): the
    child leaves the consumer group itself, and is not SIGKILLed after
    ``close_drain_timeout_s`` (10 s) still holding its place there."""
    with DurableSaver.from_urls(redis_url, mongo_url, **unique_options(
            flusher="process", outbox_partitions=4, flush_interval_s=30)) as saver:
        _put(saver, "w", 2)
        saver.flush(timeout_s=20)
        pid = saver.stats()["flusher"]["pid"]
    assert _gone(pid)
    with redis.Redis.from_url(redis_url) as r:
        consumers = [g["consumers"] for s in saver.context.outboxes for g in r.xinfo_groups(s)]
    assert consumers == [0, 0, 0, 0]
