-- The time a lone admit script (admit-lone.lua, admit-lone-held.lua) decides at, read from the
-- layout both share, whose ARGV[i] is ARGV[o + i] (o: 0, or a call's offset in a run,
-- admit-lone-run.lua): ARGV[1] the ttl floor (ms, when now is given), ARGV[4] '1' when the
-- reply ends with Redis TIME, ARGV[5] now ('' or '-' = Redis TIME: '-' for callers that cannot
-- send an empty string, Kamailio's ndb_redis templates), ARGV[6] the deadline ('' = none).
-- `given`: Redis TIME as a run already read it (admit-lone-run.lua: its calls decide at one
-- time, as a batch's do), else nil.
-- Returns: live (on Redis TIME: rounded trims, the PEXPIRE only when needed), Redis TIME (µs,
-- read at most once, nil when nothing asks for it), the decision time t, the ttl floor, and
-- whether the deadline has passed (the call is then decided nowhere).
local function loneTime(o, given)
  local now, deadline = ARGV[o + 5], ARGV[o + 6]
  local live = now == '' or now == '-'
  local clock
  if live or deadline ~= '' or ARGV[o + 4] == '1' then
    clock = given
    if clock == nil then
      local c = redis.call('TIME')
      clock = c[1] * 1000000 + c[2]
    end
  end
  local t, floorMs = clock, 0
  if not live then
    t, floorMs = now + 0, ARGV[o + 1] + 0
  end
  return live, clock, t, floorMs, deadline ~= '' and clock >= deadline + 0
end

-- globals as locals for the lone scripts' decisions (includes/lone-decide.lua,
-- lone-held-decide.lua): each lookup is a table access per use
local call, argv, keys, fmt = redis.call, ARGV, KEYS, string.format

-- How a lone decision writes a log: logWrite (includes/log.lua) for a call alone, an alias that
-- costs nothing; admit-lone-run.lua defines its own, which remembers the run's writes (a
-- wrapper here cost every lone decision 3 % more Redis instructions: its closure per call).
local loneLogWrite = logWrite
