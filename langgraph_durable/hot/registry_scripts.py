"""Lua scripts of the thread registry: Redis answering "no such thread" with certainty.

Each outbox partition has a registry hash (``hot/keys.py``: ``registry_key``) in the
partition's hash tag: field thread_id -> ``1`` for every thread a ``put`` stored (PUT adds
it in its own script; ``d`` once ``delete_thread`` removed it from both tiers), and the
field ``EPOCH_FIELD`` -> ``"<state> <nonce>"``. Only a registry whose state is
``complete`` is trusted: a thread that Redis holds no checkpoint of and that such a
registry lacks is in neither tier, so a read of it needs no MongoDB.
The epoch lives in the same hash as the thread_ids, so a Redis that lost its data (or
evicted the hash) loses both together: the hash PUT then recreates has no epoch, and a miss
asks MongoDB again. How a registry becomes complete is ``plans/thread_registry.py``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..core.ops import RedisReply, Script
from . import lua
from .keys import EPOCH_FIELD

REGISTRY_SCRIPTS = lua.sources(("registry_claim", "registry_decide", "registry_forget"))
"""Script name -> Lua source of the registry scripts (``hot/lua/registry_*.lua``; part of
``SCRIPTS``). Their Lua names ``EPOCH_FIELD`` as ``'\\0epoch'``."""
assert EPOCH_FIELD == "\x00epoch"


@dataclass(frozen=True, slots=True)
class ClaimReply:
    """REGISTRY_CLAIM's reply: ``epoch`` (``b""`` when this call claimed the registry, else
    the epoch it was decided with) and ``outbox_length`` (the partition's outbox stream
    when claimed; -1 when decided before)."""

    epoch: bytes
    outbox_length: int

    @property
    def claimed(self) -> bool:
        """True when this call claimed the registry."""
        return not self.epoch

    @classmethod
    def of(cls, raw: RedisReply) -> ClaimReply:
        """From the raw reply ``[epoch or "", length or -1]``."""
        epoch, length = raw
        return cls(bytes(epoch), int(length))


COMPLETE = "complete"
"""Epoch state: every thread either tier holds is in the registry."""
PARTIAL = "partial"
"""Epoch state: the registry may lack threads (an upgraded deployment, a Redis that lost
its data): a miss asks MongoDB."""


def epoch_complete(epoch: bytes | str | None) -> bool:
    """True when ``epoch`` (the registry's ``EPOCH_FIELD`` value, None = no epoch) says the
    registry is complete."""
    if isinstance(epoch, bytes):
        epoch = epoch.decode("utf-8", "replace")
    return epoch is not None and epoch.startswith(COMPLETE + " ")


def claim_op(registry: str, outbox: str, nonce: str, *,
             force: bool = False) -> Script[ClaimReply]:
    """REGISTRY_CLAIM of one partition (``registry`` and ``outbox`` share its slot)
    (``force``: claimed whatever its epoch, for a rebuild)."""
    return Script("registry_claim", [registry, outbox], [nonce, "1" if force else "0"],
                  decode=ClaimReply.of)


def decide_op(registry: str, nonce: str, state: str) -> Script[bool]:
    """REGISTRY_DECIDE: the claim ``nonce`` decides ``state`` (``COMPLETE``/``PARTIAL``).
    Replies True if it still held the claim."""
    return Script("registry_decide", [registry], [nonce, state], decode=bool)


def forget_op(thread_keys: Sequence[str], registry: str, thread_id: str) -> Script[bool]:
    """REGISTRY_FORGET of ``thread_id`` (``thread_keys``: ``ThreadKeys.all``). Replies True
    if it marked the thread deleted."""
    return Script("registry_forget", [*thread_keys, registry], [thread_id], decode=bool)
