-- Buckets, shared by admit, record and inspect. From ARGV[a], first the limit profiles (the
-- limits many buckets share, e.g. every peer of a default), then the buckets:
--   P           the number of profiles, then per profile:
--     retention µs, the widest window of its sliding-log limits (0: no log)
--     N         its channel limit (0: none)
--     hoff      with a channel limit, its holds' sorted set: KEYS[first + hoff] (members = call
--               ids, scores = end of each hold, µs)
--     m         the number of its limits, then per limit (sliding-log limits widest first):
--       algo    'l' sliding-log | 'f' fixed-window | 's' sliding-window; with a ban, last
--               come two pseudo-limits that only admit.lua reads: 'b' (L = the threshold,
--               W = the span, off = the strikes hash) and 'B' (W = the ban's length, off = the
--               ban's key, whose value is the ban's end, µs); on a leased level (src/lease/),
--               last of all 'S' (off = the lane's share hash, lua/lease-observe.lua)
--       L       the limit (events per window)
--       W       the window, µs
--       off     the structure it reads: KEYS[first + off] (first: the bucket's, below)
--   B           the number of buckets, then per bucket:
--     first     index in KEYS of its first key: its sliding log when its profile has
--               sliding-log limits, then its window hashes (one per distinct window of the
--               others), then its holds when it has a channel limit
--     profile   1-based index of its profile
-- Every argument is a string Redis can take as is, and every number handed back to Redis goes
-- through fmtInt: converting Lua numbers is the costly part of a script this small.
--
-- readBuckets returns flat arrays (faster than a table per bucket): per bucket b its log key
-- index (bLog[b], 0: none), retention, window hash key indices (bHash[b], a list, or nil), the
-- range of its limits [bLo[b], bHi[b]], its channel limit bN[b] (0: none) and holds key index
-- bHold[b]; per limit j: lAlgo, lL, lW, lKey (index in KEYS); per window hash key index k:
-- hashW[k]. Also the index of the first ARGV after the buckets.
local function readBuckets(a)
  local np = tonumber(ARGV[a])
  a = a + 1
  local pRet, pN, pHoff, pAlgo, pL, pW, pOff = {}, {}, {}, {}, {}, {}, {}
  for q = 1, np do
    local m = tonumber(ARGV[a + 3])
    pRet[q], pN[q], pHoff[q] = tonumber(ARGV[a]), tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
    a = a + 4
    local algo, L, W, off = {}, {}, {}, {}
    for i = 1, m do
      algo[i], L[i], W[i], off[i] = ARGV[a], tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2]), tonumber(ARGV[a + 3])
      a = a + 4
    end
    pAlgo[q], pL[q], pW[q], pOff[q] = algo, L, W, off
  end
  local nb = tonumber(ARGV[a])
  a = a + 1
  local bLog, bRet, bHash, bLo, bHi, bN, bHold = {}, {}, {}, {}, {}, {}, {}
  local lAlgo, lL, lW, lKey, hashW = {}, {}, {}, {}, {}
  local j = 0
  for b = 1, nb do
    local first, q = tonumber(ARGV[a]), tonumber(ARGV[a + 1])
    a = a + 2
    local retention, algo, L, W, off = pRet[q], pAlgo[q], pL[q], pW[q], pOff[q]
    bRet[b] = retention
    bLog[b] = retention > 0 and first or 0
    bN[b] = pN[q]
    bHold[b] = pN[q] > 0 and first + pHoff[q] or 0
    bLo[b] = j + 1
    for i = 1, #algo do
      if algo[i] == 'b' or algo[i] == 'B' or algo[i] == 'S' then
        break -- a ban's or a lease's pseudo-limits (last): not counted, not recorded here
      end
      j = j + 1
      local k = first + off[i]
      lAlgo[j], lL[j], lW[j], lKey[j] = algo[i], L[i], W[i], k
      if algo[i] ~= 'l' and hashW[k] == nil then
        hashW[k] = W[i]
        local h = bHash[b]
        if h == nil then
          bHash[b] = { k }
        else
          h[#h + 1] = k
        end
      end
    end
    bHi[b] = j
  end
  return bLog, bRet, bHash, bLo, bHi, lAlgo, lL, lW, lKey, hashW, bN, bHold, a
end

-- Window hash {w = latest window index, c = its count, p = count of window w - 1}: its fields
-- as numbers (w nil when the hash does not exist). Only two windows are kept.
local function readHash(key)
  local s = redis.call('HMGET', key, 'w', 'c', 'p')
  if not s[1] then
    return nil, 0, 0
  end
  return tonumber(s[1]), tonumber(s[2]), tonumber(s[3])
end

-- The counts of window k and of window k - 1, given the hash's fields.
local function windowCounts(w, c, p, k)
  if w == nil then
    return 0, 0
  elseif k == w then
    return c, p
  elseif k == w + 1 then
    return 0, c
  elseif k == w - 1 then
    return p, 0
  end
  return 0, 0
end

-- a / b < c / d, exactly, for whole numbers below 2^53 (b, d > 0): Euclid's steps, whose whole
-- parts and remainders (math.fmod is exact) never round (src/store/window.ts, fractionBelow)
local function fractionBelow(a, b, c, d)
  while true do
    local ra, rc = math.fmod(a, b), math.fmod(c, d)
    local qa, qc = (a - ra) / b, (c - rc) / d
    if qa ~= qc then
      return qa < qc
    end
    if ra == 0 then
      return rc > 0
    end
    if rc == 0 then
      return false
    end
    -- ra / b < rc / d iff d / rc < b / ra
    a, b, c, d = d, rc, b, ra
  end
end

-- The sliding window's test at offset r into window k, counts c and p: c + p (1 - r / W) < L,
-- exactly, as p (W - r) / W < L - c (src/store/window.ts, estimateBelow)
local function estimateBelow(L, W, c, p, r)
  if c >= L then
    return false
  end
  return p == 0 or fractionBelow(W - r, W, L - c, p)
end

-- The first offset r (µs, at most W) into a window with counts c and p at which the test passes:
-- from the bound in doubles, moved by the step or two its rounding may have cost
-- (src/store/window.ts, firstRoom).
local function firstRoom(L, W, c, p)
  local r = math.min(W, math.floor(W * (1 - (L - c) / p)) + 1)
  while r < W and not estimateBelow(L, W, c, p, r) do
    r = r + 1
  end
  while r > 1 and estimateBelow(L, W, c, p, r - 1) do
    r = r - 1
  end
  return r
end

-- A fixed-window ('f') or sliding-window ('s') limit (L, W) at t in window kw with counts c and
-- p: the value compared with L (c, or the estimate c + p(1 - f)) and the wait until room (0:
-- room), by the formulas of src/store/types.ts (AdmitResult.retryAfterUs).
local function windowLimit(algo, L, W, t, kw, c, p)
  if algo == 'f' then
    if c >= L then
      return c, (kw + 1) * W - t
    end
    return c, 0
  end
  local value = c + p * (1 - (t - kw * W) / W)
  if estimateBelow(L, W, c, p, t - kw * W) then
    return value, 0
  end
  local wait
  if c >= L then
    -- full: room only in the next window, where this one's count is the previous
    wait = (kw + 1) * W + firstRoom(L, W, 0, c) - t
  else
    wait = kw * W + firstRoom(L, W, c, p) - t
  end
  if wait < 1 then
    wait = 1
  end
  return value, wait
end

-- The fields after counting one event in window k; nil when k is older than the two windows
-- kept (nowhere to count it).
local function countIn(w, c, p, k)
  if not w or k > w + 1 then
    return k, 1, 0
  elseif k == w + 1 then
    return k, 1, c
  elseif k == w then
    return w, c + 1, p
  elseif k == w - 1 then
    return w, c, p + 1
  end
  return nil
end

-- Store a window hash's fields; it lives until window w + 1 ends (after that both counts are 0).
local function writeHash(key, w, c, p, t, W, floorMs)
  redis.call('HSET', key, 'w', fmtInt(w), 'c', fmtInt(c), 'p', fmtInt(p))
  redis.call('PEXPIRE', key, fmtInt(ttlMs((w + 2) * W - t, floorMs)))
end
