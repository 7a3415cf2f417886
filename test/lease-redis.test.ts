/**
 * A leased global level on a real local Redis Cluster (3 masters): three gates, each on its own
 * Cluster client with its own coordinator candidate (one leads), calls of Zipf-skewed peers whose
 * hot set moves every 2 s. Proven from every decision's Redis time: the level never admits more
 * than its limit in any window (t - W, t], its channels (each call holding until its hold lapses)
 * never exceed the channel limit, false refusals (refused by the leased level where the unleased
 * contract, replayed on the same arrivals at the same times, admits) stay few, and the admit
 * scripts spread over the masters. Then the leader stops mid-run: another takes over.
 */
import { expect } from 'chai';
import type { Cluster } from 'ioredis';
import { CallGate } from '../src/gate.js';
import { LeaseCoordinator } from '../src/lease/coordinator.js';
import { laneOf, laneTag } from '../src/lease/lanes.js';
import { RedisStore } from '../src/store/redis/redis-store.js';
import { InvalidArgumentError } from '../src/errors/index.js';
import { clusterRig } from './helpers/redis.js';
import { expectWithinLimits, falseRefusals, offerLoad, HOLD_US, leasedConfig } from './helpers/lease-load.js';

const LIMIT = 200; // calls per second, platform-wide
const CHANNELS = 500;
const LANES = 8;
const PEERS = 32;
const config = leasedConfig(LIMIT, CHANNELS);

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('a leased global level on a Redis Cluster (3 masters)', function () {
  this.timeout(120_000);
  const cluster = clusterRig(3);
  const clients: Cluster[] = [];
  const client = () => {
    const c = cluster.client();
    clients.push(c);
    return c;
  };

  it('lanes: an account takes its peers along; clear errors for what cannot be leased', async () => {
    const g = { name: 'global', limits: [{ algorithm: 'sliding-log' as const, limit: 10, windowUs: 1e6 }] };
    const lane = laneOf([g, { name: 'account:a', limits: [] }, { name: 'peer:x', limits: [] }], 64);
    expect(laneOf([g, { name: 'account:a', limits: [] }, { name: 'peer:y', limits: [] }], 64)).to.equal(lane);
    const fixed = { name: 'global', limits: [{ algorithm: 'fixed-window' as const, limit: 10, windowUs: 1e6 }] };
    expect(() => laneOf([fixed, { name: 'peer:x', limits: [] }], 8)).to.throw(InvalidArgumentError, /one sliding-log/);
    expect(() => laneOf([g, { name: 'tenant:t', limits: [] }, { name: 'peer:x', limits: [] }], 8)).to.throw(
      InvalidArgumentError,
      /attribute levels/,
    );
    // the global level alone (record() of a call from a peer without limits): lane 0
    expect(laneOf([g], 8)).to.equal(0);
    expect(() => laneOf([g, { name: 'tenant:t', limits: [] }], 8)).to.throw(InvalidArgumentError, /attribute levels/);
    const redis = client();
    expect(() => new RedisStore({ redis, lease: { lanes: 0 } })).to.throw(InvalidArgumentError, /lanes/);
    const leased = new RedisStore({ redis, lease: { lanes: 4 } });
    const g1 = { name: 'global', limits: [{ algorithm: 'sliding-log' as const, limit: 10, windowUs: 1e6 }] };
    const virtual = await leased.admit({ tag: 'in', buckets: [g1, { name: 'peer:x', limits: [] }], now: 1e15 }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(virtual).to.be.instanceOf(InvalidArgumentError);
    expect((virtual as Error).message).to.match(/Redis TIME only/);
    expect(() => new RedisStore({ redis, hashTags: false, lease: { lanes: 4 } })).to.throw(
      InvalidArgumentError,
      /hash tags/,
    );
  });

  it('never over the limit in any window, channels never over theirs, few false refusals; a new leader takes over', async () => {
    const prefix = `t:lease:${Date.now()}:`;
    const gates: CallGate[] = [];
    const coordinators: LeaseCoordinator[] = [];
    for (let i = 0; i < 3; i++) {
      const redis = client();
      const store = new RedisStore({ redis, prefix, lease: { lanes: LANES } });
      gates.push(await CallGate.create({ config, store, shield: false, policy: 'error' }));
      coordinators.push(
        new LeaseCoordinator({
          deployments: [{ redis, lanes: LANES, prefix }],
          limit: { calls: LIMIT, windowUs: 1_000_000, channels: CHANNELS },
          id: `c${i}`,
        }).start(),
      );
    }
    try {
      // the leader grants the lanes their first shares within a few ticks
      await sleep(600);
      expect(coordinators.filter((c) => c.report.leader)).to.have.length(1);

      const rate = 0.9 * LIMIT; // calls/s offered
      let stoppedLeader = -1;
      const decided = await offerLoad({
        gates,
        rate,
        seconds: 8,
        peers: PEERS,
        shiftMs: 2_000,
        at: {
          ms: 4_000,
          run: async () => {
            stoppedLeader = coordinators.findIndex((c) => c.report.leader);
            await coordinators[stoppedLeader]!.stop();
          },
        },
      });
      await sleep(500);
      expect(stoppedLeader).to.be.at.least(0);
      const leaders = coordinators.filter((c, i) => i !== stoppedLeader && c.report.leader);
      expect(leaders, 'one of the others leads after the leader stopped').to.have.length(1);

      expectWithinLimits(decided, LIMIT, 1_000_000, CHANNELS, HOLD_US);
      for (const x of decided) if (!x.d.admitted) expect(x.d.limitedBy, JSON.stringify(x.d)).to.equal('global');
      const share = (await falseRefusals(decided, config)) / decided.length;
      console.log(`      ${decided.length} calls at ${rate}/s: ${(100 * share).toFixed(2)} % false refusals`);
      expect(share).to.be.below(0.08); // 2.2–3.9 % measured here, some under load

      // the lanes (and their admit scripts) are spread over the masters
      const masters = new Set<string>();
      const client = clients[1]!;
      for (let k = 0; k < LANES; k++) {
        const node = client.slots[Number(await client.call('CLUSTER', 'KEYSLOT', `{${laneTag(k, LANES)}}`))]![0]!;
        masters.add(node);
      }
      expect(masters.size).to.equal(3);
      // evenly: each lane's slot in its equal part of the slot range
      for (let k = 0; k < LANES; k++)
        expect(Number(await client.call('CLUSTER', 'KEYSLOT', `{${laneTag(k, LANES)}}`)))
          .to.be.at.least((k * 16_384) / LANES)
          .and.below(((k + 1) * 16_384) / LANES);
    } finally {
      await Promise.all(coordinators.map((c) => c.stop()));
      await Promise.all(gates.map((g) => g.close()));
    }
  });
  it('a reload that halves the limit: the coordinator follows the gate; at most the old limit meanwhile, the new one a window later', async () => {
    const prefix = `t:lease-reload:${Date.now()}:`;
    const redis = client();
    const own = client();
    const gate = await CallGate.create({
      config,
      store: new RedisStore({ redis, prefix, lease: { lanes: LANES } }),
      shield: false,
    });
    const coordinator = LeaseCoordinator.forGate(gate, { deployments: [{ redis: own, lanes: LANES, prefix }] }).start();
    try {
      await sleep(300);
      let reloadedAt = 0;
      const decided = await offerLoad({
        gates: [gate],
        rate: 0.75 * LIMIT,
        seconds: 5,
        peers: PEERS,
        shiftMs: 2_000,
        at: {
          ms: 2_000,
          run: async () => {
            reloadedAt = Date.now() * 1000;
            await gate.reload(leasedConfig(LIMIT / 2, CHANNELS));
          },
        },
      });
      expect(coordinator.report.state?.limit).to.deep.equal({ calls: LIMIT / 2, channels: CHANNELS });
      expectWithinLimits(decided, LIMIT, 1_000_000, CHANNELS, HOLD_US);
      // a window after the reload (and a tick), the level holds the new limit
      const after = decided.filter((x) => x.d.at > reloadedAt + 1_100_000);
      expect(after.length).to.be.greaterThan(200);
      expectWithinLimits(after, LIMIT / 2, 1_000_000, CHANNELS, HOLD_US);
      // and admits up to it: three quarters of the old limit offered, over the new one. Not all
      // of it: 86-89 of 100 in quiet runs, whether the hot peers move in this second or not,
      // and 84 once under CI's load (the limit is split over 8 lanes, each share filled and
      // emptied by its own calls alone; without a reload the same load admits 88-97)
      const lastSecond = after.filter((x) => x.d.at > decided.at(-1)!.d.at - 1_000_000 && x.d.admitted).length;
      console.log(`      the last second: ${lastSecond} of ${LIMIT / 2} admitted`);
      expect(lastSecond).to.be.at.least(0.8 * (LIMIT / 2));
    } finally {
      await coordinator.stop();
      await gate.close();
    }
  });
});
