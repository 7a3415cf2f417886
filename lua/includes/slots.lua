-- A carrier's pacing state (reserve.lua, wait.lua, inspect.lua; src/store/slots.ts is the memory
-- store's, computing alike): its latest slot kept exactly, as a base (µs) and the k intervals
-- given since, the string "<base> <k> <p/q>", or "<base>" when k is 0 (the latest slot alone, as
-- it was written before). The interval is 1e6 / cps µs with cps the decimal the configuration
-- wrote, p / q (the caller sends "p/q"). A slot as one number of µs since 1970 steps in
-- quarter-µs at today's dates, and each call queued behind the last rounded it again. With A =
-- floor(1e6 q / p) and r = 1e6 q - A p, k intervals are k A + floor(k r / p) whole µs and a
-- fraction (k r mod p) / p, integers computed exactly (math.fmod), so a whole offset is exactly
-- whole. After common.lua.

-- The rate of its text "p/q": { text, p, A, r }.
local rateCache = {}
local function rateOf(text)
  local rate = rateCache[text]
  if rate == nil then
    local p, q = string.match(text, '^(%d+)/(%d+)$')
    p, q = tonumber(p), tonumber(q)
    local whole = 1000000 * q
    local r = math.fmod(whole, p)
    rate = { text, p, (whole - r) / p, r }
    rateCache[text] = rate
  end
  return rate
end

-- The state read from its string, { base, k, rate }, or nil.
local function slotState(v)
  if not v then
    return nil
  end
  local b, k, c = string.match(v, '^(%S+) (%d+) (%S+)$')
  if b then
    return { tonumber(b), tonumber(k), rateOf(c) }
  end
  return { tonumber(v), 0, nil }
end

-- floor(k r / p) and k r mod p, exactly: at once while k r is a whole double, else over k's bits
-- with the remainder kept below p (src/store/slots.ts, mulDivMod)
local function mulDivMod(k, r, p)
  local kr = k * r
  if kr <= 9007199254740991 then
    local rest = math.fmod(kr, p)
    return (kr - rest) / p, rest
  end
  local bit = 1
  while bit * 2 <= k do
    bit = bit * 2
  end
  local q, rest = 0, 0
  while bit >= 1 do
    q, rest = q * 2, rest * 2
    if rest >= p then
      rest, q = rest - p, q + 1
    end
    if k >= bit then
      k, rest = k - bit, rest + r
      if rest >= p then
        rest, q = rest - p, q + 1
      end
    end
    bit = bit / 2
  end
  return q, rest
end

-- k intervals at `rate`: whole µs, and the fraction's numerator over p.
local function offsetParts(k, rate)
  if k == 0 then
    return 0, 0
  end
  local q, rest = mulDivMod(k, rate[4], rate[2])
  return k * rate[3] + q, rest
end

-- k intervals at `rate`, µs.
local function slotOffset(k, rate)
  local whole, rest = offsetParts(k, rate)
  if rest == 0 then
    return whole
  end
  return whole + rest / rate[2]
end

-- The latest slot given (µs; for expiries and displays, not for pacing).
local function lastSlot(s)
  return s[1] + slotOffset(s[2], s[3])
end

-- The double next to x (a positive double), above it (direction 1) or below it (-1): x is
-- m 2^e with 0.5 <= m < 1, its neighbours 2^(e - 53) away (2^(e - 54) below a power of two).
local function adjacent(x, direction)
  local m, e = math.frexp(x)
  if direction < 0 and m == 0.5 then
    return x - math.ldexp(1, e - 54)
  end
  return x + direction * math.ldexp(1, e - 53)
end
-- The wait ahead + rest / p µs (ahead whole, 0 <= rest < p) as the double that compares with any
-- whole µs (maxWait), rounds to the nearest µs (halves up) and rounds up as the exact value does
-- (src/store/slots.ts, exactWait: the same doubles): a fraction lost in the sum is kept as the
-- next double above ahead, and the side of the half µs as the exact value's.
local function exactWait(ahead, rest, p)
  if rest == 0 then
    return ahead
  end
  local wait = ahead + rest / p
  if wait <= ahead then
    wait = adjacent(ahead, 1)
  end
  local half = ahead + 0.5
  if 2 * rest < p then
    if wait >= half then
      wait = adjacent(half, -1)
    end
  elseif wait < half then
    wait = half
  end
  return wait
end
-- The next slot after state `s` (nil: none) for a call at t at `rate`: its base, its k and its
-- wait (0: the slot is t itself, a base of its own; else exactWait). A state counted at another
-- rate (a reload changed it) is based again at its latest slot first.
local function nextSlot(s, rate, t)
  if s == nil then
    return t, 0, 0
  end
  local base, k = s[1], s[2]
  if k > 0 and s[3][1] ~= rate[1] then
    base, k = base + slotOffset(k, s[3]), 0
  end
  local whole, rest = offsetParts(k + 1, rate)
  -- since the base, whole µs first: exact while the base is a whole µs (a call's own time)
  local ahead = whole - (t - base)
  if ahead > 0 or (ahead == 0 and rest > 0) then
    return base, k + 1, exactWait(ahead, rest, rate[2])
  end
  return t, 0, 0
end

-- The state's string.
local function slotText(base, k, rate)
  if k == 0 then
    return fmt(base)
  end
  return fmt(base) .. ' ' .. fmtInt(k) .. ' ' .. rate[1]
end

-- The end of a hold of `forUs` (whole µs) from the slot base + k intervals, rounded up to a whole
-- µs: holds are compared with whole-µs times (an end after t), which rounding up keeps exact,
-- where the slot as one number of µs would be rounded to a quarter-µs.
local function slotHoldEnd(base, k, rate, forUs)
  local whole, rest = offsetParts(k, rate)
  local baseWhole = math.floor(base)
  return baseWhole + forUs + whole + math.ceil(base - baseWhole + rest / rate[2])
end
