-- A coordinator's order to a lane of a leased level (lease-shrink.lua, lease-grant.lua): KEYS[1]
-- the lane's share hash (fields: lease-observe.lua), KEYS[2] its log of the level, KEYS[3] its
-- holds. An order of an older term or epoch than the lane's is refused. One of a newer epoch
-- comes to a lane that was lost: its lease has ended, so it has admitted nothing since, and
-- what its calls still use (calls in the window, channels held) is all it keeps; the rest of
-- its share went back to the pool.

-- What the lane's calls use at `now` (µs): calls in the window W and any given ahead of now (a
-- leased carrier's slots, up to its maxWait ahead: lua/reserve.lua), channels held.
local function laneUse(now, W)
  local ts = string.format('%d', now)
  return redis.call('ZCOUNT', KEYS[2], '(' .. string.format('%d', now - W), '+inf'),
    redis.call('ZCOUNT', KEYS[3], '(' .. ts, '+inf')
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
