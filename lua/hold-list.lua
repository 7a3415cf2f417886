--[[
  hold-list: the calls in progress in one bucket or on one carrier, with their ends (an
  operator's view: `callgate holds`, GET /v1/holds). Read-only.

  KEYS[1]  the holds sorted set (members = call ids, key-safe; scores = hold ends, µs)
  ARGV[1]  now: µs since the epoch (integer); empty = read Redis TIME
  ARGV[2]  max: the most holds to return (integer >= 1)
  Reply: { now, total (members scored above now), then per hold returned, earliest end first:
         its call id and its end (µs, as an integer string) }
]]
--- @include "common"

local t = readNow(ARGV[1])
local above = '(' .. fmtInt(t)
local out = { t, redis.call('ZCOUNT', KEYS[1], above, '+inf') }
local listed = redis.call('ZRANGEBYSCORE', KEYS[1], above, '+inf', 'WITHSCORES', 'LIMIT', 0, ARGV[2])
for i = 1, #listed, 2 do
  out[#out + 1] = listed[i]
  out[#out + 1] = fmtInt(tonumber(listed[i + 1]))
end
return out
