--[[
  lease-grant: capacity the coordinator took from its pool added to a lane's share of a leased
  level (0 and 0: a renewal of the lease alone). The lease end is renewed (or kept, if later).

  KEYS[1]  the lane's share hash (fields: lua/lease-observe.lua)
  KEYS[2]  the lane's log of the level (sorted set: scores µs)
  KEYS[3]  the lane's holds of the level (sorted set: scores = hold ends, µs)
  ARGV[1]  the coordinator's term
  ARGV[2]  the lane's epoch as the coordinator has it
  ARGV[3]  calls added to the share
  ARGV[4]  channels added to the share
  ARGV[5]  lease end, µs, on this Redis' clock
  ARGV[6]  W, the level's window, µs

  An order of an older term or epoch than the lane's is refused: {-1, the lane's term}. An order
  of a newer epoch first sets the share to what the lane's calls use, and is refused ({-2})
  while the lane's lease still runs (includes/lease.lua); one to a lane whose share hash is gone
  (its Redis lost it) is refused: {-3}.
  Reply: {calls share, channels share}
]]
--- @include "common"
--- @include "lease"

local term, epoch = ARGV[1] + 0, ARGV[2] + 0
local c, h, was = leaseOrder(term, epoch, redisClock(), ARGV[6] + 0)
if c == nil then
  return h -- refused
end
c, h = c + (ARGV[3] + 0), h + (ARGV[4] + 0)
leaseWrite(term, epoch, c, h, ARGV[5] + 0, was)
return { c, h }
