"""A ``Script`` with ``wait_replicas`` > 0: the script call and ``WAIT`` in one pipeline
on one connection to the primary that owns the script's keys (``replicated``, a plan of
two steps the drivers carry out: ``ToPrimary`` and ``ReloadSlots``), and the Redis
Cluster half of carrying out ``ToPrimary`` with blocking and with asyncio clients (off a
cluster both send an ordinary pipeline: ``io/drivers.py``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import redis.exceptions
from redis.asyncio.cluster import PipelineCommand

from ..core.ops import Op, Plan, Script
from ..errors import ReplicationTimeoutError
from .client_set import Clients


@dataclass(frozen=True)
class ToPrimary(Op[list[Any]]):
    """A step of ``replicated``: send ``commands`` in one pipeline on one connection to
    the primary owning ``key``'s slot (the only server, off a cluster), or to ``node``
    (``(host, port)``, after an ``ASK``); the reply is the list of command replies, an
    error in place of a failed command's."""

    key: str
    commands: list[list[Any]]
    node: tuple[str, int] | None = None


@dataclass(frozen=True)
class ReloadSlots(Op[None]):
    """A step of ``replicated``: reload the cluster client's slot map (``CLUSTER SLOTS``)."""


def replicated(op: Script[Any], c: Clients) -> Plan[Any]:
    """``Script`` with ``wait_replicas`` > 0, sans-I/O (the sync and async drivers only
    carry out the steps): the script call and ``WAIT`` in one pipeline; ``EVAL`` after a
    ``NOSCRIPT``; one more try after ``MOVED``/``ASK``; the slot map reloaded after a lost
    connection to a cluster node (the error is then raised). Returns the script's reply;
    raises its error, or ``ReplicationTimeoutError`` when ``WAIT`` counts too few."""
    tail = [len(op.keys), *op.keys, *op.args]
    call: list[Any] = ["EVALSHA", c.script(op.name).sha, *tail]
    wait = ["WAIT", op.wait_replicas, op.wait_timeout_ms]
    node: tuple[str, int] | None = None
    redirected = False
    while True:
        commands = [["ASKING"], call, wait] if node is not None else [call, wait]
        try:
            replies = yield ToPrimary(op.keys[0], commands, node)
        except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError):
            if c.cluster:
                try:
                    yield ReloadSlots()
                except redis.exceptions.RedisError:
                    pass  # no node answers yet: the next call reloads again
            raise
        reply, count = replies[-2:]
        if isinstance(reply, redis.exceptions.NoScriptError) and call[0] == "EVALSHA":
            call = ["EVAL", c.scripts[op.name], *tail]
            continue
        if isinstance(reply, redis.exceptions.AskError) and c.cluster and not redirected:
            redirected = True  # MovedError is an AskError too
            if isinstance(reply, redis.exceptions.MovedError):
                yield ReloadSlots()
                node = None
            else:
                node = (reply.host, int(reply.port))
            continue
        if isinstance(reply, Exception):
            raise reply
        if isinstance(count, Exception):
            raise count
        if int(count) < op.wait_replicas:
            timeout_s = op.wait_timeout_ms / 1000
            raise ReplicationTimeoutError(
                f"{op.name} (key {op.keys[0]!r}) is stored on the Redis primary, but WAIT "
                f"confirmed it on {int(count)} of the {op.wait_replicas} replica(s) "
                f"required within {timeout_s} s",
                wanted=op.wait_replicas, replicas=int(count), timeout_s=timeout_s)
        return reply


def _node(r: Any, step: ToPrimary) -> Any:
    return (r.get_node(host=step.node[0], port=step.node[1]) if step.node is not None
            else r.get_node_from_key(step.key))


def on_node_sync(c: Clients, step: ToPrimary) -> list[Any]:
    """``step`` on a blocking cluster client: a pipeline of the node's own client."""
    pipe = c.redis.get_redis_connection(_node(c.redis, step)).pipeline(transaction=False)
    for cmd in step.commands:
        pipe.execute_command(*cmd)
    return pipe.execute(raise_on_error=False)  # type: ignore[no-any-return]


async def on_node_async(c: Clients, step: ToPrimary) -> list[Any]:
    """``step`` on an asyncio cluster client: ``ClusterNode.execute_pipeline`` (one
    connection, one write)."""
    await c.redis.initialize()  # a no-op once done: needed when this is its first command
    node = _node(c.redis, step)
    if node is None:
        raise redis.exceptions.ConnectionError(f"no cluster node for {step.node}")
    cmds = [PipelineCommand(i, *cmd) for i, cmd in enumerate(step.commands)]
    await node.execute_pipeline(cmds)
    return [cmd.result for cmd in cmds]
