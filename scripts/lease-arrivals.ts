/**
 * Seeded arrivals for the lease simulation (issue 28; not wired yet, see share.ts): Poisson
 * calls over lanes with Zipf-skewed demand whose hot lanes move every so often, the shape the
 * issue asks the shares to follow.
 */
import type { Arrival } from './simulate.js';

/** mulberry32, the fixtures' generator (scripts/make-fixtures.ts), kept here so src needs no scripts. */
export function prng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

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
    t += Math.max(1, Math.round((-Math.log(1 - rand()) * 1e6) / o.rate));
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
