"""Scenario 7 (short form): SIGTERM with a backlog, with and without a handler; MongoDB
down at SIGTERM (bounded exit); idle lag bounded.

The handler that works sets a flag; the loop then leaves the ``with`` block, whose
``close()`` drains the outbox. (``sys.exit`` from the handler can hang the process at
interpreter exit, see ``python -m faults.run``: not tested here, it takes 15 s to see.)"""

from __future__ import annotations

import pytest

from faults import s7_shutdown

from .faultkit import make_env


@pytest.fixture
def env(redis_url, mongo_url, tmp_path):
    return make_env(redis_url, mongo_url, tmp_path)


def test_sigterm_without_handler_leaves_the_backlog_for_the_next_flusher(env) -> None:
    rec = s7_shutdown.sigterm(env, 0, "none")
    assert rec["exit_code"] == -15 and not rec["closed_logged"]  # no cleanup ran
    assert rec["left_at_exit"] > 0  # not drained ...
    assert rec["lost"] == 0  # ... but nothing lost: the next flusher took it


def test_sigterm_handler_closing_the_saver_drains_the_outbox(env) -> None:
    rec = s7_shutdown.sigterm(env, 1, "flag")
    assert rec["backlog_at_sigterm"] >= s7_shutdown.BACKLOG
    assert rec["exit_code"] == 0 and rec["closed_logged"]
    assert rec["left_at_exit"] == 0 and rec["missing_at_exit"] == 0
    assert rec["exit_s"] < 30  # bounded by close()'s drain timeout
    assert rec["lost"] == 0


def test_sigterm_with_mongodb_down_exits_within_the_drain_timeout(env) -> None:
    rec = s7_shutdown.sigterm(env, 2, "flag", mongo_down=True, drain_s=2.0)
    # close() logs what it leaves behind and returns; the exit code is 1 when the run in
    # progress failed on MongoDB (a subgraph step reads it: see test_fault_mongo_down)
    assert rec["exit_code"] in (0, 1) and rec["closed_logged"] and not rec["hung"]
    # drain timeout, plus up to 5 s for the flusher thread's join, plus client close
    assert rec["exit_s"] < 2.0 + 5.0 + 3.0
    assert rec["left_at_exit"] > 0 and rec["lost"] == 0  # left in Redis, flushed later


def test_idle_saver_brings_everything_to_mongodb_within_a_bound(env) -> None:
    rec = s7_shutdown.idle_lag(env, bursts=3)
    assert max(rec["lags"]) < s7_shutdown.IDLE_BOUND_S
