-- Items (core/items.py): list values stored as manifests of content-addressed items.
-- refs_into(v, acc, seen): adds the digests of a manifest envelope v (MANIFEST_MAGIC
--   '\193I', 4-byte length, 16-byte digests) to acc, each once (seen).
-- hmget_all(key, names): HMGET in slices of 1000 (Lua's unpack limit).
-- items_of(items_key, refs, have): the items and nodes named by refs (and the items of
--   those nodes), as {digests, stored values (false = missing)}, leaving out the digests
--   in the set have (items the caller holds, e.g. PAGE's ARGV[4]; nil = none).
-- missing_items(items_key, first, last, step, sent): how many digests the manifests among
--   ARGV[first..last by step] name that neither Redis holds nor the call brings (sent:
--   digest -> stored value), counting the items of the nodes the call brings: a process
--   sends only the items it takes Redis to hold, and a delete or a prune may have removed
--   one since (a node's last item, met again at a node's end, is named by nothing else).
local function refs_into(v, acc, seen)
  if v and string.sub(v, 1, 2) == '\193I' then
    local n = struct.unpack('>I4', v, 3)
    for p = 7, 6 + n, 16 do
      local d = string.sub(v, p, p + 15)
      if not seen[d] then seen[d] = true; acc[#acc + 1] = d end
    end
  end
end
local function hmget_all(key, names)
  local out = {}
  for i = 1, #names, 1000 do
    local got = rcall('HMGET', key, unpack(names, i, math.min(i + 999, #names)))
    for j = 1, #got do out[#out + 1] = got[j] end
  end
  return out
end
local function items_of(items_key, refs, have)
  local names, vals = {}, {}
  if have then  -- digests the caller holds already: not sent back
    local want = {}
    for i = 1, #refs do if not have[refs[i]] then want[#want + 1] = refs[i] end end
    refs = want
  end
  if #refs == 0 then return {names, vals} end
  local got = hmget_all(items_key, refs)
  local inner, seen = {}, have or {}
  for i = 1, #refs do seen[refs[i]] = true end
  for i = 1, #refs do
    local v = got[i]
    names[#names + 1] = refs[i]; vals[#vals + 1] = v
    if v and string.sub(v, 1, 2) == '\193N' then
      for p = 3, #v, 16 do
        local c = string.sub(v, p, p + 15)
        if not seen[c] then seen[c] = true; inner[#inner + 1] = c end
      end
    end
  end
  if #inner > 0 then
    local iv = hmget_all(items_key, inner)
    for i = 1, #inner do names[#names + 1] = inner[i]; vals[#vals + 1] = iv[i] end
  end
  return {names, vals}
end
local function missing_items(items_key, first, last, step, sent)
  local refs, seen, missing = {}, {}, 0
  for i = first, last, step do refs_into(ARGV[i], refs, seen) end
  for _, d in ipairs(refs) do
    local v = sent[d]
    if not v then
      if rcall('HEXISTS', items_key, d) == 0 then missing = missing + 1 end
    elseif string.sub(v, 1, 2) == '\193N' then  -- a new node: its items too
      for p = 3, #v, 16 do
        local c = string.sub(v, p, p + 15)
        if not seen[c] then
          seen[c] = true
          if not sent[c] and rcall('HEXISTS', items_key, c) == 0 then missing = missing + 1 end
        end
      end
    end
  end
  return missing
end
