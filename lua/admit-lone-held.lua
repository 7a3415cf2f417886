--[[
  admit-lone-held: decide one call whose buckets have sliding-log limits only (and no ban), one
  of them at least with a channel limit or without any limit: a batch of one such call, the
  common case under light load when calls hold channels. admit-lone.lua's counterpart for calls
  with channels (that script keeps the layout of plain logs, every argument of which costs it):
  the rule, the keys written and the reply are admit.lua's for that batch; the layout is
  shorter, and the script defines only the four functions of includes/log.lua, loneTime, the
  three of includes/lease-lone.lua and one for its holds sets; its decision is
  includes/lone-held-decide.lua, which admit-lone-run.lua runs for each such call of a run.
  Redis runs a script's whole body on every call, making each function it defines anew:
  admit.lua's batch machinery (its closures, and the garbage they leave) cost more than twice
  this decision (callgrind, three levels with channels), so this script reads Redis TIME itself
  and writes the holds and the call record in line (what includes/channels.lua does for
  admit.lua).

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
-- the call's keys and arguments (includes/lone-held-decide.lua reads them, and sets reply and clock)
local ko, n, ao = 0, #KEYS, 0
local reply, clock
local runClock -- none: a call alone
--- @include "lone-held-decide"
if ARGV[4] == '1' then
  reply[5] = clock
end
return reply
