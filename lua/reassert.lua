--[[
  reassert: write again the holds of calls a routing process knows to be in progress (its call
  ledger), after the store may have lost them (a restart without persistence, a failover to a
  replica that missed writes), or check them (sync). Idempotent: a hold still present is not
  counted twice (one sorted-set member per call id), a call released meanwhile is not brought
  back (its tombstone, written by a release re-sent after the outage, is found first).

  KEYS[1]     the generation marker of the tag: "<token> <end of its recovery grace, µs>"
              followed by "<process id>=<when last seen, µs>" per routing process that
              re-asserted or synced lately; written when missing, renewed (ARGV[7]) once half
              its life is gone
  then per call c, in the order of ARGV: its record (<base>call:in:<id> or call:out:<id>;
              includes/channels.lua), its tombstone (<base>gone:in:<id> or gone:out:<id>), then
              the n_c holds sets it holds a channel in
  ARGV[1]     now: µs since the epoch (integer); empty = read Redis TIME
  ARGV[2]     ttl floor, ms (0 when now is Redis TIME; see record.lua)
  ARGV[3]     mode: 'lost' (the caller lost its connection: a missing record is written again)
              or 'sync' (a missing record is written again only when ARGV[4] is given and the
              marker is missing or not ARGV[4]; else the call was released elsewhere, or,
              without ARGV[4], unknown; a present record under that marker is trusted: only
              the holds it names are written again)
  ARGV[4]     the marker token the caller last saw ('' = none yet)
  ARGV[5]     the token written when the marker is missing
  ARGV[6]     recovery grace, µs: a marker written now says t + grace (see docs/redis.md)
  ARGV[7]     the marker's expiry, ms (each process's sync renews it)
  ARGV[8]     the caller's process id (key-safe, no '=' nor space; '' = not counted)
  ARGV[9]     µs after which a process not seen again counts no more
  ARGV[10]    '1': the caller found another Redis instance behind its connection (a failover):
              a grace that has ended starts again from now, else ''
  ARGV[11..]  per call: id (key-safe), end of its holds (µs), n_c
  Reply: { now, "<token> <grace end>", 1 when the marker was missing (else 0), the other processes
           seen lately, then per call its
           status: 0 ended (end <= now), 1 present (every hold there already), 2 written (its
           record or a hold was missing and is back), 3 gone (released: a tombstone, or missing
           under an unchanged marker in sync mode; in sync mode a tombstone counts only where
           the record is missing), 4 unknown (sync mode, missing, no token known yet: left
           alone) }
]]
--- @include "common"
--- @include "channels"

local t = readNow(ARGV[1])
local floorMs = tonumber(ARGV[2])
local mode, expected = ARGV[3], ARGV[4]
-- the marker: "<token> <end of the recovery grace, µs> <process id>=<last seen, µs> ..."; one
-- string, rewritten in place (KEEPTTL), so the processes sharing the tag are counted without a
-- key or a command more
local value = redis.call('GET', KEYS[1])
local missing = 0
local token, grace
local seen = {}
if not value then
  token, grace, missing = ARGV[5], fmtInt(t + tonumber(ARGV[6])), 1
else
  local i = 0
  for part in string.gmatch(value, '%S+') do
    i = i + 1
    if i == 1 then
      token = part
    elseif i == 2 then
      grace = part
    else
      local p, at = string.match(part, '^(.-)=(%d+)$')
      if p then
        seen[p] = tonumber(at)
      end
    end
  end
end
if ARGV[10] == '1' and tonumber(grace) < t then
  grace = fmtInt(t + tonumber(ARGV[6]))
end
local marker = token .. ' ' .. grace
-- the other processes seen lately: the caller learns whether any may have holds to write back
local stale, me = t - tonumber(ARGV[9]), ARGV[8]
local others = 0
local parts = { token, grace }
for p, at in pairs(seen) do
  if at > stale and p ~= me then
    others = others + 1
    parts[#parts + 1] = p .. '=' .. fmtInt(at)
  end
end
if me ~= '' then
  parts[#parts + 1] = me .. '=' .. fmtInt(t)
end
local written = table.concat(parts, ' ')
if missing == 1 or redis.call('PTTL', KEYS[1]) < tonumber(ARGV[7]) / 2 then
  redis.call('SET', KEYS[1], written, 'PX', ARGV[7]) -- written, or renewed once half its life is gone
else
  redis.call('SET', KEYS[1], written, 'KEEPTTL')
end
-- lost for sure only when the caller knew a marker: a process that never read one cannot tell a
-- store that lost its state from one nobody marked yet
local fresh = expected ~= '' and token ~= expected
-- a check (sync) under an unchanged marker: the steady state, every call in progress every syncMs
local checking = mode == 'sync' and not fresh
-- per holds set checked under an unchanged marker: the latest end of its holds in this script call
local latestOf = {}
local reply = { t, marker, missing, others }
local k, a = 2, 11
while a <= #ARGV do
  local id, e, n = ARGV[a], tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
  local record, tomb = KEYS[k], KEYS[k + 1]
  local status
  local old, keys
  if e > t and checking then
    -- the record first: a tombstone is only ever left where the record is missing (release.lua)
    old, keys = readRecord(record)
  end
  if e <= t then
    status = 0
  elseif old == nil and redis.call('GET', tomb) then -- (GET, not EXISTS: the minimal ACL user's commands, docs/redis.md)
    status = 3
  else
    if not checking then
      old, keys = readRecord(record)
    end
    if old == nil and checking then
      status = expected == '' and 4 or 3
    else
      local have = {}
      if old ~= nil then
        e = old -- a refresh elsewhere may have moved it: the store's end stands
        for _, key in ipairs(keys) do
          have[key] = true
        end
      else
        keys = {}
      end
      local added = old == nil
      -- a check (sync) under an unchanged marker trusts the record: a hold it no longer names was
      -- removed on purpose (callgate reset), and only those it names come back (an evicted set)
      local trusted = old ~= nil and checking
      for j = k + 2, k + 1 + n do
        local key = KEYS[j]
        if trusted and have[key] then
          -- the steady state, every call in progress every syncMs: a hold still there is left as
          -- it is, one command; a hold missing comes back (its set evicted, then made again by a
          -- later write with other holds only: a set there says nothing of its members). Each
          -- set's expiry is checked once per script call, against the latest of its holds here
          -- (below): lengthened if it falls short of one
          if redis.call('ZADD', key, 'NX', fmtInt(e), id) > 0 then
            added = true
          end
          local latest = latestOf[key]
          if latest == nil or e > latest then
            latestOf[key] = e
          end
        elseif not trusted then
          if redis.call('ZADD', key, fmtInt(e), id) > 0 then
            added = true
          end
          keepUntil(key, e, t, floorMs)
          if not have[key] then
            keys[#keys + 1] = key
            added = true
          end
        end
      end
      if added then
        writeRecord(record, e, keys, t, floorMs)
      end
      status = added and 2 or 1
    end
  end
  reply[#reply + 1] = status
  k, a = k + 2 + n, a + 3
end
for key, e in pairs(latestOf) do
  keepUntil(key, e, t, floorMs)
end
return reply
