"""Lua scripts of the effect journal (``langgraph_durable.effects``): one round trip each.

The journal of a thread is the hash ``ThreadKeys.fx`` (``<tag>:fx``, in the thread's slot):
field ``task_ns NUL task_id NUL name NUL n`` (``n`` = the call number of ``name`` within
the task's execution) -> *entry*: 8 decimal digits of version (1, 2, ... per write of the
field), one state letter, then a msgpack body (``plans/effects.py``):

=====  ==============================================================================
state  meaning
=====  ==============================================================================
``s``  *started*: the effect's function was about to be called (no result yet)
``d``  *done*: the body holds the result (serialized by the saver's serializer)
``e``  *failed*, journaled (``journal_errors=True``): the body names the exception
``c``  *cleared*: the function raised and the error is not journaled; as if absent
=====  ==============================================================================

The hash's field ``!`` says Redis holds every entry of the thread (set when the journal
starts on a thread Redis holds all of: ``meta.complete``); the ``meta`` field ``fx`` says
the thread has had a journal in Redis. A miss in a journal without ``!`` is asked of
MongoDB (``<collection_prefix>effects``) before anything is called.

Each write adds an outbox entry ``[ "fx", "", [field], [], bytes ]`` and raises the
thread's unflushed count (``meta.dirty``) like a checkpoint's, so the flusher copies it
(``plans/effects.copy_effects_plan``) and ACK_SETTLE lowers the count again. The journal
key never expires while it holds unflushed entries (PERSIST); the flusher gives it the
thread's ``hot_ttl_s`` once it copied them.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..core.ops import Script

TRUST_FIELD = "!"
"""Journal field: Redis holds every journal entry of the thread."""

_STORE = r"""
local function store(field, body, payload)
  local cur = redis.call('HGET', KEYS[1], field)
  local v = tonumber(ARGV[5]) or 0
  if cur then v = math.max(v, tonumber(string.sub(cur, 1, 8)) or 0) end
  local val = string.format('%08d', v + 1) .. body
  redis.call('HSET', KEYS[1], field, val)
  redis.call('PERSIST', KEYS[1])
  if redis.call('HSETNX', KEYS[2], 'born', 0) == 1 then  -- as PUT: this incarnation
    local clock = redis.call('TIME')
    redis.call('HSET', KEYS[2], 'born', tonumber(clock[1]) * 1000
               + math.floor(tonumber(clock[2]) / 1000))
  end
  redis.call('HINCRBY', KEYS[2], 'dirty', 1)
  redis.call('HSET', KEYS[2], 'fx', 1)
  redis.call('XADD', KEYS[3], '*', 't', ARGV[6], 'p', payload)
  return val
end
"""

# Look up an effect and, when Redis can tell it has none, mark it started.
# KEYS: the journal, the thread's meta, its outbox stream. ARGV: field, started body
# (state letter and msgpack), outbox payload, max entries of the outbox stream (0 = no
# bound), version floor (from MongoDB; 0), thread_id, checked ('1': MongoDB was asked and
# holds no live entry), the entry MongoDB holds ('' = none).
# Returns {'found', entry} | {'new', entry} | {'ask'} (Redis cannot tell: ask MongoDB,
# then call again with checked = '1'); OUTBOX_FULL as PUT.
EFFECT_BEGIN = _STORE + r"""
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if cur and string.sub(cur, 9, 9) ~= 'c' then return {'found', cur} end
if ARGV[8] ~= '' then  -- MongoDB holds it: keep it here too (it is flushed already)
  local fresh = redis.call('EXISTS', KEYS[1]) == 0
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[8])
  if fresh and tonumber(ARGV[9]) > 0 then redis.call('EXPIRE', KEYS[1], tonumber(ARGV[9])) end
  return {'found', ARGV[8]}
end
local trusted = cur ~= false or ARGV[7] == '1'
  or redis.call('HEXISTS', KEYS[1], '!') == 1
if not trusted and redis.call('EXISTS', KEYS[1]) == 0
    and redis.call('HEXISTS', KEYS[2], 'fx') == 0 then
  local c = redis.call('HGET', KEYS[2], 'complete')
  if c == '1' or c == '2' then  -- the thread started here and Redis holds all of it
    redis.call('HSET', KEYS[1], '!', 1)
    trusted = true
  end
end
if not trusted then return {'ask'} end
local max = tonumber(ARGV[4])
if max > 0 and redis.call('XLEN', KEYS[3]) >= max then
  return redis.error_reply('OUTBOX_FULL')
end
return {'new', store(ARGV[1], ARGV[2], ARGV[3])}
"""

# Journal an effect's outcome (done, failed or cleared) over its started entry.
# KEYS and ARGV[1..6] as EFFECT_BEGIN (ARGV[2]: the outcome's body; ARGV[4] unused: the
# effect happened, its outcome is written whatever the outbox holds). Returns the entry.
EFFECT_END = _STORE + r"""
return store(ARGV[1], ARGV[2], ARGV[3])
"""

EFFECT_SCRIPTS = {"effect_begin": EFFECT_BEGIN, "effect_end": EFFECT_END}
"""Script name -> Lua source of the journal's scripts (part of ``hot.scripts.SCRIPTS``)."""


def begin_op(keys: Sequence[str], thread_id: str, field: str, body: bytes, payload: bytes,
             max_outbox: int, *, floor: int = 0, checked: bool = False,
             known: bytes = b"", hot_ttl_s: int = 0) -> Script:
    """EFFECT_BEGIN on ``keys`` = (journal, meta, outbox stream) of ``thread_id``."""
    return Script("effect_begin", list(keys), [
        field, body, payload, max_outbox, floor, thread_id, "1" if checked else "0", known,
        hot_ttl_s])


def end_op(keys: Sequence[str], thread_id: str, field: str, body: bytes,
           payload: bytes) -> Script:
    """EFFECT_END on ``keys`` = (journal, meta, outbox stream) of ``thread_id``."""
    return Script("effect_end", list(keys), [field, body, payload, 0, 0, thread_id])
