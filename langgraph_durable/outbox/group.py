"""Upkeep of the outbox consumer group: a flusher leaves the group when it stops (if it has
no pending entries), live flushers remove consumers long gone, and entries the group's
last-delivered id has passed without being pending at any consumer are delivered again.

Each step is one small Lua script, so it reads and changes the group atomically.
"""

from __future__ import annotations

import logging
from typing import Any

import redis.exceptions

from ..core.ops import Pipeline, Plan
from ..hot import lua
from ..hot.keys import CONSUMER_GROUP
from ..hot.keys import dead_letter_key as keys_dead_letter_key
from ..plans.context import Context

log = logging.getLogger("langgraph_durable.flusher")

LEAVE = lua.source("group_leave")
"""The Lua of ``hot/lua/group_leave.lua``:
Delete consumer ARGV[2] of group ARGV[1] of stream KEYS[1] unless it holds pending entries
(``XGROUP DELCONSUMER`` would drop them from the group's pending list). 1 if deleted."""

UPKEEP = lua.source("group_upkeep")
"""The Lua of ``hot/lua/group_upkeep.lua``:
Remove consumers of group ARGV[1] idle over ARGV[2] ms holding nothing; then, when the
stream's oldest entry is at or before the group's last-delivered id and no consumer holds it
(delivered to a consumer since deleted, or the group's id moved past it), set the group's
id back to 0 so ``XREADGROUP >`` delivers it (and what follows) again. Returns
``{consumers removed, 1 if rewound, oldest id}``."""


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
            (done,) = yield Pipeline([["EVAL", LEAVE, 1, stream, CONSUMER_GROUP, consumer]])
        except redis.exceptions.ResponseError:  # no stream or no group: nothing to leave
            continue
        left = left and bool(done)
    return left


def upkeep_plan(ctx: Context) -> Plan[tuple[int, bool]]:
    """Run ``UPKEEP`` (see there) on every outbox stream; logs what it changed. Returns
    ``(consumers removed, whether any stream was rewound)``."""
    removed, rewound = 0, False
    for stream in ctx.outboxes:
        try:
            (reply,) = yield Pipeline([["EVAL", UPKEEP, 1, stream, CONSUMER_GROUP,
                                        stale_consumer_ms(ctx)]])
        except redis.exceptions.ResponseError as exc:
            if "NOGROUP" in str(exc) or "no such key" in str(exc).lower():
                continue
            raise
        removed += int(reply[0])
        if int(reply[0]):
            log.info("removed %d consumers of %s idle over %.0f s with nothing pending",
                     int(reply[0]), stream, stale_consumer_ms(ctx) / 1000)
        if reply[1]:
            rewound = True
            oldest: Any = reply[2]
            log.warning("outbox %s held entries from %s on that no consumer held although "
                        "the group had delivered them (a consumer deleted with its pending "
                        "entries, or the group's id moved); delivering them again", stream,
                        oldest.decode() if isinstance(oldest, bytes) else oldest)
    return removed, rewound
