--[[
  Learn from a 429 (docs/budget.md, "Learned limits"): in one step in the organization's slot, count
  what the service had accepted from us in the window, lower the limit in force when that is below it,
  and count the 429. Every acquire reads the result from the policy hash.

  Input:
    KEYS[1]  token log        KEYS[2]  token inflight     KEYS[3]  token refused
    KEYS[4]  org log          KEYS[5]  org inflight       KEYS[6]  org refused
    KEYS[7]  policy hash
      A "refused" set holds the permits the service answered 429 (permit id -> its log score), kept for
      one window: the service did not accept them, so a later count leaves them out. The logs keep them
      (a 429 is counted against our budget like any answer: never less safe).
    ARGV[1..4]  fallback token max, token window, org max, org window (as acquire.lua's ARGV[1..4])
    ARGV[5]     token id (fingerprint) the 429 came on
    ARGV[6]     the refused request's permit id ("<ms>.<µs>-<random>": acquire.lua puts its acquire time first)
    ARGV[7]     how many tokens the caller's pool has for the organization (1: the token is the org)

  Output: {count429, tokenAccepted, tokenLimit, learnedToken, orgAccepted, orgLimit, learnedOrg, cause}
    count429       the token's 429s so far (policy field 429:<id>)
    tokenAccepted  what the service had accepted on the token in its window (see Counting)
    tokenLimit     the token's limit in force before this 429 (learned or configured)
    learnedToken   the token limit learned now, 0 when none
    orgAccepted    idem for the organization (-1 when not counted: only a refuted token needs it)
    orgLimit       the organization's limit in force before this 429 (less the reserve)
    learnedOrg     the organization limit learned now, 0 when none
    cause          'token' | 'org' (the token was refuted, see below) | 'repeat' (this permit was
                   already learned from: nothing changed)

  Counting. accepted = the scope's permits acquired before the refused one (acquired before, so sent
  and counted before) that are in the window or in flight, less those answered 429. It can be one short
  at the window's edge: learning errs low, and the probe gives it back.

  Token or organization (the service does not say which refused; why: docs/budget.md):
  - A 429 is put down to the token first: learned:tok:<id> = "max(1, tokenAccepted) now" when below
    the token's limit in force. Never raised.
  - A token refused below a limit it learned (tokenAccepted < learned - margin, margin =
    max(2, ceil(learned / 10))), on a request acquired after it was learned, is "refuted": it keeps its
    limit, and refuted:<id> = now.
  - The organization is learned from a refuted token's 429 only, when the pool has one token, another
    token was refuted within one organization window, or orgAccepted is at the organization's learned
    limit (>= learned - margin, acquired after it): learned:org = "max(1, orgAccepted) now", if below
    its limit in force.
]]
--- @keys 7
--- @include "policy"
--- @include "clock"
local now = lt_now()

local tokenId, permitId = ARGV[5], ARGV[6]
local poolSize = tonumber(ARGV[7]) or 1
local policyKey = KEYS[7]

-- The same permit learned from twice (a retried call): nothing more.
if redis.call('ZSCORE', KEYS[3], permitId) then
  local count = tonumber(redis.call('HGET', policyKey, '429:' .. tokenId)) or 0
  return {count, -1, -1, 0, -1, -1, 0, 'repeat'}
end

local policy = lt_policy(policyKey)
local function rate(field, max, window)
  local m, w = lt_rate(policy, field, max, window)
  return m, w
end
local tokenMax, tokenWindow = rate('token', tonumber(ARGV[1]), tonumber(ARGV[2]))
tokenMax, tokenWindow = rate('tok:' .. tokenId, tokenMax, tokenWindow)
local orgMax, orgWindow = rate('org', tonumber(ARGV[3]), tonumber(ARGV[4]))
local orgUsable = orgMax - math.max(0, tonumber(policy['reserve']) or 0)

-- The learned limit in force (as acquire.lua computes it), and the learned max (nil: none).
local function learned(field, limit, configured, window)
  local value, m, at = lt_learned(policy, field, limit, configured, window, now)
  return value, m, at
end
local tokenLimit, tokenBase, tokenAt = learned('learned:tok:' .. tokenId, tokenMax, tokenMax, tokenWindow)
local orgLimit, orgBase, orgAt = learned('learned:org', orgUsable, orgMax, orgWindow)

-- A permit id starts with its acquire time: "<ms>.<µs>-" (or "<ms>-", from earlier releases).
local function acquiredAt(id)
  local ms, us = string.match(id, '^(%d+)%.?(%d*)-')
  if not ms then
    return nil
  end
  return tonumber(ms) + (tonumber(us) or 0) / 1000
end
local ownAcquired = acquiredAt(permitId)
-- Only a request granted under a learned limit (acquired after it was learned) can refute it.
local function after(at)
  return at ~= nil and ownAcquired ~= nil and ownAcquired >= at
end
local function before(id)
  local at = acquiredAt(id)
  -- An id of another form is counted: learning errs high then, and the next 429 corrects it.
  return at == nil or ownAcquired == nil or at < ownAcquired
end

-- See "Counting" above.
local function accepted(logKey, inflightKey, refusedKey, window)
  local from = now - window
  local n = 0
  for _, id in ipairs(redis.call('ZRANGE', logKey, from, '+inf', 'BYSCORE')) do
    if before(id) then
      n = n + 1
    end
  end
  for _, id in ipairs(redis.call('ZRANGE', inflightKey, 0, -1)) do
    if before(id) then
      n = n + 1
    end
  end
  for _, id in ipairs(redis.call('ZRANGE', refusedKey, from, '+inf', 'BYSCORE')) do
    if before(id) then
      n = n - 1
    end
  end
  return math.max(0, n)
end

-- The refused permit, with its log score (now when it is not settled yet), for one window.
local function markRefused(logKey, refusedKey, window)
  redis.call('ZREMRANGEBYSCORE', refusedKey, '-inf', string.format('(%d', now - window))
  redis.call('ZADD', refusedKey, redis.call('ZSCORE', logKey, permitId) or now, permitId)
  local ttl = window + 1000
  if redis.call('PTTL', refusedKey) < ttl then
    redis.call('PEXPIRE', refusedKey, ttl)
  end
end

local function margin(n)
  return math.max(2, math.ceil(n / 10))
end

local count429 = redis.call('HINCRBY', policyKey, '429:' .. tokenId, 1)
local tokenAccepted = accepted(KEYS[1], KEYS[2], KEYS[3], tokenWindow)
local orgAccepted = -1
local learnedToken, learnedOrg, cause = 0, 0, 'token'

if after(tokenAt) and tokenAccepted < tokenBase - margin(tokenBase) then
  cause = 'org'
  redis.call('HSET', policyKey, 'refuted:' .. tokenId, string.format('%d', now))
  orgAccepted = accepted(KEYS[4], KEYS[5], KEYS[6], orgWindow)
  local evidence = poolSize <= 1 or (after(orgAt) and orgAccepted >= orgBase - margin(orgBase))
  for field, value in pairs(policy) do
    if string.sub(field, 1, 8) == 'refuted:' and field ~= 'refuted:' .. tokenId then
      local at = tonumber(value) or 0
      if at >= now - orgWindow then
        evidence = true
      else
        redis.call('HDEL', policyKey, field) -- stale: it no longer counts as evidence
      end
    end
  end
  if evidence and orgAccepted < orgLimit then
    learnedOrg = math.max(1, orgAccepted)
    redis.call('HSET', policyKey, 'learned:org', string.format('%d %d', learnedOrg, now))
  end
elseif tokenAccepted < tokenLimit then
  local max = math.max(1, tokenAccepted)
  if max < tokenMax then
    learnedToken = max
    redis.call('HSET', policyKey, 'learned:tok:' .. tokenId, string.format('%d %d', max, now))
  end
end

markRefused(KEYS[1], KEYS[3], tokenWindow)
markRefused(KEYS[4], KEYS[6], orgWindow)
return {count429, tokenAccepted, tokenLimit, learnedToken, orgAccepted, orgLimit, learnedOrg, cause}
