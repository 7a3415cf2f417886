--[[
  reset: an operator empties one bucket (`callgate reset`, POST /v1/reset): its sliding log, its
  window counters and its holds. The call records of the calls that held there stop naming the
  bucket (a refresh must not bring the hold back); their holds elsewhere stay.

  KEYS[1]     the bucket's sliding log (sorted set of events; may not exist)
  KEYS[2]     the bucket's holds sorted set (members = call ids, scores = hold ends, µs)
  KEYS[3..]   the bucket's window hashes {w, c, p}, one per window of its limits (may not exist)
  ARGV[1]     now: µs since the epoch (integer); empty = read Redis TIME
  ARGV[2]     the base of the bucket's tag (<prefix>{<tag>}: or <prefix>): the inbound call
              records are <base>call:in:<id>, and hold names in them are relative to it
  Reply: { now, events removed from the log, window hashes removed, then per hold that was live
         at now (end > now), earliest end first: its call id and its end (µs, integer string) }
]]
--- @include "common"

local t = readNow(ARGV[1])
local base = ARGV[2]
local holdName = string.sub(KEYS[2], #base + 1)
-- the holds and every record they name read before any write: on a Cluster slot being moved to
-- another master, a record that has left (or expired) fails the script here, changing nothing
-- (ZRANGEBYSCORE rather than ZRANGE: the minimal ACL user has it, docs/redis.md). On Redis TIME
-- only the holds in progress (end > now): lapsed ones (a set keeps them while below its limit,
-- and sheds them 128 at a time at it, includes/channels.lua, liveHolds) go with the set, their
-- records expired with them. With a caller-given time a record outlives its hold (a
-- virtual-time floor), and a refresh at an earlier time would bring the hold back: every
-- member's record loses the bucket then.
local from = ARGV[1] == '' and '(' .. fmtInt(t) or '-inf'
local members = redis.call('ZRANGEBYSCORE', KEYS[2], from, '+inf', 'WITHSCORES')
local records = {}
for i = 1, #members, 2 do
  local rk = base .. 'call:in:' .. members[i]
  records[i] = { rk, redis.call('GET', rk) }
end

local out = { t, redis.call('ZCARD', KEYS[1]), 0 }
redis.call('DEL', KEYS[1])
local windows = 0
for i = 3, #KEYS do
  windows = windows + redis.call('DEL', KEYS[i])
end
out[3] = windows

for i = 1, #members, 2 do
  local id, e = members[i], tonumber(members[i + 1])
  if e > t then
    out[#out + 1] = id
    out[#out + 1] = fmtInt(e)
  end
  -- the call's record without this bucket's hold (its TTL kept)
  local rk, v = records[i][1], records[i][2]
  if v then
    local parts = {}
    for part in string.gmatch(v, '%S+') do
      if part ~= holdName then
        parts[#parts + 1] = part
      end
    end
    redis.call('SET', rk, table.concat(parts, ' '), 'KEEPTTL')
  end
end
redis.call('DEL', KEYS[2])
return out
