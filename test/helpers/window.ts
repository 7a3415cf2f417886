/** Most events in any half-open window (t - windowUs, t]; the times need not be sorted. */
export function maxInWindow(timesUs: readonly number[], windowUs: number): number {
  const t = [...timesUs].sort((a, b) => a - b);
  let best = 0;
  for (let lo = 0, hi = 0; hi < t.length; hi++) {
    while (t[lo]! <= t[hi]! - windowUs) lo++;
    best = Math.max(best, hi - lo + 1);
  }
  return best;
}
