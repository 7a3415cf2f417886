/**
 * The Store interface: the atomic operations callgate's admission and dispatch stand on.
 * MemoryStore and RedisStore implement it with identical semantics (one conformance suite
 * runs against both); this file is the normative description of those semantics.
 *
 * Time: every `now` is an integer number of microseconds since the epoch. When `now` is
 * omitted, the store reads its own clock (Redis `TIME` for RedisStore, the process clock for
 * MemoryStore) and reports the time it used in the result.
 */

import type { EventEmitter } from 'eventemitter3';
import type { HoldLedger } from '../holds/ledger.js';
export type Algorithm = 'sliding-log' | 'sliding-window' | 'fixed-window';

/**
 * What a store reads of a request's signal: an AbortSignal, or anything with `aborted` (a
 * decision's deadline sets a plain flag: an AbortController per call costs more than the rest
 * of the call's work in process).
 */
export type StopSignal = AbortSignal | DeadlineSignal;

/**
 * A decision's deadline as a flag (set when the caller stopped waiting) and the time it will be
 * set, on the process clock (systemClockUs, µs). A store that already sent the command cannot
 * take it back; RedisStore sends the deadline with it, and the script skips a call whose
 * deadline has passed (in Redis time) when it runs, so that it is never counted.
 */
export interface DeadlineSignal {
  readonly aborted: boolean;
  readonly deadlineUs?: number;
}

/** What every request may carry besides its own fields. */
export interface RequestOptions {
  /**
   * Aborted when the caller stopped waiting (its decision timed out). A store must not send a
   * command whose signal is aborted: the policy has decided that call already.
   */
  readonly signal?: StopSignal;
}

/** One limit of a bucket: at most `limit` admitted events per window of `windowUs`. */
export interface Limit {
  readonly limit: number;
  readonly windowUs: number;
  readonly algorithm: Algorithm;
}

/**
 * A bucket: one counted thing (the platform, an account, a peer) and its limits.
 * `name` identifies it within its tag; it must be key-safe (see store/keys.ts: bucketName()).
 * `channels`: at most that many of its calls in progress at once (absent: no channel limit).
 */
export interface Bucket {
  readonly name: string;
  readonly limits: readonly Limit[];
  readonly channels?: number;
  /** Attribute levels: refuse the bucket outright for a while once it refused too often (BanRule). */
  readonly ban?: BanRule;
}

/**
 * A bucket's ban (attribute levels, docs/attributes.md). Strikes: the calls this bucket's rate
 * limits lacked room for, counted in fixed windows of `spanUs` ([k·span, (k+1)·span)), whether or
 * not another bucket refused them too. The call that brings its window's strikes to `threshold`
 * bans the bucket until t + forUs: while banned (t < end), a call naming it is refused before any
 * limit is checked, `reason` `banned`, limitedBy the first banned bucket, retryAfterUs the time
 * left; it counts nowhere and is no strike. A ban ends at its time or when lifted (unban).
 */
export interface BanRule {
  readonly threshold: number;
  readonly spanUs: number;
  readonly forUs: number;
}

/**
 * What an admitted (or dispatched) call holds: a channel in every bucket with a channel limit
 * (or on the carrier with one that takes it), from its decision until `end`, or until it is
 * released. Inbound end = t + forUs; outbound end = slot + forUs. A hold whose end is at or
 * before a time t no longer counts at t (a call ending exactly at t has freed its channel).
 *
 * `id` names the call (any non-empty string; stores encode it): one call record per id and
 * direction ties the call's holds together, so that release / refresh find them knowing only
 * the id, from any process.
 */
export interface Hold {
  readonly id: string;
  /** Microseconds the hold lasts (after t inbound, after the slot outbound); integer >= 0. */
  readonly forUs: number;
}

/**
 * Admission request. `tag` groups the keys of one call so that they live on one Cluster slot
 * (key-safe, see store/keys.ts). Buckets are checked in the order given.
 *
 * Semantics at time t, for each limit (L, W) of each bucket:
 * - sliding-log: n = events of the bucket with t - W < s <= t; room iff n < L.
 * - fixed-window: k = floor(t / W); c = events of the bucket recorded in window k; room iff c < L.
 * - sliding-window: c as above, p = events in window k - 1, f = (t - kW) / W;
 *   room iff c + p * (1 - f) < L, exactly (as p (W - r) / W < L - c in whole numbers, r = t - kW).
 * Admitted iff every limit of every bucket has room; then the event is recorded in every bucket
 * (log and window counters alike). A refusal records nothing anywhere.
 *
 * Only the two latest fixed windows of each (bucket, W) are kept (window w and w - 1, where w is
 * the latest window recorded); an event in an older window counts 0 and is not recorded.
 * Recording an event at t first trims each bucket's log to events with s > t - max(W of its
 * log limits); a refusal changes nothing. (Trimming shows only to a later call further back in
 * time, which would otherwise still count those events.)
 * (The MemoryStore also forgets what its latest time makes irrelevant, which a call far back in
 * time can notice: see MemoryStoreOptions.sweep.)
 *
 *
 * Channels. A bucket with a channel limit N has room iff fewer than N holds there have an end
 * after t; within a bucket its rate limits are checked first, then its channels (`reason` says
 * which lacked room in the first bucket without room). An admitted call holds a channel in every
 * bucket with a channel limit, until t + hold.forUs (nothing when forUs is 0), and its call
 * record remembers them. `hold` is required when a bucket has a channel limit.
 * A call whose id already has an inbound call record with an end after t (a retransmission, a
 * retry) is admitted again without being counted anywhere: `duplicate`.
 * Recording holds at t first drops the holds of that bucket that ended at or before t.
 *
 * Concurrent calls may be decided together (RedisStore batches those issued in one tick): each
 * decision is still exactly the one these rules give with the calls taken one by one, in the
 * order they were issued.
 */
export interface AdmitRequest extends RequestOptions {
  readonly tag: string;
  readonly buckets: readonly Bucket[];
  readonly now?: number;
  readonly hold?: Hold;
}

/** Which kind of limit of the first bucket without room refused the call. */
export type RefusalReason = 'rate' | 'channels' | 'banned';

export interface AdmitResult {
  readonly admitted: boolean;
  /** Index in `buckets` of the first bucket that lacked room; -1 when admitted. */
  readonly limitedBy: number;
  /** On refusal: `rate` when a rate limit of that bucket lacked room, else `channels`. */
  readonly reason?: RefusalReason;
  /** Admitted because the call already holds (its id has a live inbound call record): counted nowhere. */
  readonly duplicate?: boolean;
  /**
   * When refused: microseconds until every rate limit that lacked room has room again, assuming
   * no other event is admitted meanwhile (the max over the failing rate limits of every bucket);
   * 0 when admitted, and 0 when only channel limits lacked room (a call's end is not known).
   * - sliding-log (n >= L): the (n - L + 1)-th oldest event s in (t - W, t] leaves at s + W: s + W - t.
   * - fixed-window: (k + 1) * W - t.
   * - sliding-window: if c >= L: (k + 1) * W + r - t with r the first offset into window k + 1
   *   at which c * (1 - r / W) < L; else: k * W + r - t with r the first offset into window k
   *   at which c + p * (1 - r / W) < L (each exactly, as the decision tests it: about
   *   floor(W * (1 - (L - c) / p)) + 1); at least 1.
   */
  readonly retryAfterUs: number;
  /** The time the decision was taken at (the given `now`, or the store's clock). */
  readonly now: number;
  /**
   * Admitted through a leased level's overflow lane (docs/leasing.md): when the level counted
   * the call there (µs, the overflow lane's Redis TIME; `now` is its lane's, a round trip later:
   * on a Cluster the two masters' clocks may differ a little).
   */
  readonly spilledAt?: number;
  /**
   * Refused by a leased level's lane for lack of calls share alone: the level had room, and so
   * did every other limit of the call (RedisStore's overflow lane may take it).
   */
  readonly spillable?: boolean;
}

/**
 * Unconditional record (the "add" operation): count one event in every bucket, refuse nothing.
 * With a hold, the call also holds its channels as an admitted one does (and a call still
 * holding is not counted again: `duplicate`).
 */
export interface RecordRequest extends RequestOptions {
  readonly tag: string;
  readonly buckets: readonly Bucket[];
  readonly now?: number;
  readonly hold?: Hold;
}

export interface RecordResult {
  readonly now: number;
  readonly duplicate?: boolean;
}

/** The "get" operation: events of a bucket's sliding log with now - W < s <= now. */
export interface CountRequest extends RequestOptions {
  readonly tag: string;
  readonly bucket: string;
  readonly windowUs: number;
  readonly now?: number;
}

export interface CountResult {
  readonly count: number;
  readonly now: number;
}

/**
 * One carrier of a route: `intervalUs` = 1e6 / cps (may be fractional), `maxWaitUs` >= 0,
 * `channels`: at most that many calls in progress on it at once (absent: no channel limit).
 */
export interface Carrier {
  /** Key-safe carrier name (see store/keys.ts: carrierName()). */
  readonly name: string;
  readonly intervalUs: number;
  /**
   * Its calls per second, when known (the configuration's): slots are counted in intervals of
   * 1e6 / cps µs, k of them computed as k * 1e6 / cps, exact where the result is a whole number
   * of µs (a wait of exactly maxWait). Absent: 1e6 / intervalUs.
   */
  readonly cps?: number;
  readonly maxWaitUs: number;
  readonly channels?: number;
}

/**
 * Leaky-bucket reservation over a route, tried in order. For carrier c:
 * slot = max(t, last(c) + I) (no last: slot = t), wait = slot - t. The first carrier with
 * wait <= maxWait and, when it has a channel limit N, fewer than N holds with an end after t
 * takes the call (last(c) = slot) and, with a channel limit, holds it until slot + hold.forUs
 * (holds count from the decision, also while the call waits for its slot). A refused carrier
 * keeps its state. `hold` is required when a carrier of the route has a channel limit.
 * A call record of the same id still holding elsewhere is released first (one outbound hold per id).
 * On a Redis Cluster each carrier has a tag of its own (store/keys.ts: carrierTag).
 */
export interface ReserveRequest extends RequestOptions {
  readonly route: readonly Carrier[];
  readonly now?: number;
  readonly hold?: Hold;
}

export interface ReserveResult {
  /** Index in `route` of the carrier that took the call; -1 when none could. */
  readonly index: number;
  /** Wait on the chosen carrier in microseconds (slot - now); 0 when refused. */
  readonly waitUs: number;
  /** The slot given (now + waitUs); 0 when refused. */
  readonly slotUs: number;
  /** The wait each carrier tried would have imposed, in route order, up to the chosen one. */
  readonly waits: readonly number[];
  /** Per carrier tried, in route order: true when its wait fitted but its channels were full at t. */
  readonly full: readonly boolean[];
  /**
   * Per carrier tried, in route order: true when it is leased across regions (RedisStore's
   * `leasedCarriers`, docs/leasing.md) and gave no slot within maxWait for its share: the share
   * had no room (no slot before its lease end with fewer than its calls share in the second),
   * or, with a share below the carrier's CPS, the wait was too long (the whole CPS might have
   * taken the call). Absent when no carrier tried says so.
   */
  readonly shareLacked?: readonly boolean[];
  readonly now: number;
}

/**
 * The end of a call (hang-up): drop every hold of the call records of `id` (inbound, outbound or
 * both) and the records themselves. `released` counts the records that still held at t.
 */
export interface ReleaseRequest extends RequestOptions {
  readonly id: string;
  /** Which records: default both. */
  readonly direction?: 'in' | 'out';
  readonly now?: number;
}

export interface ReleaseResult {
  /** Call records (0, 1 or 2) that still held something at t. */
  readonly released: number;
  readonly now: number;
}

/** A long call: every hold of the call records of `id` still holding at t now ends at t + forUs. */
export interface RefreshRequest extends RequestOptions {
  readonly id: string;
  readonly forUs: number;
  readonly now?: number;
}

export interface RefreshResult {
  /** Call records (0, 1 or 2) that held at t and were extended. */
  readonly refreshed: number;
  readonly now: number;
}

/**
 * Calls in progress in one bucket (tag and bucket name, as in AdmitRequest) or on one carrier
 * (tag OUTBOUND_TAG, the carrier's name): the holds there with an end after t.
 */
export interface HoldsRequest extends RequestOptions {
  readonly tag: string;
  readonly name: string;
  readonly now?: number;
}

export interface HoldsResult {
  readonly holds: number;
  readonly now: number;
}

/** Current queue wait of one carrier: max(0, last(c) + I - now). */
export interface WaitRequest extends RequestOptions {
  readonly carrier: Carrier;
  readonly now?: number;
}

export interface WaitResult {
  readonly waitUs: number;
  readonly now: number;
}

/**
 * The "inspect" operation, read-only: what each limit of some buckets and each carrier sees at
 * `now` (an operator's view). Buckets are named with their tag, as in an admission.
 */
export interface InspectRequest extends RequestOptions {
  readonly buckets: readonly { readonly tag: string; readonly bucket: Bucket }[];
  readonly carriers: readonly Carrier[];
  readonly now?: number;
}

export interface InspectResult {
  /**
   * Per bucket, per limit (in the bucket's order): `counts`, the value the limit compares with L
   * (sliding-log: events in (now - W, now]; fixed-window: the current window's count;
   * sliding-window: the estimate c + p * (1 - f)), and `retryAfterUs`, 0 when it has room, else
   * the wait an admission would be told (see AdmitResult).
   */
  readonly buckets: readonly {
    readonly counts: readonly number[];
    readonly retryAfterUs: readonly number[];
    readonly channels?: number;
  }[];
  /**
   * Per carrier: its queue wait, max(0, last(c) + I - now), as WaitResult. `channels` (buckets and
   * carriers with a channel limit): the calls in progress there at now, as HoldsResult. `lease`
   * (a carrier the store leases across regions: docs/leasing.md): this deployment's share of
   * its CPS (`calls`) and channels, the time left of its lease (µs, 0 once ended), and `used`,
   * the most of its slots in any second ending now or later (what a shrink cannot go below).
   */
  readonly carriers: readonly {
    readonly waitUs: number;
    readonly channels?: number;
    readonly lease?: {
      readonly calls: number;
      readonly channels: number;
      readonly leftUs: number;
      readonly used: number;
    };
  }[];
  readonly now: number;
}

/**
 * Lift a bucket's ban (BanRule) and forget its strikes: an operator's decision. `lifted`: it was
 * banned at t.
 */
export interface UnbanRequest extends RequestOptions {
  readonly tag: string;
  readonly bucket: string;
  readonly now?: number;
}

export interface UnbanResult {
  readonly lifted: boolean;
  readonly now: number;
}

/** The bans in force at t (bucket names with their tag, and each ban's end, µs). */
export interface BansRequest extends RequestOptions {
  readonly now?: number;
}

export interface BansResult {
  readonly bans: readonly { readonly tag: string; readonly bucket: string; readonly end: number }[];
  readonly now: number;
}

/** What a store reports outside any call (RedisStore: a lost connection, once per outage). */
export interface StoreEvents {
  error: [Error];
  /** The store lost holds this process knew of (a restart or failover), or a tag's marker was gone (see reassert). */
  storeLoss: [StoreLossEvent];
  /** A re-assertion of this process's calls ran on one tag (see reassert). */
  holdsReasserted: [HoldsReassertedEvent];
}

// ---- Holds re-assertion (issue 25): the calls a process knows, written again after a loss ----

/** One call of a reassert request: its id, which side, the holds sets (bucket or carrier names) and their end (µs). */
export interface ReassertCall {
  readonly id: string;
  readonly direction: 'in' | 'out';
  readonly names: readonly string[];
  readonly end: number;
}

/**
 * Write again the holds of calls in progress on one tag (outbound calls: their carrier's tag, carrierTag(name)),
 * idempotently: for each call whose end is after t and that has no tombstone (a release re-sent
 * after an outage), its record and a hold in each named set, with the store's end when its
 * record is still there (else the given end); a hold still present is not counted twice.
 * `mode` 'lost' (default): a missing record is written again. 'sync': only when `token` is
 * given and the tag's generation marker is missing or is not `token` (the store lost it), else
 * the call counts as released elsewhere (`gone`), or `unknown` when no token is given.
 * The marker is written when missing, with a recovery grace: until `graceUntil` a store fresh
 * from a loss waits for the other processes to write theirs (docs/redis.md).
 */
export interface ReassertRequest extends RequestOptions {
  readonly tag: string;
  readonly calls: readonly ReassertCall[];
  readonly mode?: 'lost' | 'sync';
  readonly token?: string;
  /** Recovery grace written with a new marker, µs (default 0). */
  readonly graceUs?: number;
  /** The calling routing process's id: the store counts the processes sharing the tag. */
  readonly process?: string;
  /** A process not seen for this long (µs) counts no more (default 60 s). */
  readonly processTtlUs?: number;
  /** Another Redis instance answers now (a failover): a grace that has ended starts again (`graceUs`). */
  readonly restartGrace?: boolean;
  readonly now?: number;
}

export type ReassertStatus = 'ended' | 'present' | 'written' | 'gone' | 'unknown';

export interface ReassertResult {
  /** Per call, in order. */
  readonly statuses: readonly ReassertStatus[];
  /** The tag's marker token now. */
  readonly token: string;
  /** The marker was missing (written now): the store lost this tag's state, or never had it. */
  readonly markerMissing: boolean;
  /** End of the tag's recovery grace, µs. */
  readonly graceUntil: number;
  /** Other routing processes seen on the tag lately (before this call). */
  readonly others: number;
  readonly now: number;
}

export interface StoreLossEvent {
  readonly tag: string;
  /** What showed it: the connection was lost and holds were missing, or the tag's marker changed. */
  readonly cause: 'reconnect' | 'marker';
}

export interface HoldsReassertedEvent {
  readonly tag: string;
  /** Holds written again. */
  readonly reasserted: number;
  /** Calls found released elsewhere (dropped from the ledger). */
  readonly gone: number;
  /** Calls checked. */
  readonly checked: number;
}

export interface Store {
  /** 'memory' or 'redis', for reports and logs. */
  readonly kind: string;
  /**
   * Whether its keys carry hash tags (a Cluster): a call's keys then live on its plan's tag, and
   * a peer named with two accounts is counted apart on each (docs/redis.md). Absent: no tags.
   */
  readonly hashTags?: boolean;
  /** Trouble outside any call; CallGate re-emits it on its own 'error' event. */
  readonly events?: EventEmitter<StoreEvents>;
  admit(req: AdmitRequest): Promise<AdmitResult>;
  record(req: RecordRequest): Promise<RecordResult>;
  count(req: CountRequest): Promise<CountResult>;
  reserve(req: ReserveRequest): Promise<ReserveResult>;
  wait(req: WaitRequest): Promise<WaitResult>;
  release(req: ReleaseRequest): Promise<ReleaseResult>;
  refresh(req: RefreshRequest): Promise<RefreshResult>;
  holds(req: HoldsRequest): Promise<HoldsResult>;
  inspect(req: InspectRequest): Promise<InspectResult>;
  /**
   * The calls this process admitted or dispatched and has not seen end (RedisStore: written
   * again after a loss). Decisions taken by policy while the store was away enter it too.
   */
  readonly ledger?: HoldLedger;
  /**
   * The lanes of a leased global level (docs/leasing.md): its inbound keys are on lane tags
   * instead of the one inbound tag. Undefined: not leased.
   */
  readonly leaseLanes?: number;
  /** With leaseLanes: where each account's (or peer's) keys are, pins included (src/lease/lanes.ts). */
  readonly leasePlan?: LanePlan;
  /** A leased level with an overflow lane (docs/leasing.md): the level's calls are on it too. */
  readonly leaseOverflow?: boolean;
  /** The ids of the carriers it leases across regions (docs/leasing.md, "Carriers across regions"). */
  readonly leasedCarriers?: readonly string[];
  /** Write the ledger's calls marked unwritten now (a reload that turned a channel limit on); resolves once done. */
  writeLedger?(): Promise<void>;
  /**
   * A configuration was loaded in place of another (CallGate.reload): forget what was built for
   * the old one (RedisStore: the shared buckets' script arguments, and what it knew of their
   * logs, so that the first write of each under the new limits sets its expiry again).
   */
  configChanged?(): void;
  /** Write again the holds of calls in progress (see ReassertRequest); stores that cannot lose state may omit it. */
  reassert?(req: ReassertRequest): Promise<ReassertResult>;
  /** Lift a ban (attribute levels); optional so that a store without bans still is one. */
  unban?(req: UnbanRequest): Promise<UnbanResult>;
  /** The bans in force (an operator's view: RedisStore scans its keys for them). */
  bans?(req: BansRequest): Promise<BansResult>;
  /** Drop every key of this store (its prefix); for tests and replay runs. */
  clear(): Promise<void>;
  close(): Promise<void>;
}

/**
 * Where a leased deployment's owners go (docs/leasing.md, "Placing accounts"): `lanes` lanes;
 * owners named in `pins` (bucket names, `account:<id>` or `peer:<id>`) on the lane given there,
 * every other owner where its hash puts it, as without pins. Made by lanePlan (src/lease/lanes.ts).
 */
export interface LanePlan {
  readonly lanes: number;
  readonly pins: ReadonlyMap<string, number>;
}
