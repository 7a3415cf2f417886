-- Sliding logs, shared by admit-lone, admit-lone-held, admit, record, count and inspect. A log is a sorted set of
-- events (members = event ids, scores = µs); a limit (L, W) at t sees the events of the window
-- (t - W, t], and the log keeps those of its retention r, the widest window of its limits.
-- This include needs no other (admit-lone.lua includes it alone): Redis runs a script's whole
-- body on every call, and each function a script defines is made anew each time.
-- Numbers given as strings (ARGV, replies) are read as `s + 0`: Lua converts the string once,
-- where tonumber() converts it twice (lua_isnumber, then lua_tonumber), each a strtod; callgrind
-- put 8-13 % of a decision's Redis instructions in tonumber.

-- The events of log `key` in the window W ending at t (ts: t as a score), and the window's
-- lower bound as a score, for logWait: scores are integers, so (t - W, t] is [t - W + 1, t] (a
-- concatenation less than '(' .. (t - W)). `from`: that bound, when the caller has it already.
local function logCount(key, t, ts, W, from)
  if from == nil then
    from = string.format('%d', t - W + 1)
  end
  return redis.call('ZCOUNT', key, from, ts), from
end

-- The wait (µs) until the window W at t has room again when its i + 1 oldest events must leave
-- it first (a window of count events and limit L: i = count - L): the (i + 1)-th oldest, at s,
-- leaves at s + W. `from` and `ts` are the window's bounds (logCount).
local function logWait(key, from, ts, i, W, t)
  local s = redis.call('ZRANGEBYSCORE', key, from, ts, 'WITHSCORES', 'LIMIT', string.format('%d', i), '1')[2]
  return s + W - t
end

-- Check log `key` at t against its limits (L, W) in ARGV[first], ARGV[first + 1], ... up to
-- ARGV[last - 1], ARGV[last], widest window first; `wider`: the log's size (ZCARD), `retry`: the
-- longest wait found so far. Returns whether a limit refuses (a wait > 0) and the new longest
-- wait. Below L, a wider window's count (or the log's size) proves room without counting: the
-- common case, far from limits; a limit no longer than the wait already found can change
-- neither the refusal nor its wait, so it is not counted.
local function logLimits(key, t, ts, first, last, wider, retry)
  local refused = false
  for j = first, last, 2 do
    local L = ARGV[j] + 0
    if wider >= L then
      local W = ARGV[j + 1] + 0
      if retry < W then
        local count, from = logCount(key, t, ts, W)
        wider = count
        if count >= L then
          local wait = logWait(key, from, ts, count - L, W, t)
          if wait > 0 then
            refused = true
            if wait > retry then
              retry = wait
            end
          end
        end
      end
    end
  end
  return refused, retry
end

-- Add events (score, member, ...) at t to log `key` of retention r, whose widest limit admits L
-- events in r: first drop those no limit sees any more, then set the log's expiry, 2r + Q ms
-- (Q = floor(r / 4) + 1; at least floorMs). E, the trim's step, is Q, or floor(256 r / L) + 1
-- where that is less: the time in which the limit's full pace adds 256 events, so that one
-- trim removes about that many (a fraction of a ms; steps of 64 events cost a lone decision
-- 10-14 % more instructions at a few hundred calls a second, in trims that removed nothing).
-- A quarter of a 10 s window of a platform-wide 100,000 made every 2.5 s's trim remove 2.5 s
-- of calls at once, and one such command held Redis for 15-54 ms at 10,000-15,000 calls/s
-- (bench/log-trim.ts).
--
-- rounded false: the trim is at t - r and the expiry always set (writes with a caller-given now,
-- whose times may go back, and those that keep no track of the log: record.lua, and admit.lua
-- for a lone call).
--
-- rounded true (on Redis TIME, whose times only grow): the trim is at t - r rounded down to a
-- multiple of E (src/store/redis/bucket-args.ts, trimBound, computes the same number), and
-- skipped when `known` (the bound of the latest trim the caller knows of; '' = none) is that
-- bound: every event added since is newer, so it would remove nothing. The expiry is set only
-- when `expire` asks (the log is new, or the caller does not know it was set for these limits)
-- or the trim removed something. Why 2r + Q is then long enough: while writes skip the PEXPIRE,
-- the event written with the last expiry (at t0) is still there, above the trim's bound:
-- t < t0 + r + E <= t0 + r + Q, and the log lives until t0 + 2r + Q > t + r, long enough for
-- the event it adds at t. The expiry counts Q, not E, so that this holds between writers whose
-- steps differ (processes with other limits for the bucket, or from before E was sized by L).
-- (After a reload widens a window, the caller asks once per process for each bucket's new
-- limits.) Returns the trim's bound, what the next write at t may pass as `known`.
local function logWrite(key, t, r, L, rounded, known, expire, floorMs, ...)
  local q = math.floor(r / 4) + 1
  local e = math.floor(r * 256 / L) + 1 -- (L = 0: inf)
  if q < e then
    e = q
  end
  local bound = t - r
  local removed = 0
  if rounded then
    bound = bound - bound % e
  end
  if not rounded or known == '' or known + 0 ~= bound then
    removed = redis.call('ZREMRANGEBYSCORE', key, '-inf', string.format('%d', bound))
  end
  redis.call('ZADD', key, ...)
  if not rounded or expire or removed > 0 then
    -- common.lua's ttlMs(2r + Q, floorMs), spelled out (see above)
    local ms = math.ceil((2 * r + q) / 1000) + 1
    if ms < floorMs then
      ms = floorMs
    end
    redis.call('PEXPIRE', key, string.format('%d', ms))
  end
  return bound
end
