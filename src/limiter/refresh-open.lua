--[[
  Write an organization's run window as UTC instants (the policy's `open` field, acquire.lua "Run
  window"), computed by src/limiter/run-window-open.ts from the calendar fields it read: only when those
  fields are still what it read, so a `limits set` in between is never overwritten with intervals of the
  old calendar. Without a calendar (no runWindow and no blackout), `open` is removed.

  Input:
    KEYS[1]  policy hash
    ARGV[1]  runWindow as read ('' = absent)   ARGV[2]  tz as read   ARGV[3]  blackout as read
    ARGV[4]  the new `open` value ("horizon s1 e1 ...")

  Output: 1 written (or removed), 0 the calendar changed meanwhile (nothing written)
]]
--- @keys 1
local fields = redis.call('HMGET', KEYS[1], 'runWindow', 'tz', 'blackout')
for i = 1, 3 do
  if (fields[i] or '') ~= ARGV[i] then
    return 0
  end
end
if ARGV[1] == '' and ARGV[3] == '' then
  redis.call('HDEL', KEYS[1], 'open')
else
  redis.call('HSET', KEYS[1], 'open', ARGV[4])
end
return 1
