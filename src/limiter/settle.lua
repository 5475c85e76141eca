--[[
  Settle a permit: the request is over, so it moves from in flight to the log, in the token's and in
  the organization's scope, with the latest time the server may have counted it.

  Input:
    KEYS[1]  token log        KEYS[2]  token inflight
    KEYS[3]  org log          KEYS[4]  org inflight

    ARGV[1]  permit id
    ARGV[2]  'response': a response arrived (any status): stamp Redis TIME now, which is after it.
             'abandon':  no response will come (timeout, reset after sending): the server may still
                         count the request until the in-flight deadline, so stamp max(now, deadline).
    ARGV[3]  token key TTL (ms)   ARGV[4]  org key TTL (ms): the ones acquire returned with the permit
             (computed from the windows in effect then). A TTL is only ever extended: a key written
             under a longer window (before a limit change, or by another process) keeps its longer life.

  Output: the org scope's stamped time (ms), or -1 when abandon found nothing left in flight.

  A response for a permit already moved to the log (its holder overran the deadline) raises its score
  to now (ZADD GT: never lowers), and one for a permit already trimmed is added again at now: both err
  on the safe side, the server may have counted it as late as now. Settling twice is harmless.
  Nothing is published: a settle never frees budget earlier than a refusal's wait predicted.
]]
--- @keys 4
--- @include "clock"
local now = lt_now()
local permitId = ARGV[1]
local abandon = ARGV[2] == 'abandon'

local function settle(logKey, inflightKey, keyTtl)
  local deadline = redis.call('ZSCORE', inflightKey, permitId)
  local score = now
  if abandon then
    if not deadline then
      return -1
    end
    score = math.max(now, tonumber(deadline))
  end
  if deadline then
    redis.call('ZREM', inflightKey, permitId)
  end
  redis.call('ZADD', logKey, 'GT', score, permitId)
  if redis.call('PTTL', logKey) < keyTtl then
    redis.call('PEXPIRE', logKey, keyTtl)
  end
  return score
end

settle(KEYS[1], KEYS[2], tonumber(ARGV[3]))
return settle(KEYS[3], KEYS[4], tonumber(ARGV[4]))
