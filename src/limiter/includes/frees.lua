--[[
  When the permits counted in one window leave it, for the ETA's simulation (peek-frees.lua).
  A permit in the log (or in flight past its deadline) at score s leaves at s + window + 1 (acquire.lua,
  "Counting"); its inMs is that time less now, rounded UP to a multiple of ceil((window + 1) / steps), so
  no permit is said to leave earlier than it does. A permit still in flight is counted as settled now.
  At most 2 * steps + 2 ZCOUNTs, however full the window is.
]]

-- The frees of one scope at `now`: {inMs, count, ...}, ascending; one count per step when many.
-- `inflight`: the scope's entries still in flight, said to leave at window + 1.
local function lt_frees(now, logKey, inflightKey, window, inflight, steps)
  local from = now - window
  local step = math.ceil((window + 1) / steps)
  local logged = redis.call('ZCOUNT', logKey, from, '+inf')
  local expired = redis.call('ZCOUNT', inflightKey, from, now)
  local counts = {}
  if logged + expired <= steps then
    local function add(scores)
      for i = 2, #scores, 2 do
        local b = math.ceil((tonumber(scores[i]) + window + 1 - now) / step)
        counts[b] = (counts[b] or 0) + 1
      end
    end
    if logged > 0 then
      add(redis.call('ZRANGE', logKey, from, '+inf', 'BYSCORE', 'WITHSCORES'))
    end
    if expired > 0 then
      add(redis.call('ZRANGE', inflightKey, from, now, 'BYSCORE', 'WITHSCORES'))
    end
  else
    -- Step b holds the scores s with (b - 1) * step < s + window + 1 - now <= b * step.
    for b = 1, steps do
      local lo = string.format('(%d', now - window - 1 + (b - 1) * step)
      local hi = now - window - 1 + b * step
      local c = redis.call('ZCOUNT', logKey, lo, hi)
      if expired > 0 then
        c = c + redis.call('ZCOUNT', inflightKey, lo, math.min(hi, now))
      end
      if c > 0 then
        counts[b] = c
      end
    end
  end
  local out = {}
  for b = 1, steps do
    if counts[b] then
      out[#out + 1] = math.min(b * step, window + 1)
      out[#out + 1] = counts[b]
    end
  end
  if inflight > 0 then
    out[#out + 1] = window + 1
    out[#out + 1] = inflight
  end
  return out
end
