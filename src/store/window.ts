/**
 * floor(t / W) for integer µs, corrected for the rounding of the double division (t / W can
 * round up to the next integer when t is just below a multiple of a large W). The Lua scripts
 * do the same (lua/includes/common.lua windowIndex).
 */
export function windowIndex(t: number, w: number): number {
  let k = Math.floor(t / w);
  if (k * w > t) k--;
  else if ((k + 1) * w <= t) k++;
  return k;
}

/** Index of the first element of sorted[lo..] above x (sorted.length when none). */
export function firstAbove(sorted: readonly number[], lo: number, x: number): number {
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (sorted[mid]! <= x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/** Index of the first element of sorted[lo..] at or above x (sorted.length when none). */
export function firstAtLeast(sorted: readonly number[], lo: number, x: number): number {
  let hi = sorted.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (sorted[mid]! < x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/**
 * The counts of t's fixed window k and of window k - 1, from the two latest windows kept
 * ({ w: latest window, c: its count, p: the count of w - 1 }), as lua/includes/buckets.lua
 * windowCounts.
 */
export function windowCounts(
  s: { readonly w: number; readonly c: number; readonly p: number } | undefined,
  k: number,
): [c: number, p: number] {
  if (s === undefined) return [0, 0];
  if (k === s.w) return [s.c, s.p];
  if (k === s.w + 1) return [0, s.c];
  if (k === s.w - 1) return [s.p, 0];
  return [0, 0];
}

/**
 * A fixed-window or sliding-window limit (L, W) at t, in window k with counts c and p: the value
 * compared with L (c, or the estimate c + p(1 - f)) and the wait until room (0: room), by the
 * formulas of src/store/types.ts (AdmitResult.retryAfterUs).
 */
export function windowLimit(
  algorithm: 'fixed-window' | 'sliding-window',
  L: number,
  W: number,
  t: number,
  k: number,
  c: number,
  p: number,
): { value: number; wait: number } {
  if (algorithm === 'fixed-window') return { value: c, wait: c >= L ? (k + 1) * W - t : 0 };
  const value = c + p * (1 - (t - k * W) / W);
  if (estimateBelow(L, W, c, p, t - k * W)) return { value, wait: 0 };
  // full: room only in the next window, where this one's count is the previous
  const wait = c >= L ? (k + 1) * W + firstRoom(L, W, 0, c) - t : k * W + firstRoom(L, W, c, p) - t;
  return { value, wait: Math.max(wait, 1) };
}

/**
 * a / b < c / d, exactly, for whole numbers below 2^53 (b, d > 0): Euclid's steps on the two
 * fractions, whose whole parts and remainders (% is exact on doubles) never round, where a
 * product such as a * d could pass 2^53.
 */
export function fractionBelow(a: number, b: number, c: number, d: number): boolean {
  for (;;) {
    const ra = a % b;
    const rc = c % d;
    const qa = (a - ra) / b;
    const qc = (c - rc) / d;
    if (qa !== qc) return qa < qc;
    if (ra === 0) return rc > 0;
    if (rc === 0) return false;
    // ra / b < rc / d iff d / rc < b / ra
    [a, b, c, d] = [d, rc, b, ra];
  }
}

/**
 * The sliding window's test at offset r (µs) into window k, counts c and p: c + p (1 - r / W) < L,
 * exactly (in doubles an estimate of exactly L can round below it: 17 + 50 * (1 - 0.34) is
 * 49.99999999999999). As p (W - r) / W < L - c.
 */
export function estimateBelow(L: number, W: number, c: number, p: number, r: number): boolean {
  if (c >= L) return false;
  return p === 0 || fractionBelow(W - r, W, L - c, p);
}

/**
 * The first offset r (µs, at most W) into a window with counts c and p at which the test passes:
 * from the bound floor(W * (1 - (L - c) / p)) + 1 in doubles, moved by the step or two its
 * rounding may have cost (the test falls monotonically with r), so that a call retried after
 * the wait is admitted, and not a µs later. lua/includes/buckets.lua does the same.
 */
function firstRoom(L: number, W: number, c: number, p: number): number {
  let r = Math.min(W, Math.floor(W * (1 - (L - c) / p)) + 1);
  while (r < W && !estimateBelow(L, W, c, p, r)) r++;
  while (r > 1 && estimateBelow(L, W, c, p, r - 1)) r--;
  return r;
}
