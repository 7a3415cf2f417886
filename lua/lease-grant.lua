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
--- @include "common"

local term, epoch = ARGV[1] + 0, ARGV[2] + 0
local v = redis.call('HMGET', KEYS[1], 'term', 'g', 'c', 'h', 'e')
if term < (tonumber(v[1]) or 0) or epoch < (tonumber(v[2]) or 0) then
  return { -1 }
end
local c, h = tonumber(v[3]) or 0, tonumber(v[4]) or 0
if epoch > (tonumber(v[2]) or 0) then
  c, h = 0, 0
end
c, h = c + (ARGV[3] + 0), h + (ARGV[4] + 0)
local e = ARGV[5] + 0
local was = tonumber(v[5]) or 0
if was > e then
  e = was
end
redis.call('HSET', KEYS[1], 'term', fmtInt(term), 'g', fmtInt(epoch), 'c', fmtInt(c), 'h', fmtInt(h), 'e', fmtInt(e))
return { c, h }
