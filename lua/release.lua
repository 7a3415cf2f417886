--[[
  release: the end of a call (hang-up): drop its call records and every hold they name.

  KEYS        the call's records (its inbound and/or outbound one; they may not exist): strings
              "<end of its holds, µs> <hold name> ..." (includes/channels.lua)
  ARGV[1]     now: µs since the epoch (integer); empty = read Redis TIME
  ARGV[2]     the call's id (key-safe): its member in each holds sorted set
  ARGV[3]     tombstone expiry, ms ('' or absent = none): leave <base>gone:in:<id> (gone:out:)
              beside each record found missing, so that a process writing its holds again
              (reassert.lua) does not bring the call back (releases soon after a loss)
  ARGV[4]     '1': leave the tombstone beside every record, found or not (a release re-sent
              after a loss, or once answered when it may have landed between a re-assertion's
              read of the ledger and its write: src/store/redis/holds-keeper.ts), else ''
  ARGV[5]     '1': no slot can move (a single Redis, not a Cluster): the holds the records name
              are not read before the first write (includes/channels.lua, readRecordAll); else
              '' or absent
  Reply: { released (the records that still held at now: end > now), now }
]]
--- @include "common"
--- @include "channels"

local t = readNow(ARGV[1])
local tombMs = ARGV[3]
local id = ARGV[2]
-- on a Cluster every key to touch read first (readRecordAll): a slot being moved fails the
-- script before any write, so that sending it again is safe
local found, tombs = {}, {}
local unmoved = ARGV[5] == '1'
for i = 1, #KEYS do
  local e, holds = readRecordAll(KEYS[i], unmoved)
  found[i] = { e, holds }
  if tombMs ~= nil and tombMs ~= '' and (e == nil or ARGV[4] == '1') then
    tombs[i] = string.gsub(KEYS[i], 'call:(%a+):([^:]*)$', 'gone:%1:%2')
    if not unmoved then
      redis.call('PTTL', tombs[i])
    end
  end
end
local released = 0
for i = 1, #KEYS do
  local e, holds = found[i][1], found[i][2]
  if e ~= nil then
    dropRead(KEYS[i], id, holds)
    if e > t then
      released = released + 1
    end
  end
  if tombs[i] then
    redis.call('SET', tombs[i], '1', 'PX', tombMs)
  end
end
return { released, t }
