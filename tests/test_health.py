"""The health verdict (``inspection/health.py``) on real servers: failing while entries
wait and no flusher is alive, ok once one runs; degraded by a dead letter, by a Redis
that lost the key prefix's data, by an outbox near ``max_outbox``; failing with MongoDB
unreachable."""

from __future__ import annotations

from typing import Any

import pytest
from langgraph.checkpoint.base import empty_checkpoint

from langgraph_durable import DurableSaver
from langgraph_durable.inspection import health
from langgraph_durable.outbox.group import dead_letter_key
from langgraph_durable.testing import drop_key_prefix, unique_options, wait_for


def _put_many(saver: DurableSaver, thread: str, n: int) -> None:
    cfg = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    for i in range(n):
        cp = empty_checkpoint()
        cp["channel_values"] = {"v": i}
        cp["channel_versions"] = {"v": str(i + 1)}
        cfg = saver.put(cfg, cp, {"step": i}, {"v": str(i + 1)})


def _verdict(saver: DurableSaver, **options: Any) -> health.Verdict:
    return health.check(saver.context, saver.sync_clients, health.HealthOptions(**options))


def test_entries_waiting_without_a_live_flusher_fail_and_a_running_flusher_makes_it_ok(
        redis_url: str, mongo_url: str) -> None:
    opts = unique_options()
    with DurableSaver.from_urls(redis_url, mongo_url, flusher="off", **opts) as off:
        off.setup()
        quiet = _verdict(off)
        assert quiet.level == "degraded"
        assert quiet.reasons == [("degraded", "no flusher is alive: entries written now will "
                                  "wait in Redis until one starts")]
        _put_many(off, "t1", 3)
        v = _verdict(off)
        assert v.level == "failing" and v.value == 2
        assert v.reasons[0] == ("failing", "no flusher is alive and 3 outbox entries wait "
                                "for MongoDB: start a worker (langgraph-durable flusher) or a "
                                "saver with a flusher")
        with DurableSaver.from_urls(redis_url, mongo_url, **opts) as on:
            on.flush()
            ok = wait_for(lambda: (lambda x: x if x.level == "ok" else None)(_verdict(off)),
                          15, "the verdict to become ok")
            assert ok.reasons == [] and ok.as_dict() == {"verdict": "ok", "value": 0,
                                                         "reasons": []}


def test_a_dead_letter_makes_the_verdict_degraded(saver: DurableSaver) -> None:
    _put_many(saver, "t1", 1)
    saver.flush()
    assert _verdict(saver).level == "ok"
    key = dead_letter_key(saver.context)
    saver.sync_clients.redis.xadd(key, {"entry": "1-0", "error": "test"})
    v = _verdict(saver)
    assert v.level == "degraded"
    assert v.reasons == [("degraded", f"1 dead letter(s) in {key}: outbox entries that "
                          "could not be written to MongoDB")]


def test_a_redis_that_lost_the_prefix_keys_is_reported_while_mongodb_holds_threads(
        saver: DurableSaver) -> None:
    _put_many(saver, "t1", 2)
    saver.flush()
    assert _verdict(saver).level == "ok"
    drop_key_prefix(saver.sync_clients.redis, saver.context.config.key_prefix)
    assert saver.get_tuple({"configurable": {"thread_id": "t1"}}) is not None  # from MongoDB
    v = _verdict(saver)
    assert v.level == "degraded"
    texts = [t for _, t in v.reasons]
    assert any(t.startswith("Redis lost this key prefix's data (it lacks the key prefix's "
                            "binding and the epoch of 1 thread registry while MongoDB says "
                            "the prefix was set up)") for t in texts), texts


def test_an_outbox_near_max_outbox_is_degraded_and_a_full_one_failing(
        redis_url: str, mongo_url: str) -> None:
    opts = unique_options(max_outbox=5)
    with DurableSaver.from_urls(redis_url, mongo_url, flusher="off", **opts) as off:
        _put_many(off, "t1", 4)
        v = _verdict(off, max_flush_lag_s=3600)
        assert ("degraded", "an outbox partition holds 4 of its 5 entries of max_outbox "
                "(80% or more)") in v.reasons
        _put_many(off, "t2", 1)
        v = _verdict(off, max_flush_lag_s=3600)
        assert ("failing", "an outbox partition is full (5 of its 5 entries of "
                "max_outbox): puts are refused") in v.reasons


def test_mongodb_unreachable_is_failing(redis_url: str) -> None:
    opts = unique_options(server_selection_timeout_s=0.5)
    saver = DurableSaver.from_urls(redis_url, "mongodb://127.0.0.1:9/", flusher="off",
                                   **opts)
    try:
        v = _verdict(saver)
        assert v.level == "failing"
        assert v.reasons[0][1].startswith("MongoDB does not answer: ServerSelectionTimeout")
    finally:
        saver.close()


def test_health_options_are_checked() -> None:
    with pytest.raises(ValueError, match="outbox_warn_ratio must be in"):
        health.HealthOptions(outbox_warn_ratio=0)


def test_the_dashboard_sample_records_the_verdict_as_the_health_gauge(
        redis_url: str, mongo_url: str) -> None:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    from langgraph_durable.dashboard import tiers

    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])

    def gauge(outbox: str) -> Any:
        data = reader.get_metrics_data()
        return [p.value for rm in data.resource_metrics for sm in rm.scope_metrics
                for m in sm.metrics if m.name == "langgraph_durable.health"
                for p in m.data.data_points if dict(p.attributes) == {"outbox": outbox}]

    with DurableSaver.from_urls(redis_url, mongo_url, meter_provider=provider,
                                **unique_options()) as saver:
        _put_many(saver, "t1", 1)
        saver.flush()
        samples = tiers.LagSamples()
        tiers.sample(saver, samples)
        assert gauge(saver.context.outbox) == [0]
        saver.sync_clients.redis.xadd(dead_letter_key(saver.context), {"error": "test"})
        tiers.sample(saver, samples)
        assert gauge(saver.context.outbox) == [1]
        assert tiers.tiers_data(saver, samples)["health"]["value"] == 1
    with pytest.raises(ValueError, match="a health value is 0, 1 or 2"):
        saver.runtime.metrics.health(3)
