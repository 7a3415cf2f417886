-- The calls of a batch (admit, reserve), from ARGV[a] to the end of ARGV, in runs that share a
-- time:
--   now   µs since the epoch (integer); empty = Redis TIME (read once per script)
--   c     the number of calls in the run, then the calls' arguments (each call's own number of
--         them: the script's call function reads them)
-- Consecutive calls with the same time form a group: begin(t, live) opens it (live: its first
-- run is on Redis TIME), call(x) decides each
-- of its calls in order (x: the index in ARGV of the call's first argument; it returns the index
-- past its last), finish(floor) closes it (writes what it changed) before the next group and at
-- the end. floor is the least key expiry (ms) for what the group writes: floorMs when a call of
-- the group gave its now (a virtual clock), 0 when all ran on Redis TIME; virtual says whether
-- one did (finish(floor, virtual)).
local function eachCall(a, floorMs, begin, call, finish)
  local t, floor, virtual
  local argc = #ARGV
  while a <= argc do
    local now, c = ARGV[a], tonumber(ARGV[a + 1])
    local runT, runFloor
    if now == '' then
      runT, runFloor = redisClock(), 0
    else
      runT, runFloor = tonumber(now), floorMs
    end
    if runT ~= t then
      if t ~= nil then
        finish(floor, virtual)
      end
      t, floor, virtual = runT, runFloor, now ~= ''
      begin(t, now == '')
    else
      if runFloor > floor then
        floor = runFloor
      end
      virtual = virtual or now ~= ''
    end
    a = a + 2
    for _ = 1, c do
      a = call(a)
    end
  end
  if t ~= nil then
    finish(floor, virtual)
  end
end
