--[[
  lease-grant: capacity the coordinator took from its pool added to a lane's share of a leased
  level (0 and 0: a renewal of the lease alone). The lease end is renewed (or kept, if later).

  KEYS[1]  the lane's share hash (fields: lua/lease-observe.lua)
  ARGV[1]  the coordinator's term
  ARGV[2]  the lane's epoch as the coordinator has it
  ARGV[3]  calls added to the share
  ARGV[4]  channels added to the share
  ARGV[5]  lease end, µs, on this Redis' clock

  An order of an older term or epoch than the lane's is refused: {-1}. An order of a newer
  epoch first sets the share to 0 (what the lane held went back to the pool while it was lost).
  Reply: {calls share, channels share}
]]
--- @include "lease"

local term, epoch = ARGV[1] + 0, ARGV[2] + 0
local c, h, was = leaseOrder(term, epoch)
if c == nil then
  return { -1 }
end
c, h = c + (ARGV[3] + 0), h + (ARGV[4] + 0)
leaseWrite(term, epoch, c, h, ARGV[5] + 0, was)
return { c, h }
