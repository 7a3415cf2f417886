--[[
  holds: the calls in progress in one bucket or on one carrier.

  KEYS[1]  the holds sorted set (members = call ids, scores = hold ends, µs)
  ARGV[1]  now: µs since the epoch (integer); empty = read Redis TIME
  Reply: { holds = #{members scored above now}, now }
]]
--- @include "common"

local t = readNow(ARGV[1])
return { redis.call('ZCOUNT', KEYS[1], '(' .. fmtInt(t), '+inf'), t }
