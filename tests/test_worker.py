"""The standalone flusher worker drains the outbox of an application with flusher="off"."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest
from langgraph.checkpoint.base import empty_checkpoint

from langgraph_durable import DurableSaver
from langgraph_durable.hot.keys import CONSUMER_GROUP, heartbeats_key
from langgraph_durable.testing import unique_options, wait_for


def _start_worker(redis_url: str, mongo_url: str, opts: dict, *flags: str) -> subprocess.Popen:
    """``python -m langgraph_durable.outbox.worker`` on these servers, key prefix and
    database, with ``flags``."""
    return subprocess.Popen(
        [sys.executable, "-m", "langgraph_durable.outbox.worker", "--redis-url", redis_url,
         "--mongo-url", mongo_url, "--key-prefix", opts["key_prefix"],
         "--database", opts["database"], *flags],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def test_worker_process_drains_the_outbox_and_exits_cleanly_on_sigterm(
    redis_url: str, mongo_url: str
) -> None:
    opts = unique_options(flusher="off")
    with DurableSaver.from_urls(redis_url, mongo_url, **opts) as saver:
        worker = _start_worker(redis_url, mongo_url, opts)
        try:
            cfg = {"configurable": {"thread_id": "w", "checkpoint_ns": ""}}
            for _ in range(5):
                cfg = saver.put(cfg, empty_checkpoint(), {"step": 1}, {})
            saver.flush(timeout_s=20)
            db = saver.sync_clients.db
            cps = db[saver.context.collections.checkpoints]
            assert cps.count_documents({"thread_id": "w"}) == 5
        finally:
            worker.send_signal(signal.SIGTERM)
            out, err = worker.communicate(timeout=20)
        assert worker.returncode == 0, err
        assert "5 entries" in out


@pytest.mark.parametrize("argv, message", [
    (["--write-concern-w", "0"], "error: invalid option --write-concern-w: Value error, "
     "write_concern_w must be 'majority' or a number from 1 to 50"),
    (["--flush-batch-size", "0"], "error: invalid option --flush-batch-size: Input should "
     "be greater than or equal to 1"),
    (["--key-prefix", "a:b"], "error: invalid option --key-prefix: String should match"),
])
def test_bad_worker_options_are_one_line_errors(argv, message, capsys) -> None:
    from langgraph_durable.outbox.worker import run

    assert run(["--redis-url", "redis://127.0.0.1:1", "--mongo-url",
                "mongodb://127.0.0.1:1", *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith(message) and err.count("\n") == 1, err


def test_worker_takes_outbox_partitions_and_drains_every_partition(
    redis_url: str, mongo_url: str
) -> None:
    # an application with outbox_partitions=4 on a single Redis: a worker started with
    # the same --outbox-partitions reads all four streams
    opts = unique_options(flusher="off", outbox_partitions=4)
    with DurableSaver.from_urls(redis_url, mongo_url, **opts) as saver:
        threads = [f"p{i}" for i in range(12)]
        for t in threads:
            saver.put({"configurable": {"thread_id": t, "checkpoint_ns": ""}},
                      empty_checkpoint(), {"step": 1}, {})
        r = saver.sync_clients.redis
        assert sum(1 for s in saver.context.outboxes if r.xlen(s)) >= 2  # spread
        worker = _start_worker(redis_url, mongo_url, opts, "--outbox-partitions", "4")
        try:
            wait_for(lambda: sum(r.xlen(s) for s in saver.context.outboxes) == 0, 30,
                     "the worker to drain every partition")
            cps = saver.sync_clients.db[saver.context.collections.checkpoints]
            assert cps.count_documents({}) == 12
        finally:
            worker.send_signal(signal.SIGTERM)
            out, err = worker.communicate(timeout=20)
        assert worker.returncode == 0, err
        assert "12 entries" in out


def test_a_worker_sigtermed_mid_backlog_exits_0_holding_nothing_and_loses_nothing(
    redis_url: str, mongo_url: str
) -> None:
    # a rolling restart: the worker stops after its round, leaves no entry pending on its
    # consumer (or is marked lapsed so live flushers take them at once), and loses nothing
    opts = unique_options(flusher="off")
    with DurableSaver.from_urls(redis_url, mongo_url, **opts) as saver:
        cfg = {"configurable": {"thread_id": "rolling", "checkpoint_ns": ""}}
        for i in range(300):
            cfg = saver.put(cfg, empty_checkpoint(), {"step": i}, {})
        r, ctx = saver.sync_clients.redis, saver.context
        cps = saver.sync_clients.db[ctx.collections.checkpoints]
        worker = _start_worker(redis_url, mongo_url, opts, "--flush-batch-size", "1")
        try:
            wait_for(lambda: cps.count_documents({}) > 0, 30, "the worker's first round")
        finally:
            worker.send_signal(signal.SIGTERM)
            out, err = worker.communicate(timeout=20)
        assert worker.returncode == 0, err
        moved = int(out.split(": ", 1)[1].split(" entries")[0])
        assert 0 < moved == cps.count_documents({})
        pending = r.xpending(ctx.outbox, CONSUMER_GROUP)["pending"]
        beats = dict(r.zrange(heartbeats_key(ctx.config.key_prefix), 0, -1, withscores=True))
        assert pending == 0 and beats == {}  # it left the group and the heartbeat registry
        assert r.xlen(ctx.outbox) == 300 - moved
    with DurableSaver.from_urls(redis_url, mongo_url, **{**opts, "flusher": "auto"}) as s:
        s.flush(timeout_s=60)
        assert s.sync_clients.db[ctx.collections.checkpoints].count_documents({}) == 300


def test_sigterm_ends_the_workers_wait_between_rounds_at_once(
    redis_url: str, mongo_url: str
) -> None:
    # with several outbox streams an idle worker waits flush_interval_s between rounds
    # (60 s here); SIGTERM ends that wait: the worker exits 0 well before then
    opts = unique_options(flusher="off", outbox_partitions=4)
    with DurableSaver.from_urls(redis_url, mongo_url, **opts) as saver:
        saver.put({"configurable": {"thread_id": "idle", "checkpoint_ns": ""}},
                  empty_checkpoint(), {"step": 1}, {})
        r, ctx = saver.sync_clients.redis, saver.context
        worker = _start_worker(redis_url, mongo_url, opts, "--outbox-partitions", "4",
                               "--flush-interval-s", "60")
        try:
            wait_for(lambda: sum(r.xlen(s) for s in ctx.outboxes) == 0, 30,
                     "the worker's first round")
            # the round ends a few ms after its last delete; then the worker waits 60 s.
            # (A slower round only makes the signal land in it: the test cannot fail
            # falsely, it then does not tell the wait from the round.)
            time.sleep(1.0)
        finally:
            worker.send_signal(signal.SIGTERM)
            out, err = worker.communicate(timeout=20)
        assert worker.returncode == 0, err
        assert "1 entries in 2 rounds" in out  # its round, one empty round, the wait
        assert r.zcard(heartbeats_key(ctx.config.key_prefix)) == 0  # it left the registry
