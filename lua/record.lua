--[[
  record: record one event in several buckets at once, unconditionally (a call that must pass,
  such as an emergency call, still counts against every limit, channels included).

  KEYS        every structure of the buckets, each named once: sliding-log sorted sets
              (members = event ids, scores = µs), window hashes {w, c, p} and holds sorted
              sets (includes/channels.lua); then, on a Cluster, the call record ARGV[4] names
              (declared so that a Cluster checks it before the script runs, as in admit.lua)
  ARGV[1]     now: µs since the epoch (integer); empty = read Redis TIME
  ARGV[2]     member: a unique id for this event (the sorted-set member)
  ARGV[3]     ttl floor, ms: the least expiry of a written key (0 when now is Redis TIME;
              a long floor when the caller's clock is virtual, so keys outlive real time)
  ARGV[4]     call record key, <base>call:in:<id> ('' when no bucket has a channel limit)
  ARGV[5]     the call's id (key-safe; '' when none)
  ARGV[6]     how long the call holds its channels, µs
  ARGV[7]     deadline, µs in Redis time ('' = none): past it the call is skipped, not counted
  ARGV[8..]   the profiles and buckets (includes/buckets.lua; their limits are not checked)
  Reply: { now (integer, µs), 0, or 1 when the call's record still held at now (a repeat:
         nothing counted), or 2 when it was skipped (past its deadline: nothing counted) }
]]
--- @include "common"
--- @include "log"
--- @include "buckets"
--- @include "channels"

local t = readNow(ARGV[1])
local ts = fmtInt(t)
local member = ARGV[2]
local floorMs = tonumber(ARGV[3])
local record, id, forUs = ARGV[4], ARGV[5], tonumber(ARGV[6])
local bLog, bRet, bHash, bLo, _, _, lL, _, _, hashW, _, bHold = readBuckets(8)
if pastDeadline(ARGV[7]) then
  return { t, 2 }
end
if id ~= '' then
  local e = recordEnd(record)
  if e and e > t then
    return { t, 1 }
  end
end
local holdKeys = {}
for b = 1, #bRet do
  local log = bLog[b]
  if log > 0 then
    -- (a bucket's first limit is its widest sliding log)
    logWrite(KEYS[log], t, bRet[b], lL[bLo[b]], false, '', true, floorMs, ts, member)
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
  if bHold[b] > 0 then
    holdKeys[#holdKeys + 1] = KEYS[bHold[b]]
  end
end
if id ~= '' and forUs > 0 then
  local e = t + forUs
  for _, k in ipairs(holdKeys) do
    if ARGV[1] == '' then
      -- on Redis TIME, lapsed holds dropped 128 at most, as by an admission at the limit (a
      -- count against a limit of 0: exact); a trim of every lapsed hold could take milliseconds
      writeHolds(k, { [id] = e }, t, ts, floorMs, liveHolds(k, ts, 0))
    else
      writeHolds(k, { [id] = e }, t, ts, floorMs)
    end
  end
  writeRecord(record, e, holdKeys, t, floorMs)
end
return { t, 0 }
