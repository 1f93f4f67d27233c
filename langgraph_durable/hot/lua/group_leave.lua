--[[
  GROUP_LEAVE: delete a consumer of an outbox stream's group unless it holds pending
  entries (XGROUP DELCONSUMER would drop them from the group's pending list).
  (hot/flusher_scripts.py: LeaveArgs; outbox/group.py: leave_plan.)

  Input:
    KEYS[1]  stream_key       an outbox stream

    ARGV[1]  group            the consumer group
    ARGV[2]  consumer         the consumer leaving

  Output:
    1 if deleted, else 0

  Errors: none of its own.
]]
local rcall = redis.call
local stream_key = KEYS[1]

if #rcall('XPENDING', stream_key, ARGV[1], '-', '+', 1, ARGV[2]) > 0 then return 0 end
rcall('XGROUP', 'DELCONSUMER', stream_key, ARGV[1], ARGV[2])
return 1
