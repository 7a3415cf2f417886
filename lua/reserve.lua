--[[
  reserve: leaky-bucket pacing over routes, for a batch of calls decided one after the other in
  the order given (each exactly as it would be as a script call of its own, in that order).
  Each carrier c sends one call per interval I; last(c) is the latest slot given on c. For each
  carrier of the call's route, in order: slot = max(t, last(c) + I), wait = slot - t; the first
  carrier with wait <= maxWait takes the call (last(c) = slot). Carriers passed over keep their
  state: nothing is reserved on a refusal.

  KEYS        every carrier of the batch, once: its last slot (a string, µs)
  ARGV[1]     ttl floor, ms, for calls whose now is given (see admit.lua)
  ARGV[2]     NR, the number of routes, then per route: n, then per carrier in route order:
              its key (1-based index in KEYS), I (µs, may be fractional), maxWait (µs)
  then the calls, in runs that share a time (includes/runs.lua), one route index (1-based) per
  call
  Reply: per call, m (the number of carriers tried) and then: index (1-based carrier that took
         the call; 0 = none), waitUs, slotUs (0 when none), now, and the wait of each carrier
         tried, in order (times as strings: I may be fractional)

  How the work is shared: calls with the same t form a group; in a group each carrier is read
  once (GET) and written once (SET with expiry) when the time changes or the batch ends.
]]
--- @include "common"
--- @include "runs"

local floorMs = tonumber(ARGV[1])
local routes = {}
local a = 3
for r = 1, tonumber(ARGV[2]) do
  local n = tonumber(ARGV[a])
  local keys, Is, maxWaits = {}, {}, {}
  for i = 1, n do
    local j = a + 3 * i - 2
    keys[i], Is[i], maxWaits[i] = tonumber(ARGV[j]), tonumber(ARGV[j + 1]), tonumber(ARGV[j + 2])
  end
  routes[r] = { keys, Is, maxWaits }
  a = a + 1 + 3 * n
end

local t, ts -- the group's time (number, string)
local last, loaded, lastI, dirty -- per carrier key index

local function newGroup(now)
  t, ts = now, fmtInt(now)
  last, loaded, lastI, dirty = {}, {}, {}, {}
end

local function writeGroup(floor)
  for k in pairs(dirty) do
    -- last(c) matters until slot + I: after that every call gets slot = t anyway
    redis.call('SET', KEYS[k], fmt(last[k]), 'PX', fmtInt(ttlMs(last[k] + lastI[k] - t, floor)))
  end
end

local out = {}
eachCall(a, floorMs, newGroup, function(r)
  local route = routes[tonumber(r)]
  local keys, Is, maxWaits = route[1], route[2], route[3]
  local head = #out
  out[head + 1] = 0 -- m, set below
  out[head + 2], out[head + 3], out[head + 4], out[head + 5] = 0, '0', '0', ts
  local m = 0
  for i = 1, #keys do
    local k, I = keys[i], Is[i]
    if not loaded[k] then
      local v = redis.call('GET', KEYS[k])
      last[k] = v and tonumber(v)
      loaded[k] = true
    end
    local slot = t
    if last[k] then
      local nextFree = last[k] + I
      if nextFree > t then
        slot = nextFree
      end
    end
    local wait = slot - t
    local waitText = fmt(wait)
    m = m + 1
    out[head + 5 + m] = waitText
    if wait <= maxWaits[i] then
      last[k], lastI[k], dirty[k] = slot, I, true
      out[head + 2], out[head + 3], out[head + 4] = i, waitText, fmt(slot)
      break
    end
  end
  out[head + 1] = m
end, writeGroup)
return out
