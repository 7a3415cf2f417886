-- Shared helpers, inlined into each script by the loader (src/store/redis/scripts.ts).

-- Doubles print exactly with 17 significant digits; Lua's own tostring keeps only 14,
-- which would corrupt microsecond timestamps (16 digits). (Any Lua number handed to
-- redis.call is printed that lossy way too: every number argument goes through fmt/fmtInt.)
local function fmt(x)
  return string.format('%.17g', x)
end

-- An integer exactly, twice as fast as fmt: for values known to be integers (µs times and
-- windows, counts, milliseconds).
local function fmtInt(x)
  return string.format('%d', x)
end

-- `now` from the caller (µs), or Redis TIME when the argument is empty: one clock for
-- every routing process.
local function readNow(arg)
  if arg ~= nil and arg ~= '' then
    return tonumber(arg)
  end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- Redis TIME, read once per script call (the clock the deadlines of calls are in).
local redisClockUs
local function redisClock()
  if redisClockUs == nil then
    redisClockUs = readNow('')
  end
  return redisClockUs
end

-- Whether a call's deadline (µs, Redis time; '' = none) has passed: the process stopped waiting
-- and decided the call by its store-trouble policy, so the script must not count it.
local function pastDeadline(deadline)
  return deadline ~= '' and redisClock() >= tonumber(deadline)
end

-- floor(t / W) for integers, corrected for the rounding of the double division.
local function windowIndex(t, w)
  local k = math.floor(t / w)
  if k * w > t then
    k = k - 1
  elseif (k + 1) * w <= t then
    k = k + 1
  end
  return k
end

-- Milliseconds a key must live for its content to stop mattering `us` from now;
-- never below the caller's floor (used when time comes from the caller, not Redis).
local function ttlMs(us, floorMs)
  local ms = math.ceil(us / 1000) + 1
  if ms < floorMs then
    return floorMs
  end
  return ms
end
