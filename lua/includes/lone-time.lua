-- The time a lone admit script (admit-lone.lua, admit-lone-held.lua) decides at, read from the
-- layout both share: ARGV[1] the ttl floor (ms, when now is given), ARGV[4] '1' when the reply
-- ends with Redis TIME, ARGV[5] now ('' or '-' = Redis TIME: '-' for callers that cannot send an
-- empty string, Kamailio's ndb_redis templates), ARGV[6] the deadline ('' = none).
-- Returns: live (on Redis TIME: rounded trims, the PEXPIRE only when needed), Redis TIME (µs,
-- read at most once, nil when nothing asks for it), the decision time t, the ttl floor, and
-- whether the deadline has passed (the call is then decided nowhere).
local function loneTime()
  local now, deadline = ARGV[5], ARGV[6]
  local live = now == '' or now == '-'
  local clock
  if live or deadline ~= '' or ARGV[4] == '1' then
    local c = redis.call('TIME')
    clock = c[1] * 1000000 + c[2]
  end
  local t, floorMs = clock, 0
  if not live then
    t, floorMs = now + 0, ARGV[1] + 0
  end
  return live, clock, t, floorMs, deadline ~= '' and clock >= deadline + 0
end
