--- @include "generation_entry"

-- store(journal_key, meta_key, outbox_key, field, body, payload): write a journal entry
-- (8 decimal digits of version, then body: state letter and msgpack) over field, one
-- version above the field's current one and ARGV[5] (the version floor from MongoDB);
-- keep the journal from expiring, mark this generation of the thread (meta 'born', as
-- PUT, KEYS[4] its tombstones), raise its unflushed count (meta 'dirty'), mark that it
-- has a journal (meta 'fx') and append the outbox entry {t = ARGV[6] (thread_id), p =
-- payload}, stamped after the thread's last delete. Returns the entry.
local function store(journal_key, meta_key, outbox_key, field, body, payload)
  local cur = rcall('HGET', journal_key, field)
  local v = tonumber(ARGV[5]) or 0
  if cur then v = math.max(v, tonumber(string.sub(cur, 1, 8)) or 0) end
  local val = string.format('%08d', v + 1) .. body
  rcall('HSET', journal_key, field, val)
  rcall('PERSIST', journal_key)
  rcall('HINCRBY', meta_key, 'dirty', 1)
  rcall('HSET', meta_key, 'fx', 1)
  generation_entry(meta_key, KEYS[4], outbox_key, ARGV[6], payload)  -- as PUT
  return val
end
