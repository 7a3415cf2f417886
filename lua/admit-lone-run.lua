--[[
  admit-lone-run: decide a run of calls, each of which a lone script could decide alone
  (admit-lone.lua: plain sliding logs; admit-lone-held.lua: sliding logs with channel limits),
  one after the other in the order given, each as its own lone script call would decide it
  (includes/lone-decide.lua, lone-held-decide.lua): a small batch, where admit.lua's batch
  setup costs Redis more than it shares, and where as many script calls would cost the caller
  one command each. Atomic: no call of the run can be run after a later one, on a Cluster too
  (every key is declared: a slot being moved answers TRYAGAIN before anything runs).

  KEYS        every call's keys, in its lone script's order, one call after the other
  ARGV[1]     '1': end the reply with Redis TIME (the caller measures Redis' clock), else ''
  ARGV[2..]   per call: its script ('l' admit-lone.lua, 'h' admit-lone-held.lua), n (its number
              of keys), m (its number of arguments), then its m arguments in that script's
              layout (its ARGV[1..m])

  Semantics: each call's lone script's, in order; the calls on Redis TIME at one time (read
  once), as a batch's calls in admit.lua; each log written as admit.lua writes it, trimmed and
  given its expiry once per bound, not once per call.
  Reply: per call its lone script's four integers (limitedBy, retryAfterUs, now, flags), then,
         when asked (ARGV[1]), Redis TIME (µs)
]]
--- @include "log"
--- @include "lone-time"
--- @include "lease-lone"

-- Redis TIME once read: every call of the run decides at it, as a batch's calls do
local runClock
-- The blocks' log write (includes/lone-time.lua), remembering per log key the bound and
-- retention of the run's last write to it: a log the run wrote already for the same limits is
-- not trimmed again at that bound nor given its expiry again (as admit.lua writes a batch's).
local runBound, runR = {}, {}
local function loneLogWrite(key, t, r, L, live, known, expire, floorMs, ts, member)
  if runR[key] == r then
    known, expire = runBound[key], false
  end
  runBound[key], runR[key] = fmt('%d', logWrite(key, t, r, L, live, known, expire, floorMs, ts, member)), r
end
local out, keyAt, argAt, argEnd = {}, 0, 2, #ARGV
while argAt < argEnd do
  -- the call's keys and arguments (includes/lone-decide.lua and lone-held-decide.lua read them,
  -- and set reply and clock)
  local ko, n, ao = keyAt, ARGV[argAt + 1] + 0, argAt + 2
  local reply, clock
  if ARGV[argAt] == 'h' then
--- @include "lone-held-decide"
  else
--- @include "lone-decide"
  end
  local j = #out
  out[j + 1], out[j + 2], out[j + 3], out[j + 4] = reply[1], reply[2], reply[3], reply[4]
  if clock ~= nil then
    runClock = clock
  end
  keyAt, argAt = keyAt + n, argAt + 3 + ARGV[argAt + 2]
end
if ARGV[1] == '1' then
  if runClock == nil then
    local v = redis.call('TIME')
    runClock = v[1] * 1000000 + v[2]
  end
  out[#out + 1] = runClock
end
return out
