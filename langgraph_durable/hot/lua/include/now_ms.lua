-- now_ms(): the Redis clock (TIME) in ms since the epoch.
local function now_ms()
  local clock = rcall('TIME')
  return tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
end

-- delete_ms(outbox_key): the time a delete stamps its tombstones with: the Redis clock, or
-- the time of the last id the thread's outbox stream gave (nil: not looked up) when that
-- is later (an entry stamped ahead of the clock: generation_entry), so every entry added
-- before the delete is stamped at or before it, and the fence takes it back.
local function delete_ms(outbox_key)
  local now = now_ms()
  if not outbox_key then return now end
  local info = redis.pcall('XINFO', 'STREAM', outbox_key)
  if type(info) == 'table' and not info.err then
    for i = 1, #info - 1, 2 do
      if info[i] == 'last-generated-id' then
        local ms = tonumber(string.match(info[i + 1], '^(%d+)'))
        if ms and ms > now then return ms end
      end
    end
  end
  return now
end
