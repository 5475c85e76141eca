--[[
  Compacts final records written whole by a release before the compact record (state version 5, see
  src/app/state-upgrade.ts), as finish-attempt.lua compacts a record that ends final now
  (includes/compact.lua). A record that is not final, or already compacted, is left as it is, so running
  this again, or beside workers of this release, changes nothing.

  KEYS[1]  outcomes hash ({org}:out)   KEYS[2] audit stream ({org}:audit)
  KEYS[3]  audit dedupe hash ({org}:audit:ids)
  ARGV[1..] learner ids

  Records of that release name no dedupe keys (`ak`): the ones an attempt of theirs can have written are
  derived (the transfer's `t:<id>` and the plain id older entries used, and `a:`/`r:` of each merged
  attempt id).

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
