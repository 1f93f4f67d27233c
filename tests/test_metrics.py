"""Metrics through OpenTelemetry (SDK with an InMemoryMetricReader) and stats(): exact
counts for a known sequence of calls, the same numbers in both; logs never carry values."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import time
from typing import Any

import opentelemetry.sdk.metrics as otel_sdk
import pytest
import redis
from langgraph.checkpoint.base import empty_checkpoint
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from langgraph_durable import DeadLetteredError, DurableSaver
from langgraph_durable.io.drivers import run_sync
from langgraph_durable.metrics import INSTRUMENTS
from langgraph_durable.outbox import dead
from langgraph_durable.outbox.flusher import Flusher
from langgraph_durable.testing import mongo_server, unique_options, wait_for

SECRET = "s3cr3t-penguin-value"


def _points(reader: InMemoryMetricReader) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    data = reader.get_metrics_data()
    for rm in data.resource_metrics if data else []:
        for sm in rm.scope_metrics:
            for m in sm.metrics:
                out.setdefault(m.name, []).extend(m.data.data_points)
    return out


def _value(points: dict[str, list[Any]], name: str, **attrs: str) -> Any:
    found = [p for p in points.get(name, []) if dict(p.attributes) == attrs]
    assert len(found) <= 1
    if not found:
        return None
    p = found[0]
    return p.value if hasattr(p, "value") else (p.count, p.sum)


def _checkpoint(n: int) -> dict[str, Any]:
    cp = empty_checkpoint()
    cp["channel_values"] = {"notes": f"{SECRET} {n}"}
    cp["channel_versions"] = {"notes": f"{n:032}.0"}
    return cp


def test_known_calls_give_exact_counts_in_otel_and_stats(redis_url: str, mongo_url: str) -> None:
    reader = InMemoryMetricReader()
    provider = otel_sdk.MeterProvider(metric_readers=[reader])
    opts = unique_options()
    saver = DurableSaver.from_urls(redis_url, mongo_url, meter_provider=provider, **opts)
    with saver:
        cfg: Any = {"configurable": {"thread_id": "m", "checkpoint_ns": ""}}
        for n in range(3):
            cp = _checkpoint(n)
            cfg = saver.put(cfg, cp, {"step": n}, {"notes": cp["channel_versions"]["notes"]})
        saver.put_writes(cfg, [("a", SECRET), ("b", 2)], "task-1")
        saver.put_writes(cfg, [("a", 3)], "task-2")
        assert saver.get_tuple({"configurable": {"thread_id": "m"}}) is not None  # hot
        assert saver.get_tuple({"configurable": {"thread_id": "nobody"}}) is None  # miss
        saver.flush()
        with redis.Redis.from_url(redis_url) as r:
            r.delete(*saver.context.keys("m").all)
        assert saver.get_tuple({"configurable": {"thread_id": "m"}}) is not None  # durable
        db = saver.sync_clients.db
        cols = saver.context.collections
        durable_bytes = sum(len(d["checkpoint"]) + len(d["metadata"])
                            for d in db[cols.checkpoints].find())
        durable_bytes += sum(len(d["data"]) for d in db[cols.blobs].find())
        durable_bytes += sum(len(e["data"]) for d in db[cols.checkpoints].find()
                             for e in d.get("vals", []))  # the values inside checkpoints
        durable_bytes += sum(len(w["data"]) for d in db[cols.writes].find()
                             for w in d["writes"])  # a document per put_writes call
    stats = saver.stats()  # flusher stopped: nothing changes any more
    pts = _points(reader)

    assert stats["puts"] == 3 == _value(pts, "langgraph_durable.puts")
    assert stats["put_writes"] == 2 == _value(pts, "langgraph_durable.put_writes")
    assert (stats["reads_hot"], stats["reads_durable"], stats["reads_miss"]) == (1, 1, 1)
    for tier in ("hot", "durable", "miss"):
        assert _value(pts, "langgraph_durable.reads", tier=tier) == 1
    f = stats["flush"]
    assert f["entries"] == 5 and f["dead_letters"] == 0 and f["retries"] == 0
    # checkpoints (their small values inside), writes (one document per put_writes call)
    assert f["documents"] == 3 + 2
    assert _value(pts, "langgraph_durable.flush.documents") == 5
    assert f["batch_size"]["sum"] == 5 and f["lag_s"]["count"] == 5
    assert _value(pts, "langgraph_durable.flush.batch_size") == (f["batches"], 5)
    count, total = _value(pts, "langgraph_durable.flush.lag")
    assert count == 5 and total == pytest.approx(f["lag_s"]["sum"])
    assert stats["bytes_written"]["durable"] == durable_bytes
    assert _value(pts, "langgraph_durable.bytes_written", tier="durable") == durable_bytes
    hot_bytes = stats["bytes_written"]["hot"]
    assert hot_bytes > durable_bytes
    assert _value(pts, "langgraph_durable.bytes_written", tier="hot") == hot_bytes
    assert stats["outbox_length"] is None  # read live from Redis: none after close()
    assert stats["flusher"]["outbox_length_seen"] == 0
    assert _value(pts, "langgraph_durable.outbox.length", outbox=saver.context.outbox) == 0
    assert _value(pts, "langgraph_durable.flush.errors", kind="retry") is None
    ops = stats["op_duration_s"]
    assert ops["hot.put"]["count"] == 3 and ops["hot.put_writes"]["count"] == 2
    assert ops["hot.page"]["count"] == 3  # each get_tuple: one page script
    for key, summary in ops.items():  # every operation: the same count and time in both
        tier, _, op = key.partition(".")
        count, total = _value(pts, "langgraph_durable.op.duration", tier=tier, op=op)
        assert count == summary["count"] and total == pytest.approx(summary["sum"])
    assert set(pts) <= set(INSTRUMENTS)


def test_flush_retries_and_dead_letters_are_counted_and_logged_without_values(
    redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="langgraph_durable")
    reader = InMemoryMetricReader()
    provider = otel_sdk.MeterProvider(metric_readers=[reader])
    opts = unique_options(server_selection_timeout_s=0.3)
    with mongo_server() as ms:
        cp = _checkpoint(0)
        # a corrupt record in Redis, written before any flusher runs: it can never be
        # written to MongoDB -> dead letter
        with DurableSaver.from_urls(redis_url, ms.url, **{**opts, "flusher": "off"}) as w:
            w.put({"configurable": {"thread_id": "d2", "checkpoint_ns": ""}}, cp,
                  {"step": 0, "note": SECRET}, {"notes": cp["channel_versions"]["notes"]})
            keys = w.context.keys("d2")
            with redis.Redis.from_url(redis_url) as r:
                member = r.hkeys(keys.cp)[0]
                r.hset(keys.cp, member, b"\xc1" + SECRET.encode())
        saver = DurableSaver.from_urls(redis_url, ms.url, meter_provider=provider, **opts)
        with saver:
            with pytest.raises(DeadLetteredError):  # the flush waited for it: named
                saver.flush()
            # an operator drops it (``dead-letters drop``): later flushes are green
            letters = run_sync(dead.list_plan(saver.context), saver.sync_clients)
            run_sync(dead.drop_plan(saver.context, letters), saver.sync_clients)
            ms.stop()  # MongoDB down: rounds fail and are retried
            cfg: Any = {"configurable": {"thread_id": "d", "checkpoint_ns": ""}}
            saver.put(cfg, cp, {"step": 0, "note": SECRET},
                      {"notes": cp["channel_versions"]["notes"]})
            wait_for(lambda: saver.stats()["flush"]["retries"] >= 2, 20, "two flush retries",
                     pause_s=0.05)
            ms.start()
            saver.flush(timeout_s=30)
            stats = saver.stats()
    pts = _points(reader)
    retries = stats["flush"]["retries"]
    assert retries >= 2
    assert _value(pts, "langgraph_durable.flush.errors", kind="retry") == retries
    assert stats["flush"]["dead_letters"] == 1
    assert _value(pts, "langgraph_durable.flush.errors", kind="dead_letter") == 1
    records = [r for r in caplog.records if r.name.startswith("langgraph_durable")]
    assert any(r.levelno == logging.WARNING and "retrying" in r.getMessage() for r in records)
    assert any(r.levelno == logging.ERROR and "dead" in r.getMessage() for r in records)
    for r in records:
        if r.levelno >= logging.INFO:
            assert SECRET not in r.getMessage()


def test_backlog_is_logged_as_a_warning(redis_url: str, mongo_url: str,
                                        caplog: pytest.LogCaptureFixture) -> None:
    from langgraph_durable.io.drivers import run_sync
    from langgraph_durable.outbox.flusher import Flusher
    from langgraph_durable.plans.context import Context

    caplog.set_level(logging.WARNING, logger="langgraph_durable")
    opts = unique_options(flusher="off", max_outbox=4)
    with DurableSaver.from_urls(redis_url, mongo_url, **opts) as saver:
        cfg: Any = {"configurable": {"thread_id": "b", "checkpoint_ns": ""}}
        for n in range(4):
            cfg = saver.put(cfg, empty_checkpoint(), {"step": n}, {})
        one_at_a_time = saver.context.config.model_copy(update={"flush_batch_size": 1})
        f = Flusher(Context(one_at_a_time, saver.context.serde, saver.context.queryable))
        clients = saver.sync_clients
        assert clients is not None
        lengths = []
        for _ in range(4):
            f._account(run_sync(f._round_plan(), clients))
            lengths.append(f.metrics.outbox_length)
    assert lengths == [3, 2, 1, 0]
    warnings = [r.getMessage() for r in caplog.records if "outbox backlog" in r.getMessage()]
    assert warnings == ["outbox backlog: 3 entries waiting for MongoDB (max_outbox=4), "
                        + warnings[0].split("), ")[1]]  # once: rate-limited


def test_without_opentelemetry_the_saver_keeps_plain_stats(redis_url: str,
                                                           mongo_url: str) -> None:
    code = f"""
import sys
sys.modules["opentelemetry"] = None  # as if the otel extra were not installed
from langgraph.checkpoint.base import empty_checkpoint
from langgraph_durable import DurableSaver, metrics
assert metrics._otel is None
with DurableSaver.from_urls({redis_url!r}, {mongo_url!r}, key_prefix="nootel",
                            database="nootel") as s:
    s.put({{"configurable": {{"thread_id": "t", "checkpoint_ns": ""}}}}, empty_checkpoint(),
          {{}}, {{}})
    s.get_tuple({{"configurable": {{"thread_id": "t"}}}})
    s.flush()
    st = s.stats()
    s.delete_thread("t")
assert st["puts"] == 1 and st["reads_hot"] == 1 and st["op_duration_s"]["hot.put"]["count"] == 1
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"


async def test_async_calls_are_counted_the_same_way(redis_url: str, mongo_url: str) -> None:
    reader = InMemoryMetricReader()
    provider = otel_sdk.MeterProvider(metric_readers=[reader])
    opts = unique_options(flusher="off")
    async with DurableSaver.from_urls(redis_url, mongo_url, meter_provider=provider,
                                      **opts) as saver:
        cfg: Any = {"configurable": {"thread_id": "a", "checkpoint_ns": ""}}
        for n in range(2):
            cfg = await saver.aput(cfg, empty_checkpoint(), {"step": n}, {})
        await saver.aput_writes(cfg, [("x", 1)], "task")
        assert await saver.aget_tuple({"configurable": {"thread_id": "a"}}) is not None
        assert await saver.aget_tuple({"configurable": {"thread_id": "zz"}}) is None
        stats = saver.stats()
    pts = _points(reader)
    assert (stats["puts"], stats["put_writes"]) == (2, 1)
    assert (stats["reads_hot"], stats["reads_miss"]) == (1, 1)
    assert _value(pts, "langgraph_durable.puts") == 2
    assert _value(pts, "langgraph_durable.reads", tier="miss") == 1
    assert stats["op_duration_s"]["hot.put"]["count"] == 2
    assert _value(pts, "langgraph_durable.op.duration", tier="hot", op="put")[0] == 2


def test_stats_outbox_length_is_live_during_a_mongodb_outage(redis_url) -> None:
    # MongoDB down: the flusher never completes a round, so what it last saw (nothing)
    # says nothing; stats() reads the outbox now and shows it full
    from langgraph_durable import OutboxFullError
    from langgraph_durable.testing import mongo_server

    with mongo_server() as ms:
        with DurableSaver.from_urls(redis_url, ms.url, max_outbox=30, on_outbox_full="raise",
                                    server_selection_timeout_s=0.3,
                                    **unique_options()) as saver:
            ms.stop()
            cfg = {"configurable": {"thread_id": "full", "checkpoint_ns": ""}}
            with pytest.raises(OutboxFullError):
                for n in range(31):
                    cp = _checkpoint(n)
                    cfg = saver.put(cfg, cp, {"step": n},
                                    {"notes": cp["channel_versions"]["notes"]})
            stats = saver.stats()
            assert stats["outbox_length"] == 30
            assert stats["flusher"]["outbox_length_seen"] in (None, 0)
            ms.start()
            saver.flush(timeout_s=60)
            assert saver.stats()["outbox_length"] == 0


async def test_astats_reads_the_outbox_length_with_asyncio_clients(asaver) -> None:
    cfg = {"configurable": {"thread_id": "a", "checkpoint_ns": ""}}
    cp = _checkpoint(1)
    await asaver.aput(cfg, cp, {"step": 1}, {"notes": cp["channel_versions"]["notes"]})
    await asaver.aflush()
    assert (await asaver.astats())["outbox_length"] == 0


@pytest.mark.parametrize("api", ["sync", "async"])
def test_stats_right_after_flush_count_the_round_that_drained_the_outbox(
        redis_url: str, mongo_url: str, monkeypatch, api: str) -> None:
    # the round acknowledges its entries, then returns and is counted: a flusher thread
    # held up between the two (a busy machine) made stats() after flush() miss the round.
    # The hold-up is provoked here: counting the round waits 0.5 s
    count = Flusher._account

    def slow_account(self: Flusher, stats: Any) -> None:
        if stats.entries:
            time.sleep(0.5)
        count(self, stats)

    monkeypatch.setattr(Flusher, "_account", slow_account)

    async def run() -> dict[str, Any]:
        async with DurableSaver.from_urls(redis_url, mongo_url,
                                          **unique_options()) as saver:
            for i in range(3):
                await saver.aput({"configurable": {"thread_id": f"t{i}",
                                                   "checkpoint_ns": ""}},
                                 empty_checkpoint(), {"step": 0}, {})
            await saver.aflush(timeout_s=30)
            return await saver.astats()

    if api == "async":
        stats = asyncio.run(run())
    else:
        with DurableSaver.from_urls(redis_url, mongo_url, **unique_options()) as saver:
            for i in range(3):
                saver.put({"configurable": {"thread_id": f"t{i}", "checkpoint_ns": ""}},
                          empty_checkpoint(), {"step": 0}, {})
            saver.flush(timeout_s=30)
            stats = saver.stats()
    assert stats["outbox_length"] == 0
    assert stats["flusher"]["entries"] == 3
