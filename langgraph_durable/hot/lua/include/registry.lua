-- The thread registry of the thread's partition (hot/keys.py: registry_key; field
-- thread_id -> '1', 'd' once delete_thread removed it from both tiers: its tombstones may
-- still refuse late writes; field '\0epoch' -> '<state> <nonce>', hot/registry_scripts.py).
-- registry_key may be nil (a caller that passes no registry): both functions say false.
-- never_stored(registry_key, thread_id): a complete registry has no field for the
--   thread, so no tier holds a checkpoint or a tombstone of it.
-- new_in_registry(registry_key, index_key, thread_id): no checkpoint of the thread in
--   Redis (its index index_key is absent), and a complete registry lacks it, so no tier
--   holds one: pending writes that raced the thread's first put (LangGraph sends them
--   concurrently) made its meta, yet Redis holds the whole thread.
local function never_stored(registry_key, thread_id)
  if not registry_key or rcall('HEXISTS', registry_key, thread_id) == 1 then return false end
  local epoch = rcall('HGET', registry_key, '\0epoch') or ''
  return string.sub(epoch, 1, 9) == 'complete '
end
local function new_in_registry(registry_key, index_key, thread_id)
  if not registry_key or rcall('EXISTS', index_key) == 1
      or rcall('HGET', registry_key, thread_id) == '1' then return false end
  local epoch = rcall('HGET', registry_key, '\0epoch') or ''
  return string.sub(epoch, 1, 9) == 'complete '
end
