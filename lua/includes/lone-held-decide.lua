-- One lone call with channels: its decision (admit-lone-held.lua; admit-lone-run.lua, for each
-- such call of a run), included as a block of code, as includes/lone-decide.lua is: it reads
-- the includer's locals ko, n and ao (the call's keys are KEYS[ko + 1 .. ko + n], its arguments
-- ARGV[ao + 1 ..] in admit-lone-held.lua's layout, see its header) and sets its locals reply
-- (the four integers) and clock (Redis TIME, µs, if it was read); in a run, with runClock and
-- loneLogWrite as includes/lone-decide.lua says. After includes/log.lua, lone-time.lua and
-- lease-lone.lua.
do
  local id = argv[ao + 7]
  local live, t, floorMs, expired
  live, clock, t, floorMs, expired = loneTime(ao, runClock)
  if expired then
    reply = { 0, 0, t, 4 } -- decided nowhere
  else
    local ts = fmt('%d', t)
    -- the holds of a set with an end after t as far as a limit n needs them (includes/channels.lua,
    -- liveHolds, dropLapsed and holdsAfter: on Redis TIME its size while below n, else a ZCOUNT
    -- above t, and its lapsed holds dropped, 128 at most; with a given now a ZCOUNT above t)
    local function holdsNow(key, n)
      if live then
        local z = call('ZCARD', key)
        if z < n then
          return z, false
        end
        local c = call('ZCOUNT', key, '(' .. ts, '+inf')
        if z - c > 128 then
          local old = call('ZRANGEBYSCORE', key, '-inf', ts, 'LIMIT', 0, 128)
          call('ZREM', key, unpack(old))
        elseif c < z then
          call('ZREMRANGEBYSCORE', key, '-inf', ts)
        end
        return c, true
      end
      return call('ZCOUNT', key, '(' .. ts, '+inf'), true
    end
    local record -- the call record's key (a call with an id)
    local holding = false
    local flags3 = argv[ao + 3]
    local share -- a leased level's lane share (the first bucket's)
    if flags3 == 'S' or flags3 == '1S' then
      share = keys[ko + n - (id ~= '' and 1 or 0)]
    end
    if id ~= '' then
      record = keys[ko + n]
      local v = call('GET', record)
      holding = v and string.match(v, '^%d+') + 0 > t
    end
    if holding then
      reply = { 0, 0, t, 2 } -- its record still holds: admitted again, counted nowhere
    else
      local limitedBy, retry, flags = 0, 0, 0
      local shareC, shareH, shareRefused
      -- past a refusal by the calls share alone, every later limit and channel is counted (none
      -- skipped): `later`, one of them lacked room too
      local later = false
      if share ~= nil then
        shareC, shareH = laneShare(share, t, true)
      end
      -- per bucket q: [q] its log's key index (nil: none), [-q] its holds' key index (nil: none)
      local at = {}
      -- per log key index k: [k] its retention r, [-k] its size (0: new), its known trim bound, and
      -- the widest window's limit L
      local logs, known, widest = {}, {}, {}
      -- per holds key index k: [k] its count (on Redis TIME a count of 0 means no hold in
      -- progress: includes/channels.lua, writeHolds), [-k] whether exact
      local stored = {}
      local k = 0
      local a = ao + 10
      for q = 1, argv[ao + 9] + 0 do
        local m = argv[a + 1] + 0
        local last = a + 1 + 2 * m
        if m > 0 then
          k = k + 1
          local key = keys[ko + k]
          at[q], known[k] = k, argv[a]
          -- the log's size (O(1) to read) bounds every window's count (logLimits)
          local wider = call('ZCARD', key)
          logs[k], logs[-k], widest[k] = argv[a + 3] + 0, wider, argv[a + 2] + 0
          local refused
          if q == 1 and share ~= nil then
            refused, retry, shareRefused = leasedLog(key, t, ts, argv[a + 2] + 0, argv[a + 3] + 0, wider, shareC)
            shareRefused = shareRefused and 'rc'
          elseif shareRefused == 'rc' then
            refused, retry = logLimitsPastShare(key, t, ts, a + 2, last, wider, retry)
            later = later or refused
          else
            refused, retry = logLimits(key, t, ts, a + 2, last, wider, retry)
          end
          if refused and limitedBy == 0 then
            limitedBy = q
          end
        end
        local N = argv[last + 1] + 0
        if N > 0 then
          k = k + 1
          at[-q] = k
          -- then its channels (holds with an end after t); past the first bucket without room
          -- they change nothing
          if limitedBy == 0 then
            local n = N
            if q == 1 and share ~= nil and shareH < n then
              n = shareH
            end
            local held, exact = holdsNow(keys[ko + k], n)
            stored[k], stored[-k] = held, exact
            if held >= n then
              limitedBy, flags = q, 1
              if held < N then
                shareRefused = 'rh' -- the level had a channel, the lane's share not
              end
            end
          elseif shareRefused == 'rc' and not later then
            local n = N
            if q == 1 and shareH < n then
              n = shareH
            end
            if holdsNow(keys[ko + k], n) >= n then
              later = true
            end
          end
        end
        a = last + 2
      end
      if limitedBy == 0 then
        local member, refresh = argv[ao + 2], flags3 == '1' or flags3 == '1S'
        -- a call holding for h > 0: a channel in every bucket with a channel limit, until e
        local h = id ~= '' and argv[ao + 8] + 0 or 0
        local es, px, parts, from
        if h > 0 then
          es = fmt('%d', t + h)
          -- includes/common.lua's ttlMs(h, floorMs), spelled out
          local ms = math.ceil(h / 1000) + 1
          if ms < floorMs then
            ms = floorMs
          end
          px = fmt('%d', ms)
          -- the record names each holds set by its key past the record's base (#'call:in:' = 8)
          parts, from = { es }, #record - #id - 7
        end
        for q = 1, argv[ao + 9] + 0 do
          local lk = at[q]
          if lk ~= nil then
            local expire = refresh or logs[-lk] == 0
            loneLogWrite(keys[ko + lk], t, logs[lk], widest[lk], live, known[lk], expire, floorMs, ts, member)
          end
          local hk = at[-q]
          if hk ~= nil and h > 0 then
            -- includes/channels.lua: writeHolds and keepUntil, for one hold
            local key = keys[ko + hk]
            if not live then
              call('ZREMRANGEBYSCORE', key, '-inf', ts)
              call('ZADD', key, es, id)
              if call('PTTL', key) < px + 0 then
                call('PEXPIRE', key, px)
              end
            else
              call('ZADD', key, es, id)
              if stored[hk] == 0 then
                call('PEXPIRE', key, px)
              elseif call('PEXPIRE', key, px, 'GT') == 0 and stored[-hk] then
                call('PEXPIRE', key, px, 'NX')
              end
            end
            parts[#parts + 1] = string.sub(key, from)
          end
        end
        if h > 0 then
          call('SET', record, table.concat(parts, ' '), 'PX', px)
        end
      elseif shareRefused then
        call('HINCRBY', share, shareRefused, 1)
      end
      if shareRefused == 'rc' and not later and limitedBy == 1 then
        flags = 16
      end
      reply = { limitedBy, retry, t, flags }
    end
  end
end
