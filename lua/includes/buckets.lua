-- The structures of admit and add, after ARGV[1..3] (now, member, ttl floor):
--   ARGV[4]   nl, the number of sliding logs: KEYS[1..nl], one per bucket with sliding-log limits
--   ARGV[5]   nw, the number of window hashes: KEYS[nl + 1 .. nl + nw], one per bucket and
--             distinct window of its fixed-/sliding-window limits
--   then per log (2 each):   retention µs (max W of its bucket's sliding-log limits),
--                            expiry ms after an event (ttlMs(retention, floor), given by the caller)
--   then per window hash:    W, µs
--   then (admit only) per limit, buckets in order, and within a bucket its sliding-log limits
--   widest window first (5 each):
--     b         1-based index of the limit's bucket
--     algo      'l' sliding-log | 'f' fixed-window | 's' sliding-window
--     L         the limit (events per window)
--     W         the window, µs
--     s         the structure it reads: index of its log (1..nl) or of its window hash (1..nw)
-- Every argument is a string Redis can take as is, and every number handed back to Redis goes
-- through fmtInt: converting Lua numbers is the costly part of a script this small.

-- t - W as a score string, each distinct W formatted once per call.
local function bounds(t)
  local cache = {}
  return function(W)
    local s = cache[W]
    if not s then
      s = fmtInt(t - W)
      cache[W] = s
    end
    return s
  end
end

-- Drop log entries no limit can see any more (s <= t - retention).
local function trimLogs(nl, bound)
  for i = 1, nl do
    redis.call('ZREMRANGEBYSCORE', KEYS[i], '-inf', bound(tonumber(ARGV[4 + 2 * i])))
  end
end

-- Window hash {w = latest window index, c = its count, p = count of window w - 1}: its fields
-- as numbers (w nil when the hash does not exist). Only two windows are kept.
local function readHash(key)
  local s = redis.call('HMGET', key, 'w', 'c', 'p')
  if not s[1] then
    return nil, 0, 0
  end
  return tonumber(s[1]), tonumber(s[2]), tonumber(s[3])
end

-- The counts of window k and of window k - 1, given the hash's fields.
local function windowCounts(w, c, p, k)
  if w == nil then
    return 0, 0
  elseif k == w then
    return c, p
  elseif k == w + 1 then
    return 0, c
  elseif k == w - 1 then
    return p, 0
  end
  return 0, 0
end

-- Count one event at t in a window hash whose fields were w, c, p.
local function recordWindow(key, w, c, p, t, W, floorMs)
  local k = windowIndex(t, W)
  if not w or k > w + 1 then
    w, c, p = k, 1, 0
  elseif k == w + 1 then
    w, c, p = k, 1, c
  elseif k == w then
    c = c + 1
  elseif k == w - 1 then
    p = p + 1
  else
    return -- older than the two windows kept: nowhere to count it
  end
  redis.call('HSET', key, 'w', fmtInt(w), 'c', fmtInt(c), 'p', fmtInt(p))
  redis.call('PEXPIRE', key, fmtInt(ttlMs((w + 2) * W - t, floorMs)))
end

-- Count the event once in every log.
local function recordLogs(nl, ts, member)
  for i = 1, nl do
    redis.call('ZADD', KEYS[i], ts, member)
    redis.call('PEXPIRE', KEYS[i], ARGV[5 + 2 * i])
  end
end
