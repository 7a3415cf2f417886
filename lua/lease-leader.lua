--[[
  lease-leader: one coordinator per leased level (src/lease/coordinator.ts). A candidate takes
  the leadership when no one holds it, the leader renews it and saves its state; a candidate
  that lost it (its key expired, another took it) learns so and stops.

  KEYS[1]  the leader key `<prefix>{lease:<level>}:leader` (value: the leader's id; expiry)
  KEYS[2]  the term counter `<prefix>{lease:<level>}:term`: +1 per new leader; lane scripts
           refuse a term older than the last they saw, so a former leader's orders are void
  KEYS[3]  the coordinator's state `<prefix>{lease:<level>}:state` (JSON, src/lease/coordinator.ts)
  ARGV[1]  this candidate's id
  ARGV[2]  how long the leadership lasts without a renewal, ms; '0': the leader gives it up
  ARGV[3]  the state to save ('' = none): saved only by the leader
  ARGV[4]  the highest term a lane answered this candidate with ('' or 0: none): the next term
           counts past it (a counter lost with its Redis must not go back: the lanes would
           refuse every new leader)

  Reply: {1, term} still the leader (renewed, state saved); {2, term, state or ''} the leader
  from now (the state its predecessor saved); {0} another one leads.
]]
local id, ttl = ARGV[1], ARGV[2]
local minTerm = tonumber(ARGV[4] or '') or 0
if minTerm > (tonumber(redis.call('GET', KEYS[2]) or '0') or 0) then
  redis.call('SET', KEYS[2], string.format('%d', minTerm))
end
local holder = redis.call('GET', KEYS[1])
if holder == id and ttl == '0' then
  redis.call('DEL', KEYS[1])
  return { 0 }
end
if ttl == '0' then
  return { 0 }
end
if holder == id then
  redis.call('PEXPIRE', KEYS[1], ttl)
  if ARGV[3] ~= '' then
    redis.call('SET', KEYS[3], ARGV[3])
  end
  return { 1, tonumber(redis.call('GET', KEYS[2]) or '0') }
end
if holder then
  return { 0 }
end
redis.call('SET', KEYS[1], id, 'PX', ttl)
local term = redis.call('INCR', KEYS[2])
return { 2, term, redis.call('GET', KEYS[3]) or '' }
