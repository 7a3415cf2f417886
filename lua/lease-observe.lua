--[[
  lease-observe: what one lane of a leased level reports to the coordinator at a tick
  (src/lease/coordinator.ts), read atomically on the lane's clock. It resets nothing: a reading
  whose reply is lost (a timeout on a slow link) loses no count, since the coordinator counts
  from what it last received (the refusals as differences, the admissions from its mark).

  KEYS[1]  the lane's share hash `<prefix>{in:<lane>}:global:share`:
             c   calls per window the lane may admit (its share of the level's limit)
             h   channels its calls may hold (its share of the channel limit)
             e   lease end, µs, Redis TIME: at or past it the lane admits nothing on the level
             g   epoch: orders of an older one are refused (lua/lease-grant.lua)
             term  the highest coordinator term seen: an older coordinator is refused
             rc, rh  calls refused for lack of calls share, of channels share, since the hash
                     was made (the admit scripts add them; counters, never reset)
             o   the lane's time at the last observation (µs), or its newest entry if later (a
                 leased carrier's slot ahead of now): the calls admitted since are those of the
                 log after it (counted here, so that an admission writes nothing to the share
                 hash)
  KEYS[2]  the lane's log of the level (sorted set: scores µs; a leased carrier's slot log)
  KEYS[3]  the lane's holds of the level (sorted set: scores = hold ends, µs)
  ARGV[1]  the coordinator's term (integer)
  ARGV[2]  W, the level's window, µs
  ARGV[3]  T, the tick, µs (the coordinator's horizon: the time to its next order here): of the
           lane's use, `leaving` is what its rule no longer counts a tick later, from the later
           of now and its newest entry on: the log in (now - W, now - W + T] when none lies ahead
  ARGV[4]  optional: the mark of the last reading the coordinator received (the reply's last
           value, a string: a leased carrier's slot may be fractional, which an integer reply
           would truncate); the calls admitted are counted after it, else after `o`

  Reply: {now, inWindow, leaving, inUse, admitted, rc, rh, c, h, e, g, emptied, mark}, or {-1, term}
  when a newer coordinator's term is recorded (this one must stop). inWindow: the lane's use of
  its calls share (includes/lease.lua: its log in (now - W, now], or with entries ahead of now
  the most in any window ending at or after now). emptied: 1 when the share
  hash had no term or no epoch (never observed or ordered, or its Redis lost it: restarted
  empty, failed over to a replica without it, evicted; a late reading may have written the term
  back since, never the epoch, which only an order writes), else 0.
]]
--- @include "common"
--- @include "lease"

local term = ARGV[1] + 0
local W, T = ARGV[2] + 0, ARGV[3] + 0
local v = redis.call('HMGET', KEYS[1], 'term', 'o', 'rc', 'rh', 'c', 'h', 'e', 'g')
local seen = tonumber(v[1]) or 0
if term < seen then
  return { -1, seen }
end
local now = redisClock()
local ts = fmtInt(now)
local inWindow, inUse, ahead = laneUse(now, W)
-- admitted since the last observation (the log keeps a window: a longer gap counts a window);
-- a leased carrier's slots may lie ahead of now: counted to +inf, and the mark is the later of
-- now and the newest slot, so that none counts twice
local since = ARGV[4]
if since == nil or since == '' then
  since = v[2]
end
local admitted = 0
if since then
  admitted = redis.call('ZCOUNT', KEYS[2], '(' .. since, '+inf')
end
local mark = ahead or ts
-- what the lane's rule will count at the next tick: its next entry comes after its newest one
-- (or now), a tick later, and counts the log from there less W (lua/reserve.lua); leaving is
-- the rest of its use. Without entries ahead: the log in (now - W, now - W + T].
local leaving = inWindow - redis.call('ZCOUNT', KEYS[2], '(' .. fmtInt(tonumber(mark) - W + T), '+inf')
redis.call('HSET', KEYS[1], 'term', fmtInt(term), 'o', mark)
return {
  now,
  inWindow,
  leaving,
  inUse,
  admitted,
  tonumber(v[3]) or 0,
  tonumber(v[4]) or 0,
  tonumber(v[5]) or 0,
  tonumber(v[6]) or 0,
  tonumber(v[7]) or 0,
  tonumber(v[8]) or 0,
  (v[1] and v[8]) and 0 or 1,
  mark,
}
