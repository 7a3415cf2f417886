--[[
  wait: the current queue wait of one carrier, max(0, last(c) + I - now).

  KEYS[1]  the carrier's last slot (string, µs)
  ARGV[1]  now: µs since the epoch (integer); empty = read Redis TIME
  ARGV[2]  I: the carrier's interval, µs (may be fractional)
  Reply: { waitUs (string), now (string) }
]]
--- @include "common"

local t = readNow(ARGV[1])
local last = redis.call('GET', KEYS[1])
local wait = 0
if last then
  wait = tonumber(last) + tonumber(ARGV[2]) - t
  if wait < 0 then
    wait = 0
  end
end
return { fmt(wait), fmt(t) }
