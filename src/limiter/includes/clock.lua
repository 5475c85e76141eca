--[[
  The limiter's one clock, Redis TIME (acquire.lua "Clock"), included by every limiter script; the
  model test puts a stepped clock in its place (test/model/limiter-clock.ts).
]]

-- Now: whole ms since the epoch, and the µs within that ms (a permit id carries them, so
-- learn.lua can order the permits of one ms).
local function lt_now()
  local time = redis.call('TIME')
  local micros = tonumber(time[2])
  return tonumber(time[1]) * 1000 + math.floor(micros / 1000), micros % 1000
end
