"""Heartbeats of the flushers: how a flusher knows another one is dead, so that it claims
the dead one's pending entries at once instead of after ``claim_idle_s``.

Every flusher (in-process thread or task, standalone worker) is a member of the
*heartbeat registry* of its key prefix, one sorted set (``hot.keys.heartbeats_key``):
member = consumer name, score = when its heartbeat lapses, in the Redis server's clock
(ms). Beside the flush loop, not in it, a heartbeat thread (or asyncio task) refreshes it
every third of ``heartbeat_ttl_s`` (``BEAT``), so a round stalled in MongoDB or on a slow
network keeps its consumer alive; the same script answers which members have lapsed.

A lapsed member is dead (killed, or frozen for ``heartbeat_ttl_s``). The next round of a
live flusher claims the entries it holds that are idle for ``heartbeat_ttl_s`` too
(``REAP``: ``XPENDING ... consumer`` then ``XCLAIM``, one script per outbox stream),
removes it from the consumer group of every stream where it holds nothing more, and from
the registry once it holds nothing anywhere (``FORGET``).

A consumer that is not a member (made by an older version, by hand, or with a registry
lost with Redis's data) was never seen to beat: it is not taken for dead, and its entries
are claimed after ``claim_idle_s`` as before (``streams.claim_plan``). A flusher that
stops cleanly leaves the registry; one that stops still holding entries marks itself
lapsed, so the others take them at once.

On a Redis Cluster the registry is one key in its own slot: only single-key scripts and
plain commands touch it, never a script with a stream.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from ..core.ops import Pipeline, Plan
from ..hot import lua
from ..hot.keys import CONSUMER_GROUP, heartbeats_key
from ..io.drivers import Clients, normalise, run_async, run_sync
from ..io.tasks import Periodic
from ..plans.context import Context
from .group import leave_plan
from .streams import Taken, _share

log = logging.getLogger("langgraph_durable.flusher")

REGISTRY_TTL_S = 7 * 24 * 3600
"""Seconds the registry outlives the last heartbeat of any flusher of its key prefix."""

LAPSED_PER_BEAT = 100
"""Most lapsed members one heartbeat reports (the rest at the next ones)."""

BEAT = lua.source("heartbeat_beat")
"""The Lua of ``hot/lua/heartbeat_beat.lua``:
Registry KEYS[1]: member ARGV[1]'s heartbeat lapses ARGV[2] ms from now (server time);
the registry lives ARGV[3] ms more. Returns up to ARGV[4] members already lapsed."""

FORGET = lua.source("heartbeat_forget")
"""The Lua of ``hot/lua/heartbeat_forget.lua``:
Remove the members ARGV of registry KEYS[1] that are still lapsed (one that came back
to life and beat since keeps its place). Returns how many were removed."""

REAP = lua.source("heartbeat_reap")
"""The Lua of ``hot/lua/heartbeat_reap.lua``:
Stream KEYS[1], group ARGV[1]: consumer ARGV[2] claims up to ARGV[4] entries idle over
ARGV[3] ms that the dead consumers ARGV[5..] hold; each dead consumer holding nothing
more is deleted from the group. Returns ``{claimed entries, consumers deleted}``."""


def beat_plan(ctx: Context, consumer: str) -> Plan[list[str]]:
    """Refresh ``consumer``'s heartbeat for ``heartbeat_ttl_s`` (``BEAT``, one round trip);
    returns the other members whose heartbeat has lapsed (dead flushers)."""
    ttl_ms = max(1, int(ctx.config.heartbeat_ttl_s * 1000))
    (lapsed,) = yield Pipeline([["EVAL", BEAT, 1, heartbeats_key(ctx.config.key_prefix),
                                 consumer, ttl_ms, REGISTRY_TTL_S * 1000, LAPSED_PER_BEAT]])
    return [_text(m) for m in lapsed or []]


def reap_plan(ctx: Context, consumer: str, dead: Sequence[str], n: int
              ) -> Plan[list[Taken]]:
    """Claim for ``consumer`` the entries the ``dead`` consumers hold in every outbox
    stream (up to ``n``, idle over ``heartbeat_ttl_s``), delete them from the group where
    they hold nothing more, and forget those holding nothing anywhere (one pipeline of one
    ``REAP`` per stream, then one ``FORGET`` if any holds nothing). Returns the entries
    taken, as ``streams.read_plan`` does."""
    idle_ms = max(1, int(ctx.config.heartbeat_ttl_s * 1000))
    streams = ctx.outboxes
    replies = yield Pipeline([["EVAL", REAP, 1, s, CONSUMER_GROUP, consumer, idle_ms,
                               _share(ctx, n), *dead] for s in streams])
    taken: list[Taken] = []
    emptied = {c: 0 for c in dead}
    for s, (entries, empty) in zip(streams, replies):
        taken += [(s, e) for e in normalise("XRANGE", entries)]
        for c in empty:
            emptied[_text(c)] = emptied.get(_text(c), 0) + 1
    gone = [c for c, k in emptied.items() if k == len(streams)]
    if gone:
        yield Pipeline([["EVAL", FORGET, 1, heartbeats_key(ctx.config.key_prefix), *gone]])
    return taken


def stop_plan(ctx: Context, consumer: str) -> Plan[bool]:
    """A flusher's last step: leave the consumer group (``group.leave_plan``), then the
    registry (``ZREM``); one still holding entries stays in the group and is marked lapsed
    (score 0) so live flushers claim them at once. True if it left the group."""
    left = yield from leave_plan(ctx, consumer)
    key = heartbeats_key(ctx.config.key_prefix)
    yield Pipeline([["ZREM", key, consumer] if left else ["ZADD", key, 0, consumer]])
    return left


class Heartbeat(Periodic):
    """The heartbeat of one flusher's consumer, beating beside its flush loop: every third
    of ``heartbeat_ttl_s`` in a daemon thread (``start_thread``, sync clients) or an
    asyncio task (``start_task``, async clients). ``take_dead()`` hands the lapsed members
    the last beat reported to the next flush round (each report once). A beat that fails
    (Redis down) is logged and retried at the next period; the flusher's rounds fail
    meanwhile too."""

    def __init__(self, ctx: Context, consumer: str) -> None:
        super().__init__()
        self.ctx = ctx
        self.consumer = consumer
        self.name = f"langgraph-durable-heartbeat-{consumer}"
        self.period_s = ctx.config.heartbeat_ttl_s / 3
        self.beats = 0
        """Heartbeats sent that Redis answered."""
        self._dead: tuple[str, ...] = ()
        self._failing = False

    def take_dead(self) -> tuple[str, ...]:
        """The members the last beat found lapsed (dead flushers), once: ``()`` until the
        next beat reports again."""
        dead, self._dead = self._dead, ()
        return dead

    def _beaten(self, lapsed: list[str]) -> None:
        self.beats += 1
        self._dead = tuple(lapsed)
        if self._failing:
            self._failing = False
            log.info("flusher %s: heartbeat answered again", self.consumer)

    def _missed(self, exc: Exception) -> None:
        if not self._failing:  # once per streak: the rounds log their own failures
            self._failing = True
            log.warning("flusher %s: heartbeat failed (retrying every %.2f s): %s",
                        self.consumer, self.period_s, exc)

    def beat(self, clients: Clients) -> None:
        """One heartbeat now, with blocking ``clients`` (errors logged, not raised)."""
        try:
            self._beaten(run_sync(beat_plan(self.ctx, self.consumer), clients))
        except Exception as exc:
            self._missed(exc)

    async def abeat(self, clients: Clients) -> None:
        """Async ``beat``."""
        try:
            self._beaten(await run_async(beat_plan(self.ctx, self.consumer), clients))
        except Exception as exc:
            self._missed(exc)

    tick = beat
    atick = abeat


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)
