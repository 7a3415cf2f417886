--[[
  admit: check several buckets, each with one or more (limit, window) pairs, and record the
  event in all of them only if every one has room (all or nothing).

  KEYS[1..n]  the structures the buckets read, each named once: per bucket its sliding-log
              sorted set (members = event ids, scores = µs) if it has sliding-log limits, and
              one hash {w, c, p} per distinct window of its fixed-/sliding-window limits.
  ARGV[1]     now: µs since the epoch (integer); empty = read Redis TIME
  ARGV[2]     member: a unique id for this event (the sorted-set member)
  ARGV[3]     ttl floor, ms: the least expiry of a written key (0 when now is Redis TIME;
              a long floor when the caller's clock is virtual, so keys outlive real time)
  ARGV[4..]   the bucket descriptors (includes/buckets.lua: B, then per bucket logKey,
              retention µs, m, then per limit algo, L, W µs, key index)

  Semantics at time t (normative: src/store/types.ts):
    sliding-log     n = #{s : t - W < s <= t}; room iff n < L
    fixed-window    c = count of window floor(t / W); room iff c < L
    sliding-window  room iff c + p * (1 - f) < L, f = (t - kW) / W
  Reply: { admitted 1|0, limitedBy (1-based index of the first bucket without room; 0),
           retryAfterUs (string: max over failing limits of the wait until room), now (string) }
]]
--- @include "common"
--- @include "buckets"

local t = readNow(ARGV[1])
local floorMs = tonumber(ARGV[3])
local buckets = parseBuckets()
trimLogs(buckets, t)

local limitedBy = 0
local retry = 0
for b, bucket in ipairs(buckets) do
  for _, lim in ipairs(bucket.limits) do
    local L, W, key = lim.L, lim.W, KEYS[lim.key]
    local wait = 0
    if lim.algo == 'l' then
      local n = redis.call('ZCOUNT', key, '(' .. fmt(t - W), fmt(t))
      if n >= L then
        -- the (n - L + 1)-th oldest event in the window leaves it at s + W
        local s = redis.call('ZRANGEBYSCORE', key, '(' .. fmt(t - W), fmt(t), 'WITHSCORES', 'LIMIT', n - L, 1)
        wait = tonumber(s[2]) + W - t
      end
    else
      local k = windowIndex(t, W)
      local c, p = readWindow(key, k)
      if lim.algo == 'f' then
        if c >= L then
          wait = (k + 1) * W - t
        end
      else
        local f = (t - k * W) / W
        if c + p * (1 - f) >= L then
          if c >= L then
            wait = (k + 1) * W + math.floor(W * (1 - L / c)) + 1 - t
          else
            wait = k * W + math.floor(W * (1 - (L - c) / p)) + 1 - t
          end
          if wait < 1 then
            wait = 1
          end
        end
      end
    end
    if wait > 0 then
      if limitedBy == 0 then
        limitedBy = b
      end
      if wait > retry then
        retry = wait
      end
    end
  end
end

if limitedBy == 0 then
  recordAll(buckets, t, ARGV[2], floorMs)
  return { 1, 0, '0', fmt(t) }
end
return { 0, limitedBy, fmt(retry), fmt(t) }
