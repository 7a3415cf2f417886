/**
 * Argument checks shared by every Store: nonsense is refused with InvalidArgumentError before
 * any I/O, so a bad caller never reaches Redis and both stores refuse exactly the same inputs.
 */
import { InvalidArgumentError } from '../errors/index.js';
import type { AdmitRequest, Bucket, Carrier, CountRequest, Limit, ReserveRequest, WaitRequest } from './types.js';

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
      if (!(Number.isSafeInteger(lim?.limit) && lim.limit > 0)) fail(`${at}.limit must be a positive integer, got ${String(lim?.limit)}`);
      if (!(Number.isSafeInteger(lim.windowUs) && lim.windowUs > 0)) {
        fail(`${at}.windowUs must be a positive integer number of microseconds, got ${String(lim.windowUs)}`);
      }
      if (!ALGORITHMS.has(lim.algorithm)) fail(`${at}.algorithm must be sliding-log, sliding-window or fixed-window, got ${String(lim.algorithm)}`);
    });
  });
}

/**
 * Bucket lists found valid. Plans pass the same (readonly) list on every call of a peer, so a
 * list is checked once, not on every decision; a new list, even an equal one, is checked anew.
 */
const validBuckets = new WeakSet<readonly Bucket[]>();

export function checkAdmit(req: AdmitRequest): void {
  checkName('tag', req?.tag);
  checkNow(req.now);
  if (validBuckets.has(req.buckets)) return;
  checkBuckets(req.buckets);
  validBuckets.add(req.buckets);
}

export function checkCount(req: CountRequest): void {
  checkName('tag', req?.tag);
  checkName('bucket', req.bucket);
  checkNow(req.now);
  if (!(Number.isSafeInteger(req.windowUs) && req.windowUs > 0)) fail(`windowUs must be a positive integer, got ${String(req.windowUs)}`);
}

function checkCarrier(at: string, c: Carrier): void {
  checkName(`${at}.name`, c?.name);
  if (!(Number.isFinite(c.intervalUs) && c.intervalUs > 0)) fail(`${at}.intervalUs must be a positive finite number, got ${String(c.intervalUs)}`);
  if (!(Number.isFinite(c.maxWaitUs) && c.maxWaitUs >= 0)) fail(`${at}.maxWaitUs must be a finite number >= 0, got ${String(c.maxWaitUs)}`);
}

export function checkReserve(req: ReserveRequest): void {
  checkNow(req?.now);
  if (!Array.isArray(req.route) || req.route.length === 0) fail('route must be a non-empty array of carriers');
  req.route.forEach((c, i) => checkCarrier(`route[${i}]`, c));
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
