/**
 * A leased level's budget split into lane shares (docs/leasing.md): the state, the one
 * operation a lane runs on its own share (shrink, never below what it already uses), and the
 * integer split the coordinator uses to turn wants into targets.
 *
 * The pure algorithm: coordinator.ts runs it on Redis, the lane's side in lua/lease-*.lua, and
 * scripts/lease-simulate.ts on a simulated clock, where its invariant is tested too.
 *
 * Why integers: a lane admits a call when its log holds fewer calls in (t - W, t] than its
 * share, so shares are counts; with integer shares, Σ shares + pool = limit holds exactly,
 * with no rounding to argue about.
 */

/** What a leased level budgets: calls per window and channels (0 when the level has none). */
export interface Budget {
  readonly calls: number;
  readonly channels: number;
}

export const ZERO: Budget = { calls: 0, channels: 0 };

export function add(a: Budget, b: Budget): Budget {
  return { calls: a.calls + b.calls, channels: a.channels + b.channels };
}

export function sub(a: Budget, b: Budget): Budget {
  return { calls: a.calls - b.calls, channels: a.channels - b.channels };
}

export function sum(list: readonly Budget[]): Budget {
  let calls = 0;
  let channels = 0;
  for (const b of list) {
    calls += b.calls;
    channels += b.channels;
  }
  return { calls, channels };
}

/**
 * The lane's side of a shrink (what the lane script will do atomically, on the lane's own
 * clock and log): the share becomes max(target, used), where used is what the lane's calls
 * use at that instant (calls admitted in the current window; channels in use). It never
 * grows here: a target above the share is a no-op, growth only comes as a grant.
 * Returns the new share and what it freed (>= 0), which alone may go to the pool.
 */
export function applyShrink(share: number, target: number, used: number): { share: number; freed: number } {
  const next = Math.min(share, Math.max(target, used));
  return { share: next, freed: share - next };
}

/**
 * Splits `total` (an integer >= 0) into integers proportional to `weights` (largest remainder),
 * so that the parts sum to `total` exactly. All weights 0: an even split. Equal remainders go
 * to the larger `tiebreak` first, then to the lower index.
 */
export function splitProportional(total: number, weights: readonly number[], tiebreak?: readonly number[]): number[] {
  const n = weights.length;
  if (n === 0) return [];
  let w = 0;
  for (const x of weights) w += Math.max(0, x);
  const raw = weights.map((x) => (w > 0 ? (total * Math.max(0, x)) / w : total / n));
  const parts = raw.map(Math.floor);
  let left = total - parts.reduce((a, b) => a + b, 0);
  const tb = (i: number) => tiebreak?.[i] ?? 0;
  const order = raw
    .map((r, i) => [r - Math.floor(r), i] as const)
    .sort((a, b) => b[0] - a[0] || tb(b[1]) - tb(a[1]) || a[1] - b[1]);
  for (let k = 0; left > 0; k = (k + 1) % n, left--) parts[order[k]![1]]! += 1;
  return parts;
}
