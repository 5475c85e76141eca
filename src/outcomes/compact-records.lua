--[[
  Compacts final records an earlier release wrote whole (state version 5, app/state-upgrade.ts), as
  finish-attempt.lua does (includes/compact.lua). Others are left as they are: safe to run again.

  KEYS[1]  outcomes hash ({org}:out)   KEYS[2] audit stream ({org}:audit)
  KEYS[3]  audit dedupe hash ({org}:audit:ids)
  ARGV[1..] learner ids

  Those records name no dedupe keys (`ak`): they are derived (`t:<id>`, the plain id, `a:`/`r:` per attempt).

  Returns the number of records compacted.
]]
--- @keys 3
--- @include "compact"
local done = 0
for i = 1, #ARGV do
  local learner = ARGV[i]
  local text = redis.call('HGET', KEYS[1], learner)
  local ok, rec = false, nil
  if text then ok, rec = pcall(cjson.decode, text) end
  if not ok or type(rec) ~= 'table' then rec = nil end
  local b = rec and rec['b'] or ''
  local whole = rec and (rec['h'] ~= nil or rec['au'] ~= nil or rec['ai'] ~= nil)
  if rec and b ~= '' and b ~= 'queued' and b ~= 'retrying' and whole then
    local ak = lt_list(rec['ak'])
    if rec['x'] then
      ak[#ak + 1] = 't:' .. rec['x']
      ak[#ak + 1] = rec['x']
    end
    for _, id in ipairs(lt_list(rec['ai'])) do
      ak[#ak + 1] = 'a:' .. id
      ak[#ak + 1] = 'r:' .. id
    end
    rec['ak'] = ak
    lt_compact(rec, learner, rec['r'] or '', b, rec['t'] or 0, KEYS[2], KEYS[3])
    redis.call('HSET', KEYS[1], learner, cjson.encode(rec))
    done = done + 1
  end
end
return done
