-- A leased level in the lone admit scripts (admit-lone.lua, admit-lone-held.lua): the lane's
-- share hash (fields: lease-observe.lua) names what the lane may use of the level's limits.

-- The calls and (when `channels`) the channels the lane may use at t: its share, none at or
-- past its lease end. Only the fields needed are read, each converted once (`s + 0`, log.lua:
-- tonumber converts twice); a field not there comes back false. callgrind: the share's read was
-- most of what a leased lone decision costs over an unleased one (12k instructions of 179k).
local function laneShare(share, t, channels)
  local v
  if channels then
    v = redis.call('HMGET', share, 'e', 'c', 'h')
  else
    v = redis.call('HMGET', share, 'e', 'c')
  end
  local e, c, h = v[1], v[2], v[3]
  if not e or t >= e + 0 then
    return 0, 0
  end
  return c and c + 0 or 0, h and h + 0 or 0
end

-- A later log's limits (ARGV[first..last], as logLimits reads them) past a refusal by the calls
-- share alone: every one counted, none skipped for the wait found so far, to tell whether the
-- call had room but for the share. Whether one refuses, and the longest wait, `retry` included.
local function logLimitsPastShare(key, t, ts, first, last, wider, retry)
  local refused, wait = logLimits(key, t, ts, first, last, wider, 0)
  if wait > retry then
    retry = wait
  end
  return refused, retry
end

-- The level's one sliding-log limit (L, W) on log `key` at t, against the lane's calls share c
-- (`wider`: the log's size): refused, the wait, and whether the share alone refused (the level
-- itself had room).
local function leasedLog(key, t, ts, L, W, wider, c)
  local limit = L
  if c < limit then
    limit = c
  end
  if wider < limit then
    return false, 0, false
  end
  local count, from = logCount(key, t, ts, W)
  if count < limit then
    return false, 0, false
  end
  local wait = W -- no share at all: the wait is the coordinator's, a window at most
  if limit > 0 then
    wait = logWait(key, from, ts, count - limit, W, t)
  end
  return true, wait, count < L
end
