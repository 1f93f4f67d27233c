-- outbox_full(outbox_key, max): true when the outbox stream outbox_key (nil = the call
-- writes no outbox entry: false) holds max entries or more (max 0 = no bound). The
-- caller then replies redis.error_reply('OUTBOX_FULL').
local function outbox_full(outbox_key, max)
  if not outbox_key then return false end
  max = tonumber(max)
  return max > 0 and rcall('XLEN', outbox_key) >= max
end
