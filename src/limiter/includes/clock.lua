--[[
  The limiter's one clock, shared by acquire.lua, settle.lua, learn.lua, peek.lua and peek-frees.lua
  (each has `--- @include "clock"`): Redis TIME, one clock for every process (see "Clock" in
  acquire.lua). One part, so the scripts cannot disagree on what "now" is, and so the model test of the
  limiter can load these same scripts with a stepped clock put in this part's place (test/model/limiter-clock.ts).
]]

-- Now: whole ms since the epoch, and the µs within that ms (a permit id carries them, to order the
-- permits of one ms: learn.lua counts those acquired before a refused one).
local function lt_now()
  local time = redis.call('TIME')
  local micros = tonumber(time[2])
  return tonumber(time[1]) * 1000 + math.floor(micros / 1000), micros % 1000
end
