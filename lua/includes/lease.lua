-- A coordinator's order to a lane of a leased level (lease-shrink.lua, lease-grant.lua), on the
-- lane's share hash KEYS[1] (fields: lease-observe.lua). An order of an older term or epoch than
-- the lane's is refused; one of a newer epoch starts from a share of 0 (what the lane held went
-- back to the pool while it was lost).

-- The share {calls, channels} the order applies to and the lease end the lane has, or nil when
-- the order is refused.
local function leaseOrder(term, epoch)
  local v = redis.call('HMGET', KEYS[1], 'term', 'g', 'c', 'h', 'e')
  local g = tonumber(v[2]) or 0
  if term < (tonumber(v[1]) or 0) or epoch < g then
    return nil
  end
  if epoch > g then
    return 0, 0, tonumber(v[5]) or 0
  end
  return tonumber(v[3]) or 0, tonumber(v[4]) or 0, tonumber(v[5]) or 0
end

-- The lane's new share, and its lease end: the order's, or the lane's if later.
local function leaseWrite(term, epoch, c, h, e, was)
  if was > e then
    e = was
  end
  redis.call('HSET', KEYS[1], 'term', string.format('%d', term), 'g', string.format('%d', epoch), 'c',
    string.format('%d', c), 'h', string.format('%d', h), 'e', string.format('%d', e))
end
