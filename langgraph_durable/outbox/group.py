"""Upkeep of the outbox consumer group: a flusher leaves the group when it stops (if it has
no pending entries), live flushers remove consumers long gone, and entries the group's
last-delivered id has passed without being pending at any consumer are delivered again.

Each step is one small Lua script (GROUP_LEAVE, GROUP_UPKEEP: ``hot/flusher_scripts.py``),
so it reads and changes the group atomically.
"""

from __future__ import annotations

import logging

import redis.exceptions

from ..core.ops import Pipeline, Plan, ask
from ..errors import CorruptRecordError
from ..hot.flusher_scripts import LeaveArgs, UpkeepArgs
from ..hot.keys import CONSUMER_GROUP
from ..hot.keys import dead_letter_key as keys_dead_letter_key
from ..plans.context import Context

log = logging.getLogger("langgraph_durable.flusher")

def ensure_group_plan(ctx: Context) -> Plan[None]:
    """Create every outbox stream and its consumer group if missing (idempotent)."""
    for stream in ctx.outboxes:
        try:
            yield Pipeline([["XGROUP", "CREATE", stream, CONSUMER_GROUP, "0", "MKSTREAM"]])
        except redis.exceptions.ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise


def dead_letter_key(ctx: Context) -> str:
    """Stream of outbox entries that could not be written (with the error), for operators
    (``hot.keys.dead_letter_key``)."""
    return keys_dead_letter_key(ctx.config.key_prefix)


def stale_consumer_ms(ctx: Context) -> int:
    """Milliseconds a consumer holding nothing may stay idle before live flushers remove it:
    10 x ``claim_idle_s`` (a flusher pausing after failures is idle 2 x ``claim_idle_s``;
    a consumer removed while alive is re-created by its next ``XREADGROUP``)."""
    return int(ctx.config.claim_idle_s * 10_000)


def leave_plan(ctx: Context, consumer: str) -> Plan[bool]:
    """Remove ``consumer`` from the group of every outbox stream unless it holds pending
    entries there; True if it left them all."""
    left = True
    for stream in ctx.outboxes:
        try:
            done = yield from ask(LeaveArgs(stream, CONSUMER_GROUP, consumer).op())
        except (redis.exceptions.ResponseError, CorruptRecordError):
            continue  # no stream or no group (or not a stream: WRONGTYPE): nothing to leave
        left = left and done
    return left


def upkeep_plan(ctx: Context) -> Plan[tuple[int, bool]]:
    """Run GROUP_UPKEEP (``hot.flusher_scripts.UpkeepArgs``) on every outbox stream; logs
    what it changed. Returns ``(consumers removed, whether any stream was rewound)``."""
    removed, rewound = 0, False
    for stream in ctx.outboxes:
        try:
            reply = yield from ask(UpkeepArgs(stream, CONSUMER_GROUP,
                                              stale_consumer_ms(ctx)).op())
        except redis.exceptions.ResponseError as exc:
            if "NOGROUP" in str(exc) or "no such key" in str(exc).lower():
                continue
            raise
        removed += reply.removed
        if reply.removed:
            log.info("removed %d consumers of %s idle over %.0f s with nothing pending",
                     reply.removed, stream, stale_consumer_ms(ctx) / 1000)
        if reply.rewound:
            rewound = True
            log.warning("outbox %s held entries from %s on that no consumer held although "
                        "the group had delivered them (a consumer deleted with its pending "
                        "entries, or the group's id moved); delivering them again", stream,
                        reply.oldest)
    return removed, rewound
