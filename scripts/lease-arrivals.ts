/**
 * Seeded arrivals for the lease simulation (src/lease/, not wired yet, see share.ts): Poisson
 * calls over lanes with Zipf-skewed demand whose hot lanes move every so often, the shape the
 * issue asks the shares to follow.
 */
import type { Arrival } from './lease-simulate.js';
import { expGapUs, prng } from './make-fixtures.js';

export interface ArrivalOptions {
  readonly lanes: number;
  /** Calls per second offered over all lanes. */
  readonly rate: number;
  readonly durationUs: number;
  /** Zipf exponent over lanes (0: even). */
  readonly zipf: number;
  /** The lanes' ranks are shuffled every this many µs (0: never). */
  readonly shiftUs: number;
  /** Mean channel hold, µs (exponential). */
  readonly meanHoldUs: number;
  readonly seed: number;
}

export function zipfArrivals(o: ArrivalOptions): Arrival[] {
  const rand = prng(o.seed);
  const cdf: number[] = [];
  let s = 0;
  for (let i = 0; i < o.lanes; i++) cdf.push((s += 1 / (i + 1) ** o.zipf));
  for (let i = 0; i < o.lanes; i++) cdf[i]! /= s;
  const perm = Array.from({ length: o.lanes }, (_, i) => i);
  const shuffle = () => {
    for (let i = perm.length - 1; i > 0; i--) {
      const j = Math.floor(rand() * (i + 1));
      [perm[i], perm[j]] = [perm[j]!, perm[i]!];
    }
  };
  shuffle();
  const out: Arrival[] = [];
  let t = 0;
  let nextShift = o.shiftUs > 0 ? o.shiftUs : Number.POSITIVE_INFINITY;
  for (;;) {
    t += expGapUs(rand, o.rate);
    if (t >= o.durationUs) break;
    while (t >= nextShift) {
      shuffle();
      nextShift += o.shiftUs;
    }
    const u = rand();
    let rank = 0;
    while (cdf[rank]! < u && rank < o.lanes - 1) rank++;
    out.push({ t, lane: perm[rank]!, holdUs: Math.max(1, Math.round(-Math.log(1 - rand()) * o.meanHoldUs)) });
  }
  return out;
}

/**
 * Poisson calls over two lanes (two regions), `busyShare` of them on the busy one, the two
 * swapping every `shiftUs`: the shape of bench/lease-carriers.ts, for the simulation.
 */
export function swappingArrivals(
  o: Omit<ArrivalOptions, 'lanes' | 'zipf'> & { readonly busyShare: number },
): Arrival[] {
  const rand = prng(o.seed);
  const out: Arrival[] = [];
  let t = 0;
  for (;;) {
    t += expGapUs(rand, o.rate);
    if (t >= o.durationUs) break;
    const busy = o.shiftUs > 0 ? Math.floor(t / o.shiftUs) % 2 : 0;
    const lane = rand() < o.busyShare ? busy : 1 - busy;
    out.push({ t, lane, holdUs: Math.max(1, Math.round(-Math.log(1 - rand()) * o.meanHoldUs)) });
  }
  return out;
}
