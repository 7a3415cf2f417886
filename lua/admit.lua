--[[
  admit: check several buckets, each with one or more (limit, window) pairs, and record the
  event in all of them only if every one has room (all or nothing).

  KEYS        the structures the buckets read, each named once: first the sliding-log sorted
              sets (members = event ids, scores = µs), one per bucket with sliding-log limits,
              then the window hashes {w, c, p}, one per bucket and distinct window of its
              fixed-/sliding-window limits
  ARGV[1]     now: µs since the epoch (integer); empty = read Redis TIME
  ARGV[2]     member: a unique id for this event (the sorted-set member)
  ARGV[3]     ttl floor, ms: the least expiry of a written key (0 when now is Redis TIME;
              a long floor when the caller's clock is virtual, so keys outlive real time)
  ARGV[4..]   the structures and the limits (includes/buckets.lua)

  Semantics at time t (normative: src/store/types.ts):
    sliding-log     n = #{s : t - W < s <= t}; room iff n < L
    fixed-window    c = count of window floor(t / W); room iff c < L
    sliding-window  room iff c + p * (1 - f) < L, f = (t - kW) / W
  Reply (integers, all exact below 2^53): admitted: now (µs); refused: { limitedBy (1-based
         index of the first bucket without room), retryAfterUs (max over failing limits of the
         wait until room), now }
]]
--- @include "common"
--- @include "buckets"

local t = readNow(ARGV[1])
local ts = fmtInt(t)
local bound = bounds(t)
local nl, nw = tonumber(ARGV[4]), tonumber(ARGV[5])
trimLogs(nl, bound)

-- each window hash is read once: its fields serve the checks and the record
local hw, hc, hp
if nw > 0 then
  hw, hc, hp = {}, {}, {}
  for j = 1, nw do
    hw[j], hc[j], hp[j] = readHash(KEYS[nl + j])
  end
end

local limitedBy = 0
local retry = 0
local counted = {}
for i = 6 + 2 * nl + nw, #ARGV, 5 do
  local algo, L, W, s = ARGV[i + 1], tonumber(ARGV[i + 2]), tonumber(ARGV[i + 3]), tonumber(ARGV[i + 4])
  local wait = 0
  if algo == 'l' then
    -- a log's limits come widest window first, and a window holds no more events than a wider
    -- one: a count below L already proves room
    local wider = counted[s]
    if wider == nil or wider >= L then
      local from = '(' .. bound(W)
      local n = redis.call('ZCOUNT', KEYS[s], from, ts)
      counted[s] = n
      if n >= L then
        -- the (n - L + 1)-th oldest event in the window leaves it at s + W
        local e = redis.call('ZRANGEBYSCORE', KEYS[s], from, ts, 'WITHSCORES', 'LIMIT', fmtInt(n - L), '1')
        wait = tonumber(e[2]) + W - t
      end
    end
  else
    local k = windowIndex(t, W)
    local c, p = windowCounts(hw[s], hc[s], hp[s], k)
    if algo == 'f' then
      if c >= L then
        wait = (k + 1) * W - t
      end
    else
      local f = (t - k * W) / W
      if c + p * (1 - f) >= L then
        if c >= L then
          wait = (k + 1) * W + math.floor(W * (1 - L / c)) + 1 - t
        else
          wait = k * W + math.floor(W * (1 - (L - c) / p)) + 1 - t
        end
        if wait < 1 then
          wait = 1
        end
      end
    end
  end
  if wait > 0 then
    if limitedBy == 0 then
      limitedBy = tonumber(ARGV[i])
    end
    if wait > retry then
      retry = wait
    end
  end
end

if limitedBy == 0 then
  recordLogs(nl, ts, ARGV[2])
  if nw > 0 then
    local floorMs = tonumber(ARGV[3])
    local wBase = 5 + 2 * nl
    for j = 1, nw do
      recordWindow(KEYS[nl + j], hw[j], hc[j], hp[j], t, tonumber(ARGV[wBase + j]), floorMs)
    end
  end
  return t
end
return { limitedBy, retry, t }
