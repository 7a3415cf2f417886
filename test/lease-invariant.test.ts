/**
 * The leased level's invariant on a simulated clock (src/lease, issue 28, not wired yet): lanes
 * each checking their own sliding log against their share, a coordinator ticking with
 * messages that take time, Zipf demand whose hot lanes move. Checked here from the admissions
 * alone, apart from the simulator's own count: at every admission instant t, the calls the
 * lanes admitted together in (t - W, t] are at most the limit (the total only grows at an
 * admission, so these instants are all that need checking), and the channels in use at most
 * the channel limit. Two deliberately wrong coordinators (grant before the shrink is
 * confirmed; shrink below what a window uses) must break it, so the check can fail.
 */
import { expect } from 'chai';
import type { DemandParams } from '../src/lease/demand.js';
import { zipfArrivals } from '../scripts/lease-arrivals.js';
import { type Protocol, type SimOptions, simulate } from '../scripts/lease-simulate.js';
import { worstOf } from './helpers/lease-worst.js';

const P: DemandParams = { windowTicks: 10, up: 0.6, down: 0.2, headroom: 1, floor: { calls: 1, channels: 1 } };

interface Case {
  readonly lanes: number;
  readonly load: number;
  readonly shiftUs: number;
  readonly latencyUs: number;
}

const LIMIT = { calls: 100, channels: 60 };
const CASES: Case[] = [
  { lanes: 4, load: 1.5, shiftUs: 1_000_000, latencyUs: 40_000 },
  { lanes: 4, load: 1.5, shiftUs: 500_000, latencyUs: 40_000 },
  { lanes: 8, load: 1.2, shiftUs: 1_000_000, latencyUs: 20_000 },
  { lanes: 4, load: 0.9, shiftUs: 2_000_000, latencyUs: 0 },
];
const SEEDS = [1, 2, 3, 4, 5];

function run(c: Case, seed: number, protocol: Protocol, overflow = false) {
  const arrivals = zipfArrivals({
    lanes: c.lanes,
    rate: LIMIT.calls * c.load,
    durationUs: 20_000_000,
    zipf: 1.5,
    shiftUs: c.shiftUs,
    meanHoldUs: 500_000,
    seed,
  });
  const o: SimOptions = {
    lanes: c.lanes,
    limit: LIMIT,
    windowUs: 1_000_000,
    tickUs: 100_000,
    latencyUs: c.latencyUs,
    params: P,
    protocol,
    seed,
    record: true,
    overflow,
  };
  const r = simulate(arrivals, o);
  return { r, w: worstOf(r.admissions, o.windowUs) };
}

describe('lease: the invariant on a simulated clock', () => {
  for (const c of CASES)
    for (const overflow of [false, true]) {
      it(`${c.lanes} lanes${overflow ? ' and an overflow lane' : ''}, ${c.load * 100} % load, hot lanes move every ${c.shiftUs / 1000} ms, messages up to ${c.latencyUs / 1000} ms: never over a limit`, () => {
        for (const seed of SEEDS) {
          const { r, w } = run(c, seed, 'correct', overflow);
          expect(r.admitted, 'calls were admitted').to.be.greaterThan(0);
          expect(w.calls, `seed ${seed}: calls in a window`).to.be.at.most(LIMIT.calls);
          expect(w.channels, `seed ${seed}: channels`).to.be.at.most(LIMIT.channels);
          expect(r.violations).to.equal(0);
          expect(w.calls).to.equal(r.maxInWindow);
        }
      });
    }

  it('16 lanes at 1,000 calls/s, 105 % load, shifts every 5 s: never over, and the limit is reached', () => {
    const limit = { calls: 1000, channels: 1200 };
    const arrivals = zipfArrivals({
      lanes: 16,
      rate: 1050,
      durationUs: 12_000_000,
      zipf: 1,
      shiftUs: 5_000_000,
      meanHoldUs: 1_000_000,
      seed: 9,
    });
    const r = simulate(arrivals, {
      lanes: 16,
      limit,
      windowUs: 1_000_000,
      tickUs: 100_000,
      latencyUs: 2_000,
      params: P,
      record: true,
    });
    const w = worstOf(r.admissions, 1_000_000);
    expect(w.calls).to.be.at.most(limit.calls);
    expect(w.channels).to.be.at.most(limit.channels);
    expect(w.calls, 'the shares do let the level fill').to.be.at.least(limit.calls * 0.95);
  });

  for (const protocol of ['grant-before-shrink', 'shrink-below-use'] as const) {
    it(`a wrong coordinator (${protocol}) goes over the limit: the check can fail`, () => {
      let over = 0;
      for (const c of CASES.slice(0, 2))
        for (const seed of SEEDS) {
          const { w } = run(c, seed, protocol);
          if (w.calls > LIMIT.calls || w.channels > LIMIT.channels) over++;
        }
      expect(over).to.be.greaterThan(0);
    });
  }
});
