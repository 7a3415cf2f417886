--[[
  admit-lone: decide one call whose buckets are plain sliding logs (sliding-log limits only, no
  channel limit): a batch of one such call, the common case under light load. The rule and the
  reply are admit.lua's for that batch; the layout is shorter, and the script defines only the
  functions of includes/log.lua, loneTime and those of includes/lease-lone.lua; its decision is
  includes/lone-decide.lua, which admit-lone-run.lua runs for each such call of a run. Redis
  runs a script's whole body on every call, making each function it defines anew: admit.lua's
  batch machinery (its closures, and the garbage they leave) would cost more than this
  decision, and including common.lua as well made a lone decision cost 15% more Redis
  instructions (callgrind), so this script reads Redis TIME itself.

  KEYS[q]       the log of the call's q-th bucket, in check order (all distinct; members =
                event ids, scores = µs); with 'S' in ARGV[3], last the share hash of a leased
                level's lane (lua/lease-observe.lua), whose level is the first bucket
  ARGV[1]       ttl floor, ms, when now is given (virtual clocks: keys must outlive real time);
                calls on Redis TIME use no floor
  ARGV[2]       the call's event id (its member in every log)
  ARGV[3]       flags: '1' set every log's expiry (the caller does not know it was set for
                these limits: see includes/log.lua, logWrite); 'S' the first bucket is a leased
                level's lane: its one limit L is min(L, the share's calls c), and 0 at or past
                the lease end e; a call refused for lack of share is counted on the share
                hash (rc). '', '1', 'S' or '1S'
  ARGV[4]       '1': end the reply with Redis TIME (the caller measures Redis' clock), else ''
  ARGV[5]       now, µs since the epoch (integer; '' or '-' = Redis TIME)
  ARGV[6]       deadline, µs in Redis time ('' = none)
  ARGV[6 + q]   the bound of the latest trim of log q the caller knows of ('' = none): the
                caller saw an admit on Redis TIME trim it there
  ARGV[7 + n..] per bucket q: m, then m pairs L (events), W (µs), widest window first (the first
                W is the log's retention r)

  Semantics at time t (normative: src/store/types.ts):
    sliding-log   n = #{s : t - W < s <= t}; room iff n < L
    the call is admitted iff every limit of every bucket has room, and then recorded in every
    log at t; a call whose deadline has passed (Redis TIME >= deadline) is skipped: decided
    nowhere
  Reply: four integers (exact below 2^53): limitedBy (0: admitted; else the 1-based position of
         the first bucket without room), retryAfterUs (0 when admitted; else the max over
         failing limits of the wait until room), now (µs), flags (0; 4: skipped, past its
         deadline; 16: refused by the leased level's share alone, the level and every other
         bucket having room: an overflow lane may take it); then, when asked (ARGV[4]), Redis
         TIME (µs)

  On Redis TIME a log keeps its expiry as includes/log.lua (logWrite, rounded) says: the trim is
  rounded, skipped when the caller knows the log was trimmed at that bound already, and the
  PEXPIRE sent only when the trim removed something, the log is new (it was empty) or ARGV[3]
  asks. With now given (a virtual clock, whose times may go back) it trims exactly at t - r, as
  every other write does, and always sets the expiry.
]]
--- @include "log"
--- @include "lone-time"
--- @include "lease-lone"
-- the call's keys and arguments (includes/lone-decide.lua reads them, and sets reply and clock)
local ko, n, ao = 0, #KEYS, 0
local reply, clock
local runClock -- none: a call alone
--- @include "lone-decide"
if ARGV[4] == '1' then
  reply[5] = clock
end
return reply
