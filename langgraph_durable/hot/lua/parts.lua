--[[
  PARTS: the pending writes (and blob values) of checkpoints whose records may live in
  MongoDB only (hot/scripts.py: parts_op, PartsReply).

  Input:
    KEYS[1..3]                cp, cv, idx (unused)
    KEYS[4]  blobs_key        bl: blob field -> channel value envelope
    KEYS[5]  writes_key       w: write field -> write envelope
    KEYS[6]  write_index_key  wi: sorted set of write fields
    KEYS[7..8]                ns, meta (unused)
    KEYS[9]  items_key        it: digest -> item or node bytes

    ARGV[1]  n                the number of members that follow
    ARGV[2..n+1]              members
    ARGV[n+2..]               blob fields

  Output:
    {{write values} per member, {blob values}, {item digests}, {item values}} (the items
    as PAGE's).

  Errors: none of its own.
]]
local rcall = redis.call
local blobs_key, writes_key, write_index_key, items_key = KEYS[4], KEYS[5], KEYS[6], KEYS[9]

--- @include "items"

local n = tonumber(ARGV[1])
local out = {}
for i = 2, n + 1 do
  local m = ARGV[i]
  local wf = rcall('ZRANGEBYLEX', write_index_key, '[' .. m .. '\0', '(' .. m .. '\1')
  local wv = {}
  if #wf > 0 then wv = rcall('HMGET', writes_key, unpack(wf)) end
  out[#out + 1] = wv
end
local values, fields = {}, {}
for i = n + 2, #ARGV do fields[#fields + 1] = ARGV[i] end
if #fields > 0 then values = hmget_all(blobs_key, fields) end
local refs, rseen = {}, {}
for i = 1, #fields do refs_into(values[i], refs, rseen) end
for _, wv in ipairs(out) do
  for _, v in ipairs(wv) do refs_into(v, refs, rseen) end
end
local it = items_of(items_key, refs)
return {out, values, it[1], it[2]}
