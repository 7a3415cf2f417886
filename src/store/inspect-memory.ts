/**
 * The MemoryStore's "inspect" (see InspectRequest in types.ts): the same per-limit arithmetic as
 * its admitSync and as lua/inspect.lua, reading and never changing the store's structures.
 */
import { InvalidArgumentError } from '../errors/index.js';
import { carrierRate, nextSlot, type SlotState } from './slots.js';
import type { Bucket, InspectRequest, InspectResult } from './types.js';
import { checkAdmit, checkNow, checkWait } from './validate.js';
import { firstAbove, windowCounts, windowIndex, windowLimit } from './window.js';

/** What inspect reads of a MemoryStore. */
export interface MemoryState {
  /** A bucket's sliding log: its times ascending, the live ones from `head`. */
  log(bucket: string): { readonly times: readonly number[]; readonly head: number } | undefined;
  /** A (bucket, W) window's counts: w the latest window, c its count, p the count of w - 1. */
  window(key: string): { readonly w: number; readonly c: number; readonly p: number } | undefined;
  /** A carrier's pacing state (slots.ts). */
  slot(carrier: string): SlotState | undefined;
  /** Calls in progress at t in a bucket, or on a carrier. */
  holds(bucket: string, t: number): number;
  carrierHolds(carrier: string, t: number): number;
}

/** The key MemoryStore keeps a bucket's window counts under. */
export const windowKey = (bucket: string, windowUs: number): string => `${bucket}\u0000${windowUs}`;

export function checkInspect(req: InspectRequest): void {
  checkNow(req?.now);
  if (!Array.isArray(req.buckets)) throw new InvalidArgumentError('buckets must be an array of { tag, bucket }');
  if (!Array.isArray(req.carriers)) throw new InvalidArgumentError('carriers must be an array of carriers');
  req.buckets.forEach((b, i) => {
    try {
      // (inspect holds nothing: the hold only satisfies the check of a bucket with channels)
      checkAdmit({ tag: b?.tag, buckets: [b?.bucket], hold: { id: 'inspect', forUs: 0 } });
    } catch (err) {
      throw new InvalidArgumentError(`buckets[${i}]: ${(err as Error).message}`);
    }
  });
  req.carriers.forEach((carrier, i) => {
    try {
      checkWait({ carrier });
    } catch (err) {
      throw new InvalidArgumentError(`carriers[${i}]: ${(err as Error).message}`);
    }
  });
}

/** Events of a sorted list with lo < s <= hi, and the index of the first. */
function range(times: readonly number[], head: number, lo: number, hi: number): [first: number, count: number] {
  const first = firstAbove(times, head, lo);
  return [first, firstAbove(times, first, hi) - first];
}

function inspectBucket(
  state: MemoryState,
  bucket: Bucket,
  t: number,
): { counts: number[]; retryAfterUs: number[]; channels?: number } {
  const counts: number[] = [];
  const retryAfterUs: number[] = [];
  for (const { limit: L, windowUs: W, algorithm } of bucket.limits) {
    let count = 0;
    let wait = 0;
    if (algorithm === 'sliding-log') {
      const log = state.log(bucket.name);
      if (log !== undefined) {
        const [first, n] = range(log.times, log.head, t - W, t);
        count = n;
        if (n >= L) wait = log.times[first + n - L]! + W - t;
      }
    } else {
      const k = windowIndex(t, W);
      const [c, p] = windowCounts(state.window(windowKey(bucket.name, W)), k);
      ({ value: count, wait } = windowLimit(algorithm, L, W, t, k, c, p));
    }
    counts.push(count);
    retryAfterUs.push(wait);
  }
  return bucket.channels === undefined
    ? { counts, retryAfterUs }
    : { counts, retryAfterUs, channels: state.holds(bucket.name, t) };
}

export function inspectMemory(state: MemoryState, req: InspectRequest, t: number): InspectResult {
  return {
    buckets: req.buckets.map((b) => inspectBucket(state, b.bucket, t)),
    carriers: req.carriers.map((c) => {
      const waitUs = nextSlot(state.slot(c.name), carrierRate(c), t).wait;
      return c.channels === undefined ? { waitUs } : { waitUs, channels: state.carrierHolds(c.name, t) };
    }),
    now: t,
  };
}
