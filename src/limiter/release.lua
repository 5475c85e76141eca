--[[
  Release a permit whose request provably never reached the server (e.g. the connection was refused
  before a byte was sent): its in-flight entries are removed and the budget is returned at once.
  A permit already moved to the log (its deadline passed) stays there: late is always safe.

  Input:
    KEYS[1]  token inflight   KEYS[2]  org inflight
    ARGV[1]  permit id
    ARGV[2]  events channel   ARGV[3]  event message (small JSON, no secret)

  Output: number of entries removed (0, 1 or 2). An event is published when any was.
]]
--- @keys 2
local removed = redis.call('ZREM', KEYS[1], ARGV[1]) + redis.call('ZREM', KEYS[2], ARGV[1])
if removed > 0 then
  redis.call('PUBLISH', ARGV[2], ARGV[3])
end
return removed
