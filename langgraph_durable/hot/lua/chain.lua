--[[
  CHAIN: walk the parent chain of a checkpoint for some channels: per ancestor its id,
  index (cv), write values and the non-empty blob values of still-open channels; a channel
  closes at its first stored value. (hot/scripts.py: chain_op, ChainReply, ChainStatus.)

  Input:
    KEYS[1]                   cp (unused)
    KEYS[2]  index_key        cv: member -> msgpack [parent checkpoint_id, blob fields...]
    KEYS[3]                   idx (unused)
    KEYS[4]  blobs_key        bl: blob field -> channel value envelope
    KEYS[5]  writes_key       w: write field -> write envelope
    KEYS[6]  write_index_key  wi: sorted set of write fields
    KEYS[7..8]                ns, meta (unused)
    KEYS[9]  items_key        it: digest -> item or node bytes

    ARGV[1]  ns               checkpoint_ns
    ARGV[2]  checkpoint_id    the target
    ARGV[3]  max_steps        at most this many ancestors
    ARGV[4..]                 the channels

  Output:
    {status, rows, next, {item digests}, {item values}}
    rows: {{ancestor id, cv, {write values}, {blob field, value, ...}, {missing blob
    fields}}, ...}; status 0 = done, 1 = the next ancestor is not in Redis (next is its
    id), 2 = a blob Redis lacks must be looked up (next = the ancestor's id; its row lists
    the fields), 3 = the step limit was reached (next = the last ancestor's id), 4 = the
    target itself is not in Redis (rows empty; next = the target). The items are those the
    manifests among the rows' values name (as PAGE's).

  Errors: none of its own.
]]
local rcall = redis.call
local index_key, blobs_key, writes_key = KEYS[2], KEYS[4], KEYS[5]
local write_index_key, items_key = KEYS[6], KEYS[9]

--- @include "items"

local function walk()
local ns, maxn = ARGV[1], tonumber(ARGV[3])
local open, nopen = {}, 0
for i = 4, #ARGV do open[ARGV[i]] = true; nopen = nopen + 1 end
local cv = rcall('HGET', index_key, ns .. '\0' .. ARGV[2])
if not cv then return {4, {}, ARGV[2]} end
local parent = cmsgpack.unpack(cv)[1]
local rows, n = {}, 0
while parent ~= '' and nopen > 0 do
  if n >= maxn then return {3, rows, rows[#rows][1]} end
  local m = ns .. '\0' .. parent
  local pcv = rcall('HGET', index_key, m)
  if not pcv then return {1, rows, parent} end
  local parts = cmsgpack.unpack(pcv)
  local wf = rcall('ZRANGEBYLEX', write_index_key, '[' .. m .. '\0', '(' .. m .. '\1')
  local wv = {}
  if #wf > 0 then wv = rcall('HMGET', writes_key, unpack(wf)) end
  local seeds, missing, closing = {}, {}, {}
  for j = 2, #parts do
    local f = parts[j]
    local a = string.find(f, '\0', 1, true)
    local b = string.find(f, '\0', a + 1, true)
    local ch = string.sub(f, a + 1, b - 1)
    if open[ch] then
      local v = rcall('HGET', blobs_key, f)
      if not v then missing[#missing + 1] = f
      elseif v ~= '' then seeds[#seeds + 1] = f; seeds[#seeds + 1] = v; closing[#closing + 1] = ch
      end
    end
  end
  rows[#rows + 1] = {parent, pcv, wv, seeds, missing}
  n = n + 1
  if #missing > 0 then return {2, rows, parent} end
  for _, ch in ipairs(closing) do open[ch] = nil; nopen = nopen - 1 end
  parent = parts[1]
end
return {0, rows, ''}
end
local reply = walk()
local refs, rseen = {}, {}
for _, row in ipairs(reply[2]) do
  for _, v in ipairs(row[3]) do refs_into(v, refs, rseen) end
  for j = 2, #row[4], 2 do refs_into(row[4][j], refs, rseen) end
end
local it = items_of(items_key, refs)
reply[4], reply[5] = it[1], it[2]
return reply
