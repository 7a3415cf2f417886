--[[
  admit: decide a batch of calls, one after the other in the order given. Each call checks
  every limit of every bucket it names and is recorded in all of them only if every one has
  room (all or nothing). Since the script is atomic, each decision is exactly what it would be
  as a script call of its own, in that order; a batch only shares the work: a bucket named by
  many calls is read once and written once per distinct time.

  KEYS        every structure of the batch, each named once: sliding-log sorted sets
              (members = event ids, scores = µs), window hashes {w, c, p} and holds sorted
              sets (members = call ids, scores = hold ends, µs; includes/channels.lua)
  ARGV[1]     ttl floor, ms, for calls whose now is given (virtual clocks: keys must outlive
              real time); calls on Redis TIME use no floor
  ARGV[2]     member prefix: call i's event id (its sorted-set member) is the prefix .. i,
              unique as long as the prefix is unique per batch
  ARGV[3]     call record prefix: the record of call id x is the key prefix .. x (it shares
              the batch's hash tag, so it is named here rather than in KEYS)
  ARGV[4]     '1': end the reply with Redis TIME (the caller measures Redis' clock), else ''
  ARGV[5..]   the profiles and buckets of the batch, each bucket once (includes/buckets.lua)
  then the plans, the bucket lists the calls name, each once:
    NP        the number of plans, then per plan: n, then n bucket indices (1-based), in
              check order
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
         4: skipped, past its deadline); then, when asked (ARGV[4]), Redis TIME (µs)

  How the work is shared: calls with the same t form a group. In a group each (log, W) is
  counted once with ZCOUNT and each window hash read once; the calls admitted add their events
  to local state (all at t, so inside every window), which is written when the time changes or
  the batch ends: per log one trim, ZADD and PEXPIRE, per hash one HSET and PEXPIRE, per holds
  set one trim, ZADD and expiry check, per call record one SET. A refused call
  changes nothing, so the retry-after lookups of a log are kept for the group too.
]]
--- @include "common"
--- @include "buckets"
--- @include "runs"
--- @include "channels"

local floorMs = tonumber(ARGV[1])
local memberPrefix = ARGV[2]
local recordPrefix = ARGV[3]
local wantClock = ARGV[4] == '1'
local bLog, bRet, bHash, bLo, bHi, lAlgo, lL, lW, lKey, hashW, bN, bHold, a = readBuckets(5)
local plans, planHolds = {}, {}
for p = 1, tonumber(ARGV[a]) do
  local n = tonumber(ARGV[a + 1])
  local list = {}
  local holds = false
  for q = 1, n do
    list[q] = tonumber(ARGV[a + 1 + q])
    if bN[list[q]] > 0 then
      holds = true
    end
  end
  plans[p], planHolds[p] = list, holds
  a = a + 1 + n
end
a = a + 1

local t, ts -- the group's time, as a number and as a score
local since, after -- per W: the scores t - W and '(' .. (t - W), formatted once per group
local retention, counts, oldest, added, nAdded -- per log key index
local hw, hc, hp, loaded, dirty -- per window hash key index
local holdsStored, holdsAdded, nHolds -- per holds key index: ZCOUNT above t, call id -> end, count
local records -- call records to write: { id, end, keys }
local recordEnds = {} -- end of every call record this batch wrote or will write, by id

local function newGroup(now)
  t, ts = now, fmtInt(now)
  since, after = {}, {}
  retention, counts, oldest, added, nAdded = {}, {}, {}, {}, {}
  hw, hc, hp, loaded, dirty = {}, {}, {}, {}, {}
  holdsStored, holdsAdded, nHolds, records = {}, {}, {}, {}
end

local function writeGroup(floor)
  for k, members in pairs(added) do
    -- recording, the log drops what no limit can see any more (s <= t - retention)
    local r = retention[k]
    local bound = since[r]
    if bound == nil then
      bound = fmtInt(t - r)
      since[r] = bound
    end
    redis.call('ZREMRANGEBYSCORE', KEYS[k], '-inf', bound)
    local args = {}
    for i = 1, #members do
      args[2 * i - 1], args[2 * i] = ts, members[i]
    end
    redis.call('ZADD', KEYS[k], unpack(args))
    redis.call('PEXPIRE', KEYS[k], fmtInt(ttlMs(r, floor)))
  end
  for k in pairs(dirty) do
    writeHash(KEYS[k], hw[k], hc[k], hp[k], t, hashW[k], floor)
  end
  for k, ends in pairs(holdsAdded) do
    writeHolds(KEYS[k], ends, t, ts, floor)
  end
  for _, r in ipairs(records) do
    writeRecord(recordPrefix .. r[1], r[2], r[3], t, floor)
  end
end

-- Holds of set k with an end after t: those in Redis (counted once per group) and those added
-- by earlier calls of the group (all end after t).
local function holdCount(k)
  local stored = holdsStored[k]
  if stored == nil then
    stored = holdsAfter(KEYS[k], ts)
    holdsStored[k] = stored
  end
  return stored + (nHolds[k] or 0)
end

-- Whether call `id` has a record still holding at t.
local function stillHolding(id)
  local e = recordEnds[id]
  if e == nil then
    e = recordEnd(recordPrefix .. id)
  end
  return e ~= nil and e > t
end

-- '(' .. (t - W): the exclusive lower bound of the window W ending at t.
local function above(W)
  local s = after[W]
  if s == nil then
    s = '(' .. fmtInt(t - W)
    after[W] = s
  end
  return s
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

-- Events of log k in (t - W, t]: those in Redis (counted once per group) and those added by
-- earlier calls of the group (at t). Also the Redis part, for the retry-after lookup.
local function logCount(k, W)
  local byW = sub(counts, k)
  local stored = byW[W]
  if stored == nil then
    stored = redis.call('ZCOUNT', KEYS[k], above(W), ts)
    byW[W] = stored
  end
  return stored + (nAdded[k] or 0), stored
end

-- The score of the (i + 1)-th oldest stored event of log k in (t - W, t]; a call refused by a
-- log leaves it as it was, so the calls after it often ask the same.
local function storedAt(k, W, i)
  local byI = sub(sub(oldest, k), W)
  local s = byI[i]
  if s == nil then
    s = tonumber(redis.call('ZRANGEBYSCORE', KEYS[k], above(W), ts, 'WITHSCORES', 'LIMIT', fmtInt(i), '1')[2])
    byI[i] = s
  end
  return s
end

-- Decide one call on the buckets of its plan at the group's time; record it if admitted. `id`:
-- the call's id when its plan has a channel limit (nil otherwise), `forUs` its hold.
local function decide(list, call, id, forUs)
  if id ~= nil and stillHolding(id) then
    return 0, 0, 2
  end
  local limitedBy, retry, flags = 0, 0, 0
  for q = 1, #list do
    local b = list[q]
    -- a log's limits come widest window first, and a window holds no more events than a wider
    -- one: a count below L already proves room
    local wider
    for j = bLo[b], bHi[b] do
      local algo, L, W, k = lAlgo[j], lL[j], lW[j], lKey[j]
      local wait = 0
      if retry >= W and algo ~= 's' then
        -- already refused, and no longer than this limit's wait can be (at most W): it can
        -- change neither the refusal nor its retry-after, so it is not even counted
        wait = 0
      elseif algo == 'l' then
        if wider == nil or wider >= L then
          local count, stored = logCount(k, W)
          wider = count
          if count >= L then
            -- the (count - L + 1)-th oldest event in the window leaves it at s + W; events
            -- added in this group (at t) come after every stored one
            if count - L < stored then
              wait = storedAt(k, W, count - L) + W - t
            else
              wait = W
            end
          end
        end
      else
        if not loaded[k] then
          hw[k], hc[k], hp[k] = readHash(KEYS[k])
          loaded[k] = true
        end
        local kw = windowIndex(t, W)
        local c, p = windowCounts(hw[k], hc[k], hp[k], kw)
        if algo == 'f' then
          if c >= L then
            wait = (kw + 1) * W - t
          end
        else
          local f = (t - kw * W) / W
          if c + p * (1 - f) >= L then
            if c >= L then
              wait = (kw + 1) * W + math.floor(W * (1 - L / c)) + 1 - t
            else
              wait = kw * W + math.floor(W * (1 - (L - c) / p)) + 1 - t
            end
            if wait < 1 then
              wait = 1
            end
          end
        end
      end
      if wait > 0 then
        if limitedBy == 0 then
          limitedBy = q
        end
        if wait > retry then
          retry = wait
        end
      end
    end
    -- then its channels; past the first bucket without room they change nothing
    if limitedBy == 0 and bN[b] > 0 and holdCount(bHold[b]) >= bN[b] then
      limitedBy, flags = q, 1
    end
  end

  if limitedBy == 0 then
    local member = memberPrefix .. call
    for q = 1, #list do
      local b = list[q]
      local log = bLog[b]
      if log > 0 then
        local list = added[log]
        if list == nil then
          added[log], nAdded[log], retention[log] = { member }, 1, bRet[b]
        else
          list[#list + 1] = member
          nAdded[log] = nAdded[log] + 1
        end
      end
      local hashes = bHash[b]
      if hashes then
        for _, k in ipairs(hashes) do
          if not loaded[k] then
            hw[k], hc[k], hp[k] = readHash(KEYS[k])
            loaded[k] = true
          end
          local w, c, p = countIn(hw[k], hc[k], hp[k], windowIndex(t, hashW[k]))
          if w then
            hw[k], hc[k], hp[k] = w, c, p
            dirty[k] = true
          end
        end
      end
    end
    if id ~= nil and forUs > 0 then
      -- a channel in every bucket with a channel limit, until t + forUs
      local e = t + forUs
      local keys = {}
      for q = 1, #list do
        local k = bHold[list[q]]
        if k > 0 then
          local ends = sub(holdsAdded, k)
          ends[id] = e
          nHolds[k] = (nHolds[k] or 0) + 1
          keys[#keys + 1] = KEYS[k]
        end
      end
      records[#records + 1] = { id, e, keys }
      recordEnds[id] = e
    end
  end
  return limitedBy, retry, flags
end

local out = {}
local call = 0
eachCall(a, floorMs, newGroup, function(x)
  call = call + 1
  local p, deadline = tonumber(ARGV[x]), ARGV[x + 1]
  local id, forUs
  if planHolds[p] then
    id, forUs, x = ARGV[x + 2], tonumber(ARGV[x + 3]), x + 2
  end
  local limitedBy, retry, flags = 0, 0, 4
  if not pastDeadline(deadline) then
    limitedBy, retry, flags = decide(plans[p], call, id, forUs)
  end
  local n = #out
  out[n + 1], out[n + 2], out[n + 3], out[n + 4] = limitedBy, retry, t, flags
  return x + 2
end, writeGroup)
if wantClock then
  out[#out + 1] = redisClock()
end
return out
