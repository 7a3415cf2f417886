-- Channels (calls in progress), shared by admit, add and reserve. A holds sorted set has one
-- member per call holding a channel there (the call id) scored by the end of its hold (µs); the
-- holds at t are the members scored above t. A call record (hash) ties a call's holds together:
--   e   the end of its holds (µs)
--   k   the holds' keys, space-separated (they share the record's hash tag)
-- so that release and refresh find them from the call id alone.

-- Holds of a set with an end after t ('(' .. ts: scores above t).
local function holdsAfter(key, ts)
  return redis.call('ZCOUNT', key, '(' .. ts, '+inf')
end

-- Keep a key until `untilUs` at least: PEXPIRE only when that lengthens its life.
local function keepUntil(key, untilUs, t, floorMs)
  local need = ttlMs(untilUs - t, floorMs)
  if redis.call('PTTL', key) < need then
    redis.call('PEXPIRE', key, fmtInt(need))
  end
end

-- Record holds in a set at t: drop those that ended (scores <= t), add `ends` (call id -> end).
local function writeHolds(key, ends, t, ts, floorMs)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', ts)
  local args, n, latest = {}, 0, t
  for id, e in pairs(ends) do
    args[n + 1], args[n + 2] = fmtInt(e), id
    n = n + 2
    if e > latest then
      latest = e
    end
  end
  redis.call('ZADD', key, unpack(args))
  keepUntil(key, latest, t, floorMs)
end

-- Write a call record: holds in `keys` (a list of key names) until `e`.
local function writeRecord(key, e, keys, t, floorMs)
  redis.call('HSET', key, 'e', fmtInt(e), 'k', table.concat(keys, ' '))
  redis.call('PEXPIRE', key, fmtInt(ttlMs(e - t, floorMs)))
end

-- The end of the call record `key` (a number), or nil when there is none.
local function recordEnd(key)
  local e = redis.call('HGET', key, 'e')
  if e then
    return tonumber(e)
  end
  return nil
end

-- Drop a call record and its holds (member `id` in each of its keys); returns its end (nil: none).
local function dropRecord(key, id)
  local r = redis.call('HMGET', key, 'e', 'k')
  if not r[1] then
    return nil
  end
  for k in string.gmatch(r[2], '%S+') do
    redis.call('ZREM', k, id)
  end
  redis.call('DEL', key)
  return tonumber(r[1])
end
