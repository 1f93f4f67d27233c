--[[
  EFFECT_END: journal an effect's outcome (done, failed or cleared) over its started
  entry (hot/effect_scripts.py: end_op).

  Input:
    KEYS[1]  journal_key      the thread's effect journal (ThreadKeys.fx)
    KEYS[2]  meta_key         the thread's meta (born, dirty, fx)
    KEYS[3]  outbox_key       the thread's outbox stream
    KEYS[4]  gone_key         the thread's tombstones (the first write after a delete
                              stamps its generation after them)

    ARGV[1]  field
    ARGV[2]  body             the outcome's body (state letter and msgpack)
    ARGV[3]  payload          the outbox entry's payload
    ARGV[4]                   unused (the effect happened: its outcome is written whatever
                              the outbox holds)
    ARGV[5]  floor            version floor
    ARGV[6]  thread_id

  Output:
    the entry written

  Errors: none of its own.
]]
local rcall = redis.call
local journal_key, meta_key, outbox_key = KEYS[1], KEYS[2], KEYS[3]

--- @include "effect_store"

return store(journal_key, meta_key, outbox_key, ARGV[1], ARGV[2], ARGV[3])
