"""redis_min_replicas with canned replies: the put/put_writes plans ask for WAIT on their
script and name thread, checkpoint and task when too few replicas confirm; the driver's
replicated-script plan sends the script and WAIT in one pipeline and handles NOSCRIPT,
MOVED, ASK and a lost cluster node."""

from __future__ import annotations

from typing import Any

import pytest
import redis
import redis.exceptions

from langgraph_durable.core.ops import Op, Script
from langgraph_durable.errors import ReplicationTimeoutError
from langgraph_durable.io.drivers import Clients, run_with
from langgraph_durable.io.replication import ReloadSlots, ToPrimary, replicated
from langgraph_durable.plans import write

from .stepping import context, drive
from .test_write_plans import ENTRY, PARENT, cfg, prepare

SOURCE = "return 1"


def short(op: Op[Any]) -> Any:
    """The driver's answer when WAIT counted 0 of the replicas asked for."""
    assert isinstance(op, Script)
    raise ReplicationTimeoutError("short", wanted=op.wait_replicas, replicas=0,
                                  timeout_s=op.wait_timeout_ms / 1000)


def test_by_default_a_put_does_not_wait_for_replicas() -> None:
    ctx = context()
    (op,) = drive(write.put_plan(ctx, prepare(ctx)), lambda op: ENTRY).ops
    assert isinstance(op, Script) and (op.wait_replicas, op.wait_timeout_ms) == (0, 0)


def test_min_replicas_makes_the_put_script_wait_with_the_timeout_in_ms() -> None:
    ctx = context(redis_min_replicas=2, redis_wait_timeout_s=0.25)
    done = drive(write.put_plan(ctx, prepare(ctx)), lambda op: ENTRY)
    (op,) = done.ops
    assert isinstance(op, Script) and op.name == "put"
    assert (op.wait_replicas, op.wait_timeout_ms) == (2, 250)
    assert done.result["configurable"]["thread_id"] == "t"


def test_a_put_confirmed_on_too_few_replicas_raises_naming_thread_and_checkpoint() -> None:
    ctx = context(redis_min_replicas=1, redis_wait_timeout_s=0.5)
    put = prepare(ctx)
    with pytest.raises(ReplicationTimeoutError) as err:
        drive(write.put_plan(ctx, put), short)
    e = err.value
    assert (e.thread_id, e.checkpoint_ns, e.checkpoint_id, e.task_id) == (
        "t", "", put.checkpoint_id, None)
    assert (e.wanted, e.replicas, e.timeout_s) == (1, 0, 0.5)
    assert str(e) == (
        f"checkpoint {put.checkpoint_id!r} of thread 't' (ns '') IS stored on the Redis "
        "primary and in the outbox (it reaches MongoDB as usual), but WAIT confirmed it on "
        "0 replica(s), not the 1 of redis_min_replicas, within redis_wait_timeout_s=0.5: a "
        "failover of the primary now could lose it from Redis before the flush")


def test_put_writes_confirmed_on_too_few_replicas_raises_naming_the_task() -> None:
    ctx = context(redis_min_replicas=1)
    prepared = write.prepare_put_writes(ctx, cfg(PARENT), [("v", 1)], "task-7", "")
    with pytest.raises(ReplicationTimeoutError,
                       match=r"pending writes of task 'task-7' to checkpoint "
                             rf"'{PARENT}' of thread 't' \(ns ''\) IS stored") as err:
        drive(write.put_writes_plan(ctx, prepared), short)
    assert (err.value.task_id, err.value.checkpoint_id) == ("task-7", PARENT)


# ------------------------------------------------------------------ the driver's plan


class _Cluster:
    """Enough of a cluster client for ``Clients.script`` (no server is contacted)."""

    def register_script(self, source: str) -> Any:
        return redis.Redis().register_script(source)


def clients(cluster: bool = False) -> Clients:
    r: Any = _Cluster() if cluster else redis.Redis()
    return Clients(r, None, {"put": SOURCE}, cluster=cluster)


OP = Script("put", ["{k}:a", "{k}:b"], ["x", 1], wait_replicas=1, wait_timeout_ms=300)


def run(c: Clients, *replies: Any) -> tuple[Any, list[Op[Any]]]:
    """Drive ``replicated(OP)`` giving ``replies`` in turn (an exception is raised)."""
    steps: list[Op[Any]] = []
    queue = list(replies)

    def answer(step: Op[Any]) -> Any:
        steps.append(step)
        reply = queue.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return reply

    try:
        return run_with(replicated(OP, c), answer), steps
    except Exception as exc:
        return exc, steps


def sha(c: Clients) -> str:
    return str(c.script("put").sha)


EVALSHA_TAIL = [2, "{k}:a", "{k}:b", "x", 1]
WAIT = ["WAIT", 1, 300]


def test_the_script_and_wait_are_one_pipeline_to_the_primary_of_the_first_key() -> None:
    c = clients()
    result, steps = run(c, [ENTRY, 1])
    assert result == ENTRY
    assert steps == [ToPrimary("{k}:a", [["EVALSHA", sha(c), *EVALSHA_TAIL], WAIT])]


def test_wait_counting_too_few_replicas_raises_with_the_count() -> None:
    result, _ = run(clients(), [ENTRY, 0])
    assert isinstance(result, ReplicationTimeoutError)
    assert (result.wanted, result.replicas, result.timeout_s) == (1, 0, 0.3)
    assert str(result) == ("put (key '{k}:a') is stored on the Redis primary, but WAIT "
                           "confirmed it on 0 of the 1 replica(s) required within 0.3 s")


def test_noscript_sends_the_source_with_eval() -> None:
    c = clients()
    result, steps = run(c, [redis.exceptions.NoScriptError("NOSCRIPT"), 0], [ENTRY, 1])
    assert result == ENTRY
    assert steps[1] == ToPrimary("{k}:a", [["EVAL", SOURCE, *EVALSHA_TAIL], WAIT])


def test_a_script_refusal_is_raised_unchanged_whatever_wait_counted() -> None:
    refusal = redis.exceptions.ResponseError("DELETED 5000")
    result, steps = run(clients(), [refusal, 1])
    assert result is refusal and len(steps) == 1


def test_moved_reloads_the_slot_map_and_sends_once_more() -> None:
    moved = redis.exceptions.MovedError("1234 127.0.0.1:7001")
    c = clients(cluster=True)
    result, steps = run(c, [moved, 0], None, [ENTRY, 1])
    assert result == ENTRY
    call = ToPrimary("{k}:a", [["EVALSHA", sha(c), *EVALSHA_TAIL], WAIT])
    assert steps == [call, ReloadSlots(), call]


def test_a_second_moved_is_raised() -> None:
    moved = redis.exceptions.MovedError("1234 127.0.0.1:7001")
    result, steps = run(clients(cluster=True), [moved, 0], None, [moved, 0])
    assert result is moved and len(steps) == 3


def test_ask_sends_once_more_to_the_named_node_after_asking() -> None:
    c = clients(cluster=True)
    result, steps = run(c, [redis.exceptions.AskError("1234 127.0.0.1:7002"), 0],
                        ["OK", ENTRY, 1])
    assert result == ENTRY
    assert steps[1] == ToPrimary(
        "{k}:a", [["ASKING"], ["EVALSHA", sha(c), *EVALSHA_TAIL], WAIT], ("127.0.0.1", 7002))


def test_a_lost_cluster_node_reloads_the_slot_map_then_raises() -> None:
    lost = redis.exceptions.ConnectionError("Connection refused")
    result, steps = run(clients(cluster=True), lost, None)
    assert result is lost
    assert isinstance(steps[1], ReloadSlots) and len(steps) == 2


def test_a_lost_single_server_raises_without_reloading() -> None:
    lost = redis.exceptions.ConnectionError("Connection refused")
    result, steps = run(clients(), lost)
    assert result is lost and len(steps) == 1
