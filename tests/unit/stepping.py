"""Driving plans without servers: canned replies in, recorded operations out.

``drive(plan, answer)`` runs a plan to its end: ``answer(op)`` returns the reply to each
operation it yields (or raises the error the server would have raised); ``Sleep`` is
answered by advancing the ``FakeClock`` instead of waiting. Every operation is recorded in
the returned ``Drive`` (``ops``), so a test asserts what the plan asked for, in order.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from langgraph_durable.config import DurableConfig
from langgraph_durable.core.ops import Op, Parallel, Plan, Script, Sleep
from langgraph_durable.errors import ScriptRefused
from langgraph_durable.io.drivers import run_with
from langgraph_durable.plans.context import Clock, Context, partitions_for


class FakeClock(Clock):
    """A clock that moves only when told (``advance``) or when a plan sleeps."""

    def __init__(self, monotonic_s: float = 1000.0,
                 wall_ns: int = 1_700_000_000_000_000_000) -> None:
        self.now_s = monotonic_s
        self.wall_ns = wall_ns

    def monotonic(self) -> float:
        return self.now_s

    def time_ns(self) -> int:
        return self.wall_ns

    def advance(self, seconds: float) -> None:
        """Move both clocks ``seconds`` forward."""
        self.now_s += seconds
        self.wall_ns += int(seconds * 1e9)


def context(*, cluster: bool = False, **options: Any) -> Context:
    """A context for unit tests: prefix ``u``, JsonPlusSerializer, a ``FakeClock``."""
    cfg = DurableConfig(**{"key_prefix": "u", "database": "unit", **options})
    return Context(cfg, JsonPlusSerializer(), queryable=True, cluster=cluster,
                   clock=FakeClock(), partitions=partitions_for(cfg, cluster))


def refused(text: str, script: str = "put") -> ScriptRefused:
    """The error the drivers raise for a Lua script's ``redis.error_reply(text)`` (a code
    its operation declares): ``ScriptRefused``."""
    return ScriptRefused.parse(script, text)


@dataclass
class Drive:
    """What one plan did: its operations in order (a ``Parallel``'s own operations are
    recorded after it) and its return value."""

    ops: list[Op[Any]] = field(default_factory=list)
    result: Any = None

    def kinds(self) -> list[str]:
        """Names of the operations: the script name for a ``Script``, else the class."""
        return [getattr(op, "name", None) or type(op).__name__ for op in self.ops]


def drive(plan: Plan[Any], answer: Callable[[Op[Any]], Any],
          clock: FakeClock | None = None, record: Drive | None = None) -> Drive:
    """Run ``plan`` to its end with ``answer`` as the servers (see the module); pass
    ``record`` to keep the operations of a plan that raises."""
    out = record if record is not None else Drive()

    def reply(op: Op[Any]) -> Any:
        out.ops.append(op)
        if isinstance(op, Sleep):
            if clock is not None:
                clock.advance(op.seconds)
            return None
        if isinstance(op, Parallel):
            return [reply(o) for o in op.ops]
        got = answer(op)
        if isinstance(op, Script) and isinstance(got, (list, tuple, bytes, int)):
            return op.reply_of(got)  # a raw reply, decoded as the drivers decode it
        return got

    out.result = run_with(plan, reply)
    return out
