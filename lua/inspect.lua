--[[
  inspect: read, never write, what the limits of some buckets and carriers see now (an
  operator's view during an incident: OpenSIPS' rl_list, Kamailio's pl.stats).

  KEYS        the structures of the buckets (as admit.lua: sliding-log sorted sets and window
              hashes {w, c, p}), then the carriers' pacing states (includes/slots.lua), each
              named once
  ARGV[1]     now: µs since the epoch (integer); empty = read Redis TIME
  ARGV[2..]   the profiles and buckets (includes/buckets.lua)
  then NC     the number of carriers, then per carrier: its key (1-based index in KEYS), its rate
              "p/q" (cps = p / q; I = 1e6 q / p µs), its holds' key (index in KEYS; 0: no channel limit), and for a
              carrier leased across regions (docs/leasing.md) its share hash and its slot log
              (indices in KEYS; 0 and 0: not leased) and W, its share's window (µs)
  Reply: now, then per bucket, per limit in profile order (sliding-log limits widest window
         first, as src/store/redis/bucket-args.ts orders them): count (the value the limit compares with L:
         events in (now - W, now] for sliding-log, the current window's count for fixed-window,
         the estimate c + p * (1 - f) for sliding-window) and retryAfterUs (0 when it has room,
         else the wait until it has, as admit.lua computes it), as strings, then its calls in
         progress (holds with an end after now; -1 without a channel limit); then per carrier
         its queue wait, max(0, last + I - now), as a string, its calls in progress (-1
         without a channel limit), and leased: its calls share, its channels share, the time
         left of its lease (µs, 0 once it has ended), its slots' use of the calls share (the
         most in any window ending now or later: includes/lease.lua); -1 each when not leased
]]
--- @include "common"
--- @include "log"
--- @include "buckets"
--- @include "lease"
--- @include "slots"

local t = readNow(ARGV[1])
local ts = fmtInt(t)
local bLog, bRet, bHash, bLo, bHi, lAlgo, lL, lW, lKey, hashW, bN, bHold, a = readBuckets(2)

-- calls in progress in a holds set (-1 when there is none)
local function inProgress(k)
  if k == 0 then
    return -1
  end
  return redis.call('ZCOUNT', KEYS[k], '(' .. ts, '+inf')
end

local out = { ts }
local hashes = {}
for b = 1, #bLo do
  for j = bLo[b], bHi[b] do
    local algo, L, W, k = lAlgo[j], lL[j], lW[j], lKey[j]
    local count, wait = 0, 0
    if algo == 'l' then
      local from
      count, from = logCount(KEYS[k], t, ts, W)
      if count >= L then
        wait = logWait(KEYS[k], from, ts, count - L, W, t)
      end
    else
      local h = hashes[k]
      if h == nil then
        h = { readHash(KEYS[k]) }
        hashes[k] = h
      end
      local kw = windowIndex(t, W)
      local c, p = windowCounts(h[1], h[2], h[3], kw)
      count, wait = windowLimit(algo, L, W, t, kw, c, p)
    end
    out[#out + 1] = fmt(count)
    out[#out + 1] = fmt(wait)
  end
  out[#out + 1] = inProgress(bN[b] > 0 and bHold[b] or 0)
end

for i = 1, tonumber(ARGV[a]) do
  local at = a + 6 * (i - 1)
  local k, rate, h = tonumber(ARGV[at + 1]), rateOf(ARGV[at + 2]), tonumber(ARGV[at + 3])
  local share, slots, W = tonumber(ARGV[at + 4]), tonumber(ARGV[at + 5]), tonumber(ARGV[at + 6])
  local _, _, wait = nextSlot(slotState(redis.call('GET', KEYS[k])), rate, t)
  out[#out + 1] = fmt(wait)
  out[#out + 1] = inProgress(h)
  if share > 0 then
    local v = redis.call('HMGET', KEYS[share], 'c', 'h', 'e')
    local left = (tonumber(v[3]) or 0) - t
    if left < 0 then
      left = 0
    end
    out[#out + 1] = tonumber(v[1]) or 0
    out[#out + 1] = tonumber(v[2]) or 0
    out[#out + 1] = fmt(left)
    out[#out + 1] = (laneCalls(t, W, KEYS[slots]))
  else
    for _ = 1, 4 do
      out[#out + 1] = -1
    end
  end
end
return out
