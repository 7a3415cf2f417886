--[[
  reserve: leaky-bucket pacing over routes, for a batch of calls decided one after the other in
  the order given (each exactly as it would be as a script call of its own, in that order).
  Each carrier c sends one call per interval I; last(c) is the latest slot given on c. For each
  carrier of the call's route, in order: slot = max(t, last(c) + I), wait = slot - t; the first
  carrier with wait <= maxWait and, when it has a channel limit N, fewer than N holds with an end
  after t, takes the call (last(c) = slot). Carriers passed over keep their state: nothing is
  reserved on a refusal.

  KEYS        every carrier of the batch, once: its pacing state (a string: its latest slot as
              a base and the intervals since, includes/slots.lua), and the holds
              sorted set of each carrier with a channel limit (includes/channels.lua); then, on
              a Cluster, the record key of every call with an id (named again from ARGV[3];
              declared so that a Cluster checks it before the script runs, as in admit.lua)
  ARGV[1]     ttl floor, ms, for calls whose now is given (see admit.lua)
  ARGV[2]     ttl floor, ms, for calls on Redis TIME (0, but with carriers spread over shards,
              where calls at an earlier time from another shard may follow: reserve-args.ts)
  ARGV[3]     call record prefix: the outbound record of call id x is the key prefix .. x (it
              shares the carriers' hash tag; on a Cluster, also declared at the end of KEYS)
  ARGV[4]     '1': end the reply with Redis TIME (the caller measures Redis' clock), else ''
  ARGV[5]     NR, the number of routes, then per route: n, then per carrier in route order:
              its key (1-based index in KEYS), its rate "p/q" (cps = p / q, exactly the
              configuration's decimal; I = 1e6 q / p µs), maxWait (µs), N (its
              channel limit, 0: none), its holds key (index in KEYS; 0 when N is 0)
  then NL, the number of leased carriers (docs/leasing.md, "Carriers across regions"), then
  per leased carrier: its key (index in KEYS), its share hash (index in KEYS; fields as
  lua/lease-observe.lua's), its slot log (index in KEYS: a sorted set of the slots it gave,
  scores = members = the slot, µs), W (µs: its share is calls per window W), and L, the
  carrier's whole limit per window (its CPS for W = 1 s)
  then the calls, in runs that share a time (includes/runs.lua), four arguments per call:
  route index (1-based), its deadline (µs, Redis time; '' = none: a call whose deadline has
  passed is skipped), the call's id (key-safe; '' for none), how long the call holds its
  carrier's channel after its slot (µs)
  A leased carrier gives slot s only while its lease runs (s < e) and its slot log holds fewer
  than c slots in (s - W, +inf): from the slot above it moves on to the earliest such s, which
  must still be within maxWait; and, with a channel limit, only while its holds are fewer than h
  too (c, h, e: its share hash). Where only its share lacked room, the call is refused there as
  when the wait is too long, and counted in the share hash (rc, rh) for the coordinator.
  A call with an id that gets a carrier first drops the id's previous outbound record and its
  hold (one outbound hold per call id); then, on a carrier with a channel limit, it holds a
  channel from now until slot + its hold time (rounded up to a whole µs: includes/slots.lua),
  recorded under its id.
  Reply: per call, m (the number of carriers tried; -1: skipped, past its deadline, and nothing
         else follows but the four fields below) and then: index (1-based carrier that took
         the call; 0 = none), waitUs, slotUs (0 when none), now, and per carrier tried, in
         order: its wait (a leased carrier's: to the slot its calls share allows) and 1 when its
         channels were full (with a wait it could take), 2 when its (leased) calls share had no
         slot within maxWait (or, with a share below its CPS, its wait was too long), 3 when its
         channels share lacked room, else 0
         (times as strings: I may be fractional); then, when asked (ARGV[3]), Redis TIME (µs)

  How the work is shared: calls with the same t form a group; in a group each carrier is read
  once (GET) and written once (SET with expiry) when the time changes or the batch ends, its
  holds counted once (ZCOUNT) and written once.
]]
--- @include "common"
--- @include "runs"
--- @include "channels"
--- @include "slots"

local floorMs = tonumber(ARGV[1])
local liveFloorMs = tonumber(ARGV[2])
local recordPrefix = ARGV[3]
local recordFrom = namesFrom(recordPrefix)
local wantClock = ARGV[4] == '1'
local routes = {}
local a = 6
for r = 1, tonumber(ARGV[5]) do
  local n = tonumber(ARGV[a])
  local keys, cpss, maxWaits, Ns, holdKeys = {}, {}, {}, {}, {}
  for i = 1, n do
    local j = a + 5 * i - 4
    keys[i], cpss[i], maxWaits[i] = tonumber(ARGV[j]), rateOf(ARGV[j + 1]), tonumber(ARGV[j + 2])
    Ns[i], holdKeys[i] = tonumber(ARGV[j + 3]), tonumber(ARGV[j + 4])
  end
  routes[r] = { keys, cpss, maxWaits, Ns, holdKeys }
  a = a + 1 + 5 * n
end
local leases = {} -- per carrier key index: { share key index, slot log key index, W, L }
for i = 1, tonumber(ARGV[a]) do
  local j = a + 5 * i - 4
  leases[tonumber(ARGV[j])] = { tonumber(ARGV[j + 1]), tonumber(ARGV[j + 2]), tonumber(ARGV[j + 3]), tonumber(ARGV[j + 4]) }
end
a = a + 1 + 5 * tonumber(ARGV[a])

local t, ts -- the group's time (number, string)
local state, loaded, dirty -- per carrier key index: its pacing state { base, k, rate } (includes/slots.lua)
local holdsStored, holdsAdded, nHolds -- per holds key index: ZCOUNT above t, call id -> end, count
local records -- outbound call records this group writes: { id, end, key, dead }
local group = 0
local pending = {} -- per call id, its record written by this batch: { group, holds key index, entry }

local function newGroup(now)
  t, ts = now, fmtInt(now)
  state, loaded, dirty = {}, {}, {}
  holdsStored, holdsAdded, nHolds, records = {}, {}, {}, {}
  group = group + 1
end

local function writeGroup(floor)
  if floor < liveFloorMs then
    floor = liveFloorMs
  end
  for k in pairs(dirty) do
    -- last(c) matters until slot + I: after that every call gets slot = t anyway
    local s = state[k]
    local nextFree = s[1] + slotOffset(s[2] + 1, s[3])
    redis.call('SET', KEYS[k], slotText(s[1], s[2], s[3]), 'PX', fmtInt(ttlMs(nextFree - t, floor)))
    local lease = leases[k]
    if lease ~= nil then
      -- a slot counts in the windows (s - W, s]: every later slot, a reroute's late attempt's
      -- too, is at least last + I > t (last lives long enough: reserve-args.ts), so a slot at or
      -- before t - W never counts again
      local slots = KEYS[lease[2]]
      redis.call('ZREMRANGEBYSCORE', slots, '-inf', fmtInt(t - lease[3]))
      keepUntil(slots, lastSlot(s) + lease[3], t, floor)
    end
  end
  for k, ends in pairs(holdsAdded) do
    if next(ends) ~= nil then
      writeHolds(KEYS[k], ends, t, ts, floor)
    end
  end
  for _, r in ipairs(records) do
    if not r[4] then
      writeRecord(recordPrefix .. r[1], r[2], { r[3] }, t, floor, recordFrom)
    end
  end
end

-- Holds of set k with an end after t: in Redis (counted once per group) and added this group.
local function holdCount(k)
  return storedHolds(holdsStored, k, ts) + (nHolds[k] or 0)
end

-- Drop the previous outbound record of call `id` and its hold, wherever it is.
local function dropPrevious(id)
  local prev = pending[id]
  if prev ~= nil and prev[1] == group then
    -- written by this group, not yet in Redis
    local k = prev[2]
    holdsAdded[k][id] = nil
    nHolds[k] = nHolds[k] - 1
    prev[3][4] = true
  elseif dropRecord(recordPrefix .. id, id) then
    holdsStored = {} -- a hold left Redis: count again
  end
  pending[id] = nil
end

-- A leased carrier's share {c, h, e}, read once per script call (only the lease scripts change
-- it); the calls refused for its lack are added to the hash once, at the end.
local shares = {} -- per carrier key index: { c, h, e, rc, rh }
local function shareOf(k)
  local s = shares[k]
  if s == nil then
    local v = redis.call('HMGET', KEYS[leases[k][1]], 'c', 'h', 'e')
    s = { tonumber(v[1]) or 0, tonumber(v[2]) or 0, tonumber(v[3]) or 0, 0, 0 }
    shares[k] = s
  end
  return s
end

-- The earliest slot from `slot` on at which leased carrier k's calls share lets it give one, or
-- nil when none before its lease end: fewer than c slots of its log in (slot - W, +inf) (the
-- slots given ahead count too); with n >= c there, the (n - c + 1)-th oldest of them leaves at
-- its slot + W. Within its share, a region paces as one pacer would at the share's rate.
local function shareSlot(k, slot)
  local lease, s = leases[k], shareOf(k)
  if s[1] <= 0 then
    return nil
  end
  local key, from = KEYS[lease[2]], '(' .. fmt(slot - lease[3])
  local n = redis.call('ZCOUNT', key, from, '+inf')
  if n >= s[1] then
    slot = tonumber(redis.call('ZRANGEBYSCORE', key, from, '+inf', 'LIMIT', n - s[1], 1)[1]) + lease[3]
  end
  if slot >= s[3] then
    return nil
  end
  return slot
end

local out = {}
eachCall(a, floorMs, newGroup, function(x)
  local route = routes[tonumber(ARGV[x])]
  local id, forUs = ARGV[x + 2], tonumber(ARGV[x + 3])
  local keys, cpss, maxWaits, Ns, holdKeys = route[1], route[2], route[3], route[4], route[5]
  local head = #out
  out[head + 1] = 0 -- m, set below
  out[head + 2], out[head + 3], out[head + 4], out[head + 5] = 0, '0', '0', ts
  if pastDeadline(ARGV[x + 1]) then
    out[head + 1] = -1
    return x + 4
  end
  local m = 0
  for i = 1, #keys do
    local k, rate = keys[i], cpss[i]
    if not loaded[k] then
      state[k] = slotState(redis.call('GET', KEYS[k]))
      loaded[k] = true
    end
    -- slot = max(t, last(c) + I), as base + n intervals, and its exact wait
    local base, n, wait = nextSlot(state[k], rate, t)
    local slot = base + slotOffset(n, rate)
    local fits = wait <= maxWaits[i]
    local flag = 0 -- why a carrier was passed over (see Reply)
    local lease = leases[k]
    if lease ~= nil then
      local later = fits and shareSlot(k, slot)
      if later and later - t <= maxWaits[i] then
        if later ~= slot then
          slot, base, n, wait = later, later, 0, later - t
        end
      elseif fits or shareOf(k)[1] < lease[4] then
        -- no slot within maxWait for lack of share; below the carrier's CPS, a wait too long
        -- counts so too (slots its share pushed ahead made it): the coordinator sees the demand
        flag = 2
      end
    end
    local waitText = fmt(wait)
    if flag == 0 and fits and Ns[i] > 0 then
      local held = holdCount(holdKeys[i])
      if held >= Ns[i] then
        flag = 1
      elseif leases[k] ~= nil and held >= shareOf(k)[2] then
        flag = 3
      end
    end
    out[head + 6 + 2 * m], out[head + 7 + 2 * m] = waitText, flag
    m = m + 1
    if flag >= 2 then
      local s = shares[k]
      s[flag + 2] = s[flag + 2] + 1 -- rc (2), rh (3)
    end
    if fits and flag == 0 then
      state[k], dirty[k] = { base, n, rate }, true
      if lease ~= nil then
        local st = fmt(slot)
        redis.call('ZADD', KEYS[lease[2]], st, st)
      end
      out[head + 2], out[head + 3], out[head + 4] = i, waitText, fmt(slot)
      if id ~= '' then
        dropPrevious(id)
        local e = slotHoldEnd(base, n, rate, forUs)
        local h = holdKeys[i]
        if h > 0 and e > t then
          local ends = holdsAdded[h]
          if ends == nil then
            ends = {}
            holdsAdded[h] = ends
          end
          ends[id] = e
          nHolds[h] = (nHolds[h] or 0) + 1
          local entry = { id, e, KEYS[h], false }
          records[#records + 1] = entry
          pending[id] = { group, h, entry }
        end
      end
      break
    end
  end
  out[head + 1] = m
  return x + 4
end, writeGroup)
for k, s in pairs(shares) do
  if s[4] > 0 then
    redis.call('HINCRBY', KEYS[leases[k][1]], 'rc', s[4])
  end
  if s[5] > 0 then
    redis.call('HINCRBY', KEYS[leases[k][1]], 'rh', s[5])
  end
end
if wantClock then
  out[#out + 1] = redisClock()
end
return out
