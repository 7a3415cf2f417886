-- Channels (calls in progress), shared by admit, record, reserve, release and refresh. A holds
-- sorted set has one member per call holding a channel there (the call id) scored by the end of
-- its hold (µs); the holds at t are the members scored above t. A call record ties a call's holds
-- together, so that release and refresh find them from the call id alone: a string
--   "<end of its holds, µs> <name> <name> ..."
-- under the key <base>call:in:<id> (or call:out:), each hold being the sorted set <base><name>
-- (same hash tag; ids are key-safe, without ':'). A string, and names rather than keys: a held
-- call costs Redis as little as it can.

-- The text of a hold's end (µs), formatted once per script call: a batch's calls admitted at
-- one time with one hold share their end, and each is written in every holds set and record.
local endTexts = {}
local function endText(e)
  local s = endTexts[e]
  if s == nil then
    s = fmtInt(e)
    endTexts[e] = s
  end
  return s
end

-- Holds of a set with an end after t ('(' .. ts: scores above t).
local function holdsAfter(key, ts)
  return redis.call('ZCOUNT', key, '(' .. ts, '+inf')
end

-- The holds of set `key` with an end after t, on Redis TIME (times only grow), as far as a
-- channel limit N needs them: the set's size (ZCARD, O(1)) while it is below N, since no more of
-- its holds can be live; at N or more, the exact count (ZCOUNT above t), and lapsed holds
-- (scores <= t: calls never released, their process gone) dropped, HOLDS_TRIM at most
-- (dropLapsed). A ZCOUNT above t at every call walked a small set's listpack entry by entry,
-- and the trim at every write removed nothing but those lapsed holds: a set keeps them while it
-- is below N, and sheds them HOLDS_TRIM per script call that counts it at N or more, or leaves
-- with them when it expires. `n`: the set's size when the caller has it already (an earlier
-- count of its group, not exact), else nil. Returns the count and whether it is exact.
local HOLDS_TRIM = 128

-- Drop the holds of set `key` that ended at or before t, HOLDS_TRIM at most: the oldest. A set
-- whose limit is far above its calls in progress fills up with thousands of lapsed holds (a
-- routing process that crashed with its calls), and dropping them all in the one script that
-- met the limit held Redis 15-23 ms at 100,000, every decision queued behind it. `lapsed`: how
-- many there are. Only scores <= t are ever touched (ZRANGEBYSCORE and ZREM, which the minimal
-- ACL user has: docs/redis.md), whatever `lapsed` says.
local function dropLapsed(key, ts, lapsed)
  if lapsed <= HOLDS_TRIM then
    redis.call('ZREMRANGEBYSCORE', key, '-inf', ts)
    return
  end
  local old = redis.call('ZRANGEBYSCORE', key, '-inf', ts, 'LIMIT', 0, HOLDS_TRIM)
  if #old > 0 then
    redis.call('ZREM', key, unpack(old))
  end
end

local function liveHolds(key, ts, N, n)
  n = n or redis.call('ZCARD', key)
  if n < N then
    return n, false
  end
  local live = redis.call('ZCOUNT', key, '(' .. ts, '+inf')
  if live < n then
    dropLapsed(key, ts, n - live)
  end
  return live, true
end

-- Holds of set k with an end after t in Redis, counted once per group of calls at one time
-- (`stored`: per key index, the count read at that time).
local function storedHolds(stored, k, ts)
  local n = stored[k]
  if n == nil then
    n = holdsAfter(KEYS[k], ts)
    stored[k] = n
  end
  return n
end

-- Keep a key until `untilUs` at least: PEXPIRE only when that lengthens its life.
local function keepUntil(key, untilUs, t, floorMs)
  local need = ttlMs(untilUs - t, floorMs)
  if redis.call('PTTL', key) < need then
    redis.call('PEXPIRE', key, fmtInt(need))
  end
end

-- Record holds in a set at t, add `ends` (call id -> end) and keep the set until the latest.
-- `stored`: on Redis TIME, the set's count by liveHolds before these holds, and `exact` whether
-- that count was exact (nil otherwise: its ended holds, scores <= t, are dropped first, and its
-- expiry only ever lengthened, keepUntil). On Redis TIME lapsed holds wait for liveHolds, and
-- the count says whether the set holds a call in progress: every callgate writer gives a holds
-- set an expiry as it makes it, so one with a hold in progress needs only PEXPIRE GT (one
-- command, where PTTL and PEXPIRE took two), and one without (a count of 0: a new set, or one of
-- lapsed holds only, whose life may end with this hold's) a plain PEXPIRE. GT leaves a key
-- without an expiry as it is: a set there without one (written or restored by another tool)
-- gets one with NX when it fills up to its limit (an exact count), so that it cannot keep
-- lapsed holds for ever.
local function writeHolds(key, ends, t, ts, floorMs, stored, exact)
  if stored == nil then
    redis.call('ZREMRANGEBYSCORE', key, '-inf', ts)
  end
  local args, n, latest = {}, 0, t
  for id, e in pairs(ends) do
    args[n + 1], args[n + 2] = endText(e), id
    n = n + 2
    if e > latest then
      latest = e
    end
  end
  redis.call('ZADD', key, unpack(args))
  if stored == nil then
    keepUntil(key, latest, t, floorMs)
    return
  end
  local ms = fmtInt(ttlMs(latest - t, floorMs))
  if stored == 0 then
    redis.call('PEXPIRE', key, ms)
  elseif redis.call('PEXPIRE', key, ms, 'GT') == 0 and exact then
    redis.call('PEXPIRE', key, ms, 'NX')
  end
end

-- The part of a call record's key before call:in:<id> / call:out:<id>.
local function recordBase(key)
  return string.match(key, '^(.*)call:in:[^:]*$') or string.match(key, '^(.*)call:out:[^:]*$')
end

-- Where hold names start in the keys of the records under `recordPrefix` (<base>call:in: or
-- <base>call:out:): #base + 1, for writeRecord, found once per script call rather than by a
-- pattern match per record; nil when the prefix is not a record prefix.
local function namesFrom(recordPrefix)
  local base = recordBase(recordPrefix .. 'x')
  return base and #base + 1
end

-- Write a call record: holds in `keys` (a list of key names) until `e`. `from`: where the names
-- start in those keys (namesFrom), when the caller knows it (else read from the record's key).
local function writeRecord(key, e, keys, t, floorMs, from)
  from = from or #recordBase(key) + 1
  local parts = { endText(e) }
  for i = 1, #keys do
    parts[i + 1] = string.sub(keys[i], from)
  end
  redis.call('SET', key, table.concat(parts, ' '), 'PX', fmtInt(ttlMs(e - t, floorMs)))
end

-- A call record's end (a number) and hold keys (a list), or nil when there is none.
local function readRecord(key)
  local v = redis.call('GET', key)
  if not v then
    return nil
  end
  local base = recordBase(key)
  local e, keys = nil, {}
  for part in string.gmatch(v, '%S+') do
    if e == nil then
      e = tonumber(part)
    else
      keys[#keys + 1] = base .. part
    end
  end
  return e, keys
end

-- readRecord, then every hold key it names read too (PTTL: any type, and in the minimal ACL
-- user's commands, docs/redis.md, where EXISTS is not). On a Cluster slot being moved to
-- another master, a key that has left for it fails the script here ("non local key"), before
-- any write: release.lua and refresh.lua name these keys from the record, where a Cluster cannot
-- check them before the script runs (docs/redis.md, "Moving a busy account or carrier").
-- `unmoved`: the caller knows no slot can move (a single Redis): the reads, a command per hold
-- for nothing, are left out.
local function readRecordAll(key, unmoved)
  local e, keys = readRecord(key)
  if e ~= nil and not unmoved then
    for _, k in ipairs(keys) do
      redis.call('PTTL', k)
    end
  end
  return e, keys
end

-- The end of the call record `key` (a number), or nil when there is none.
local function recordEnd(key)
  local v = redis.call('GET', key)
  if not v then
    return nil -- (a missing key reads as false, which would not compare as a number)
  end
  return tonumber(string.match(v, '^%d+'))
end

-- Drop call record `key`, read as its hold keys `keys`: member `id` out of each holds set, each
-- set once (a ZREM that empties a set deletes it, and a second would meet a missing key: on a
-- slot being moved, an error after this write), then the record.
local function dropRead(key, id, keys)
  local seen = {}
  for _, k in ipairs(keys) do
    if not seen[k] then
      seen[k] = true
      redis.call('ZREM', k, id)
    end
  end
  redis.call('DEL', key)
end

-- Drop a call record and its holds (member `id` in each of its keys); returns its end (nil: none).
local function dropRecord(key, id)
  local e, keys = readRecord(key)
  if e == nil then
    return nil
  end
  dropRead(key, id, keys)
  return e
end
