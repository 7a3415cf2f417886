-- A leased level in the lone admit scripts (admit-lone.lua, admit-lone-held.lua): the lane's
-- share hash (fields: lease-observe.lua) names what the lane may use of the level's limits.

-- The calls and channels the lane may use at t: its share, none at or past its lease end.
local function laneShare(share, t)
  local v = redis.call('HMGET', share, 'c', 'h', 'e')
  if t >= (tonumber(v[3]) or 0) then
    return 0, 0
  end
  return tonumber(v[1]) or 0, tonumber(v[2]) or 0
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
