/**
 * Independent checks of benchmark runs: given the times (µs) of the events a bucket admitted,
 * count the places where a limit was exceeded. Written from the contract (src/store/types.ts),
 * not from the stores' code, so a fast wrong store shows up as violations.
 */
import type { Algorithm } from '../src/store/types.js';

export interface LimitSpec {
  readonly limit: number;
  readonly windowUs: number;
  readonly algorithm: Algorithm;
}

/** floor(t / w) exactly, for integers t >= 0 (BigInt: no rounding question at all). */
function windowOf(t: number, w: number): number {
  return Number(BigInt(t) / BigInt(w));
}

/** sliding-log: no L + 1 events with t - W < s <= t, i.e. times[i + L] - times[i] >= W. */
export function slidingLogViolations(times: Float64Array, L: number, W: number): number {
  let bad = 0;
  for (let i = 0; i + L < times.length; i++) if (times[i + L]! - times[i]! < W) bad++;
  return bad;
}

/** fixed-window: at most L events in each window [kW, (k + 1)W). */
export function fixedWindowViolations(times: Float64Array, L: number, W: number): number {
  let bad = 0;
  let k = -1;
  let c = 0;
  for (const t of times) {
    const kt = windowOf(t, W);
    if (kt !== k) {
      k = kt;
      c = 0;
    }
    if (++c > L) bad++;
  }
  return bad;
}

/**
 * sliding-window: before each admitted event at t (window k, fraction f into it), the events
 * already admitted in window k (c) and window k - 1 (p) satisfy c + p * (1 - f) < L.
 */
export function slidingWindowViolations(times: Float64Array, L: number, W: number): number {
  let bad = 0;
  const perWindow = new Map<number, number>();
  for (const t of times) {
    const k = windowOf(t, W);
    const c = perWindow.get(k) ?? 0;
    const p = perWindow.get(k - 1) ?? 0;
    const f = (t - k * W) / W;
    if (!(c + p * (1 - f) < L)) bad++;
    perWindow.set(k, c + 1);
  }
  return bad;
}

export function violations(times: Float64Array, lim: LimitSpec): number {
  switch (lim.algorithm) {
    case 'sliding-log':
      return slidingLogViolations(times, lim.limit, lim.windowUs);
    case 'fixed-window':
      return fixedWindowViolations(times, lim.limit, lim.windowUs);
    case 'sliding-window':
      return slidingWindowViolations(times, lim.limit, lim.windowUs);
  }
}

/** Admitted times grouped by bucket, each group sorted. */
export class AdmittedLog {
  private readonly byBucket = new Map<string, number[]>();

  add(bucket: string, t: number): void {
    let a = this.byBucket.get(bucket);
    if (!a) this.byBucket.set(bucket, (a = []));
    a.push(t);
  }

  /** Total violations of `limitsOf(bucket)` over every bucket. */
  check(limitsOf: (bucket: string) => readonly LimitSpec[]): { buckets: number; events: number; violations: number } {
    let bad = 0;
    let events = 0;
    for (const [bucket, list] of this.byBucket) {
      const times = Float64Array.from(list).sort();
      events += times.length;
      for (const lim of limitsOf(bucket)) bad += violations(times, lim);
    }
    return { buckets: this.byBucket.size, events, violations: bad };
  }
}

/**
 * Leaky-bucket reservations: on each carrier, given slots are at least I apart (up to the
 * double rounding of last + I) and no wait exceeds maxWait.
 */
export function reservationViolations(slots: Map<string, number[]>, intervalOf: (c: string) => number): number {
  let bad = 0;
  for (const [carrier, list] of slots) {
    const s = Float64Array.from(list).sort();
    const I = intervalOf(carrier);
    for (let i = 1; i < s.length; i++) if (s[i]! - s[i - 1]! < I - 1e-6 * Math.max(1, I)) bad++;
  }
  return bad;
}
