/**
 * How fast leased shares follow demand (bench/lease-sim.ts on a simulated clock,
 * bench/lease-cluster.ts on a real Cluster): after each shift at t_s (every full epoch of
 * `shiftUs` but the first), the steady shares S* are the mean of the shares over the epoch's last
 * second; the lanes that gain are those with S*_L > S_L(t_s) (the shares just before the
 * shift); convergence is the first trace point after t_s at which those lanes together hold 90 %
 * of what they gain, each counted up to its S*_L: Σ min(S_L(t), S*_L) - S_L(t_s) >= 0.9 ·
 * Σ (S*_L - S_L(t_s)). Median and worst over the shifts, in seconds.
 */

/** The calls shares at time t (µs, from the start of the load). */
export interface SharePoint {
  readonly t: number;
  readonly shares: readonly number[];
}

export function convergence(
  trace: readonly SharePoint[],
  shiftUs: number,
  totalUs: number,
): { median: number; worst: number; n: number } {
  const times: number[] = [];
  for (let ts = 2 * shiftUs; ts + shiftUs <= totalUs; ts += shiftUs) {
    const before = [...trace].reverse().find((x) => x.t <= ts);
    const tail = trace.filter((x) => x.t >= ts + shiftUs - 1_000_000 && x.t < ts + shiftUs);
    if (!before || tail.length === 0) continue;
    const lanes = before.shares.length;
    const star = Array.from({ length: lanes }, (_, i) => tail.reduce((a, x) => a + x.shares[i]!, 0) / tail.length);
    const gain = star.map((s, i) => s - before.shares[i]!);
    const total = gain.reduce((a, g) => a + Math.max(0, g), 0);
    let at = Number.POSITIVE_INFINITY;
    for (const x of trace) {
      if (x.t <= ts) continue;
      let got = 0;
      for (let i = 0; i < lanes; i++)
        if (gain[i]! > 0) got += Math.max(0, Math.min(x.shares[i]!, star[i]!) - before.shares[i]!);
      if (got >= 0.9 * total) {
        at = x.t - ts;
        break;
      }
    }
    times.push(at / 1e6);
  }
  times.sort((a, b) => a - b);
  return {
    median: times[Math.floor(times.length / 2)] ?? Number.NaN,
    worst: times[times.length - 1] ?? Number.NaN,
    n: times.length,
  };
}
