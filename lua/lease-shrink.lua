--[[
  lease-shrink: a lane's share of a leased level comes down towards the coordinator's target,
  never below what its calls use at this instant (src/lease/share.ts, applyShrink): calls
  admitted in the current window, channels held now. The lease end is renewed (or kept, if
  later).

  KEYS[1]  the lane's share hash (fields: lua/lease-observe.lua)
  KEYS[2]  the lane's log of the level (sorted set: scores µs)
  KEYS[3]  the lane's holds of the level (sorted set: scores = hold ends, µs)
  ARGV[1]  the coordinator's term
  ARGV[2]  the lane's epoch as the coordinator has it
  ARGV[3]  target calls share
  ARGV[4]  target channels share
  ARGV[5]  lease end, µs, on this Redis' clock
  ARGV[6]  W, the level's window, µs

  An order of an older term or epoch than the lane's is refused: {-1, the lane's term}. An order
  of a newer epoch first sets the share to what the lane's calls use, and is refused ({-2})
  while the lane's lease still runs (includes/lease.lua); one to a lane whose share hash is gone
  (its Redis lost it) is refused: {-3}.
  Reply: {calls share, channels share, calls freed, channels freed}
]]
--- @include "common"
--- @include "lease"

local term, epoch, now, W = ARGV[1] + 0, ARGV[2] + 0, redisClock(), ARGV[6] + 0
local c, h, was = leaseOrder(term, epoch, now, W)
if c == nil then
  return h -- refused
end
local usedC, usedH = laneUse(now, W)
-- max(target, used), never above the share
local function shrink(share, target, used)
  local next = target
  if used > next then
    next = used
  end
  if next > share then
    next = share
  end
  return next
end
local nc, nh = shrink(c, ARGV[3] + 0, usedC), shrink(h, ARGV[4] + 0, usedH)
leaseWrite(term, epoch, nc, nh, ARGV[5] + 0, was)
return { nc, nh, c - nc, h - nh }
