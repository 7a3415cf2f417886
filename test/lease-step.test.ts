/**
 * The lease coordinator's step (src/lease, issue 28, not wired yet): a shrink never goes below
 * what a lane uses, what it frees goes to the pool (after any debt), grants come only from the
 * pool, Σ shares + pool = limit + debt after every step, and a reload moves the limit without
 * ever exceeding the old one meanwhile.
 */
import { expect } from 'chai';
import type { DemandParams } from '../src/lease/demand.js';
import { reload } from '../src/lease/reload.js';
import { applyShrink, splitProportional, sum } from '../src/lease/share.js';
import {
  type LaneObservation,
  type LeaseState,
  type ShrinkResult,
  checkLease,
  initialLease,
  planStep,
  settle,
  shrinkLane,
  targetsFor,
} from '../src/lease/step.js';

const P: DemandParams = { windowTicks: 10, up: 0.6, down: 0.2, headroom: 1, floor: { calls: 1, channels: 1 } };

function obs(o: Partial<LaneObservation> = {}): LaneObservation {
  return {
    admittedInWindow: 0,
    channelsInUse: 0,
    refusedCalls: 0,
    refusedChannels: 0,
    admittedSinceTick: 0,
    leavingBeforeNextTick: 0,
    ...o,
  };
}

/** One tick with every lane's use unchanged between the read and the shrink. */
function tick(state: LeaseState, o: LaneObservation[]): LeaseState {
  const plan = planStep(state, o, P);
  const results: ShrinkResult[] = plan.shrinks.map((s) =>
    shrinkLane(s.lane, plan.state.shares[s.lane]!, s.target, {
      calls: o[s.lane]!.admittedInWindow,
      channels: o[s.lane]!.channelsInUse,
    }),
  );
  const next = settle(plan.state, results, plan.grants).state;
  checkLease(next);
  return next;
}

describe('lease: the coordinator step', () => {
  it('a lane shrinks to its target or to what it uses, whichever is more, and never grows', () => {
    expect(applyShrink(50, 10, 30)).to.deep.equal({ share: 30, freed: 20 });
    expect(applyShrink(50, 10, 5)).to.deep.equal({ share: 10, freed: 40 });
    expect(applyShrink(50, 80, 5)).to.deep.equal({ share: 50, freed: 0 });
    expect(applyShrink(50, 0, 50)).to.deep.equal({ share: 50, freed: 0 });
  });

  it('splits an integer total exactly, in proportion', () => {
    const parts = splitProportional(1000, [1, 1 / 2, 1 / 3, 0]);
    expect(parts.reduce((a, b) => a + b, 0)).to.equal(1000);
    expect(parts[3]).to.equal(0);
    expect(parts[0]).to.be.closeTo(545, 1);
    expect(splitProportional(7, [0, 0, 0])).to.deep.equal([3, 2, 2]);
  });

  it('targets: bases first, then headroom, then the surplus evenly', () => {
    // the bases alone overflow: split in proportion to them
    expect(
      targetsFor(100, [
        { base: 150, headroom: 10 },
        { base: 50, headroom: 10 },
      ]),
    ).to.deep.equal([75, 25]);
    // the bases fit, the headroom does not: every base whole, the rest by headroom
    expect(
      targetsFor(100, [
        { base: 80, headroom: 10 },
        { base: 10, headroom: 30 },
      ]),
    ).to.deep.equal([83, 17]);
    // everything fits: the surplus evenly
    expect(
      targetsFor(100, [
        { base: 30, headroom: 10 },
        { base: 5, headroom: 5 },
      ]),
    ).to.deep.equal([65, 35]);
  });

  it('a limit below lanes × floor: the units go to the lanes that want more, not to the lowest', () => {
    // 8 lanes, a limit of 5: every base is the floor (1), so the parts tie at 5/8; lane 6 is
    // busy but slow (its want above the floor only by headroom). By index alone lanes 0-4 got
    // the units at every tick, and lane 6 none, ever (300 of 300 calls refused in a replay)
    const idle = { base: 1, headroom: 0 };
    const wants = Array.from({ length: 8 }, (_, i) => (i === 6 ? { base: 1, headroom: 0.3 } : idle));
    expect(targetsFor(5, wants)).to.deep.equal([1, 1, 1, 1, 0, 0, 1, 0]);
    expect(splitProportional(2, [1, 1, 1], [0, 5, 1])).to.deep.equal([0, 1, 1]);
  });

  it('moves unused share from an idle lane to a refusing one, never below what the idle lane used', () => {
    let s = initialLease({ calls: 100, channels: 20 }, 2, P);
    expect(s.shares).to.deep.equal([
      { calls: 50, channels: 10 },
      { calls: 50, channels: 10 },
    ]);
    // lane 0 used 40 calls of its window and holds 8 channels; lane 1 is refusing
    const o = [
      obs({ admittedInWindow: 40, channelsInUse: 8 }),
      obs({ admittedInWindow: 50, admittedSinceTick: 5, refusedCalls: 30, channelsInUse: 10, refusedChannels: 5 }),
    ];
    const plan = planStep(s, o, P);
    const shrink = plan.shrinks.find((x) => x.lane === 0);
    expect(shrink, 'lane 0 is asked to shrink').to.not.equal(undefined);
    s = tick(s, o);
    expect(s.shares[0]!.calls).to.equal(40);
    expect(s.shares[0]!.channels).to.equal(8);
    expect(s.shares[1]!.calls).to.equal(60);
    expect(s.shares[1]!.channels).to.equal(12);
  });

  it('grants only what the shrinks really freed, when a lane used more by the time it shrank', () => {
    const s = initialLease({ calls: 100, channels: 0 }, 2, P);
    const o = [obs({ admittedInWindow: 10 }), obs({ admittedInWindow: 50, refusedCalls: 40, admittedSinceTick: 5 })];
    const plan = planStep(s, o, P);
    const planned = sum(plan.grants.map((g) => g.amount)).calls;
    expect(planned).to.be.greaterThan(30);
    // between the read and the shrink, lane 0 admitted 35 more: it frees less
    const results = plan.shrinks.map((x) =>
      shrinkLane(x.lane, plan.state.shares[x.lane]!, x.target, { calls: x.lane === 0 ? 45 : 0, channels: 0 }),
    );
    const done = settle(plan.state, results, plan.grants);
    checkLease(done.state);
    expect(sum(done.grants.map((g) => g.amount)).calls).to.equal(5);
    expect(done.state.shares[0]!.calls).to.equal(45);
    expect(done.state.shares[1]!.calls).to.equal(55);
  });

  it('keeps a floor for an idle lane, so its first call needs no grant', () => {
    let s = initialLease({ calls: 100, channels: 10 }, 4, P);
    for (let i = 0; i < 30; i++)
      s = tick(s, [
        obs({ admittedInWindow: 90, admittedSinceTick: 9, refusedCalls: 20, channelsInUse: 7 }),
        obs(),
        obs(),
        obs(),
      ]);
    for (const lane of [1, 2, 3]) expect(s.shares[lane]!.calls).to.be.at.least(1);
    expect(s.shares[0]!.calls).to.be.at.least(90);
  });

  it('a lane whose whole share is in use keeps it, whatever the others ask', () => {
    let s = initialLease({ calls: 100, channels: 10 }, 2, P);
    for (let i = 0; i < 10; i++) {
      s = tick(s, [
        obs({ admittedInWindow: s.shares[0]!.calls, channelsInUse: s.shares[0]!.channels }),
        obs({ refusedCalls: 500, refusedChannels: 50 }),
      ]);
      expect(s.shares[0]).to.deep.equal({ calls: 50, channels: 5 });
    }
  });

  it('rejects a shrink result that does not match the share it came from', () => {
    const s = initialLease({ calls: 100, channels: 0 }, 2, P);
    const bad: ShrinkResult = { lane: 0, share: { calls: 10, channels: 0 }, freed: { calls: 50, channels: 0 } };
    expect(() => settle(s, [bad], [])).to.throw(RangeError);
  });
});

describe('lease: a reload', () => {
  it('puts an increase in the pool, and the next tick grants it', () => {
    let s = initialLease({ calls: 100, channels: 10 }, 2, P);
    s = reload(s, { calls: 150, channels: 10 });
    checkLease(s);
    expect(s.pool.calls).to.equal(50);
    s = tick(s, [obs({ refusedCalls: 100, admittedSinceTick: 5, admittedInWindow: 50 }), obs()]);
    expect(s.pool.calls).to.equal(0);
    expect(sum(s.shares).calls).to.equal(150);
  });

  it('takes a decrease from the pool, then as debt that shrinks pay before the pool, never above the old limit', () => {
    let s = initialLease({ calls: 100, channels: 10 }, 2, P);
    s = reload(s, { calls: 40, channels: 10 });
    checkLease(s);
    expect(s.debt.calls).to.equal(60);
    // both lanes still hold 45 calls in their windows: nothing can be freed yet
    s = tick(s, [obs({ admittedInWindow: 45 }), obs({ admittedInWindow: 45 })]);
    expect(sum(s.shares).calls + s.pool.calls).to.equal(90);
    expect(s.pool.calls).to.equal(0);
    // their calls leave the window: the debt is paid, the level is at its new limit
    s = tick(s, [obs(), obs()]);
    expect(s.debt.calls).to.equal(0);
    expect(sum(s.shares).calls + s.pool.calls).to.equal(40);
  });

  it('pays the debt of a decrease first when an increase follows', () => {
    let s = initialLease({ calls: 100, channels: 0 }, 2, P);
    s = reload(s, { calls: 40, channels: 0 });
    s = reload(s, { calls: 70, channels: 0 });
    checkLease(s);
    expect(s.debt.calls).to.equal(30);
    expect(s.pool.calls).to.equal(0);
    expect(() => reload(s, { calls: -1, channels: 0 })).to.throw(RangeError);
  });
});
