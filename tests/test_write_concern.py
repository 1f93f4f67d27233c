"""The MongoDB write concern of every write the saver makes (DurableConfig.write_concern_*)."""

from __future__ import annotations

import pytest
import redis
from langgraph.checkpoint.base import empty_checkpoint
from pymongo import WriteConcern

from langgraph_durable import DurableSaver
from langgraph_durable.core.ops import BulkWriteFailed
from langgraph_durable.errors import ConfigurationError, SaverClosedError
from langgraph_durable.io.drivers import run_sync
from langgraph_durable.outbox.flusher import dead_letter_key, flush_batch_plan
from langgraph_durable.testing import unique_options


def _put(saver: DurableSaver, thread: str) -> None:
    cp = empty_checkpoint()
    cp["channel_values"] = {"v": 1}
    cp["channel_versions"] = {"v": 1}
    saver.put({"configurable": {"thread_id": thread, "checkpoint_ns": ""}}, cp, {"step": 0},
              {"v": 1})


def test_default_write_concern_is_majority_with_journal(saver: DurableSaver) -> None:
    expected = WriteConcern(w="majority", j=True, wtimeout=10_000)
    assert saver.sync_clients.db.write_concern == expected
    _put(saver, "t")
    saver.flush()  # SecantusDB takes w:majority, j:true like a standalone mongod
    assert saver.sync_clients.db["checkpoints"].count_documents({"thread_id": "t"}) == 1


def test_an_unmet_write_concern_keeps_entries_in_the_outbox(redis_url, mongo_url) -> None:
    # w=3 on a single server: MongoDB applies the write but answers with a write concern
    # error; the flusher must not acknowledge (the write is not durable as configured)
    opts = unique_options(flusher="off")
    with DurableSaver.from_urls(redis_url, mongo_url, **opts):
        pass  # indexes and consumer group (setup itself needs the write concern met)
    s = DurableSaver.from_urls(redis_url, mongo_url, write_concern_w=3,
                               write_concern_timeout_s=0.2, close_drain_timeout_s=0, **opts)
    s.check_deployment()  # set up above: its own set-up would fail on w=3 (meta's write)
    try:
        r: redis.Redis = s.sync_clients.redis
        _put(s, "t")
        with pytest.raises(BulkWriteFailed) as err:
            run_sync(flush_batch_plan(s.context, "c", block_ms=0, claim=False), s.sync_clients)
        assert err.value.write_concern_errors[0].code_name == "UnsatisfiableWriteConcern"
        assert r.xlen(s.context.outbox) == 1  # still there, for the next round
        assert r.xlen(dead_letter_key(s.context)) == 0  # a retryable error, not poison
        assert r.ttl(s.context.keys("t").cp) == -1  # not settled
    finally:
        s.close()


@pytest.mark.parametrize("bad, message", [
    (0, "write_concern_w must be 'majority' or a number from 1 to 50 .* got 0 "),
    ("all", "got 'all'"),
    (True, "got True"),
    (None, "got None"),
    (51, "got 51"),
    (10**30, "got 1000000000000000000000000000000"),
])
def test_bad_write_concern_is_refused(bad, message) -> None:
    with pytest.raises(ConfigurationError, match=message):
        DurableSaver(redis=redis.Redis(), mongo=None, write_concern_w=bad)


@pytest.mark.parametrize("timeout, message", [
    (0.0004, "0.0004 would round to 0 \\(no limit\\)"),
    (float("inf"), "less than or equal to 86400"),
    (-1, "greater than or equal to 0"),
])
def test_bad_write_concern_timeout_is_refused(timeout, message) -> None:
    with pytest.raises(ConfigurationError, match=message):
        DurableSaver(redis=redis.Redis(), mongo=None, write_concern_timeout_s=timeout)


@pytest.mark.parametrize("prefix", ["app:7", "a{b}", "a b", ""])
def test_key_prefixes_that_could_collide_are_refused(prefix) -> None:
    # with a ':' prefixes "app" and "app:7" made the same keys for threads "5:hello" and
    # "hello"; the length-prefixed tag is unique only if the prefix cannot hold ':'
    with pytest.raises(ConfigurationError, match="key_prefix"):
        DurableSaver(redis=redis.Redis(), mongo=None, key_prefix=prefix)


def test_write_concern_w_from_text() -> None:
    from langgraph_durable.config import DurableConfig

    assert DurableConfig(write_concern_w="2").write_concern == WriteConcern(
        w=2, j=True, wtimeout=10_000)
    assert DurableConfig(write_concern_w=1, write_concern_j=False,
                         write_concern_timeout_s=0).write_concern == WriteConcern(w=1, j=False)


def test_a_failed_setup_leaves_no_flusher_running(redis_url, mongo_url) -> None:
    import threading

    def flushers() -> int:
        return sum(t.name.startswith("langgraph-durable-flusher") and t.is_alive()
                   for t in threading.enumerate())

    before = flushers()
    saver = DurableSaver.from_urls(redis_url, mongo_url, write_concern_w=3,
                                   write_concern_timeout_s=0.2, **unique_options())
    with pytest.raises(Exception, match="Not enough data-bearing nodes"):
        with saver:
            pass
    assert flushers() == before  # the flusher started by setup's first call was stopped
    with pytest.raises(SaverClosedError):
        saver.get_tuple({"configurable": {"thread_id": "t"}})


def test_a_flusher_that_keeps_failing_lets_a_healthy_one_take_its_entries(
        redis_url, mongo_url) -> None:
    # a live flusher whose writes always fail (here: w=3 cannot be met) must not hold the
    # entries it read forever: after failing for claim_idle_s it pauses, they go idle, and
    # another flusher claims them. claim_idle_s is above the retry backoff (2 s at most),
    # else the entries would go idle between two retries anyway
    from faults.tiers import wait_for

    opts = unique_options(claim_idle_s=2.5)
    with DurableSaver.from_urls(redis_url, mongo_url, flusher="off", **opts):
        pass  # indexes and consumer group
    bad = DurableSaver.from_urls(redis_url, mongo_url, write_concern_w=3,
                                 write_concern_timeout_s=0.1, close_drain_timeout_s=0, **opts)
    bad.check_deployment()  # set up above: its own set-up would fail on w=3 (meta's write)
    try:
        _put(bad, "held")  # starts bad's flusher, which reads the entry and fails
        r: redis.Redis = bad.sync_clients.redis
        wait_for(lambda: r.xpending(bad.context.outbox, "flushers")["pending"] == 1, 10,
                 "the failing flusher to hold the entry")
        # it failed twice (its retry too) before the healthy one starts: a stall of the
        # failing one's thread longer than claim_idle_s after its first failure would
        # otherwise let the healthy one take the entry before any retry
        wait_for(lambda: bad.runtime.flusher is not None and bad.runtime.flusher.errors >= 2,
                 30, "the failing flusher to fail twice")
        with DurableSaver.from_urls(redis_url, mongo_url, **opts) as good:
            good.flush(timeout_s=20)  # timed out before: the entry never went idle
            assert good.sync_clients.db["checkpoints"].count_documents({"thread_id": "held"}) == 1
        assert bad.runtime.flusher is not None and bad.runtime.flusher.errors >= 2
        # names the cause, quotes no document; the first failed insert was applied (only
        # its write concern failed), so a retry also meets its own duplicate key
        assert bad.runtime.flusher.last_error in (
            f"BulkWriteFailed: {n} write errors, codes {codes}; write concern errors: "
            "100 UnsatisfiableWriteConcern" for n, codes in ((0, []), (1, [11000])))
    finally:
        bad.close()
