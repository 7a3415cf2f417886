--[[
  admit: decide a batch of calls, one after the other in the order given. Each call checks
  every limit of every bucket it names and is recorded in all of them only if every one has
  room (all or nothing). Since the script is atomic, each decision is exactly what it would be
  as a script call of its own, in that order; a batch only shares the work: a bucket named by
  many calls is read once and written once per distinct time.

  KEYS        every structure of the batch, each named once: sliding-log sorted sets
              (members = event ids, scores = µs), window hashes {w, c, p} and holds sorted
              sets (members = call ids, scores = hold ends, µs; includes/channels.lua); then,
              on a Cluster (hash tags), the record key of every call with an id (the script
              names it again from ARGV[3]; declared so that a Cluster checks it before the
              script runs: a slot being moved to another master answers TRYAGAIN then, where a
              key first met mid-script is an error after the writes before it)
  ARGV[1]     ttl floor, ms, for calls whose now is given (virtual clocks: keys must outlive
              real time); calls on Redis TIME use no floor
  ARGV[2]     member prefix: call i's event id (its sorted-set member) is the prefix .. i,
              unique as long as the prefix is unique per batch
  ARGV[3]     call record prefix: the record of call id x is the key prefix .. x (it shares
              the batch's hash tag; on a Cluster, also declared at the end of KEYS)
  ARGV[4]     '1': end the reply with Redis TIME (the caller measures Redis' clock), else ''
  ARGV[5..]   the profiles and buckets of the batch, each bucket once (includes/buckets.lua)
  then the plans, the bucket lists the calls name, each once:
    NP        the number of plans, then per plan: n, then n bucket indices (1-based), in
              check order
  then per bucket (in bucket order), the bound of its log's latest trim the caller knows of
  ('' = none, and the caller does not know the log's expiry was set for these limits): see
  includes/log.lua (logWrite) on how a write on Redis TIME trims and sets the expiry
  then the calls, in runs that share a time (includes/runs.lua); per call its plan index
  (1-based), its deadline (µs, Redis time; '' = none) and, when a bucket of the plan has a
  channel limit, the call's id (key-safe) and how long it holds its channels once admitted (µs)

  Semantics at time t (normative: src/store/types.ts):
    sliding-log     n = #{s : t - W < s <= t}; room iff n < L
    fixed-window    c = count of window floor(t / W); room iff c < L
    sliding-window  room iff c + p * (1 - f) < L, f = (t - kW) / W
    channels N      holds with an end after t < N (checked after the bucket's rate limits)
    a call whose record still holds at t (end > t) is admitted again, counted nowhere
    a call whose deadline has passed (Redis TIME >= deadline) is skipped: decided nowhere
  Reply: per call four integers (exact below 2^53): limitedBy (0: admitted; else the 1-based
         position, among the call's buckets, of the first without room), retryAfterUs (0 when
         admitted; else the max over failing rate limits of the wait until room), now (µs),
         flags (1: refused by channels, not rate; 2: a repeated admit of a call still holding;
         4: skipped, past its deadline; 8: refused by a ban, retryAfterUs its time left; 16:
         refused by a leased level's share alone, the level and every other bucket having room:
         an overflow lane may take it); then, when asked (ARGV[4]), Redis TIME (µs)

  How the work is shared: calls with the same t form a group. In a group each (log, W) is
  counted once with ZCOUNT, each holds set once and each window hash read once; the calls
  admitted add their events to local state (all at t, so inside every window), which is written
  when the time changes or the batch ends: per log one trim, ZADD and PEXPIRE (on Redis TIME the
  trim and the PEXPIRE only when needed, as admit-lone.lua does), per hash one HSET and PEXPIRE,
  per holds set one ZADD and its expiry (on Redis TIME no trim, and PEXPIRE GT, or a plain one
  on a new set: includes/channels.lua, liveHolds and writeHolds), per call record one SET. A
  refused call changes no count (at most a holds set full of lapsed holds is trimmed), so the
  retry-after lookups of a log are kept for the group too. A log's size (ZCARD, O(1)) bounds
  every count of it: a log below a limit has room without counting; a holds set's size bounds
  its count the same way.

  A lone call (the batch holds one call, the common case under light load) whose buckets have
  sliding-log limits only goes to a script of its own instead, which decides and writes what
  this one would: admit-lone.lua without channel limits, admit-lone-held.lua with them; a
  small batch of such calls goes to admit-lone-run.lua, which runs their lone decisions one
  after the other. Any other lone call takes the same decide() as a batch but keeps no group
  state: it reads and writes Redis directly, in the same commands.
]]
--- @include "common"
--- @include "log"
--- @include "buckets"
--- @include "runs"
--- @include "channels"

local floorMs = tonumber(ARGV[1])
local memberPrefix = ARGV[2]
local recordPrefix = ARGV[3]
local recordFrom = namesFrom(recordPrefix)
local wantClock = ARGV[4] == '1'
-- ARGV's numbers are read as `ARGV[i] + 0` (includes/log.lua says why)

-- Where things lie in ARGV (read in place, see the header of includes/buckets.lua):
-- profile q at pAt[q] (retention, N, hoff, m, then 4 per limit), bucket b at bAt + 2b - 2
-- (first key, profile), plan p at planAt[p] (n, then n bucket indices)
local pAt = {}
local a = 6
for q = 1, ARGV[5] + 0 do
  pAt[q] = a
  a = a + 4 + 4 * ARGV[a + 3]
end
local bAt = a + 1
local nBuckets = ARGV[a] + 0
a = bAt + 2 * nBuckets
local planAt = {}
for p = 1, ARGV[a] + 0 do
  a = a + 1
  planAt[p] = a
  a = a + ARGV[a]
end
-- bucket b's known trim bound: ARGV[knownAt + b]
local knownAt = a
a = a + nBuckets + 1

-- Profiles, buckets and plans as numbers, each parsed on first use (once per script call,
-- however many calls of the batch name it). A profile: r (log retention), N (channel limit),
-- hoff, and per limit algo, L, W, off; hashes: the window hashes to record, each once ({off, W}).
local profiles, plans = {}, {}
local function profileAt(po)
  local pr = profiles[po]
  if pr == nil then
    local m = ARGV[po + 3] + 0
    local algo, L, W, off, hashes = {}, {}, {}, {}, {}
    local seen = {}
    local ban, lease
    local j = po + 4 * m
    if m >= 1 and ARGV[j] == 'S' then
      -- a leased level's share (includes/buckets.lua): its hash at KEYS[first + off], last
      lease = ARGV[j + 3] + 0
      m = m - 1
      j = j - 4
    end
    if m >= 2 and ARGV[j] == 'B' then
      -- a ban's pseudo-limits, last (includes/buckets.lua): {threshold, span, strikes off, length, ban off}
      ban = { ARGV[j - 3] + 0, ARGV[j - 2] + 0, ARGV[j - 1] + 0, ARGV[j + 2] + 0, ARGV[j + 3] + 0 }
      m = m - 2
    end
    for i = 1, m do
      j = po + 4 * i
      algo[i], L[i], W[i], off[i] = ARGV[j], ARGV[j + 1] + 0, ARGV[j + 2] + 0, ARGV[j + 3] + 0
      if algo[i] ~= 'l' and not seen[off[i]] then
        seen[off[i]] = true
        hashes[#hashes + 1] = { off[i], W[i] }
      end
    end
    pr = { r = ARGV[po] + 0, N = ARGV[po + 1] + 0, hoff = ARGV[po + 2] + 0, m = m, algo = algo, L = L, W = W, off = off, hashes = hashes, ban = ban, lease = lease }
    profiles[po] = pr
  end
  return pr
end

-- bucket b: its first key index and its profile (two flat arrays: a table per bucket costs more)
local bFirst, bProfile = {}, {}
local function bucketAt(b)
  local first = bFirst[b]
  if first == nil then
    local i = bAt + 2 * b - 2
    first = ARGV[i] + 0
    bFirst[b], bProfile[b] = first, profileAt(pAt[ARGV[i + 1] + 0])
  end
  return first, bProfile[b]
end

-- plan p: its bucket indices in check order, and whether one has a channel limit (its calls
-- then carry an id and a hold); per position q also the bucket's first key and profile, and
-- whether a bucket has a ban: decide() reads these per call, so they are flat arrays made once
local planHolds, planFirsts, planProfiles, planBans = {}, {}, {}, {}
local function planOf(p)
  local list = plans[p]
  if list == nil then
    local at = planAt[p]
    local holds, bans = false, false
    local firsts, profs = {}, {}
    list = {}
    for q = 1, ARGV[at] + 0 do
      local b = ARGV[at + q] + 0
      local first, pr = bucketAt(b)
      list[q], firsts[q], profs[q] = b, first, pr
      holds = holds or pr.N > 0
      bans = bans or pr.ban ~= nil
    end
    plans[p], planHolds[p], planFirsts[p], planProfiles[p], planBans[p] = list, holds, firsts, profs, bans
  end
  return list, planHolds[p], planFirsts[p], planProfiles[p], planBans[p]
end

-- A lone call: one run of one call, with 2 arguments, or 4 (id and hold) when its plan holds.
local argc = #ARGV
local single = ARGV[a + 1] == '1' and (a + 3 == argc or a + 5 == argc)

local t, ts -- the group's time, as a number and as a score
local floor -- the least key expiry (ms) of what the group writes (runs.lua)
local virtual -- whether a call of the group gave its now (runs.lua): times may go back
local live -- whether the group began on Redis TIME: its holds sets are counted by their size while
-- below their limit (includes/channels.lua, liveHolds)
-- group state of a batch (tables made on first use; nil for a lone call, which writes at once):
local fromOf -- per W: the window's lower bound as a score (logCount), formatted once per group
local retention, paces, counts, waits, added, nAdded, sizes, knownOf -- per log key index (paces: its widest L)
local hw, hc, hp, loaded, dirty, hashW -- per window hash key index (a lone call uses the first four)
-- per holds key index: holds after t in Redis (on a live group at most their size, liveHolds),
-- whether that count is exact, call id -> end, count
local holdsStored, holdsExact, holdsAdded, nHolds
local records -- call records to write: { id, end, keys }
local recordEnds -- end of every call record this batch wrote or will write, by id

local function newGroup(now, groupFloor, groupLive)
  t, ts, floor, live = now, fmtInt(now), groupFloor, groupLive
  fromOf, retention, paces, counts, waits, added, nAdded, sizes, knownOf = nil, nil, nil, nil, nil, nil, nil, nil, nil
  hw, hc, hp, loaded, dirty, hashW = nil, nil, nil, nil, nil, nil
  holdsStored, holdsExact, holdsAdded, nHolds, records = nil, nil, nil, nil, nil
end

-- The fields of window hash k, read once per group (once per lone call).
local function loadHash(k)
  if loaded == nil then
    hw, hc, hp, loaded = {}, {}, {}, {}
  end
  if not loaded[k] then
    hw[k], hc[k], hp[k] = readHash(KEYS[k])
    loaded[k] = true
  end
  return hw[k], hc[k], hp[k]
end

local function writeGroup()
  if added ~= nil then
    for k, args in pairs(added) do
      -- recording, the log drops what no limit can see any more (s <= t - retention); on Redis
      -- TIME at a rounded bound, and sets its expiry only when needed (includes/log.lua)
      local known = ARGV[knownAt + knownOf[k]]
      -- the expiry is set when the caller knows nothing of the log, or the log is new
      local always = known == '' or sizes == nil or (sizes[k] or 0) == 0
      logWrite(KEYS[k], t, retention[k], paces[k], not virtual, known, always, floor, unpack(args))
    end
  end
  if dirty ~= nil then
    for k in pairs(dirty) do
      writeHash(KEYS[k], hw[k], hc[k], hp[k], t, hashW[k], floor)
    end
  end
  if holdsAdded ~= nil then
    for k, ends in pairs(holdsAdded) do
      -- counted before any hold was added (on a live group by liveHolds: its count)
      writeHolds(KEYS[k], ends, t, ts, floor, live and holdsStored[k] or nil, holdsExact[k])
    end
  end
  if records ~= nil then
    for _, r in ipairs(records) do
      writeRecord(recordPrefix .. r[1], r[2], r[3], t, floor, recordFrom)
    end
  end
end

-- tbl[k], a table created on first use.
local function sub(tbl, k)
  local v = tbl[k]
  if v == nil then
    v = {}
    tbl[k] = v
  end
  return v
end

-- Holds of set k with an end after t, as far as its limit N needs them: those in Redis (read
-- once per group; on a live group their size, made exact once it reaches N with the group's,
-- includes/channels.lua, liveHolds) and those added by earlier calls of the group (all end
-- after t). A lone call keeps the count for its write (addHold).
local function holdCount(k, N)
  if holdsStored == nil then
    holdsStored, holdsExact, holdsAdded, nHolds = {}, {}, {}, {}
  end
  local added = nHolds[k] or 0
  local n, exact = holdsStored[k], holdsExact[k]
  if n == nil and not live then
    n, exact = holdsAfter(KEYS[k], ts), true
  elseif not exact then
    -- the group's own holds are on top of the set's: N - added left for it
    n, exact = liveHolds(KEYS[k], ts, N - added, n)
  end
  holdsStored[k], holdsExact[k] = n, exact
  return n + added
end

-- Whether call `id` has a record still holding at t.
local function stillHolding(id)
  local e = recordEnds and recordEnds[id]
  if e == nil then
    e = recordEnd(recordPrefix .. id)
  end
  return e ~= nil and e > t
end

-- The size of log k: what Redis holds (read once per group) and what earlier calls of the group
-- added. No window of it holds more.
local function groupSize(k)
  if single then
    return redis.call('ZCARD', KEYS[k])
  end
  if sizes == nil then
    sizes = {}
  end
  local z = sizes[k]
  if z == nil then
    z = redis.call('ZCARD', KEYS[k])
    sizes[k] = z
  end
  return z + (nAdded and nAdded[k] or 0)
end

-- Events of log k in (t - W, t]: those in Redis (counted once per group) and those added by
-- earlier calls of the group (at t). Also the Redis part, and the window's lower bound, for the
-- retry-after lookup.
local function groupCount(k, W)
  if single then
    local n, s = logCount(KEYS[k], t, ts, W)
    return n, n, s
  end
  if counts == nil then
    counts, nAdded = {}, {}
  end
  if fromOf == nil then
    fromOf = {}
  end
  local byW = sub(counts, k)
  local stored = byW[W]
  if stored == nil then
    stored, fromOf[W] = logCount(KEYS[k], t, ts, W, fromOf[W])
    byW[W] = stored
  end
  return stored + (nAdded[k] or 0), stored, fromOf[W]
end

-- The wait until the window W of log k at t has room again when its i + 1 oldest stored events
-- must leave it first (logWait; s: the window's lower bound); a call refused by a log leaves it
-- as it was, so the calls after it often ask the same.
local function storedWait(k, W, s, i)
  if single then
    return logWait(KEYS[k], s, ts, i, W, t)
  end
  if waits == nil then
    waits = {}
  end
  local byI = sub(sub(waits, k), W)
  local wait = byI[i]
  if wait == nil then
    wait = logWait(KEYS[k], s, ts, i, W, t)
    byI[i] = wait
  end
  return wait
end

-- Record an admitted call's event in log k (retention r, its widest window's limit L) of bucket b.
local function addEvent(k, r, L, member, b)
  if single then
    logWrite(KEYS[k], t, r, L, false, '', true, floor, ts, member)
    return
  end
  if added == nil then
    added, retention, paces, knownOf = {}, {}, {}, {}
    if nAdded == nil then
      counts, nAdded = {}, {}
    end
  end
  -- the log's ZADD arguments (score, member pairs), built as the group goes
  local args = added[k]
  if args == nil then
    added[k], nAdded[k], retention[k], paces[k], knownOf[k] = { ts, member }, 1, r, L, b
  else
    local n = nAdded[k] + 1
    args[2 * n - 1], args[2 * n] = ts, member
    nAdded[k] = n
  end
end

-- Count an admitted call's event in window hash k (windows of W).
local function countHash(k, W)
  local w, c, p = loadHash(k)
  w, c, p = countIn(w, c, p, windowIndex(t, W))
  if w then
    hw[k], hc[k], hp[k] = w, c, p
    if single then
      writeHash(KEYS[k], w, c, p, t, W, floor)
    else
      if dirty == nil then
        dirty, hashW = {}, {}
      end
      dirty[k], hashW[k] = true, W
    end
  end
end

-- Hold a channel in holds set k for call `id` until e (the call counted the set: holdCount).
local function addHold(k, id, e)
  if single then
    writeHolds(KEYS[k], { [id] = e }, t, ts, floor, live and holdsStored[k] or nil, holdsExact[k])
    return
  end
  sub(holdsAdded, k)[id] = e
  nHolds[k] = (nHolds[k] or 0) + 1
end

-- Write call `id`'s record: holds in `keys` until e.
local function addRecord(id, e, keys)
  if single then
    writeRecord(recordPrefix .. id, e, keys, t, floor, recordFrom)
    return
  end
  if records == nil then
    records = {}
  end
  records[#records + 1] = { id, e, keys }
  if recordEnds == nil then
    recordEnds = {}
  end
  recordEnds[id] = e
end

-- Bans (src/store/types.ts, BanRule). They are read and written at once, not through the
-- group state: a ban set by a call of the batch refuses the next ones.

-- The end of bucket `first`'s ban (µs) when it is banned at t, else nil.
local function bannedUntil(first, ban)
  local v = redis.call('GET', KEYS[first + ban[5]])
  if v then
    local e = tonumber(v)
    if e > t then
      return e
    end
  end
  return nil
end

-- A call the bucket's rate limits lacked room for: a strike in its span [k span, (k + 1) span);
-- the strike that reaches the threshold bans it until t + length, and the count starts afresh
-- (once the ban ends, the value needs as many strikes again).
local function strike(first, ban)
  local span = ban[2]
  local key = KEYS[first + ban[3]]
  local k = windowIndex(t, span)
  local s = redis.call('HMGET', key, 'k', 'c')
  local c = 1
  if s[1] and tonumber(s[1]) == k then
    c = tonumber(s[2]) + 1
  end
  if c >= ban[1] then
    redis.call('SET', KEYS[first + ban[5]], fmtInt(t + ban[4]), 'PX', fmtInt(ttlMs(ban[4], floorMs)))
    c = 0
  end
  redis.call('HSET', key, 'k', fmtInt(k), 'c', fmtInt(c))
  redis.call('PEXPIRE', key, fmtInt(ttlMs((k + 1) * span - t, floorMs)))
end

-- Leased levels (src/lease/, lua/lease-*.lua). A lane's share hash {c, h, e, ...}: the calls per
-- window and channels this lane may use of the level's limits, until its lease end e (µs, Redis
-- TIME); at or past e it may use nothing. Read once per script call (only the lease scripts
-- change it, never while this one runs); the calls refused for lack of share are counted here
-- and added to the hash once, at the end (with those admitted, which lease-observe.lua counts
-- in the log, the coordinator's demand).
local leaseC, leaseH, leaseE, leaseRc, leaseRh -- per share key index
local function shareOf(k)
  if leaseC == nil then
    leaseC, leaseH, leaseE, leaseRc, leaseRh = {}, {}, {}, {}, {}
  end
  local c = leaseC[k]
  if c == nil then
    local v = redis.call('HMGET', KEYS[k], 'c', 'h', 'e')
    c = tonumber(v[1]) or 0
    leaseC[k], leaseH[k], leaseE[k] = c, tonumber(v[2]) or 0, tonumber(v[3]) or 0
    leaseRc[k], leaseRh[k] = 0, 0
  end
  if t >= leaseE[k] then
    return 0, 0
  end
  return c, leaseH[k]
end

local function writeShares()
  if leaseC == nil then
    return
  end
  for k in pairs(leaseC) do
    if leaseRc[k] > 0 then
      redis.call('HINCRBY', KEYS[k], 'rc', leaseRc[k])
    end
    if leaseRh[k] > 0 then
      redis.call('HINCRBY', KEYS[k], 'rh', leaseRh[k])
    end
  end
end

-- Decide one call on the buckets of plan p at the group's time; record it if admitted. `id`:
-- the call's id when its plan has a channel limit (nil otherwise), `forUs` its hold.
local function decide(p, call, id, forUs)
  if id ~= nil and stillHolding(id) then
    return 0, 0, 2
  end
  local list, _, firsts, profs, bans = planOf(p)
  local n = #list
  local limitedBy, retry, flags = 0, 0, 0
  -- a banned bucket refuses the call before anything is counted
  if bans then
    for q = 1, n do
      local ban = profs[q].ban
      if ban then
        local e = bannedUntil(firsts[q], ban)
        if e then
          return q, e - t, 8
        end
      end
    end
  end
  -- the leased level's share refused the call where the level had room (shareQ: its bucket):
  -- every later limit is then counted, to tell whether the call had room but for the share
  -- (flag 16: an overflow lane may take it); `later`: one of them lacked room too
  local shareQ, later = nil, false
  for q = 1, n do
    local first, pr = firsts[q], profs[q]
    local ban = pr.ban
    local algos, Ws, Ls = pr.algo, pr.W, pr.L
    local short = false
    -- a leased level (one sliding-log limit, the store checks): its limit is the lane's share
    local lease, shareC, shareH = pr.lease, nil, nil
    if lease ~= nil then
      lease = first + lease
      shareC, shareH = shareOf(lease)
    end
    -- a log's limits come widest window first, and a window holds no more events than a wider
    -- one: a count below L already proves room
    local wider
    for i = 1, pr.m do
      local algo, W = algos[i], Ws[i]
      local wait = 0
      if retry >= W and algo ~= 's' and not ban and shareQ == nil then
        -- already refused, and no longer than this limit's wait can be (at most W): it can
        -- change neither the refusal nor its retry-after, so it is not even counted
        wait = 0
      elseif algo == 'l' then
        local L = Ls[i]
        if shareC ~= nil and shareC < L then
          L = shareC
        end
        if wider == nil then
          wider = groupSize(first) -- a bound on every count of the log
        end
        if wider >= L then
          local count, stored, s = groupCount(first, W)
          wider = count
          if count >= L then
            if L < Ls[i] and count < Ls[i] and limitedBy == 0 then
              leaseRc[lease] = leaseRc[lease] + 1 -- the level had room, the lane's share not
              shareQ = q
            end
            -- the (count - L + 1)-th oldest event in the window leaves it at s + W; events
            -- added in this group (at t) come after every stored one
            if count - L < stored then
              wait = storedWait(first, W, s, count - L)
            else
              wait = W
            end
          end
        end
      else
        local kw = windowIndex(t, W)
        local w, c, prev = loadHash(first + pr.off[i])
        c, prev = windowCounts(w, c, prev, kw)
        local _
        _, wait = windowLimit(algo, Ls[i], W, t, kw, c, prev)
      end
      if wait > 0 then
        if limitedBy == 0 then
          limitedBy = q
        elseif shareQ ~= nil and q ~= shareQ then
          later = true
        end
        if wait > retry then
          retry = wait
        end
        short = true
      end
    end
    if short and ban then
      strike(first, ban)
    end
    -- then its channels; past the first bucket without room they change nothing (but whether
    -- the call had room but for the leased level's calls share: the leased level's own channels
    -- count against the lane's channel share, as admit-lone-held.lua and the MemoryStore's
    -- model count them)
    if shareQ ~= nil and pr.N > 0 and not later then
      local N = pr.N
      if q == shareQ and shareH < N then
        N = shareH
      end
      if holdCount(first + pr.hoff, N) >= N then
        later = true
      end
    end
    if limitedBy == 0 and pr.N > 0 then
      local N = pr.N
      if shareH ~= nil and shareH < N then
        N = shareH
      end
      local held = holdCount(first + pr.hoff, N)
      if held >= N then
        limitedBy, flags = q, 1
        if N < pr.N and held < pr.N then
          leaseRh[lease] = leaseRh[lease] + 1
        end
      end
    end
  end

  if shareQ ~= nil and limitedBy == shareQ and flags == 0 and not later then
    flags = 16
  end
  if limitedBy == 0 then
    local member = memberPrefix .. call
    local e, keys
    if id ~= nil and forUs > 0 then
      -- a channel in every bucket with a channel limit, until t + forUs
      e, keys = t + forUs, {}
    end
    for q = 1, n do
      local first, pr = firsts[q], profs[q]
      local r = pr.r
      if r > 0 then
        addEvent(first, r, pr.L[1], member, list[q])
      end
      -- each window hash of the bucket once (limits of one window share it)
      local hashes = pr.hashes
      for j = 1, #hashes do
        local h = hashes[j]
        countHash(first + h[1], h[2])
      end
      if e ~= nil and pr.N > 0 then
        local k = first + pr.hoff
        addHold(k, id, e)
        keys[#keys + 1] = KEYS[k]
      end
    end
    if e ~= nil then
      addRecord(id, e, keys)
    end
  end
  return limitedBy, retry, flags
end

-- A call's decision: its plan, deadline and (when its plan holds) id and hold from ARGV[x..];
-- the index past its arguments.
local function decideAt(x, call)
  local p, deadline = ARGV[x] + 0, ARGV[x + 1]
  local id, forUs
  local _, holds = planOf(p)
  if holds then
    id, forUs, x = ARGV[x + 2], ARGV[x + 3] + 0, x + 2
  end
  if deadline ~= '' and pastDeadline(deadline) then
    return x + 2, 0, 0, 4
  end
  return x + 2, decide(p, call, id, forUs)
end

if single then
  local now = ARGV[a]
  if now == '' then
    newGroup(redisClock(), 0, true)
  else
    newGroup(tonumber(now), floorMs, false)
  end
  local _, limitedBy, retry, flags = decideAt(a + 2, 1)
  writeShares()
  if wantClock then
    return { limitedBy, retry, t, flags, redisClock() }
  end
  return { limitedBy, retry, t, flags }
end

local out = {}
local call = 0
eachCall(a, floorMs, function(now, groupLive)
  newGroup(now, nil, groupLive)
end, function(x)
  call = call + 1
  local nx, limitedBy, retry, flags = decideAt(x, call)
  local n = 4 * call - 4
  out[n + 1], out[n + 2], out[n + 3], out[n + 4] = limitedBy, retry, t, flags
  return nx
end, function(groupFloor, groupVirtual)
  floor, virtual = groupFloor, groupVirtual
  writeGroup()
end)
writeShares()
if wantClock then
  out[#out + 1] = redisClock()
end
return out
