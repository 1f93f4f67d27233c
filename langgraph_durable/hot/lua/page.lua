--[[
  PAGE: a page of checkpoints, newest first, with everything needed to build their tuples
  (hot/scripts.py: page_op, PageReply).

  Input:
    KEYS[1]  checkpoints_key  cp: member -> checkpoint record
    KEYS[2]  index_key        cv: member -> msgpack [parent checkpoint_id, blob fields...]
    KEYS[3]  members_key      idx: sorted set of members
    KEYS[4]  blobs_key        bl: blob field -> channel value envelope
    KEYS[5]  writes_key       w: write field -> write envelope
    KEYS[6]  write_index_key  wi: sorted set of write fields
    KEYS[7]                   ns (unused)
    KEYS[8]  meta_key         meta (complete)
    KEYS[9]  items_key        it: digest -> item or node bytes
    KEYS[10] registry_key     the partition's thread registry (optional)

    ARGV[1]  lex_max          ZREVRANGEBYLEX bounds
    ARGV[2]  lex_min
    ARGV[3]  count            at most this many checkpoints
    ARGV[4]  held             the concatenated 16-byte digests of items the caller holds
                              (not sent back; may be empty)
    ARGV[5]  thread_id        with the registry

  Output:
    {rows, blob fields, blob values, complete, item digests, item values}
    rows: {{member, record, cv, {write values}}, ...}; complete: 1 when Redis holds the
    whole thread (see PUT), 2 when it holds every namespace's newest checkpoints but not
    all older ones (the hot window), 3 when no tier holds any checkpoint of the thread (a
    complete registry lacks it), else 0; the items: those the manifests among the values
    name (items_of).

  Errors: none of its own.
]]
local rcall = redis.call
local checkpoints_key, index_key, members_key, blobs_key = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local writes_key, write_index_key, meta_key, items_key = KEYS[5], KEYS[6], KEYS[8], KEYS[9]
local registry_key = KEYS[10]

--- @include "items"

local members = rcall('ZREVRANGEBYLEX', members_key, ARGV[1], ARGV[2], 'LIMIT', 0,
                      tonumber(ARGV[3]))
local out, seen, fields = {}, {}, {}
for _, m in ipairs(members) do
  local rec = rcall('HGET', checkpoints_key, m) or ''
  local cv = rcall('HGET', index_key, m) or ''
  local wf = rcall('ZRANGEBYLEX', write_index_key, '[' .. m .. '\0', '(' .. m .. '\1')
  local wv = {}
  if #wf > 0 then wv = rcall('HMGET', writes_key, unpack(wf)) end
  if cv ~= '' then
    local parts = cmsgpack.unpack(cv)
    for j = 2, #parts do
      local f = parts[j]
      if not seen[f] then seen[f] = true; fields[#fields + 1] = f end
    end
  end
  out[#out + 1] = {m, rec, cv, wv}
end
local values = {}
if #fields > 0 then values = hmget_all(blobs_key, fields) end
local complete = tonumber(rcall('HGET', meta_key, 'complete') or '0') or 0
if rcall('EXISTS', members_key) == 0 then
  complete = 0
  -- no checkpoint in Redis, and a complete registry without the thread (ARGV[5]): no
  -- tier holds any checkpoint of it
  if registry_key and rcall('HGET', registry_key, ARGV[5]) ~= '1' then
    local epoch = rcall('HGET', registry_key, '\0epoch') or ''
    if string.sub(epoch, 1, 9) == 'complete ' then complete = 3 end
  end
end
local refs, rseen = {}, {}
for i = 1, #fields do refs_into(values[i], refs, rseen) end
for _, row in ipairs(out) do
  for _, v in ipairs(row[4]) do refs_into(v, refs, rseen) end
end
local have = nil
if ARGV[4] and #ARGV[4] > 0 then
  have = {}
  for p = 1, #ARGV[4], 16 do have[string.sub(ARGV[4], p, p + 15)] = true end
end
local it = items_of(items_key, refs, have)
return {out, fields, values, complete, it[1], it[2]}
