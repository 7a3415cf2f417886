--[[
  reserve: leaky-bucket pacing over a route. Each carrier c sends one call per interval I;
  last(c) is the latest slot given on c. For each carrier in route order:
  slot = max(t, last(c) + I), wait = slot - t; the first carrier with wait <= maxWait takes the
  call (last(c) = slot). Carriers passed over keep their state: nothing is reserved on a refusal.

  KEYS[1..n]  each carrier's last slot (a string, µs), in route order
  ARGV[1]     now: µs since the epoch (integer); empty = read Redis TIME
  ARGV[2]     ttl floor, ms (see admit.lua)
  ARGV[3..]   per carrier, in KEYS order: I (µs, may be fractional), maxWait (µs)
  Reply: { index (1-based carrier that took the call; 0 = none), waitUs (string), slotUs (string),
           now (string), then the wait of each carrier tried, in order (strings) }
]]
--- @include "common"

local t = readNow(ARGV[1])
local floorMs = tonumber(ARGV[2])
local reply = { 0, '0', '0', fmtInt(t) }
for i = 1, #KEYS do
  local I = tonumber(ARGV[1 + 2 * i])
  local maxWait = tonumber(ARGV[2 + 2 * i])
  local last = redis.call('GET', KEYS[i])
  local slot = t
  if last then
    local nextFree = tonumber(last) + I
    if nextFree > t then
      slot = nextFree
    end
  end
  local wait = slot - t
  local waitText = fmt(wait)
  reply[#reply + 1] = waitText
  if wait <= maxWait then
    -- last(c) matters until slot + I: after that every call gets slot = t anyway
    local slotText = fmt(slot)
    redis.call('SET', KEYS[i], slotText, 'PX', fmtInt(ttlMs(slot + I - t, floorMs)))
    reply[1] = i
    reply[2] = waitText
    reply[3] = slotText
    return reply
  end
end
return reply
