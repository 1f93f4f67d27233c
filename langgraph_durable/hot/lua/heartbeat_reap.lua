--[[
  HEARTBEAT_REAP: a consumer claims the entries idle over idle ms that dead consumers
  hold in an outbox stream; each dead consumer holding nothing more is deleted from the
  group. (hot/flusher_scripts.py: ReapArgs; outbox/heartbeat.py: reap_plan, one
  per stream in one pipeline, as EVAL.)

  Input:
    KEYS[1]  stream_key       an outbox stream

    ARGV[1]  group            the consumer group
    ARGV[2]  consumer         the consumer claiming
    ARGV[3]  idle             ms an entry must have been idle
    ARGV[4]  limit            most entries to claim
    ARGV[5..]                 the dead consumers

  Output:
    {{claimed entries (id, fields)}, {consumers deleted}}

  Errors: none of its own.
]]
local rcall = redis.call
local stream_key = KEYS[1]

local s, g, me, idle = stream_key, ARGV[1], ARGV[2], ARGV[3]
local left = tonumber(ARGV[4])
local taken, empty = {}, {}
for i = 5, #ARGV do
  local c = ARGV[i]
  if left > 0 then
    local ids = {}
    for _, p in ipairs(rcall('XPENDING', s, g, 'IDLE', idle, '-', '+', left, c)) do
      ids[#ids + 1] = p[1]
    end
    for a = 1, #ids, 1000 do
      local got = rcall('XCLAIM', s, g, me, idle,
                        unpack(ids, a, math.min(a + 999, #ids)))
      for _, e in ipairs(got) do
        if type(e) == 'table' then
          taken[#taken + 1] = e
          left = left - 1
        end
      end
    end
  end
  if #rcall('XPENDING', s, g, '-', '+', 1, c) == 0 then
    rcall('XGROUP', 'DELCONSUMER', s, g, c)
    empty[#empty + 1] = c
  end
end
return {taken, empty}
