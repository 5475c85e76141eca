--[[
  Takes lanes for a worker process, or moves their times, each only if its time is still the one the caller
  read: a lane that a producer marked due meanwhile (its time lowered to now) is not taken from under that
  mark, and two processes reading the same due lane cannot both take it.

  KEYS[1]  lanes due (sorted set: lane -> ms time; see src/worker/lanes.ts)
  ARGV     triples: lane, the time the caller read, the new time ('' removes the lane: nothing left)

  Returns one integer per triple: 1 done, 0 left as it is (the time had changed, or the lane was gone).
]]
--- @keys 1
local out = {}
for i = 1, #ARGV, 3 do
  local lane, seen, nextTime = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local current = redis.call('ZSCORE', KEYS[1], lane)
  if current and tonumber(current) == tonumber(seen) then
    if nextTime == '' then
      redis.call('ZREM', KEYS[1], lane)
    else
      redis.call('ZADD', KEYS[1], nextTime, lane)
    end
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
end
return out
