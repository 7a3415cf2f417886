-- Bucket descriptors, shared by admit and add. After ARGV[1..3] (now, member, ttl floor):
--   ARGV[4]   B, the number of buckets; then for each bucket:
--     logKey      index in KEYS of its sliding-log sorted set (0: no sliding-log limit)
--     retention   µs of history its log keeps (max W of its sliding-log limits)
--     m           number of limits; then for each limit:
--       algo      'l' sliding-log | 'f' fixed-window | 's' sliding-window
--       L         the limit (events per window)
--       W         the window, µs
--       key       index in KEYS of the structure it reads: the log, or the window hash of W
local function parseBuckets()
  local buckets = {}
  local i = 5
  for b = 1, tonumber(ARGV[4]) do
    local bucket = { logKey = tonumber(ARGV[i]), retention = tonumber(ARGV[i + 1]), limits = {} }
    local m = tonumber(ARGV[i + 2])
    i = i + 3
    for j = 1, m do
      bucket.limits[j] = { algo = ARGV[i], L = tonumber(ARGV[i + 1]), W = tonumber(ARGV[i + 2]), key = tonumber(ARGV[i + 3]) }
      i = i + 4
    end
    buckets[b] = bucket
  end
  return buckets
end

-- Window hash {w = latest window index, c = its count, p = count of window w - 1}.
-- Returns the counts of t's window k and of window k - 1; only two windows are kept.
local function readWindow(key, k)
  local s = redis.call('HMGET', key, 'w', 'c', 'p')
  if not s[1] then
    return 0, 0
  end
  local w, c, p = tonumber(s[1]), tonumber(s[2]), tonumber(s[3])
  if k == w then
    return c, p
  elseif k == w + 1 then
    return 0, c
  elseif k == w - 1 then
    return p, 0
  end
  return 0, 0
end

local function recordWindow(key, t, W, floorMs)
  local k = windowIndex(t, W)
  local s = redis.call('HMGET', key, 'w', 'c', 'p')
  local w, c, p = tonumber(s[1]), tonumber(s[2]), tonumber(s[3])
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
  redis.call('HSET', key, 'w', fmt(w), 'c', c, 'p', p)
  redis.call('PEXPIRE', key, ttlMs((w + 2) * W - t, floorMs))
end

-- Drop log entries no limit can see any more (s <= t - retention).
local function trimLogs(buckets, t)
  for _, bucket in ipairs(buckets) do
    if bucket.logKey > 0 then
      redis.call('ZREMRANGEBYSCORE', KEYS[bucket.logKey], '-inf', fmt(t - bucket.retention))
    end
  end
end

-- Count the event once in every structure of every bucket.
local function recordAll(buckets, t, member, floorMs)
  local done = {}
  for _, bucket in ipairs(buckets) do
    if bucket.logKey > 0 and not done[bucket.logKey] then
      done[bucket.logKey] = true
      redis.call('ZADD', KEYS[bucket.logKey], fmt(t), member)
      redis.call('PEXPIRE', KEYS[bucket.logKey], ttlMs(bucket.retention, floorMs))
    end
    for _, lim in ipairs(bucket.limits) do
      if lim.algo ~= 'l' and not done[lim.key] then
        done[lim.key] = true
        recordWindow(KEYS[lim.key], t, lim.W, floorMs)
      end
    end
  end
end
