-- A coordinator's order to a lane of a leased level (lease-shrink.lua, lease-grant.lua): KEYS[1]
-- the lane's share hash (fields: lease-observe.lua), KEYS[2] its log of the level, KEYS[3] its
-- holds. An order of an older term or epoch than the lane's is refused. One of a newer epoch
-- comes to a lane that was lost: its lease has ended, so it has admitted nothing since, and
-- what its calls still use (calls in the window, channels held) is all it keeps; the rest of
-- its share went back to the pool.

-- What a lane's calls use of its calls share at `now` (µs): the most calls of its log in any
-- window (u - W, u] ending at or after now. Without entries ahead of now (the global
-- level) that is the window (now - W, now]. A leased carrier's slots run up to its maxWait ahead
-- (lua/reserve.lua): counting all of (now - W, +inf) would take a lane pacing r calls a second
-- with its slots d ahead for r·(W + d), where no window holds more than about r·W, and keep that
-- capacity from the other lanes. A window ending at u >= now holds most right at a slot (or at
-- now): one pass over the log's sorted scores finds it. The lane's own rule (fewer than its
-- share in (s - W, +inf) for a new slot s) bounds every window a new slot enters, so a share
-- down to this count never lets a window past it.
-- The newest entry of a log, as Redis wrote its score, if it lies ahead of now; else nil
-- (ZRANGEBYSCORE, which the store's minimal ACL allows, where ZRANGE is not: a leased carrier's
-- slots ahead are at most its maxWait of them).
local function newestAhead(log, now)
  local v = redis.call('ZRANGEBYSCORE', log, '(' .. string.format('%d', now), '+inf', 'WITHSCORES')
  return v[#v]
end

-- Also returns the newest entry ahead of now (newestAhead), or nil.
local function laneCalls(now, W, log)
  local from = '(' .. string.format('%d', now - W)
  local calls = redis.call('ZCOUNT', log, from, '+inf')
  local ahead = newestAhead(log, now)
  if ahead ~= nil then
    local v = redis.call('ZRANGEBYSCORE', log, from, '+inf', 'WITHSCORES')
    local a, most, lo = {}, 0, 1
    for i = 2, #v, 2 do
      a[#a + 1] = tonumber(v[i])
    end
    for j = 1, #a do
      while a[lo] <= a[j] - W do
        lo = lo + 1
      end
      -- (for a[j] <= now: the entries up to a[j], all in (now - W, now]; the last of them
      -- counts the window ending at now)
      if j - lo + 1 > most then
        most = j - lo + 1
      end
    end
    calls = most
  end
  return calls, ahead
end

-- laneCalls of the lane's log (KEYS[2]), the channels its holds (KEYS[3]) hold at now, and the
-- log's newest entry ahead of now (or nil).
local function laneUse(now, W)
  local calls, ahead = laneCalls(now, W, KEYS[2])
  return calls, redis.call('ZCOUNT', KEYS[3], '(' .. string.format('%d', now), '+inf'), ahead
end

-- The share {calls, channels} the order applies to and the lease end the lane has; or, when
-- the order is refused, nil and the reply: {-1, the lane's term} (an older term or epoch), {-2}
-- (a new epoch while the lane's lease still runs: it may be admitting on its old share), {-3}
-- (the share hash is gone: its Redis lost it).
local function leaseOrder(term, epoch, now, W)
  local v = redis.call('HMGET', KEYS[1], 'term', 'g', 'c', 'h', 'e')
  if v[1] == false then
    -- an observation (earlier in every tick) writes the term: without it the lane's Redis lost
    -- the hash since (restarted empty, failed over): what it held is unknown here
    return nil, { -3 }
  end
  local seen, g, e = tonumber(v[1]) or 0, tonumber(v[2]) or 0, tonumber(v[5]) or 0
  if term < seen or epoch < g then
    return nil, { -1, seen }
  end
  if epoch > g then
    if now < e then
      return nil, { -2 }
    end
    local c, h = laneUse(now, W)
    return c, h, e
  end
  return tonumber(v[3]) or 0, tonumber(v[4]) or 0, e
end

-- The lane's new share, and its lease end: the order's, or the lane's if later.
local function leaseWrite(term, epoch, c, h, e, was)
  if was > e then
    e = was
  end
  redis.call('HSET', KEYS[1], 'term', string.format('%d', term), 'g', string.format('%d', epoch), 'c',
    string.format('%d', c), 'h', string.format('%d', h), 'e', string.format('%d', e))
end
