--[[
  How the organization's live policy hash is read, one copy for acquire.lua, learn.lua and peek.lua
  (`--- @include "policy"`).
]]

-- The policy hash at `key` as a table (field -> value); empty when absent.
local function lt_policy(key)
  local policy = {}
  local flat = redis.call('HGETALL', key)
  for i = 1, #flat, 2 do
    policy[flat[i]] = flat[i + 1]
  end
  return policy
end

-- The bounds of a stored rate: duration.ts's RATE_MAX_COUNT and RATE_MAX_WINDOW_MS, so this
-- refuses exactly what the parser refuses (test/integration/limit-rule).
local LT_RATE_MAX_COUNT = 1000000
local LT_RATE_MAX_WINDOW_MS = 31536000000

-- Rate fields lt_rate found malformed in this run, {field, value, ...}: acquire.lua returns
-- them, so the worker names what it ignored.
local lt_malformed = {}

-- A rate field ("max/windowMs", within the bounds above): max, window, true; or the fallback
-- max, window, false when absent or malformed (then noted in lt_malformed).
local function lt_rate(policy, field, max, window)
  local v = policy[field]
  if v then
    local m, w = string.match(v, '^(%d+)/(%d+)$')
    m, w = tonumber(m), tonumber(w)
    if m and w and m >= 1 and m <= LT_RATE_MAX_COUNT and w >= 1 and w <= LT_RATE_MAX_WINDOW_MS then
      return m, w, true
    end
    lt_malformed[#lt_malformed + 1] = field
    lt_malformed[#lt_malformed + 1] = v
  end
  return max, window, false
end

-- A learned limit ("max at"; acquire.lua "Learned limits") under `limit` at `now`: the learned
-- max plus one probe step (5% of `configured`, at least 1) per probe interval since (four
-- windows, at most an hour unless the window is longer). Returns the limit in force, the max,
-- when learned and the ms to the next step; or `limit`, nil, nil, nil when none holds.
local function lt_learned(policy, field, limit, configured, window, now)
  local v = policy[field]
  if not v or limit <= 0 then
    return limit, nil, nil, nil
  end
  local m, at = string.match(v, '^(%d+) (%d+)$')
  if not m then
    return limit, nil, nil, nil
  end
  m, at = tonumber(m), tonumber(at)
  local every = math.max(window, math.min(4 * window, 3600000))
  local step = math.max(1, math.floor(configured / 20))
  local steps = math.floor(math.max(0, now - at) / every)
  local value = m + step * steps
  if value >= limit then
    return limit, nil, nil, nil
  end
  return math.max(1, value), m, at, at + (steps + 1) * every - now
end

-- Pacing (acquire.lua "Pacing"): a burst stored as "N" or "P%" (P 1..100), as core/burst.ts
-- writes it. Returns the bucket size for a limit in force of `max`, or nil for no pacing: no
-- burst, or one as large as the limit (such a bucket never refuses what the window grants). A
-- malformed value, noted as `field`, means no pacing, never a guess.
local LT_BURST_MAX_COUNT = 1000000
local function lt_burst(spec, field, max)
  if spec == nil or spec == '' then
    return nil
  end
  local p = string.match(spec, '^(%d+)%%$')
  local b
  if p then
    p = tonumber(p)
    if p >= 1 and p <= 100 then
      b = math.max(1, math.floor(max * p / 100))
    end
  else
    local n = tonumber(string.match(spec, '^(%d+)$'))
    if n and n >= 1 and n <= LT_BURST_MAX_COUNT then
      b = n
    end
  end
  if b == nil then
    if field then
      lt_malformed[#lt_malformed + 1] = field
      lt_malformed[#lt_malformed + 1] = spec
    end
    return nil
  end
  if b >= max then
    return nil
  end
  return b
end

-- The burst in force: the policy's, or `fallback` (ARGV) when it has none or a malformed one
-- (noted in lt_malformed).
local function lt_burst_spec(policy, fallback)
  local stored = policy['burst']
  if stored == '' then
    -- Empty is no burst at all, which lt_burst reads as "no pacing": stored, it is malformed.
    lt_malformed[#lt_malformed + 1] = 'burst'
    lt_malformed[#lt_malformed + 1] = stored
  elseif stored then
    local before = #lt_malformed
    lt_burst(stored, 'burst', LT_BURST_MAX_COUNT + 1)
    if #lt_malformed == before then
      return stored
    end
  end
  return fallback
end

-- A scope's bucket in GCRA form: `tat` (ms, as stored; nil when none) for `max` per `window`
-- and a bucket of `burst`. Returns the ms until it allows one permit (0: now) and the tat after
-- granting it now. T = window / max is a float, so a long run paces at exactly max per window.
-- The epsilon is a thousandth of a ms: near 1.8e12 adjacent doubles are 2.4e-4 apart, and a
-- "%.3f" tat may be 5e-4 late.
local LT_PACE_EPSILON = 1e-3
local function lt_pace(tat, now, max, window, burst)
  local interval = window / max
  local t = math.max(tonumber(tat) or 0, now)
  local allowAt = t - (burst - 1) * interval
  if now + LT_PACE_EPSILON >= allowAt then
    return 0, t + interval
  end
  return math.ceil(allowAt - now - LT_PACE_EPSILON), nil
end
