--[[
  add: record one event in several buckets at once, unconditionally (a call that must pass,
  such as an emergency call, still counts against every limit).

  KEYS        every structure of the buckets, each named once: sliding-log sorted sets
              (members = event ids, scores = µs) and window hashes {w, c, p}
  ARGV[1]     now: µs since the epoch (integer); empty = read Redis TIME
  ARGV[2]     member: a unique id for this event (the sorted-set member)
  ARGV[3]     ttl floor, ms: the least expiry of a written key (0 when now is Redis TIME;
              a long floor when the caller's clock is virtual, so keys outlive real time)
  ARGV[4..]   the profiles and buckets (includes/buckets.lua; their limits are not checked)
  Reply: now (integer, µs)
]]
--- @include "common"
--- @include "buckets"

local t = readNow(ARGV[1])
local ts = fmtInt(t)
local member = ARGV[2]
local floorMs = tonumber(ARGV[3])
local bLog, bRet, bHash, _, _, _, _, _, _, hashW = readBuckets(4)
for b = 1, #bRet do
  local log = bLog[b]
  if log > 0 then
    trimLog(KEYS[log], t, bRet[b])
    redis.call('ZADD', KEYS[log], ts, member)
    redis.call('PEXPIRE', KEYS[log], fmtInt(ttlMs(bRet[b], floorMs)))
  end
  local hashes = bHash[b]
  if hashes then
    for _, k in ipairs(hashes) do
      local W = hashW[k]
      local w, c, p = readHash(KEYS[k])
      w, c, p = countIn(w, c, p, windowIndex(t, W))
      if w then
        writeHash(KEYS[k], w, c, p, t, W, floorMs)
      end
    end
  end
end
return t
