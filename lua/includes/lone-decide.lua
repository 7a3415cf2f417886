-- One plain lone call's decision (admit-lone.lua; admit-lone-run.lua, for each call of a run),
-- included as a block of code, not a function (a closure made on every script call, with its
-- upvalues, cost a lone decision 4 % more Redis instructions): it reads the includer's locals
-- ko, n and ao (the call's keys are KEYS[ko + 1 .. ko + n], its arguments ARGV[ao + 1 ..] in
-- admit-lone.lua's layout, see its header) and sets its locals reply (the four integers) and
-- clock (Redis TIME, µs, if it was read). In a run, the includer's local runClock (Redis TIME
-- read by an earlier call of the run; nil outside a run) makes the run's calls decide at one
-- time, and its loneLogWrite (includes/lone-time.lua) writes each log once per bound, as a
-- batch does. After includes/log.lua, lone-time.lua and lease-lone.lua.
do
  local live, t, floorMs, expired
  live, clock, t, floorMs, expired = loneTime(ao, runClock)
  if expired then
    reply = { 0, 0, t, 4 } -- decided nowhere
  else
    local nb = n -- its buckets: its keys, but a leased level's share hash, last
    local flags = argv[ao + 3]
    local share
    if flags == 'S' or flags == '1S' then
      share, nb = keys[ko + n], n - 1
    end
    local ts = string.format('%d', t)
    local limitedBy, retry = 0, 0
    local shareRefused = false
    -- past a refusal by the share alone, every later limit is counted (none skipped for the
    -- wait found so far): `later`, one of them lacked room too
    local later = false
    -- per bucket q: [q] its retention r (the widest window), [-q] the size of its log (0: new);
    -- widest[q]: that window's limit L
    local logs, widest = {}, {}
    local a = ao + 7 + nb
    for q = 1, nb do
      local key = keys[ko + q]
      local last = a + 2 * argv[a]
      -- the log's size (O(1) to read) bounds every window's count (logLimits)
      local wider = call('ZCARD', key)
      logs[q], logs[-q], widest[q] = argv[a + 2] + 0, wider, argv[a + 1] + 0
      local refused
      if q == 1 and share ~= nil then
        local c = laneShare(share, t)
        refused, retry, shareRefused = leasedLog(key, t, ts, argv[a + 1] + 0, argv[a + 2] + 0, wider, c)
      elseif shareRefused then
        refused, retry = logLimitsPastShare(key, t, ts, a + 1, last, wider, retry)
        later = later or refused
      else
        refused, retry = logLimits(key, t, ts, a + 1, last, wider, retry)
      end
      if refused and limitedBy == 0 then
        limitedBy = q
      end
      a = last + 1
    end
    if limitedBy == 0 then
      local member, refresh = argv[ao + 2], flags == '1' or flags == '1S'
      for q = 1, nb do
        local expire = refresh or logs[-q] == 0
        loneLogWrite(keys[ko + q], t, logs[q], widest[q], live, argv[ao + 6 + q], expire, floorMs, ts, member)
      end
    elseif shareRefused then
      call('HINCRBY', share, 'rc', 1)
    end
    reply = { limitedBy, retry, t, (shareRefused and not later) and 16 or 0 }
  end
end
