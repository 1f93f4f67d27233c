"""Heartbeats of the flushers: how a flusher knows another one is dead, so that it claims
the dead one's pending entries at once instead of after ``claim_idle_s``.

Every flusher (in-process thread or task, standalone worker) is a member of the
*heartbeat registry* of its key prefix, one sorted set (``hot.keys.heartbeats_key``):
member = consumer name, score = when its heartbeat lapses, in the Redis server's clock
(ms). Beside the flush loop, not in it, a heartbeat thread (or asyncio task) refreshes it
every third of ``heartbeat_ttl_s`` (HEARTBEAT_BEAT; the scripts are
``hot/flusher_scripts.py``), so a round stalled in MongoDB or on a slow network keeps its
consumer alive; the same script answers which members have lapsed.

A lapsed member is dead (killed, or frozen for ``heartbeat_ttl_s``). The next round of a
live flusher claims the entries it holds that are idle for ``heartbeat_ttl_s`` too
(HEARTBEAT_REAP: ``XPENDING ... consumer`` then ``XCLAIM``, one script per outbox
stream), removes it from the consumer group of every stream where it holds nothing more,
and from the registry once it holds nothing anywhere (HEARTBEAT_FORGET).

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

from ..core.ops import Pipeline, Plan, ask
from ..hot.flusher_scripts import BeatArgs, ForgetArgs, ReapArgs
from ..hot.keys import CONSUMER_GROUP, heartbeats_key
from ..hot.lua import eval_command
from ..io.drivers import Clients, run_async, run_sync
from ..io.tasks import Periodic
from ..plans.context import Context
from .group import leave_plan
from .streams import Taken, _share

log = logging.getLogger("langgraph_durable.flusher")

REGISTRY_TTL_S = 7 * 24 * 3600
"""Seconds the registry outlives the last heartbeat of any flusher of its key prefix."""

LAPSED_PER_BEAT = 100
"""Most lapsed members one heartbeat reports (the rest at the next ones)."""

def beat_plan(ctx: Context, consumer: str) -> Plan[list[str]]:
    """Refresh ``consumer``'s heartbeat for ``heartbeat_ttl_s`` (HEARTBEAT_BEAT, one round
    trip); returns the other members whose heartbeat has lapsed (dead flushers)."""
    ttl_ms = max(1, int(ctx.config.heartbeat_ttl_s * 1000))
    return (yield from ask(BeatArgs(heartbeats_key(ctx.config.key_prefix), consumer, ttl_ms,
                                    REGISTRY_TTL_S * 1000, LAPSED_PER_BEAT).op()))


def reap_plan(ctx: Context, consumer: str, dead: Sequence[str], n: int
              ) -> Plan[list[Taken]]:
    """Claim for ``consumer`` the entries the ``dead`` consumers hold in every outbox
    stream (up to ``n``, idle over ``heartbeat_ttl_s``), delete them from the group where
    they hold nothing more, and forget those holding nothing anywhere (one pipeline of one
    HEARTBEAT_REAP per stream (``eval_command``: one round trip for them all), then one
    HEARTBEAT_FORGET if any holds nothing). Returns the entries taken, as
    ``streams.read_plan`` does."""
    idle_ms = max(1, int(ctx.config.heartbeat_ttl_s * 1000))
    streams = ctx.outboxes
    reaps = [ReapArgs(s, CONSUMER_GROUP, consumer, idle_ms, _share(ctx, n), dead).op()
             for s in streams]
    replies = yield Pipeline([eval_command(op) for op in reaps])
    taken: list[Taken] = []
    emptied = {c: 0 for c in dead}
    for s, op, raw in zip(streams, reaps, replies):
        reply = op.reply_of(raw)
        taken += [(s, e) for e in reply.claimed]
        for c in reply.deleted:
            emptied[c] = emptied.get(c, 0) + 1
    gone = [c for c, k in emptied.items() if k == len(streams)]
    if gone:
        yield from ask(ForgetArgs(heartbeats_key(ctx.config.key_prefix), gone).op())
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
