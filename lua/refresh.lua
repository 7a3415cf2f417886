--[[
  refresh: a long call's holds last longer: every record of the call still holding at now (end
  > now) and each of its holds now end at now + forUs.

  KEYS        the call's records (inbound and/or outbound; includes/channels.lua)
  ARGV[1]     now: µs since the epoch (integer); empty = read Redis TIME
  ARGV[2]     the call's id (key-safe)
  ARGV[3]     forUs: how long the holds last from now, µs
  ARGV[4]     ttl floor, ms (0 when now is Redis TIME; see record.lua)
  ARGV[5]     '1': no slot can move (a single Redis, not a Cluster): the holds the records name
              are not read before the first write (includes/channels.lua, readRecordAll); else
              '' or absent
  Reply: { refreshed (the records extended), now }
]]
--- @include "common"
--- @include "channels"

local t = readNow(ARGV[1])
local ts = fmtInt(t)
local id = ARGV[2]
local e = t + tonumber(ARGV[3])
local floorMs = tonumber(ARGV[4])
local refreshed = 0
-- on a Cluster every key to touch read first (readRecordAll): a slot being moved fails the
-- script before any write, so that sending it again is safe
local found = {}
local unmoved = ARGV[5] == '1'
for i = 1, #KEYS do
  found[i] = { readRecordAll(KEYS[i], unmoved) }
end
for i = 1, #KEYS do
  local old, keys = found[i][1], found[i][2]
  if old ~= nil and old > t then
    refreshed = refreshed + 1
    for _, k in ipairs(keys) do
      -- ZADD without XX: a hold trimmed meanwhile (a caller-given clock gone back) comes back
      redis.call('ZADD', k, fmtInt(e), id)
      keepUntil(k, e, t, floorMs)
    end
    writeRecord(KEYS[i], e, keys, t, floorMs)
  end
end
return { refreshed, t }
