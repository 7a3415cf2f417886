--[[
  add: record one event in several buckets at once, unconditionally (a call that must pass,
  such as an emergency call, still counts against every limit).

  KEYS        as in admit.lua: the sliding-log sorted sets, then the window hashes
  ARGV[1]     now: µs since the epoch (integer); empty = read Redis TIME
  ARGV[2]     member: a unique id for this event (the sorted-set member)
  ARGV[3]     ttl floor, ms (see admit.lua)
  ARGV[4..]   the structures (includes/buckets.lua; no limits follow them)
  Reply: now (integer, µs)
]]
--- @include "common"
--- @include "buckets"

local t = readNow(ARGV[1])
local ts = fmtInt(t)
local nl, nw = tonumber(ARGV[4]), tonumber(ARGV[5])
trimLogs(nl, bounds(t))
recordLogs(nl, ts, ARGV[2])
if nw > 0 then
  local floorMs = tonumber(ARGV[3])
  local wBase = 5 + 2 * nl
  for j = 1, nw do
    local key = KEYS[nl + j]
    local w, c, p = readHash(key)
    recordWindow(key, w, c, p, t, tonumber(ARGV[wBase + j]), floorMs)
  end
end
return t
