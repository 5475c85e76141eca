#!lua flags=no-writes
--[[
  Read the budget of one organization and its tokens without writing anything (the no-writes flag
  makes Redis refuse any write): what acquire would see, with expired in-flight entries counted as
  the log entries acquire would turn them into, under the same live policy (limits, reserve, pauses).

  Input:
    KEYS: as acquire.lua without the lease and the job lock (org log, org inflight, org block, then per
          token log, inflight, block), then the policy hash last
    ARGV[1]  token limit   ARGV[2]  token window (ms)   ARGV[3]  org limit   ARGV[4]  org window (ms)
             (the fallbacks, as in acquire.lua)
    ARGV[4+i] token i's id

  Output: {now, orgView, tokenView 1, ..., tokenView n, policyPresent (0|1), reserve}, each view
    {used, inflight, nextFreeInMs, blockReason ('' when none), blockTtl (-2 none, -1 until unblock, ms),
     limit, windowMs, paused ('' or the pause's JSON), overridden (0|1)}
    used: counted entries that are no longer in flight; inflight: entries still before their deadline;
    nextFreeInMs: 0 when the window has room, else the wait acquire would compute for this scope
    (blocks and pauses aside: they are reported separately). The org view's limit is what acquire
    grants: the configured limit less the reserve (overridden 1 when a reserve applies).
]]
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)

local tokenCount = (#KEYS - 4) / 3
local policy = {}
local flat = redis.call('HGETALL', KEYS[#KEYS])
for i = 1, #flat, 2 do
  policy[flat[i]] = flat[i + 1]
end
local function rate(field, max, window)
  local v = policy[field]
  if v then
    local m, w = string.match(v, '^(%d+)/(%d+)$')
    if m and tonumber(w) > 0 then
      return tonumber(m), tonumber(w), true
    end
  end
  return max, window, false
end

local function view(logKey, inflightKey, blockKey, max, window)
  local from = now - window
  local logCount = redis.call('ZCOUNT', logKey, from, '+inf')
  local expired = redis.call('ZCOUNT', inflightKey, from, now)
  local inflight = redis.call('ZCOUNT', inflightKey, string.format('(%d', now), '+inf')
  local used = logCount + expired
  local nextFree = 0
  local k = used + inflight - max + 1
  if k > 0 then
    if k <= used then
      -- The k-th oldest of the log entries and the expired in-flight deadlines in the window.
      local scores = {}
      local a = redis.call('ZRANGE', logKey, from, '+inf', 'BYSCORE', 'LIMIT', 0, k, 'WITHSCORES')
      local b = redis.call('ZRANGE', inflightKey, from, now, 'BYSCORE', 'LIMIT', 0, k, 'WITHSCORES')
      for i = 2, #a, 2 do
        scores[#scores + 1] = tonumber(a[i])
      end
      for i = 2, #b, 2 do
        scores[#scores + 1] = tonumber(b[i])
      end
      table.sort(scores)
      nextFree = scores[k] + window + 1 - now
    else
      nextFree = window + 1
    end
  end
  local reason = redis.call('GET', blockKey)
  return {used, inflight, nextFree, reason or '', redis.call('PTTL', blockKey), max, window}
end

local tokenMax, tokenWindow = rate('token', tonumber(ARGV[1]), tonumber(ARGV[2]))
local orgMax, orgWindow = rate('org', tonumber(ARGV[3]), tonumber(ARGV[4]))
local reserve = math.max(0, tonumber(policy['reserve']) or 0)
local orgView = view(KEYS[1], KEYS[2], KEYS[3], math.max(0, orgMax - reserve), orgWindow)
orgView[8] = policy['paused'] or ''
orgView[9] = reserve > 0 and 1 or 0
local out = {now, orgView}
for i = 1, tokenCount do
  local id = ARGV[4 + i] or ''
  local max, window, own = rate('tok:' .. id, tokenMax, tokenWindow)
  local v = view(KEYS[3 * i + 1], KEYS[3 * i + 2], KEYS[3 * i + 3], max, window)
  v[8] = (id ~= '' and policy['paused:' .. id]) or ''
  v[9] = own and 1 or 0
  out[#out + 1] = v
end
out[#out + 1] = #flat > 0 and 1 or 0
out[#out + 1] = reserve
return out
