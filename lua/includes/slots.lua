-- A carrier's pacing state (reserve.lua, wait.lua, inspect.lua; src/store/slots.ts is the memory
-- store's): its latest slot kept exactly, as a base (µs) and the k intervals of 1e6 / cps µs given
-- since, the string "<base> <k> <cps>", or "<base>" when k is 0 (the latest slot alone, as it
-- was written before). A slot as one number of µs since 1970 steps in quarter-µs at today's
-- dates, and each call queued behind the last rounded it again: a backlog drifted, and a wait
-- of exactly maxWait could read as longer. k intervals from the base are one division,
-- k * 1e6 / cps, exact whenever the true offset is a whole number of µs. After common.lua.

-- The state read from its string, { base, k, cps }, or nil.
local function slotState(v)
  if not v then
    return nil
  end
  local b, k, c = string.match(v, '^(%S+) (%d+) (%S+)$')
  if b then
    return { tonumber(b), tonumber(k), tonumber(c) }
  end
  return { tonumber(v), 0, 0 }
end

-- k intervals at `cps`, µs.
local function slotOffset(k, cps)
  if k == 0 then
    return 0
  end
  return (k * 1000000) / cps
end

-- The latest slot given (µs; for expiries and displays, not for pacing).
local function lastSlot(s)
  return s[1] + slotOffset(s[2], s[3])
end

-- The next slot after state `s` (nil: none) for a call at t on the carrier at `cps`: its base,
-- its k and its wait (0: the slot is t itself, a base of its own). A state counted at another
-- cps (a reload changed it) is based again at its latest slot first.
local function nextSlot(s, cps, t)
  if s == nil then
    return t, 0, 0
  end
  local base, k = s[1], s[2]
  if k > 0 and s[3] ~= cps then
    base, k = base + slotOffset(k, s[3]), 0
  end
  local off = slotOffset(k + 1, cps)
  local since = t - base
  if off > since then
    return base, k + 1, off - since
  end
  return t, 0, 0
end

-- The state's string.
local function slotText(base, k, cps)
  if k == 0 then
    return fmt(base)
  end
  return fmt(base) .. ' ' .. fmtInt(k) .. ' ' .. fmt(cps)
end

-- The end of a hold of `forUs` (whole µs) from the slot base + off, rounded up to a whole µs:
-- holds are compared with whole-µs times (an end after t), which rounding up keeps exact, where
-- the slot as one number of µs would be rounded to a quarter-µs.
local function slotHoldEnd(base, off, forUs)
  local whole = math.floor(base)
  return whole + forUs + math.ceil(off + (base - whole))
end
