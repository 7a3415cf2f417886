/**
 * Placing owners on lanes (docs/leasing.md, "Placing accounts"): `lease.pin` puts an account (or
 * a peer that names none) on the lane given, and leaves every other owner where its hash puts it.
 * Proven on the lane function itself, then on a real Redis: a pinned account's keys and
 * its peers' are on its lane's tag, inspect finds them there, and a process without the same pins
 * looks on another lane (why every process must have the same ones).
 */
import { expect } from 'chai';
import { CallGate } from '../src/gate.js';
import { LeaseCoordinator } from '../src/lease/coordinator.js';
import { bucketLaneTags, laneOf, lanePlan, laneTag } from '../src/lease/lanes.js';
import { LeasedMemoryStore } from '../src/lease/replay-lanes.js';
import { inspectState } from '../src/observe/inspect.js';
import { RedisStore } from '../src/store/redis/redis-store.js';
import { accountBucket, peerBucket } from '../src/store/keys.js';
import type { Bucket } from '../src/store/types.js';
import { InvalidArgumentError } from '../src/errors/index.js';
import { newRedisClient, redisRig } from './helpers/redis.js';

const g: Bucket = { name: 'global', limits: [{ algorithm: 'sliding-log', limit: 10, windowUs: 1e6 }] };
const call = (account: string | undefined, peer: string): Bucket[] => [
  g,
  ...(account === undefined ? [] : [{ name: `account:${account}`, limits: [] }]),
  { name: `peer:${peer}`, limits: [] },
];
const names = Array.from({ length: 400 }, (_, i) => `a${i}`);

describe('lease pins: owners placed on lanes', () => {
  it('a pinned account is on its lane with its peers; every other owner where it was without pins', () => {
    const plan = lanePlan(8, { accounts: { big: 3, huge: 5 }, peers: { lone: 6 } });
    expect(laneOf(call('big', 'p1'), plan)).to.equal(3);
    expect(laneOf(call('big', 'p2'), plan)).to.equal(3);
    expect(laneOf(call('huge', 'p1'), plan)).to.equal(5);
    // a peer pin places calls naming no account; with an account, the account's lane wins
    expect(laneOf(call(undefined, 'lone'), plan)).to.equal(6);
    expect(laneOf(call('big', 'lone'), plan)).to.equal(3);
    // pinning never moves another owner's keys
    for (const a of names) {
      expect(laneOf(call(a, 'p'), plan)).to.equal(laneOf(call(a, 'p'), 8));
      expect(laneOf(call(undefined, a), plan)).to.equal(laneOf(call(undefined, a), 8));
    }
    expect(new Set(names.map((a) => laneOf(call(a, 'p'), plan)))).to.have.property('size', 8);
    // inspect's and reset's view: an account on its lane, a peer on its own and on every account's
    expect(bucketLaneTags('account:big', ['account:big', 'account:huge'], plan)).to.deep.equal([laneTag(3, 8)]);
    const lonely = bucketLaneTags('peer:lone', ['account:big', 'account:huge'], plan);
    expect(lonely).to.deep.equal([3, 5, 6].map((k) => laneTag(k, 8)));
    // an empty pin list is no pins
    const empty = lanePlan(16, { accounts: {}, peers: {} });
    for (const a of names) expect(laneOf(call(a, 'p'), empty)).to.equal(laneOf(call(a, 'p'), 16));
  });

  it('ids are matched as the plans name them: spaces, +, : and = in ids too', () => {
    const odd = ['acme corp', '+15551234567', 'sbc:5060', 'a=b', 'x{y}'];
    const plan = lanePlan(8, { accounts: Object.fromEntries(odd.map((id) => [id, 7])), peers: { 'trunk 1': 6 } });
    // unpinned, most of them hash elsewhere: the pins are what moves them
    const hashed = odd.map((id) => laneOf([g, { name: accountBucket(id), limits: [] }], 8));
    expect(hashed.filter((k) => k !== 7).length).to.be.greaterThan(2);
    for (const id of odd) {
      expect(laneOf([g, { name: accountBucket(id), limits: [] }], plan), id).to.equal(7);
    }
    expect(laneOf([g, { name: peerBucket('trunk 1'), limits: [] }], plan)).to.equal(6);
  });

  it('a lease without a valid number of lanes is refused, pins or not', () => {
    const limit = { calls: 10, windowUs: 1e6, channels: 0 };
    for (const lanes of [undefined, '4', 0, 2000, 1.5])
      expect(() => lanePlan(lanes as never, { accounts: { a: 0 } }), String(lanes)).to.throw(
        InvalidArgumentError,
        /lease.lanes must be an integer from 1 to 1024/,
      );
    expect(() => new LeasedMemoryStore({ lanes: undefined as never, limit })).to.throw(
      InvalidArgumentError,
      /lease.lanes/,
    );
  });

  const bad: [string, unknown, RegExp][] = [
    ['not an object', 3, /lease.pin must be an object/],
    ['an array', [], /lease.pin must be an object/],
    ['an unknown field', { account: { x: 1 } }, /unknown field "account" \(accounts, peers\)/],
    ['accounts not an object', { accounts: 'x' }, /lease.pin.accounts must be an object/],
    ['a lane past the last', { accounts: { x: 4 } }, /lease.pin.accounts.x: a lane from 0 to 3 \(of 4\), got 4/],
    ['a negative lane', { peers: { y: -1 } }, /a lane from 0 to 3/],
    ['a lane not an integer', { peers: { y: 1.5 } }, /got 1.5/],
    ['a lane as text', { peers: { y: '1' } }, /got "1"/],
    ['an empty id', { accounts: { '': 1 } }, /an empty account id/],
  ];
  for (const [what, pin, message] of bad)
    it(`refuses ${what}`, () => {
      expect(() => lanePlan(4, pin)).to.throw(InvalidArgumentError, message);
      expect(
        () => new LeasedMemoryStore({ lanes: 4, pin: pin as never, limit: { calls: 10, windowUs: 1e6, channels: 0 } }),
      ).to.throw(InvalidArgumentError, message);
    });

  describe('on a real Redis', function () {
    this.timeout(30_000);
    const rig = redisRig();

    it("a pinned account's keys are on its lane; inspect finds them there, a process without the pin does not", async () => {
      const prefix = `t:pins:${Date.now()}:`;
      const config = {
        inbound: {
          global: [{ limit: 100, window: 'PT1S' }],
          accounts: { big: [{ limit: 50, window: 'PT1S' }] },
          defaultPeer: [{ limit: 20, window: 'PT1S' }],
        },
      };
      const pin = { accounts: { big: 2 } };
      const redis = newRedisClient(rig.server);
      const misspelt = { lanes: 4, pins: pin } as never;
      expect(() => new RedisStore({ redis, hashTags: true, lease: misspelt })).to.throw(
        InvalidArgumentError,
        /lease: unknown field "pins" \(lanes, overflow, pin\)/,
      );
      expect(() => new RedisStore({ redis, hashTags: true, lease: {} as never })).to.throw(
        InvalidArgumentError,
        /lease.lanes must be an integer/,
      );
      const store = new RedisStore({ redis, prefix, hashTags: true, lease: { lanes: 4, pin } });
      const gate = await CallGate.create({ config, store, shield: false, policy: 'error' });
      const own = newRedisClient(rig.server);
      const coordinator = new LeaseCoordinator({
        deployments: [{ redis: own, lanes: 4, prefix }],
        limit: { calls: 100, windowUs: 1e6 },
        tickMs: 20,
      }).start();
      try {
        // the first shares are granted within a few ticks
        let admitted = 0;
        for (let i = 0; i < 100 && admitted === 0; i++) {
          const d = await gate.admit({ callId: `w${i}`, peer: 'pbx', account: 'big' });
          if (d.admitted) admitted++;
          else await new Promise((r) => setTimeout(r, 20));
        }
        for (let i = 0; i < 5; i++) {
          const d = await gate.admit({ callId: `c${i}`, peer: i % 2 === 0 ? 'pbx' : 'pbx2', account: 'big' });
          if (d.admitted) admitted++;
        }
        expect(admitted).to.be.greaterThan(1);
        // every key of the account and its peers on lane 2's tag
        const keys = await rig.raw.keys(`${prefix}*`);
        const owned = keys.filter((k) => /account:big|peer:pbx/.test(k));
        expect(owned.length).to.be.greaterThan(2);
        for (const k of owned) expect(k, k).to.include(`{${laneTag(2, 4)}}`);
        const count = async (s: RedisStore) =>
          (await inspectState(gate.config, s)).buckets.find((b) => b.bucket === 'account:big')!.limits[0]!.count;
        expect(await count(store)).to.equal(admitted);
        // the same deployment read without the pin: the account is looked for on its hashed lane (0)
        expect(laneOf(call('big', 'pbx'), 4)).to.equal(0);
        const unpinned = new RedisStore({ redis, prefix, hashTags: true, lease: { lanes: 4 } });
        expect(await count(unpinned)).to.equal(0);
      } finally {
        await coordinator.stop();
        await gate.close();
        redis.disconnect();
        own.disconnect();
      }
    });
  });
});
