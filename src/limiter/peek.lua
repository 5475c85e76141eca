#!lua flags=no-writes
--[[
  Read the budget of one organization and its tokens without writing anything (the no-writes flag
  makes Redis refuse any write): what acquire would see, with expired in-flight entries counted as
  the log entries acquire would turn them into, under the same live policy (limits, reserve, pauses).

  Input:
    KEYS: as acquire.lua without the lease and the job lock
    KEYS[1]  org log          KEYS[2]  org inflight       KEYS[3]  org block
    KEYS[3i+1..3i+3]   token i's log, inflight and block (i = 1..n), n >= 0
    KEYS[3n+4]         policy hash
    KEYS[3n+5]         pace hash (acquire.lua "Pacing")
    ARGV[1]  token limit   ARGV[2]  token window (ms)   ARGV[3]  org limit   ARGV[4]  org window (ms)
    ARGV[5]  burst (the fallbacks, as in acquire.lua)
    ARGV[5+i] token i's id

  Output: {now, orgView, tokenView 1, ..., tokenView n, policyPresent (0|1), reserve, runWindow, tz,
    blackout, open}, each view
    {used, inflight, nextFreeInMs, blockReason ('' when none), blockTtl (-2 none, -1 until unblock, ms),
     limit, windowMs, paused ('' or the pause's JSON), overridden (0|1),
     configured, learnedMax, learnedAt, nextProbeInMs, count429, burst, bucket, paceInMs, tatInMs}
    burst is the scope's bucket size (-1: not paced), bucket the permits it allows at once now, paceInMs
    the ms until it allows one (0: now) and tatInMs its tat less now (as a float; <= 0: full); runWindow,
    tz and blackout are the policy's texts ('' when none: src/limiter/run-window.ts reads them), open the
    instants acquire.lua reads (acquire.lua "Run window"; '' when none).
    limit is the one in force, a learned limit applied (acquire.lua, "Learned limits"); configured is
    the limit without it. learnedMax, learnedAt and nextProbeInMs are -1 when no learned limit is in
    force (none, or probed back up to configured); count429 is the token's 429s (-1 when none counted,
    and always -1 for the organization).
    policyPresent: a limit, reserve or pause is stored (a hash with only learned limits and 429 counts
    is not a stored policy).
    used: counted entries that are no longer in flight; inflight: entries still before their deadline;
    nextFreeInMs: 0 when the window has room, else the wait acquire would compute for this scope
    (blocks and pauses aside: they are reported separately). The org view's limit is what acquire
    grants: the configured limit less the reserve (overridden 1 when a reserve applies).
]]
--- @keys 5+
--- @include "policy"
--- @include "clock"
local now = lt_now()

local tokenCount = (#KEYS - 5) / 3
local policy = lt_policy(KEYS[#KEYS - 1])
local burstSpec = lt_burst_spec(policy, ARGV[5])
local pace = {}
if burstSpec ~= '' and burstSpec ~= '100%' then
  pace = lt_policy(KEYS[#KEYS])
end
-- A scope's bucket as acquire.lua sees it: {burst, allowed now, ms until one, tat less now};
-- {-1, -1, 0, 0} when not paced.
local function bucket(field, max, window)
  local b = (burstSpec ~= '' and max > 0) and lt_burst(burstSpec, nil, max) or nil
  if b == nil then
    return {-1, -1, 0, '0'}
  end
  local wait = lt_pace(pace[field], now, max, window, b)
  local interval = window / max
  local tat = math.max(tonumber(pace[field]) or 0, now)
  local allows = math.floor((now + LT_PACE_EPSILON + (b - 1) * interval - tat) / interval) + 1
  return {b, math.max(0, math.min(b, allows)), wait, string.format('%.3f', tat - now)}
end
local function rate(field, max, window)
  return lt_rate(policy, field, max, window)
end

-- As acquire.lua's learned(), forgetting nothing: {limit in force, max, at, next probe in ms}.
local function learned(field, limit, configured, window)
  local value, m, at, probe = lt_learned(policy, field, limit, configured, window, now)
  if m == nil then
    return limit, -1, -1, -1
  end
  return value, m, at, probe
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
local orgUsable = math.max(0, orgMax - reserve)
local orgLimit, orgLearned, orgAt, orgProbe = learned('learned:org', orgUsable, orgMax, orgWindow)
local orgView = view(KEYS[1], KEYS[2], KEYS[3], orgLimit, orgWindow)
orgView[8] = policy['paused'] or ''
orgView[9] = reserve > 0 and 1 or 0
orgView[10], orgView[11], orgView[12], orgView[13], orgView[14] = orgUsable, orgLearned, orgAt, orgProbe, -1
local ob = bucket('org', orgLimit, orgWindow)
orgView[15], orgView[16], orgView[17], orgView[18] = ob[1], ob[2], ob[3], ob[4]
local out = {now, orgView}
for i = 1, tokenCount do
  local id = ARGV[5 + i] or ''
  local configured, window, own = rate('tok:' .. id, tokenMax, tokenWindow)
  local limit, max, at, probe = configured, -1, -1, -1
  if id ~= '' then
    limit, max, at, probe = learned('learned:tok:' .. id, configured, configured, window)
  end
  local v = view(KEYS[3 * i + 1], KEYS[3 * i + 2], KEYS[3 * i + 3], limit, window)
  v[8] = (id ~= '' and policy['paused:' .. id]) or ''
  v[9] = own and 1 or 0
  v[10], v[11], v[12], v[13] = configured, max, at, probe
  v[14] = (id ~= '' and tonumber(policy['429:' .. id])) or -1
  local tb = bucket('tok:' .. id, limit, window)
  v[15], v[16], v[17], v[18] = tb[1], tb[2], tb[3], tb[4]
  out[#out + 1] = v
end
local present = 0
for f in pairs(policy) do
  if
    string.sub(f, 1, 8) ~= 'learned:' and string.sub(f, 1, 4) ~= '429:' and string.sub(f, 1, 8) ~= 'refuted:'
  then
    present = 1
    break
  end
end
out[#out + 1] = present
out[#out + 1] = reserve
out[#out + 1] = policy['runWindow'] or ''
out[#out + 1] = policy['tz'] or ''
out[#out + 1] = policy['blackout'] or ''
out[#out + 1] = policy['open'] or ''
return out
