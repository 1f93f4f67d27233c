-- now_ms(): the Redis clock (TIME) in ms since the epoch.
local function now_ms()
  local clock = rcall('TIME')
  return tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
end
