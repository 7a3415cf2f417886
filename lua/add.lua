--[[
  add: record one event in several buckets at once, unconditionally (a call that must pass,
  such as an emergency call, still counts against every limit).

  KEYS[1..n]  as in admit.lua: per bucket its sliding-log sorted set and its window hashes
  ARGV[1]     now: µs since the epoch (integer); empty = read Redis TIME
  ARGV[2]     member: a unique id for this event (the sorted-set member)
  ARGV[3]     ttl floor, ms (see admit.lua)
  ARGV[4..]   the bucket descriptors (includes/buckets.lua)
  Reply: now (string, µs)
]]
--- @include "common"
--- @include "buckets"

local t = readNow(ARGV[1])
local buckets = parseBuckets()
trimLogs(buckets, t)
recordAll(buckets, t, ARGV[2], tonumber(ARGV[3]))
return fmt(t)
