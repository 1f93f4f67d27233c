--[[
  GROUP_UPKEEP: remove the consumers of a group idle over stale ms that hold nothing;
  then, when the stream's oldest entry is at or before the group's last-delivered id and
  no consumer holds it (delivered to a consumer since deleted, or the group's id moved
  past it), set the group's id back to 0 so XREADGROUP > delivers it (and what follows)
  again. (hot/flusher_scripts.py: UpkeepArgs; outbox/group.py: upkeep_plan.)

  Input:
    KEYS[1]  stream_key       an outbox stream

    ARGV[1]  group            the consumer group
    ARGV[2]  stale            ms a consumer holding nothing may idle

  Output:
    {consumers removed, 1 if rewound else 0, the oldest entry id (when rewound)}

  Errors: none of its own.
]]
local rcall = redis.call
local stream_key = KEYS[1]

local function field(arr, name)
  for i = 1, #arr, 2 do if arr[i] == name then return arr[i + 1] end end
end

local s, g, stale = stream_key, ARGV[1], tonumber(ARGV[2])
local removed = 0
for _, c in ipairs(rcall('XINFO', 'CONSUMERS', s, g)) do
  if field(c, 'pending') == 0 and field(c, 'idle') > stale then
    rcall('XGROUP', 'DELCONSUMER', s, g, field(c, 'name'))
    removed = removed + 1
  end
end
local first = rcall('XRANGE', s, '-', '+', 'COUNT', 1)
if #first == 0 then return {removed, 0} end
local last
for _, grp in ipairs(rcall('XINFO', 'GROUPS', s)) do
  if field(grp, 'name') == g then last = field(grp, 'last-delivered-id') end
end
local oldest = first[1][1]
local om, os_ = string.match(oldest, '(%d+)-(%d+)')
local lm, ls = string.match(last or '0-0', '(%d+)-(%d+)')
om, os_, lm, ls = tonumber(om), tonumber(os_), tonumber(lm), tonumber(ls)
local passed = om < lm or (om == lm and os_ <= ls)
if passed and #rcall('XPENDING', s, g, oldest, oldest, 1) == 0 then
  rcall('XGROUP', 'SETID', s, g, '0')
  return {removed, 1, oldest}
end
return {removed, 0}
