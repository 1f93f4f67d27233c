"""Lua scripts of the thread registry: Redis answering "no such thread" with certainty.

Each outbox partition has a registry hash (``hot/keys.py``: ``registry_key``) in the
partition's hash tag: field thread_id -> ``1`` for every thread a ``put`` stored (PUT adds
it in its own script; ``d`` once ``delete_thread`` removed it from both tiers), and the
field ``EPOCH_FIELD`` -> ``"<state> <nonce>"``. Only a registry whose state is
``complete`` is trusted: a thread that Redis holds no checkpoint of and that such a
registry lacks is in neither tier, so a read of it needs no MongoDB.
The epoch lives in the same hash as the thread_ids, so a Redis that lost its data (or
evicted the hash) loses both together: the hash PUT then recreates has no epoch, and a miss
asks MongoDB again. How a registry becomes complete is ``plans/registry.py``.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..core.ops import Script
from .keys import EPOCH_FIELD

_EPOCH = "'\\0epoch'"  # EPOCH_FIELD in Lua
assert EPOCH_FIELD == "\x00epoch"

# Start deciding a registry (KEYS[1]) that has no epoch, or only a pending one (a decision
# that never finished, or another saver's still under way: taking it over defeats that one,
# never the answer), or any with ARGV[2] = '1' (a rebuild): mark it 'pending <ARGV[1]>' and
# reply {'', length of the partition's outbox stream KEYS[2]}. A registry already decided
# replies {its epoch, -1}.
REGISTRY_CLAIM = f"""
local e = redis.call('HGET', KEYS[1], {_EPOCH})
if e and string.sub(e, 1, 8) ~= 'pending ' and ARGV[2] ~= '1' then return {{e, -1}} end
redis.call('HSET', KEYS[1], {_EPOCH}, 'pending ' .. ARGV[1])
return {{'', redis.call('XLEN', KEYS[2])}}
"""

# Finish a decision: set the registry's (KEYS[1]) epoch to '<ARGV[2]> <ARGV[1]>' only if it
# is still 'pending <ARGV[1]>' (this claim's): the hash was neither lost nor claimed again
# since. Replies 1 if set, else 0.
REGISTRY_SETTLE = f"""
if redis.call('HGET', KEYS[1], {_EPOCH}) ~= 'pending ' .. ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], {_EPOCH}, ARGV[2] .. ' ' .. ARGV[1])
return 1
"""

# Mark thread ARGV[1] deleted ('d') in the registry KEYS[10] once Redis holds no key of it
# (KEYS[1..9], ThreadKeys.all): after delete_thread removed both tiers. A read takes it for
# absent (no tier holds it), a write naming a checkpoint Redis lacks still asks for its
# tombstones (the field is kept: a thread the registry never saw has none). A put that ran
# since made keys again and keeps it registered. Replies 1 if marked, else 0.
REGISTRY_FORGET = """
if redis.call('EXISTS', unpack(KEYS, 1, 9)) > 0 then return 0 end
if redis.call('HGET', KEYS[10], ARGV[1]) ~= '1' then return 0 end
redis.call('HSET', KEYS[10], ARGV[1], 'd')
return 1
"""

REGISTRY_SCRIPTS = {
    "registry_claim": REGISTRY_CLAIM,
    "registry_settle": REGISTRY_SETTLE,
    "registry_forget": REGISTRY_FORGET,
}
"""Script name -> Lua source of the registry scripts (part of ``SCRIPTS``)."""

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


def claim_op(registry: str, outbox: str, nonce: str, *, force: bool = False) -> Script:
    """REGISTRY_CLAIM of one partition (``registry`` and ``outbox`` share its slot).
    Replies ``[b"", outbox length]`` when claimed, ``[epoch, -1]`` when decided before
    (``force``: claimed whatever its epoch, for a rebuild)."""
    return Script("registry_claim", [registry, outbox], [nonce, "1" if force else "0"])


def settle_op(registry: str, nonce: str, state: str) -> Script:
    """REGISTRY_SETTLE: the claim ``nonce`` decides ``state`` (``COMPLETE``/``PARTIAL``).
    Replies 1 if it still held the claim, else 0."""
    return Script("registry_settle", [registry], [nonce, state])


def forget_op(thread_keys: Sequence[str], registry: str, thread_id: str) -> Script:
    """REGISTRY_FORGET of ``thread_id`` (``thread_keys``: ``ThreadKeys.all``)."""
    return Script("registry_forget", [*thread_keys, registry], [thread_id])
