--[[
  HEARTBEAT_BEAT: refresh a flusher's heartbeat in the key prefix's heartbeat registry
  and report the members whose heartbeat has lapsed (dead flushers).
  (hot/flusher_scripts.py: BeatArgs; outbox/heartbeat.py: beat_plan.)

  Input:
    KEYS[1]  heartbeats_key   sorted set: consumer -> lapse time (ms, Redis clock)

    ARGV[1]  consumer         this flusher
    ARGV[2]  ttl              ms from now its heartbeat lapses
    ARGV[3]  registry_ttl     ms the registry lives on
    ARGV[4]  limit            most lapsed members to return

  Output:
    {the members already lapsed} (up to limit)

  Errors: none of its own.
]]
local rcall = redis.call
local heartbeats_key = KEYS[1]

--- @include "now_ms"

local now = now_ms()
rcall('ZADD', heartbeats_key, now + tonumber(ARGV[2]), ARGV[1])
rcall('PEXPIRE', heartbeats_key, ARGV[3])
return rcall('ZRANGEBYSCORE', heartbeats_key, '-inf', '(' .. now, 'LIMIT', 0, ARGV[4])
