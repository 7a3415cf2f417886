--[[
  count: the number of events in a bucket's sliding log within the window ending now.

  KEYS[1]  the bucket's sliding-log sorted set
  ARGV[1]  now: µs since the epoch (integer); empty = read Redis TIME
  ARGV[2]  W: the window, µs
  Reply: { count = #{s : now - W < s <= now}, now (string, µs) }
]]
--- @include "common"
--- @include "log"

local t = readNow(ARGV[1])
local W = tonumber(ARGV[2])
local ts = fmtInt(t)
return { (logCount(KEYS[1], t, ts, W)), ts }
