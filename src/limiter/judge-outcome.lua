--[[
  The error budget (docs/guard-rails.md): push one final outcome into the organization's and its
  token's samples, judge both, and when a rule is met write the pause in the same step (`paused`, author
  `breaker`, or `paused:<id>`). Also keeps the 5xx storm flag (half-open).

  Input:
    KEYS[1]  policy hash         keys.policy(org): haltAt ("P" percent or "off"), haltSample, paused...
    KEYS[2]  breaker hash        keys.breaker(org): `org` and `tok:<id>` -> the sample, newest first, as
                                 "kind:code,kind:code,..."; `storm` -> since (ms); `probe` -> "holder deadline"
    ARGV[1]  kind: 's' success, 'f' failure, 'n' not-found of a learner no list showed (its own rule),
             'h' halts at once (unexpected-result), '' not an outcome (only the storm and the probe)
    ARGV[2]  outcome code (words of it in ARGV[6])
    ARGV[3]  token id ('' = none)
    ARGV[4]  default halt share (percent) or 'off' (HALT_AT)     ARGV[5] default sample size (HALT_SAMPLE)
    ARGV[6]  JSON {code: words}: how a reason names each failure code ("403 forbidden")
    ARGV[7]  now (ISO, the pause's `at`)
    ARGV[8]  events channel      ARGV[9] event message (small JSON, no secret)
    ARGV[10] storm: '5' the answer was a server error (any attempt), 'ok' a success, '' other
    ARGV[11] the probe holder this answer frees ('' = none)    ARGV[12] now (ms)
    ARGV[13] the gap after a probe answered with a server error before the next one (ms)
    ARGV[14] the storm's bound (HALT_STORM, ms; 0 = none)    ARGV[15] the probes it needs at least

  A storm that lasted ARGV[14] with at least ARGV[15] probes in a row answered 5xx halts the
  organization like any halt: a probe uses no attempt, so nothing else would ever stop them.

  Output: {what, reason, stormNow}
    what: 'org' the organization was halted by this step, 'token' the token was paused, '' neither
    stormNow: 1 when the 5xx storm flag is set after this step
  The breaker hash also keeps `probes`: the probes answered 5xx since the storm began.
]]
--- @keys 2
local policyKey, breakerKey = KEYS[1], KEYS[2]
local kind, code, tokenId = ARGV[1], ARGV[2], ARGV[3]
local words = cjson.decode(ARGV[6])
local nowMs = tonumber(ARGV[12]) or 0

local function field(name)
  return redis.call('HGET', policyKey, name)
end

local share = field('haltAt') or ARGV[4]
local size = tonumber(field('haltSample') or '') or tonumber(ARGV[5]) or 20
size = math.max(2, math.min(1000, math.floor(size)))

-- The sample field with the new entry in front, at most `size` entries; returns the entries.
local function push(name)
  local entries = {kind .. ':' .. code}
  local stored = redis.call('HGET', breakerKey, name)
  if stored then
    for e in string.gmatch(stored, '[^,]+') do
      if #entries >= size then
        break
      end
      entries[#entries + 1] = e
    end
  end
  redis.call('HSET', breakerKey, name, table.concat(entries, ','))
  return entries
end

-- A reason in words when the entries meet a rule, else nil.
local function judge(entries)
  local held = #entries
  if held < math.ceil(size / 2) then
    return nil
  end
  local fails, stale, byCode = 0, 0, {}
  for _, e in ipairs(entries) do
    local k, c = string.match(e, '^(%a):(.*)$')
    if k == 'f' or k == 'h' then
      fails = fails + 1
      byCode[c] = (byCode[c] or 0) + 1
    elseif k == 'n' then
      stale = stale + 1
    end
  end
  local pct = tonumber(share)
  if pct and fails > 0 and fails >= math.ceil(pct * held / 100 - 1e-9) then
    local parts, top = {}, nil
    for c, n in pairs(byCode) do
      parts[#parts + 1] = {c, n}
    end
    table.sort(parts, function(a, b)
      return a[2] > b[2] or (a[2] == b[2] and a[1] < b[1])
    end)
    top = parts[1]
    if top[2] == fails then
      return string.format('%d of the last %d calls answered %s', fails, held, words[top[1]] or top[1])
    end
    local said = {}
    for _, p in ipairs(parts) do
      said[#said + 1] = string.format('%d %s', p[2], words[p[1]] or p[1])
    end
    return string.format('%d of the last %d calls failed (%s)', fails, held, table.concat(said, ', '))
  end
  if stale > 0 and stale >= math.ceil(0.9 * held - 1e-9) then
    return string.format('%d of the last %d calls answered %s', stale, held, words['not-found'] or '404')
  end
  return nil
end

local function pause(name, reason)
  local info = cjson.encode({who = 'breaker', at = ARGV[7], reason = reason})
  if redis.call('HSETNX', policyKey, name, info) == 1 then
    redis.call('PUBLISH', ARGV[8], ARGV[9])
    return true
  end
  return false
end

-- The 5xx storm (half-open): set by a server error while most of the sample's answers are,
-- cleared by any other answer (a 4xx too: a storm kept by 4xx would hold learners whose probes
-- use no attempt for ever); the probe is freed either way. With HALT_AT off there is no storm
-- either: a service that stays down fails its learners after their attempts.
local storm = redis.call('HGET', breakerKey, 'storm')
if share == 'off' then
  if storm then
    redis.call('HDEL', breakerKey, 'storm', 'probe', 'answers', 'probes')
    redis.call('PUBLISH', ARGV[8], ARGV[9])
    storm = nil
  end
elseif (ARGV[10] == 'ok' or ARGV[10] == '.') and storm then
  redis.call('HDEL', breakerKey, 'storm', 'probe', 'answers', 'probes')
  redis.call('PUBLISH', ARGV[8], ARGV[9])
  storm = nil
elseif ARGV[10] ~= '' then
  -- The storm's own sample: the last `size` answers of any attempt, '5' for a server error.
  local answers = (ARGV[10] == '5' and '5' or '.') .. (redis.call('HGET', breakerKey, 'answers') or '')
  answers = string.sub(answers, 1, size)
  redis.call('HSET', breakerKey, 'answers', answers)
  local _, fives = string.gsub(answers, '5', '')
  if not storm and ARGV[10] == '5' and #answers >= math.ceil(size / 2) and 2 * fives > #answers then
    redis.call('HSET', breakerKey, 'storm', nowMs)
    storm = tostring(nowMs)
  end
end
local stormProbes = 0
if ARGV[11] ~= '' then
  local probe = redis.call('HGET', breakerKey, 'probe')
  if probe and string.match(probe, '^(%S+)') == ARGV[11] then
    if storm and ARGV[10] == '5' then
      -- Still failing: the next probe after a gap, not at once (each probe spends budget).
      redis.call('HSET', breakerKey, 'probe', string.format('gap %d', nowMs + (tonumber(ARGV[13]) or 0)))
      stormProbes = redis.call('HINCRBY', breakerKey, 'probes', 1)
    else
      redis.call('HDEL', breakerKey, 'probe')
    end
    -- The lanes that wait for the probe's answer wake now (to wait for the gap, or to go on).
    redis.call('PUBLISH', ARGV[8], ARGV[9])
  end
end
local stormNow = storm and 1 or 0

-- A storm that does not end halts the organization (see the header), judged when a probe
-- answers 5xx.
local bound, minProbes = tonumber(ARGV[14]) or 0, tonumber(ARGV[15]) or 1
local lasted = storm and (nowMs - (tonumber(storm) or nowMs)) or 0
if stormProbes > 0 and bound > 0 and lasted >= bound and stormProbes >= minProbes
    and redis.call('HEXISTS', policyKey, 'paused') == 0 then
  local span = lasted >= 60000 and string.format('%d min', math.floor(lasted / 60000))
    or string.format('%d s', math.floor(lasted / 1000))
  local reason = string.format(
    'a 5xx storm that does not end: the service answered only server errors (5xx) for %s, %d probes in a row',
    span, stormProbes)
  if pause('paused', reason) then
    return {'org', reason, stormNow}
  end
end

if kind == '' then
  return {'', '', stormNow}
end
local orgEntries = push('org')
local tokEntries = tokenId ~= '' and push('tok:' .. tokenId) or nil
if share == 'off' or redis.call('HEXISTS', policyKey, 'paused') == 1 then
  return {'', '', stormNow}
end

local reason
if kind == 'h' then
  reason = string.format('1 call answered %s: a person must look', words[code] or code)
else
  reason = judge(orgEntries)
end
if reason then
  if pause('paused', reason) then
    return {'org', reason, stormNow}
  end
  return {'', '', stormNow}
end
if tokEntries and redis.call('HEXISTS', policyKey, 'paused:' .. tokenId) == 0 then
  local tokenReason = judge(tokEntries)
  if tokenReason and pause('paused:' .. tokenId, tokenReason) then
    return {'token', tokenReason, stormNow}
  end
end
return {'', '', stormNow}
