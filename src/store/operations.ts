/**
 * Operator operations of a store (`callgate holds` / `reset`, GET /v1/holds, POST /v1/reset):
 * list the calls holding a bucket or a carrier, and reset a bucket. Freeing one call is the
 * ordinary release (Store.release), which finds the call from any process.
 *
 * Kept beside the Store interface (types.ts) rather than in it: MemoryStore and RedisStore
 * implement both; isOperable() tells a store that does.
 */
import { InvalidArgumentError } from '../errors/index.js';
import type { Bucket, RequestOptions, Store } from './types.js';
import { checkName, checkNow } from './validate.js';

/** Most holds one listing returns (the total is always given). */
export const MAX_LISTED_HOLDS = 10_000;

/**
 * The calls in progress in one bucket (tag and bucket name, as in AdmitRequest) or on one carrier
 * (tag OUTBOUND_TAG, the carrier's name): the holds there with an end after t, earliest end
 * first, at most `max` of them (default 1000, at most MAX_LISTED_HOLDS).
 */
export interface ListHoldsRequest extends RequestOptions {
  readonly tag: string;
  readonly name: string;
  readonly now?: number;
  readonly max?: number;
}

export interface ListedHold {
  /** The call id, as the call was admitted or reserved with. */
  readonly id: string;
  /** When the hold ends unless released or refreshed, µs. */
  readonly endUs: number;
}

export interface ListHoldsResult {
  /** Holds with an end after now, earliest end first (at most `max`). */
  readonly holds: readonly ListedHold[];
  /** Every hold with an end after now (may exceed holds.length). */
  readonly total: number;
  readonly now: number;
}

/**
 * Reset one bucket (tag and bucket, as in AdmitRequest): its sliding log, the window counts of
 * each window of its limits, and its holds go. The calls that held there keep their holds in
 * other buckets, and their call records no longer name this one (a refresh does not bring the
 * hold back; a release still answers for the call). A reset changes no other bucket.
 */
export interface ResetRequest extends RequestOptions {
  readonly tag: string;
  readonly bucket: Bucket;
  readonly now?: number;
}

export interface ResetResult {
  /** Events removed from the bucket's sliding log (0 without a sliding-log limit). */
  readonly events: number;
  /** Window counters removed (one per window size of its fixed / sliding-window limits that had one). */
  readonly windows: number;
  /** The calls that held a channel there at now (their holds were removed), as ListedHold. */
  readonly holds: readonly ListedHold[];
  readonly now: number;
}

export interface OperableStore extends Store {
  /**
   * Whether keys carry hash tags (a RedisStore on a Cluster): a bucket's name then means one
   * bucket per tag. Without tags a bucket is its name, whatever tag is asked.
   */
  readonly tagged: boolean;
  listHolds(req: ListHoldsRequest): Promise<ListHoldsResult>;
  reset(req: ResetRequest): Promise<ResetResult>;
}

export function isOperable(store: Store): store is OperableStore {
  const s = store as Partial<OperableStore>;
  return typeof s.listHolds === 'function' && typeof s.reset === 'function';
}

function fail(message: string): never {
  throw new InvalidArgumentError(message);
}

/** The number of holds a listing returns. */
export function checkListHolds(req: ListHoldsRequest): number {
  checkName('tag', req?.tag);
  checkName('name', req.name);
  checkNow(req.now);
  const max = req.max ?? 1000;
  if (!(Number.isSafeInteger(max) && max >= 1 && max <= MAX_LISTED_HOLDS))
    fail(`max must be an integer from 1 to ${MAX_LISTED_HOLDS}, got ${String(req.max)}`);
  return max;
}

export function checkReset(req: ResetRequest): void {
  checkName('tag', req?.tag);
  checkName('bucket.name', req.bucket?.name);
  checkNow(req.now);
  if (!Array.isArray(req.bucket.limits)) fail('bucket.limits must be an array');
  req.bucket.limits.forEach((lim, j) => {
    if (!(Number.isSafeInteger(lim?.windowUs) && lim.windowUs > 0))
      fail(
        `bucket.limits[${j}].windowUs must be a positive integer number of microseconds, got ${String(lim?.windowUs)}`,
      );
  });
}

/** The distinct windows of a bucket's fixed and sliding-window limits (the window counters it may have). */
export function counterWindows(bucket: Bucket): number[] {
  return [...new Set(bucket.limits.filter((l) => l.algorithm !== 'sliding-log').map((l) => l.windowUs))];
}

/** The inverse of keys.ts encodeId: every `%XXXX` back to its UTF-16 code unit. */
export function decodeId(encoded: string): string {
  return encoded.replace(/%([0-9A-F]{4})/g, (_, hex: string) => String.fromCharCode(Number.parseInt(hex, 16)));
}
