--[[
  STORE_SETTLE: after the flusher wrote records to MongoDB, take them out of the
  partition's unflushed index and start their hot window (hot/store_scripts.py: store_settle_op).
  A record is settled only where Redis still holds exactly the bytes written: a newer
  version stays unflushed. A settled value expires after the hot TTL (or at its own
  expiry, when sooner); a settled delete leaves Redis (MongoDB holds its tombstone).

  Input:
    KEYS[1]       dirty_key   the partition's unflushed index: field -> record
    KEYS[2..n+1]  item keys   of the records, in ARGV order

    ARGV[1]  hot_ttl_ms   how long a settled value stays in Redis (0 = until evicted by
                          its own expiry only)
    ARGV[2]  now_ms       the client's clock, for the records' own expiry
    ARGV[3..] per record: field, record (the unflushed bytes read), written (the
                          bytes written to MongoDB: the same, or with the cseq MongoDB
                          held; Redis's copy becomes these)

  Output:
    the number of records settled

  Errors: none of its own.
]]
local rcall = redis.call
local dirty_key = KEYS[1]
local hot_ttl, now = tonumber(ARGV[1]), tonumber(ARGV[2])
local settled = 0
local n = 1
for i = 3, #ARGV, 3 do
  local field, read, record = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  n = n + 1
  local item_key = KEYS[n]
  if rcall('HGET', dirty_key, field) == read then
    rcall('HDEL', dirty_key, field)
    settled = settled + 1
  end
  if rcall('GET', item_key) == read then
    if record ~= read then rcall('SET', item_key, record) end
    local exp = tonumber(string.sub(record, 50, 65))
    if string.sub(record, 49, 49) == '1' or (exp > 0 and exp <= now) then
      rcall('DEL', item_key)
    else
      local ttl = hot_ttl
      if exp > 0 and (ttl == 0 or exp - now < ttl) then ttl = exp - now end
      if ttl > 0 then rcall('PEXPIRE', item_key, ttl) end
    end
  end
end
return settled
