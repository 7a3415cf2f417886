/**
 * The overflow lane of a leased global level (docs/leasing.md, "The overflow lane"), on a real
 * Redis: a call its lane refused for lack of calls share counts its global level on the
 * overflow lane and its other levels (and the global level's channels) on its own lane; the
 * refusal answered when the overflow lane refuses is the lane's; a call refused on its own lane
 * after the spill names its level at its position; the overflow lane is not asked again for
 * 50 ms after it refused; inspect sums it into the global level; the coordinator moves its
 * share by demand and gives it no channels. Then under load with a coordinator: never over the
 * limit in any window (from the times the level counted each call), fewer false refusals than
 * without the overflow lane.
 */
import { expect } from 'chai';
import type { Redis } from 'ioredis';
import type { AdmissionDecision } from '../src/admission/admission.js';
import { slotOf } from '../src/store/redis/slot.js';
import { CallGate } from '../src/gate.js';
import { LeaseCoordinator } from '../src/lease/coordinator.js';
import { laneOf, laneTag, OVERFLOW_TAG } from '../src/lease/lanes.js';
import { inspectState } from '../src/observe/inspect.js';
import { RedisStore } from '../src/store/redis/redis-store.js';
import type { Bucket } from '../src/store/types.js';
import { falseRefusals, leasedConfig, offerLoad, type Decided } from './helpers/lease-load.js';
import { clusterRig, rawCommand, redisRig } from './helpers/redis.js';
import { maxInWindow } from './helpers/window.js';

const W = 1_000_000;
const LANES = 2;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Global 100 per second (and `channels` when given), account acme 100, peer pbx 3, solo 1, other peers 1,000. */
function config(channels?: number) {
  return {
    maxCallDuration: 'PT60S',
    inbound: {
      global: [{ limit: 100, window: 'PT1S' }, ...(channels === undefined ? [] : [{ channels }])],
      accounts: { acme: [{ limit: 100, window: 'PT1S' }] },
      peers: { pbx: [{ limit: 3, window: 'PT1S' }], solo: [{ limit: 1, window: 'PT1S' }] },
      defaultPeer: [{ limit: 1_000, window: 'PT1S' }],
    },
  };
}

/** The lane of acme's calls. */
function acmeLane(): number {
  const g: Bucket = { name: 'global', limits: [{ algorithm: 'sliding-log', limit: 100, windowUs: W }] };
  return laneOf([g, { name: 'account:acme', limits: [] }, { name: 'peer:pbx', limits: [] }], LANES);
}

describe('the overflow lane of a leased global level', function () {
  this.timeout(60_000);
  const rig = redisRig();
  const client = () => rig.client();
  /** A gate on a store leased over LANES lanes with an overflow lane, the flood shield off. */
  const leasedGate = (conf: ReturnType<typeof config>, prefix: string) =>
    CallGate.create({
      config: conf,
      store: new RedisStore({ redis: client(), prefix, hashTags: true, lease: { lanes: LANES, overflow: true } }),
      shield: false,
    });
  const key = (prefix: string, tag: string, name: string) => `${prefix}{${tag}}:${name}`;
  /** A share as the coordinator's orders leave it (lease-grant.lua's fields), its lease an hour long. */
  const share = async (raw: Redis, prefix: string, tag: string, c: number, h: number) => {
    const [s, us] = (await raw.time()) as unknown as [string, string];
    const e = (Number(s) * 1e6 + Number(us) + 3_600e6).toString();
    await raw.hset(key(prefix, tag, 'global:share'), 'term', '1', 'g', '0', 'c', String(c), 'h', String(h), 'e', e);
  };

  for (const channels of [undefined, 50]) {
    const what = channels === undefined ? 'without' : 'with';
    it(`spills the calls its lane lacks share for, and counts each level where it belongs (${what} a global channel limit)`, async () => {
      const prefix = `t:ovf:${what}:${Date.now()}:`;
      const raw = rig.raw;
      const lane = laneTag(acmeLane(), LANES);
      const gate = await leasedGate(config(channels), prefix);
      try {
        await share(raw, prefix, lane, 1, 50);
        await share(raw, prefix, laneTag(1 - acmeLane(), LANES), 0, 0);
        await share(raw, prefix, OVERFLOW_TAG, 2, 0);
        const call = (n: number, peer = 'pbx') => gate.admit({ callId: `c${n}`, peer, account: 'acme' });
        const a = await call(1); // on its lane's share
        const b = await call(2); // spilled
        const c = await call(3); // spilled
        // the peer's 3 per second are used: refused on its lane, and not spilled (its peer would
        // refuse it there too), the lane's refusal answered
        const d = await call(4);
        expect([a.admitted, b.admitted, c.admitted]).to.deep.equal([true, true, true]);
        expect(a.spilledAt).to.equal(undefined);
        for (const x of [b, c])
          expect(x.spilledAt)
            .to.be.a('number')
            .and.at.most(x.at)
            .and.above(x.at - 1_000_000);
        expect(d).to.deep.include({ admitted: false, limitedBy: 'global', reason: 'rate' });
        expect(d.spilledAt).to.equal(undefined);
        expect(await raw.zcard(key(prefix, OVERFLOW_TAG, 'global:log'))).to.equal(2);
        // the overflow lane is full now: refused there, the lane's refusal answered
        const e = await call(5, 'other');
        expect(e).to.deep.include({ admitted: false, limitedBy: 'global', reason: 'rate' });
        expect(await raw.zcard(key(prefix, lane, 'global:log'))).to.equal(1);
        expect(await raw.zcard(key(prefix, OVERFLOW_TAG, 'global:log'))).to.equal(2);
        expect(await raw.zcard(key(prefix, lane, 'peer:pbx:log'))).to.equal(3);
        expect(await raw.zcard(key(prefix, lane, 'account:acme:log'))).to.equal(3);
        // the channels of the global level stay on the lane: each admitted call holds one there
        if (channels !== undefined) expect(await raw.zcard(key(prefix, lane, 'global:ch'))).to.equal(3);
        expect(await raw.exists(key(prefix, OVERFLOW_TAG, 'global:ch'))).to.equal(0);
        // refusals for lack of share, counted where the coordinator reads demand (b to e)
        expect(await raw.hget(key(prefix, lane, 'global:share'), 'rc')).to.equal('4');
        expect(await raw.hget(key(prefix, OVERFLOW_TAG, 'global:share'), 'rc')).to.equal('1');
        // refused just now: not asked again for 50 ms, even with share
        await share(raw, prefix, OVERFLOW_TAG, 10, 0);
        expect((await call(6, 'other')).admitted).to.equal(false);
        expect(await raw.hget(key(prefix, OVERFLOW_TAG, 'global:share'), 'rc')).to.equal('1');
        await sleep(60);
        const f = await call(7, 'other');
        expect(f.admitted).to.equal(true);
        expect(f.spilledAt).to.be.a('number');
        // two calls at once for the one place left of a peer: both spill (each saw room on its
        // lane), its lane then takes the first and refuses the second by the peer
        await share(raw, prefix, OVERFLOW_TAG, 20, 0);
        const both = await Promise.all([call(8, 'solo'), call(9, 'solo')]);
        expect(both.map((x) => x.admitted).sort()).to.deep.equal([false, true]);
        expect(both.filter((x) => x.spilledAt !== undefined)).to.have.length(1);
        expect(both.find((x) => !x.admitted)).to.deep.include({ limitedBy: 'peer:solo', reason: 'rate' });
        // inspect: the global level is the sum over the lanes and the overflow lane (the event of
        // the call its peer refused after the spill included)
        const state = await inspectState(gate.config, gate.store);
        const global = state.buckets.find((x) => x.bucket === 'global')!;
        expect(global.limits[0]!.count).to.equal(6);
        expect(global.leased_lanes).to.equal(LANES);
        if (channels !== undefined) expect(global.channels).to.deep.equal({ limit: 50, in_use: 5 });
      } finally {
        await gate.close();
      }
    });
  }

  it('the coordinator moves the overflow lane’s share by its demand, and gives it no channels', async () => {
    const prefix = `t:ovf:coord:${Date.now()}:`;
    const own = client();
    const gate = await leasedGate(config(50), prefix);
    const c = LeaseCoordinator.forGate(gate, { deployments: [{ redis: own, lanes: LANES, prefix, overflow: true }] });
    try {
      for (let i = 0; i < 3; i++) await c.tick();
      const s = c.report.state!;
      expect(s.shares).to.have.length(LANES + 1);
      expect(c.laneNames).to.deep.equal(['0', '1', 'overflow']);
      expect(s.shares[LANES]!.channels).to.equal(0);
      expect(s.shares.reduce((n, b) => n + b.calls, 0) + s.pool.calls).to.equal(100);
      expect(s.shares.reduce((n, b) => n + b.channels, 0) + s.pool.channels).to.equal(50);
      const idle = s.shares[LANES]!.calls;
      // the overflow lane refuses for lack of share: its demand, then its share, grows
      await rig.raw.hset(key(prefix, OVERFLOW_TAG, 'global:share'), 'rc', '40');
      await c.tick();
      await c.tick();
      expect(c.report.state!.shares[LANES]!.calls).to.be.above(idle);
    } finally {
      await c.stop();
      await gate.close();
    }
  });

  it('a coordinator without the overflow lane counts what a predecessor granted it, and drains it', async () => {
    const prefix = `t:ovf:drain:${Date.now()}:`;
    const raw = rig.raw;
    const [sec, us] = (await raw.time()) as unknown as [string, string];
    const now = Number(sec) * 1e6 + Number(us);
    // what a leader with the overflow lane left: lane 0 long out of its lease, lane 1 and the
    // overflow lane 50 each on running leases
    const set = (tag: string, c: number, e: number) =>
      raw.hset(key(prefix, tag, 'global:share'), 'term', '1', 'g', '1', 'c', String(c), 'h', '0', 'e', String(e));
    await set(laneTag(0, LANES), 40, now - 3 * W);
    await set(laneTag(1, LANES), 50, now + 1_500_000);
    await set(OVERFLOW_TAG, 50, now + 1_500_000);
    const c = new LeaseCoordinator({
      deployments: [{ redis: client(), lanes: LANES, prefix }],
      limit: { calls: 100, windowUs: W },
    });
    /** The calls shares the lanes may admit on now (lease running), overflow lane last. */
    const usable = async () => {
      const [s2, u2] = (await raw.time()) as unknown as [string, string];
      const t = Number(s2) * 1e6 + Number(u2);
      const out: number[] = [];
      for (const tag of [laneTag(0, LANES), laneTag(1, LANES), OVERFLOW_TAG]) {
        const [cc, e] = await raw.hmget(key(prefix, tag, 'global:share'), 'c', 'e');
        out.push(Number(e) > t ? Number(cc) : 0);
      }
      return out;
    };
    try {
      expect(c.laneNames).to.deep.equal(['0', '1', 'overflow']);
      // never more than the limit on running leases, tick after tick, until the overflow lane is drained
      for (let i = 0; i < 80; i++) {
        await c.tick();
        const shares = await usable();
        expect(
          shares.reduce((a, b) => a + b, 0),
          `tick ${i}: ${shares}`,
        ).to.be.at.most(100);
        if (i > 5 && shares[2] === 0 && shares[0]! + shares[1]! >= 90) break;
        await sleep(50);
      }
      const end = await usable();
      expect(end[2], 'the overflow lane drained').to.equal(0);
      expect(end[0]! + end[1]!, 'its share back with the lanes').to.be.at.least(90);
    } finally {
      await c.stop();
    }
  });

  it('a reload that turns a global channel limit on counts the spilled calls in progress', async () => {
    const prefix = `t:ovf:reload:${Date.now()}:`;
    const raw = rig.raw;
    const lane = laneTag(acmeLane(), LANES);
    const gate = await leasedGate(config(), prefix);
    try {
      await share(raw, prefix, lane, 1, 50);
      await share(raw, prefix, laneTag(1 - acmeLane(), LANES), 0, 0);
      await share(raw, prefix, OVERFLOW_TAG, 5, 0);
      const a = await gate.admit({ callId: 'r1', peer: 'pbx', account: 'acme' });
      const b = await gate.admit({ callId: 'r2', peer: 'pbx', account: 'acme' });
      expect([a.spilledAt, typeof b.spilledAt]).to.deep.equal([undefined, 'number']);
      await gate.reload(config(2));
      // both calls in progress hold a channel of the level now, on their lane
      expect(await raw.zcard(key(prefix, lane, 'global:ch'))).to.equal(2);
      // a third is refused: its lane lacks calls share, and the level's channels are all held,
      // so it is not spilled either
      const c = await gate.admit({ callId: 'r3', peer: 'other', account: 'acme' });
      expect(c).to.deep.include({ admitted: false, limitedBy: 'global' });
      expect(c.spilledAt).to.equal(undefined);
      expect(await raw.zcard(key(prefix, OVERFLOW_TAG, 'global:log'))).to.equal(1);
    } finally {
      await gate.close();
    }
  });

  it('under load near the limit: never over it in any window, fewer false refusals than without', async () => {
    const LIMIT = 300;
    const results: Record<string, number> = {};
    for (const overflow of [false, true]) {
      const prefix = `t:ovf:load:${overflow}:${Date.now()}:`;
      const conf = leasedConfig(LIMIT, 100_000);
      const gates: CallGate[] = [];
      const coordinators: LeaseCoordinator[] = [];
      const lanes = 8;
      for (let i = 0; i < 2; i++) {
        const store = new RedisStore({
          redis: client(),
          prefix,
          hashTags: true,
          lease: { lanes, overflow },
        });
        gates.push(await CallGate.create({ config: conf, store, shield: false, policy: 'error' }));
        coordinators.push(
          LeaseCoordinator.forGate(gates[i]!, {
            deployments: [{ redis: client(), lanes, prefix, overflow }],
            id: `c${i}`,
          }).start(),
        );
      }
      try {
        await sleep(400);
        const decided = await offerLoad({ gates, rate: 0.97 * LIMIT, seconds: 6, peers: 32, shiftMs: 2_000 });
        // the level counted a spilled call on the overflow lane, at spilledAt
        const counted = (x: Decided) => x.d.spilledAt ?? x.d.at;
        const admitted = decided.filter((x) => x.d.admitted);
        expect(
          maxInWindow(
            admitted.map(counted).sort((p, q) => p - q),
            W,
          ),
          'calls in any window',
        ).to.be.at.most(LIMIT);
        if (overflow) expect(admitted.filter((x) => x.d.spilledAt !== undefined).length).to.be.greaterThan(0);
        else expect(admitted.every((x) => x.d.spilledAt === undefined)).to.equal(true);
        results[String(overflow)] = (await falseRefusals(decided, conf)) / decided.length;
      } finally {
        await Promise.all(coordinators.map((c) => c.stop()));
        await Promise.all(gates.map((g) => g.close()));
      }
    }
    console.log(
      `      false refusals at 97 %, 8 lanes: ${(100 * results.false!).toFixed(2)} % without, ${(100 * results.true!).toFixed(2)} % with the overflow lane`,
    );
    expect(results.true).to.be.below(results.false!);
  });
});

describe('the overflow lane out of reach (a 3-master Cluster)', function () {
  this.timeout(60_000);
  const cluster = clusterRig(3);

  it('a stalled overflow master costs a call its lane’s refusal, within the deadline, not the policy’s answer', async () => {
    const raw = cluster.client();
    const master = (tag: string) => raw.slots[slotOf(`{${tag}}`)]![0]!;
    await raw.cluster('SLOTS');
    // an account whose lane is on another master than the overflow lane
    const g: Bucket = { name: 'global', limits: [{ algorithm: 'sliding-log', limit: 1, windowUs: W }] };
    const lanes = 3;
    const account = Array.from({ length: 50 }, (_, i) => `acct${i}`).find(
      (a) => master(laneTag(laneOf([g, { name: `account:${a}`, limits: [] }], lanes), lanes)) !== master(OVERFLOW_TAG),
    )!;
    const prefix = `t:ovf:stall:${Date.now()}:`;
    const [sec, us] = (await raw.time()) as unknown as [string, string];
    const e = String(Number(sec) * 1e6 + Number(us) + 3_600e6);
    // one call's worth of share on each lane, some on the overflow lane
    for (const tag of [...Array.from({ length: lanes }, (_, k) => laneTag(k, lanes)), OVERFLOW_TAG])
      await raw.hset(
        `${prefix}{${tag}}:global:share`,
        'term',
        '1',
        'g',
        '0',
        'c',
        tag === OVERFLOW_TAG ? '5' : '1',
        'h',
        '0',
        'e',
        e,
      );
    const redis = cluster.client();
    const gate = await CallGate.create({
      config: {
        maxCallDuration: 'PT60S',
        inbound: {
          global: [{ limit: 100, window: 'PT1S' }],
          accounts: { [account]: [{ limit: 100, window: 'PT1S' }] },
          defaultPeer: [{ limit: 1000, window: 'PT1S' }],
        },
      },
      store: new RedisStore({ redis, prefix, lease: { lanes, overflow: true } }),
      shield: false,
      policy: 'fail-open',
      timeoutMs: 300,
    });
    try {
      expect((await gate.admit({ callId: 's1', peer: 'p', account })).admitted).to.equal(true);
      const [host, port] = master(OVERFLOW_TAG).split(':');
      await rawCommand(Number(port), ['CLIENT', 'PAUSE', '1500', 'ALL'], 1_000, host);
      const answers: { d: AdmissionDecision; ms: number }[] = [];
      for (let i = 2; i <= 4; i++) {
        const t0 = performance.now();
        const d = await gate.admit({ callId: `s${i}`, peer: 'p', account });
        answers.push({ d, ms: performance.now() - t0 });
      }
      // the lane's refusal each time, never fail-open's admission; the first waited for the
      // overflow lane at most a third of the deadline, the others did not ask it
      for (const { d } of answers) expect(d).to.deep.include({ admitted: false, limitedBy: 'global', reason: 'rate' });
      for (const { d } of answers) expect(d.degraded).to.equal(undefined);
      expect(answers[0]!.ms).to.be.below(250);
      expect(answers[1]!.ms).to.be.below(50);
      expect(answers[2]!.ms).to.be.below(50);
    } finally {
      await gate.close();
      await sleep(1_600); // the paused master back before the cluster stops
    }
  });
});
