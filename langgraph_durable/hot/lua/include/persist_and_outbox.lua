--- @include "generation_entry"

-- persist_and_outbox(meta_key, gone_key, member, outbox_key, thread_id, payload): the end
-- of every write of a checkpoint's entries (PUT, PUT_WRITES). Marks this generation of the
-- thread (meta 'born', generation_entry), raises its unflushed count (meta 'dirty'), its
-- writes count (meta 'writes', never lowered) and the checkpoint's (meta 'u' .. member),
-- keeps the nine thread keys (KEYS[1..9]) from expiring, and appends the outbox entry
-- {t = thread_id, p = payload} to outbox_key (nil = none), stamped after the thread's
-- last delete (gone_key). Returns the entry id, or 'ok' without an outbox.
local function persist_and_outbox(meta_key, gone_key, member, outbox_key, thread_id, payload)
  rcall('HINCRBY', meta_key, 'dirty', 1)
  rcall('HINCRBY', meta_key, 'writes', 1)  -- every write: COLLECT_ITEMS asks if any since
  rcall('HINCRBY', meta_key, 'u' .. member, 1)  -- this checkpoint has unflushed entries
  for i = 1, 9 do rcall('PERSIST', KEYS[i]) end
  if not outbox_key then
    if not rcall('HGET', meta_key, 'born') then  -- this generation (no outbox: strict mode)
      rcall('HSET', meta_key, 'born', now_ms())
    end
    return 'ok'
  end
  return generation_entry(meta_key, gone_key, outbox_key, thread_id, payload)
end
