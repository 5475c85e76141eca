#!lua flags=no-writes
--[[
  When the permits counted in an organization's and its tokens' windows leave them, read-only: peek.lua's
  frees alone, for the organizations `status` must simulate.

  Input:
    KEYS[1]  org log         KEYS[2]  org inflight
    KEYS[2i+1..2i+2]   token i's log and inflight (i = 1..n), n >= 0
    ARGV[1]  steps per window (1 to 1000)
    ARGV[2]  the organization's window (ms), as the peek read it from the policy
    ARGV[2+i] token i's window (ms)

  Output: {orgFrees, token 1 frees, ..., token n frees}, each {inMs, count, ...} (includes/frees.lua).
]]
--- @keys 2+
--- @include "clock"
--- @include "frees"
local now = lt_now()
-- Bounded: a step count out of range reads nothing rather than loop for long on the server.
local steps = math.max(1, math.min(1000, tonumber(ARGV[1]) or 12))
local out = {}
for i = 0, (#KEYS - 2) / 2 do
  local logKey, inflightKey = KEYS[2 * i + 1], KEYS[2 * i + 2]
  local inflight = redis.call('ZCOUNT', inflightKey, string.format('(%d', now), '+inf')
  out[#out + 1] = lt_frees(now, logKey, inflightKey, tonumber(ARGV[2 + i]), inflight, steps)
end
return out
