--[[
  Block a token or a whole organization: a 429 for its Retry-After, or until unblock (a 401: the
  token was revoked). A block never shortens one in place: a 429 arriving on a token blocked until
  unblock keeps that block, and a shorter Retry-After keeps the longer one.

  Input:
    KEYS[1]  block key (token block or org block)
    ARGV[1]  reason (short text such as '429' or '401': shown by peek, never a secret)
    ARGV[2]  duration in ms, or 'indefinite'

  Output: 1 when the block was written, 0 when a longer one was kept.
]]
--- @keys 1
if ARGV[2] == 'indefinite' then
  redis.call('SET', KEYS[1], ARGV[1])
  return 1
end
local ms = tonumber(ARGV[2])
local current = redis.call('PTTL', KEYS[1])
if current == -1 or current >= ms then
  return 0
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ms)
return 1
