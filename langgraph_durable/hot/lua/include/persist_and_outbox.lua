-- persist_and_outbox(meta_key, member, outbox_key, thread_id, payload): the end of every
-- write of a checkpoint's entries (PUT, PUT_WRITES). Marks this generation of the thread
-- (meta 'born', ms of the Redis clock, once), raises its unflushed count (meta 'dirty')
-- and the checkpoint's (meta 'u' .. member), keeps the nine thread keys (KEYS[1..9]) from
-- expiring, and appends the outbox entry {t = thread_id, p = payload} to outbox_key (nil =
-- none). Returns the entry id, or 'ok' without an outbox.
local function persist_and_outbox(meta_key, member, outbox_key, thread_id, payload)
  if rcall('HSETNX', meta_key, 'born', 0) == 1 then  -- this generation of the thread
    local clock = rcall('TIME')
    rcall('HSET', meta_key, 'born', tonumber(clock[1]) * 1000
          + math.floor(tonumber(clock[2]) / 1000))
  end
  rcall('HINCRBY', meta_key, 'dirty', 1)
  rcall('HINCRBY', meta_key, 'u' .. member, 1)  -- this checkpoint has unflushed entries
  for i = 1, 9 do rcall('PERSIST', KEYS[i]) end
  local entry = 'ok'
  if outbox_key then
    entry = rcall('XADD', outbox_key, '*', 't', thread_id, 'p', payload)
  end
  return entry
end
