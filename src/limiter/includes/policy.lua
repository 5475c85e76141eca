--[[
  Shared by acquire.lua, learn.lua and peek.lua (each has `--- @include "policy"`, where the loader,
  src/redis/scripts.ts, splices this in): how the organization's live policy hash is read. One copy, so
  the three scripts cannot drift apart on what a limit is.
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

-- The bounds of a stored rate: duration.ts RATE_MAX_COUNT and RATE_MAX_WINDOW_MS (365 days), the same
-- numbers, so this refuses exactly what the parser and decodeRate refuse (test/integration/limit-rule).
local LT_RATE_MAX_COUNT = 1000000
local LT_RATE_MAX_WINDOW_MS = 31536000000

-- Rate fields found malformed by lt_rate in this run of the script, as {field, value, field, value, ...}:
-- acquire.lua returns them, so the worker says which stored value it ignored instead of falling back
-- in silence.
local lt_malformed = {}

-- A rate field of the policy ("max/windowMs", max 1..LT_RATE_MAX_COUNT, windowMs 1..LT_RATE_MAX_WINDOW_MS):
-- max, window, true; or the fallback max, window, false when the field is absent or malformed (then it
-- is also noted in lt_malformed).
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

-- A learned limit ("max at", see "Learned limits" in acquire.lua) applied under `limit` at `now`: the
-- learned max plus one probe step (5% of `configured`, at least 1) per probe interval since it was
-- learned (four windows, at most an hour unless the window itself is longer). Returns the limit in
-- force, the learned max, when it was learned and the ms to the next probe step; or `limit`, nil, nil,
-- nil when none holds (absent, malformed, or probed back up to `limit`).
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
