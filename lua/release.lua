--[[
  release: the end of a call (hang-up): drop its call records and every hold they name.

  KEYS        the call's records (its inbound and/or outbound one; they may not exist): strings
              "<end of its holds, µs> <hold name> ..." (includes/channels.lua)
  ARGV[1]     now: µs since the epoch (integer); empty = read Redis TIME
  ARGV[2]     the call's id (key-safe): its member in each holds sorted set
  ARGV[3]     tombstone expiry, ms ('' or absent = none): a release re-sent after an outage
              leaves <base>gone:in:<id> (gone:out:) beside each record, so that a process
              writing its holds again (reassert.lua) does not bring the call back
  Reply: { released (the records that still held at now: end > now), now }
]]
--- @include "common"
--- @include "channels"

local t = readNow(ARGV[1])
local tombMs = ARGV[3]
local released = 0
for i = 1, #KEYS do
  if tombMs ~= nil and tombMs ~= '' then
    local tomb = string.gsub(KEYS[i], 'call:(%a+):([^:]*)$', 'gone:%1:%2')
    redis.call('SET', tomb, '1', 'PX', tombMs)
  end
  local e = dropRecord(KEYS[i], ARGV[2])
  if e ~= nil and e > t then
    released = released + 1
  end
end
return { released, t }
