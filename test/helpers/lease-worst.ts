/**
 * The leased level's invariant, checked from its admissions alone (test/lease-*.test.ts): the
 * most calls admitted in any window (t - W, t] and the most channels held at once.
 */
/** The worst window and channel count of a list of admissions (in time order). */
export function worstOf(
  admissions: readonly { t: number; end: number }[],
  windowUs: number,
): { calls: number; channels: number } {
  let calls = 0;
  let first = 0;
  for (let i = 0; i < admissions.length; i++) {
    const t = admissions[i]!.t;
    while (admissions[first]!.t <= t - windowUs) first++;
    calls = Math.max(calls, i - first + 1);
  }
  // channels: +1 at each admission, -1 at each end; an end at t frees before an admission at t
  const ev: [number, number][] = [];
  for (const a of admissions) ev.push([a.t, 1], [a.end, -1]);
  ev.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  let inUse = 0;
  let channels = 0;
  for (const [, d] of ev) channels = Math.max(channels, (inUse += d));
  return { calls, channels };
}
