--[[
  admit-lone-held: decide one call whose buckets have sliding-log limits only (and no ban), one
  of them at least with a channel limit or without any limit: a batch of one such call, the
  common case under light load when calls hold channels. admit-lone.lua's counterpart for calls
  with channels (that script keeps the layout of plain logs, every argument of which costs it):
  the rule, the keys written and the reply are admit.lua's for that batch; the layout is
  shorter, and the script defines only the four functions of includes/log.lua, loneTime, the
  three of includes/lease-lone.lua and one for its holds sets. Redis runs a script's whole body
  on every call, making each function it defines anew: admit.lua's batch machinery (its
  closures, and the garbage they leave) cost more than twice this decision (callgrind, three
  levels with channels), so this script reads Redis TIME itself and writes the holds and the
  call record in line (what includes/channels.lua does for admit.lua).

  KEYS          per bucket q, in check order: its log when it has sliding-log limits (members =
                event ids, scores = µs), then its holds when it has a channel limit (members =
                call ids, scores = hold ends, µs); then, with 'S' in ARGV[3], the share hash of
                a leased level's lane, whose level is the first bucket (lua/lease-observe.lua);
                then, when the call carries an id (ARGV[7]), its call record last,
                <base>call:in:<id> (includes/channels.lua). All distinct.
  ARGV[1]       ttl floor, ms, when now is given (virtual clocks: keys must outlive real time);
                calls on Redis TIME use no floor
  ARGV[2]       the call's event id (its member in every log)
  ARGV[3]       flags: '1' set every log's expiry (the caller does not know it was set for
                these limits: see includes/log.lua, logWrite); 'S' the first bucket is a leased
                level's lane: its one limit L is min(L, the share's calls c), its channel limit
                N min(N, the share's channels h), both 0 at or past the lease end e; a call
                refused for lack of share is counted on the share hash (rc, rh). '', '1', 'S'
                or '1S'
  ARGV[4]       '1': end the reply with Redis TIME (the caller measures Redis' clock), else ''
  ARGV[5]       now, µs since the epoch (integer; '' or '-' = Redis TIME)
  ARGV[6]       deadline, µs in Redis time ('' = none)
  ARGV[7]       the call's id (key-safe) when a bucket has a channel limit, else ''
  ARGV[8]       with an id: how long the call holds its channels once admitted, µs (0: none)
  ARGV[9]       n, the number of buckets
  ARGV[10..]    per bucket q: the bound of the latest trim of its log the caller knows of ('' =
                none: the caller saw an admit on Redis TIME trim it there), m (0: no log), then
                m pairs L (events), W (µs), widest window first (the first W is the log's
                retention r), then N, its channel limit (0: none)

  Semantics at time t (normative: src/store/types.ts):
    sliding-log   n = #{s : t - W < s <= t}; room iff n < L
    channels N    holds with an end after t < N (checked after the bucket's rate limits)
    the call is admitted iff every limit of every bucket has room, and then recorded in every
    log at t and, holding for h > 0, in every holds set until t + h, with its call record; a
    call whose record still holds at t (end > t) is admitted again, counted nowhere; a call
    whose deadline has passed (Redis TIME >= deadline) is skipped: decided nowhere
  Reply: four integers (exact below 2^53): limitedBy (0: admitted; else the 1-based position of
         the first bucket without room), retryAfterUs (0 when admitted; else the max over
         failing rate limits of the wait until room), now (µs), flags (0; 1: refused by
         channels, not rate; 2: a repeated admit of a call still holding; 4: skipped, past its
         deadline; 16: refused by the leased level's calls share alone, the level and every
         other bucket, channels included, having room: an overflow lane may take it); then,
         when asked (ARGV[4]), Redis TIME (µs)

  Logs are written as admit-lone.lua writes them (includes/log.lua, logWrite: on Redis TIME a
  rounded trim, skipped when known, and the PEXPIRE only when needed; with now given the exact
  trim and the expiry always); holds and records as admit.lua writes them (includes/channels.lua:
  on Redis TIME a holds set counted by its size while below its limit, liveHolds, and its
  expiry lengthened by PEXPIRE GT, writeHolds).
]]
--- @include "log"
--- @include "lone-time"
--- @include "lease-lone"

-- globals as locals: each lookup is a table access per use
local call, argv, keys, fmt = redis.call, ARGV, KEYS, string.format
local id = argv[7]
local live, clock, t, floorMs, expired = loneTime()
local reply
if expired then
  reply = { 0, 0, t, 4 } -- decided nowhere
else
  local ts = fmt('%d', t)
  -- the holds of a set with an end after t as far as a limit n needs them (includes/channels.lua,
  -- liveHolds and holdsAfter: on Redis TIME its size while below n, else its lapsed holds
  -- dropped first; with a given now a ZCOUNT above t)
  local function holdsNow(key, n)
    if live then
      local z = call('ZCARD', key)
      if z < n then
        return z, false
      end
      return z - call('ZREMRANGEBYSCORE', key, '-inf', ts), true
    end
    return call('ZCOUNT', key, '(' .. ts, '+inf'), true
  end
  local record -- the call record's key (a call with an id)
  local holding = false
  local flags3 = argv[3]
  local share -- a leased level's lane share (the first bucket's)
  if flags3 == 'S' or flags3 == '1S' then
    share = keys[#keys - (id ~= '' and 1 or 0)]
  end
  if id ~= '' then
    record = keys[#keys]
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
    -- per holds key index k: [k] its count (on Redis TIME a count of 0 means a new set:
    -- includes/channels.lua, writeHolds), [-k] whether exact (lapsed holds dropped)
    local stored = {}
    local k = 0
    local a = 10
    for q = 1, argv[9] + 0 do
      local m = argv[a + 1] + 0
      local last = a + 1 + 2 * m
      if m > 0 then
        k = k + 1
        local key = keys[k]
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
          local held, exact = holdsNow(keys[k], n)
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
          if holdsNow(keys[k], n) >= n then
            later = true
          end
        end
      end
      a = last + 2
    end
    if limitedBy == 0 then
      local member, refresh = argv[2], flags3 == '1' or flags3 == '1S'
      -- a call holding for h > 0: a channel in every bucket with a channel limit, until e
      local h = id ~= '' and argv[8] + 0 or 0
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
      for q = 1, argv[9] + 0 do
        local lk = at[q]
        if lk ~= nil then
          local kn = known[lk]
          logWrite(keys[lk], t, logs[lk], widest[lk], live, kn, refresh or logs[-lk] == 0, floorMs, ts, member)
        end
        local hk = at[-q]
        if hk ~= nil and h > 0 then
          -- includes/channels.lua: writeHolds and keepUntil, for one hold
          local key = keys[hk]
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
if argv[4] == '1' then
  reply[5] = clock
end
return reply
