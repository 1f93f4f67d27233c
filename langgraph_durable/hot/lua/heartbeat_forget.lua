--[[
  HEARTBEAT_FORGET: remove members of the heartbeat registry that are still lapsed (one
  that came back to life and beat since keeps its place).
  (hot/flusher_scripts.py: ForgetArgs; outbox/heartbeat.py: reap_plan.)

  Input:
    KEYS[1]  heartbeats_key   sorted set: consumer -> lapse time (ms, Redis clock)

    ARGV[1..]                 the members to forget

  Output:
    how many were removed

  Errors: none of its own.
]]
local rcall = redis.call
local heartbeats_key = KEYS[1]

--- @include "now_ms"

local now = now_ms()
local n = 0
for i = 1, #ARGV do
  local s = rcall('ZSCORE', heartbeats_key, ARGV[i])
  if s and tonumber(s) < now then
    rcall('ZREM', heartbeats_key, ARGV[i])
    n = n + 1
  end
end
return n
