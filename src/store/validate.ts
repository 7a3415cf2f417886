/**
 * Argument checks shared by every Store: nonsense is refused with InvalidArgumentError before
 * any I/O, so a bad caller never reaches Redis and both stores refuse exactly the same inputs.
 */
import { InvalidArgumentError } from '../errors/index.js';
import type {
  AdmitRequest,
  Bucket,
  Carrier,
  CountRequest,
  Hold,
  HoldsRequest,
  Limit,
  RefreshRequest,
  ReleaseRequest,
  ReserveRequest,
  WaitRequest,
} from './types.js';

const ALGORITHMS = new Set(['sliding-log', 'sliding-window', 'fixed-window']);

function fail(message: string): never {
  throw new InvalidArgumentError(message);
}

/** A key-safe name: non-empty, and no brace that could open or close a Cluster hash tag. */
export function checkName(what: string, name: unknown): void {
  if (typeof name !== 'string' || name === '' || name.includes('{') || name.includes('}')) {
    fail(`${what} must be a non-empty string without '{' or '}', got ${JSON.stringify(name)}`);
  }
}

export function checkNow(now: unknown): void {
  if (now !== undefined && !(Number.isSafeInteger(now) && (now as number) >= 0)) {
    fail(`now must be a non-negative integer number of microseconds, got ${String(now)}`);
  }
}

function checkBuckets(buckets: readonly Bucket[] | undefined): void {
  if (!Array.isArray(buckets) || buckets.length === 0) fail('buckets must be a non-empty array');
  const seen = new Set<string>();
  buckets.forEach((bucket, b) => {
    checkName(`buckets[${b}].name`, bucket?.name);
    if (seen.has(bucket.name)) fail(`buckets[${b}].name ${JSON.stringify(bucket.name)} appears twice`);
    seen.add(bucket.name);
    if (!Array.isArray(bucket.limits)) fail(`buckets[${b}].limits must be an array`);
    (bucket.limits as readonly Limit[]).forEach((lim, j) => {
      const at = `buckets[${b}].limits[${j}]`;
      if (!(Number.isSafeInteger(lim?.limit) && lim.limit > 0))
        fail(`${at}.limit must be a positive integer, got ${String(lim?.limit)}`);
      if (!(Number.isSafeInteger(lim.windowUs) && lim.windowUs > 0)) {
        fail(`${at}.windowUs must be a positive integer number of microseconds, got ${String(lim.windowUs)}`);
      }
      if (!ALGORITHMS.has(lim.algorithm))
        fail(`${at}.algorithm must be sliding-log, sliding-window or fixed-window, got ${String(lim.algorithm)}`);
    });
    checkChannels(`buckets[${b}].channels`, bucket.channels);
  });
}

function checkChannels(at: string, channels: unknown): void {
  if (channels !== undefined && !(Number.isSafeInteger(channels) && (channels as number) > 0)) {
    fail(`${at} must be a positive integer, got ${String(channels)}`);
  }
}

/** A call id as given by traffic: any non-empty string (stores encode it in keys). */
function checkId(at: string, id: unknown): void {
  if (typeof id !== 'string' || id === '') fail(`${at} must be a non-empty string, got ${JSON.stringify(id)}`);
}

function checkForUs(at: string, forUs: unknown): void {
  if (!(Number.isSafeInteger(forUs) && (forUs as number) >= 0))
    fail(`${at} must be a non-negative integer number of microseconds, got ${String(forUs)}`);
}

/** The hold of a call: required when something on its way has a channel limit. */
function checkHold(hold: Hold | undefined, needed: boolean): void {
  if (hold === undefined) {
    if (needed) fail('hold ({ id, forUs }) is required when a bucket or carrier has a channel limit');
    return;
  }
  checkId('hold.id', hold?.id);
  checkForUs('hold.forUs', hold.forUs);
}

/**
 * Bucket lists found valid. Plans pass the same (readonly) list on every call of a peer, so a
 * list is checked once, not on every decision; a new list, even an equal one, is checked anew.
 */
const validBuckets = new WeakSet<readonly Bucket[]>();

export function checkAdmit(req: AdmitRequest): void {
  checkName('tag', req?.tag);
  checkNow(req.now);
  if (!validBuckets.has(req.buckets)) {
    checkBuckets(req.buckets);
    validBuckets.add(req.buckets);
  }
  if (req.hold !== undefined || hasChannels(req.buckets)) checkHold(req.hold, hasChannels(req.buckets));
}

/** Whether a bucket of the list has a channel limit (cached per list, as lists are readonly). */
const channelLists = new WeakMap<readonly Bucket[], boolean>();
export function hasChannels(buckets: readonly Bucket[]): boolean {
  let has = channelLists.get(buckets);
  if (has === undefined) {
    has = buckets.some((b) => b.channels !== undefined);
    channelLists.set(buckets, has);
  }
  return has;
}

export function checkCount(req: CountRequest): void {
  checkName('tag', req?.tag);
  checkName('bucket', req.bucket);
  checkNow(req.now);
  if (!(Number.isSafeInteger(req.windowUs) && req.windowUs > 0))
    fail(`windowUs must be a positive integer, got ${String(req.windowUs)}`);
}

function checkCarrier(at: string, c: Carrier): void {
  checkName(`${at}.name`, c?.name);
  if (!(Number.isFinite(c.intervalUs) && c.intervalUs > 0))
    fail(`${at}.intervalUs must be a positive finite number, got ${String(c.intervalUs)}`);
  if (c.cps !== undefined && !(Number.isFinite(c.cps) && c.cps >= 1e-9))
    fail(`${at}.cps must be a finite number >= 1e-9 (slots count it in billionths), got ${String(c.cps)}`);
  // an interval alone is counted as a cps when it reads as one, in billionths too
  if (c.cps === undefined && !(c.intervalUs <= 1e15))
    fail(`${at}.intervalUs must be at most 1e15 (a cps of 1e-9), got ${String(c.intervalUs)}`);
  if (!(Number.isFinite(c.maxWaitUs) && c.maxWaitUs >= 0))
    fail(`${at}.maxWaitUs must be a finite number >= 0, got ${String(c.maxWaitUs)}`);
  checkChannels(`${at}.channels`, c.channels);
}

export function checkReserve(req: ReserveRequest): void {
  checkNow(req?.now);
  if (!Array.isArray(req.route) || req.route.length === 0) fail('route must be a non-empty array of carriers');
  req.route.forEach((c, i) => {
    checkCarrier(`route[${i}]`, c);
  });
  const needed = req.route.some((c) => c.channels !== undefined);
  if (req.hold !== undefined || needed) checkHold(req.hold, needed);
}

export function checkRelease(req: ReleaseRequest): void {
  checkId('id', req?.id);
  checkNow(req.now);
  if (req.direction !== undefined && req.direction !== 'in' && req.direction !== 'out')
    fail(`direction must be in or out, got ${String(req.direction)}`);
}

export function checkRefresh(req: RefreshRequest): void {
  checkId('id', req?.id);
  checkNow(req.now);
  checkForUs('forUs', req.forUs);
}

export function checkHolds(req: HoldsRequest): void {
  checkName('tag', req?.tag);
  checkName('name', req.name);
  checkNow(req.now);
}

export function checkWait(req: WaitRequest): void {
  checkNow(req?.now);
  checkCarrier('carrier', req.carrier);
}

/** The longest sliding-log window of a bucket: how much history its log keeps (0: no log). */
export function logRetention(bucket: Bucket): number {
  let r = 0;
  for (const lim of bucket.limits) if (lim.algorithm === 'sliding-log' && lim.windowUs > r) r = lim.windowUs;
  return r;
}
