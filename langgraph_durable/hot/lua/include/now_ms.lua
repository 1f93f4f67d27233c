-- now_ms(): the Redis clock (TIME) in ms since the epoch.
local function now_ms()
  local clock = rcall('TIME')
  return tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
end

-- past_ms(ms): return once the Redis clock has passed ms (a delete stamping its tombstones
-- ms waits here, well under a millisecond on average): every outbox entry added after the
-- delete (XADD '*') is then stamped after ms, and one stamped ms or earlier was added
-- before it, which the flush rounds' fence takes back (plans/fence.py). A clock that does
-- not move (none known) ends the wait after 100,000 readings.
local function past_ms(ms)
  for _ = 1, 100000 do
    if now_ms() > ms then return end
  end
end
