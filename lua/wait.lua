--[[
  wait: the current queue wait of one carrier, max(0, last(c) + I - now).

  KEYS[1]  the carrier's pacing state (a string: its latest slot as a base and the intervals
           since, includes/slots.lua)
  ARGV[1]  now: µs since the epoch (integer); empty = read Redis TIME
  ARGV[2]  the carrier's rate "p/q" (cps = p / q; I = 1e6 q / p µs)
  Reply: { waitUs (string), now (string) }
]]
--- @include "common"
--- @include "slots"

local t = readNow(ARGV[1])
local _, _, wait = nextSlot(slotState(redis.call('GET', KEYS[1])), rateOf(ARGV[2]), t)
return { fmt(wait), fmt(t) }
