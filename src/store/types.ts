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
export type Algorithm = 'sliding-log' | 'sliding-window' | 'fixed-window';

/**
 * What a store reads of a request's signal: an AbortSignal, or anything with `aborted` (a
 * decision's deadline sets a plain flag: an AbortController per call costs more than the rest
 * of the call's work in process).
 */
export type StopSignal = AbortSignal | { readonly aborted: boolean };

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
 * `name` identifies it within its tag; it must be key-safe (see keys.ts: bucketName()).
 */
export interface Bucket {
  readonly name: string;
  readonly limits: readonly Limit[];
}

/**
 * Admission request. `tag` groups the keys of one call so that they live on one Cluster slot
 * (key-safe, see keys.ts). Buckets are checked in the order given.
 *
 * Semantics at time t, for each limit (L, W) of each bucket:
 * - sliding-log: n = events of the bucket with t - W < s <= t; room iff n < L.
 * - fixed-window: k = floor(t / W); c = events of the bucket recorded in window k; room iff c < L.
 * - sliding-window: c as above, p = events in window k - 1, f = (t - kW) / W;
 *   room iff c + p * (1 - f) < L (plain double arithmetic, in that order).
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
 * Concurrent calls may be decided together (RedisStore batches those issued in one tick): each
 * decision is still exactly the one these rules give with the calls taken one by one, in the
 * order they were issued.
 */
export interface AdmitRequest extends RequestOptions {
  readonly tag: string;
  readonly buckets: readonly Bucket[];
  readonly now?: number;
}

export interface AdmitResult {
  readonly admitted: boolean;
  /** Index in `buckets` of the first bucket that lacked room; -1 when admitted. */
  readonly limitedBy: number;
  /**
   * When refused: microseconds until every limit that lacked room has room again, assuming no
   * other event is admitted meanwhile (the max over the failing limits of every bucket). 0 when admitted.
   * - sliding-log (n >= L): the (n - L + 1)-th oldest event s in (t - W, t] leaves at s + W: s + W - t.
   * - fixed-window: (k + 1) * W - t.
   * - sliding-window: if c >= L: (k + 1) * W + r - t with r = floor(W * (1 - L / c)) + 1;
   *   else: k * W + r - t with r = floor(W * (1 - (L - c) / p)) + 1; at least 1.
   */
  readonly retryAfterUs: number;
  /** The time the decision was taken at (the given `now`, or the store's clock). */
  readonly now: number;
}

/** Unconditional record (the "add" operation): count one event in every bucket, refuse nothing. */
export interface RecordRequest extends RequestOptions {
  readonly tag: string;
  readonly buckets: readonly Bucket[];
  readonly now?: number;
}

export interface RecordResult {
  readonly now: number;
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

/** One carrier of a route: `intervalUs` = 1e6 / cps (may be fractional), `maxWaitUs` >= 0. */
export interface Carrier {
  /** Key-safe carrier name (see keys.ts: carrierName()). */
  readonly name: string;
  readonly intervalUs: number;
  readonly maxWaitUs: number;
}

/**
 * Leaky-bucket reservation over a route, tried in order. For carrier c:
 * slot = max(t, last(c) + I) (no last: slot = t), wait = slot - t. The first carrier with
 * wait <= maxWait takes the call (last(c) = slot); a refused carrier keeps its state.
 * All carriers share one tag (one Cluster slot), since routes mix carriers freely.
 */
export interface ReserveRequest extends RequestOptions {
  readonly route: readonly Carrier[];
  readonly now?: number;
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

/** What a store reports outside any call (RedisStore: a lost connection, once per outage). */
export interface StoreEvents {
  error: [Error];
}

export interface Store {
  /** 'memory' or 'redis', for reports and logs. */
  readonly kind: string;
  /** Trouble outside any call; CallGate re-emits it on its own 'error' event. */
  readonly events?: EventEmitter<StoreEvents>;
  admit(req: AdmitRequest): Promise<AdmitResult>;
  record(req: RecordRequest): Promise<RecordResult>;
  count(req: CountRequest): Promise<CountResult>;
  reserve(req: ReserveRequest): Promise<ReserveResult>;
  wait(req: WaitRequest): Promise<WaitResult>;
  /** Drop every key of this store (its prefix); for tests and replay runs. */
  clear(): Promise<void>;
  close(): Promise<void>;
}
