--[[
  release: the end of a call (hang-up): drop its call records and every hold they name.

  KEYS        the call's records (its inbound and/or outbound one; they may not exist): strings
              "<end of its holds, µs> <hold name> ..." (includes/channels.lua)
  ARGV[1]     now: µs since the epoch (integer); empty = read Redis TIME
  ARGV[2]     the call's id (key-safe): its member in each holds sorted set
  Reply: { released (the records that still held at now: end > now), now }
]]
--- @include "common"
--- @include "channels"

local t = readNow(ARGV[1])
local released = 0
for i = 1, #KEYS do
  local e = dropRecord(KEYS[i], ARGV[2])
  if e ~= nil and e > t then
    released = released + 1
  end
end
return { released, t }
