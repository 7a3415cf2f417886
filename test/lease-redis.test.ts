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
import type { AdmissionDecision } from '../src/admission/admission.js';
import { LeaseCoordinator } from '../src/lease/coordinator.js';
import { laneOf, laneTag } from '../src/lease/lanes.js';
import { MemoryStore } from '../src/store/memory-store.js';
import { RedisStore } from '../src/store/redis/redis-store.js';
import { InvalidArgumentError } from '../src/errors/index.js';
import { newClusterClient, startCluster, type RedisClusterHandle } from './helpers/redis.js';
import { maxInWindow } from './helpers/window.js';

const LIMIT = 200; // calls per second, platform-wide
const CHANNELS = 500;
const HOLD_US = 2_000_000; // maxCallDuration: calls never report their end here, so each holds 2 s
const LANES = 8;
const PEERS = 32;
const config = {
  maxCallDuration: 'PT2S',
  inbound: {
    global: [{ limit: LIMIT, window: 'PT1S' }, { channels: CHANNELS }],
    defaultPeer: [{ limit: 1_000, window: 'PT1S' }],
  },
};

/** Zipf(1) over PEERS peers, the ranks rotated by `shift`: the hot peers move. */
function zipfPeer(rand: () => number, shift: number): string {
  const weights = Array.from({ length: PEERS }, (_, k) => 1 / (k + 1));
  const total = weights.reduce((a, b) => a + b, 0);
  let x = rand() * total;
  let k = 0;
  while (k < PEERS - 1 && x > weights[k]!) x -= weights[k++]!;
  return `peer-${(k + shift) % PEERS}`;
}

function prng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('a leased global level on a Redis Cluster (3 masters)', function () {
  this.timeout(120_000);
  let cluster: RedisClusterHandle;
  const clients: Cluster[] = [];
  before(async () => {
    cluster = await startCluster(3);
  });
  after(async () => {
    for (const c of clients) c.disconnect();
    await cluster?.stop();
  });

  it('lanes: an account takes its peers along; clear errors for what cannot be leased', () => {
    const g = { name: 'global', limits: [{ algorithm: 'sliding-log' as const, limit: 10, windowUs: 1e6 }] };
    const lane = laneOf([g, { name: 'account:a', limits: [] }, { name: 'peer:x', limits: [] }], 64);
    expect(laneOf([g, { name: 'account:a', limits: [] }, { name: 'peer:y', limits: [] }], 64)).to.equal(lane);
    const fixed = { name: 'global', limits: [{ algorithm: 'fixed-window' as const, limit: 10, windowUs: 1e6 }] };
    expect(() => laneOf([fixed, { name: 'peer:x', limits: [] }], 8)).to.throw(InvalidArgumentError, /one sliding-log/);
    expect(() => laneOf([g, { name: 'tenant:t', limits: [] }, { name: 'peer:x', limits: [] }], 8)).to.throw(
      InvalidArgumentError,
      /attribute levels/,
    );
    const client = newClusterClient(cluster);
    clients.push(client);
    expect(() => new RedisStore({ redis: client, lease: { lanes: 0 } })).to.throw(InvalidArgumentError, /lanes/);
    expect(() => new RedisStore({ redis: client, hashTags: false, lease: { lanes: 4 } })).to.throw(
      InvalidArgumentError,
      /hash tags/,
    );
  });

  it('never over the limit in any window, channels never over theirs, few false refusals; a new leader takes over', async () => {
    const prefix = `t:lease:${Date.now()}:`;
    const gates: CallGate[] = [];
    const coordinators: LeaseCoordinator[] = [];
    for (let i = 0; i < 3; i++) {
      const client = newClusterClient(cluster);
      clients.push(client);
      const store = new RedisStore({ redis: client, prefix, lease: { lanes: LANES } });
      gates.push(await CallGate.create({ config, store, shield: false, policy: 'error' }));
      coordinators.push(
        new LeaseCoordinator({
          deployments: [{ redis: client, lanes: LANES, prefix }],
          limit: { calls: LIMIT, windowUs: 1_000_000, channels: CHANNELS },
          maxHoldMs: HOLD_US / 1000,
          id: `c${i}`,
        }).start(),
      );
    }
    try {
      // the leader grants the lanes their first shares within a few ticks
      await sleep(600);
      expect(coordinators.filter((c) => c.report.leader)).to.have.length(1);

      const rand = prng(7);
      const rate = 0.9 * LIMIT; // calls/s offered
      const seconds = 8;
      const decisions: { peer: string; d: AdmissionDecision }[] = [];
      const pending: Promise<void>[] = [];
      const start = performance.now();
      let stoppedLeader = -1;
      for (let n = 0; n < rate * seconds; n++) {
        const dueMs = (n / rate) * 1000;
        const wait = start + dueMs - performance.now();
        if (wait > 0) await sleep(wait);
        if (stoppedLeader < 0 && dueMs >= 4_000) {
          stoppedLeader = coordinators.findIndex((c) => c.report.leader);
          await coordinators[stoppedLeader]!.stop();
        }
        const peer = zipfPeer(rand, Math.floor(dueMs / 2_000) * 7);
        const gate = gates[n % gates.length]!;
        pending.push(gate.admit({ callId: `call-${n}`, peer }).then((d) => void decisions.push({ peer, d })));
      }
      await Promise.all(pending);
      await sleep(500);
      expect(stoppedLeader).to.be.at.least(0);
      const leaders = coordinators.filter((c, i) => i !== stoppedLeader && c.report.leader);
      expect(leaders, 'one of the others leads after the leader stopped').to.have.length(1);

      decisions.sort((a, b) => a.d.at - b.d.at);
      const admitted = decisions.filter((x) => x.d.admitted).map((x) => x.d.at);
      // exact, from the decisions' Redis times: calls per window and calls holding at once
      expect(maxInWindow(admitted, 1_000_000)).to.be.at.most(LIMIT);
      expect(maxInWindow(admitted, HOLD_US)).to.be.at.most(CHANNELS);
      for (const x of decisions) if (!x.d.admitted) expect(x.d.limitedBy, JSON.stringify(x.d)).to.equal('global');

      // the unleased contract on the same arrivals at the same times
      const reference = await CallGate.create({ config, store: new MemoryStore() });
      let falseRefusals = 0;
      for (const [i, x] of decisions.entries()) {
        const r = await reference.admit({ callId: `ref-${i}`, peer: x.peer, at: x.d.at });
        if (r.admitted && !x.d.admitted) falseRefusals++;
      }
      await reference.close();
      const share = falseRefusals / decisions.length;
      console.log(
        `      ${decisions.length} calls at ${rate}/s: ${admitted.length} admitted, ${falseRefusals} false refusals (${(100 * share).toFixed(2)} %)`,
      );
      expect(decisions).to.have.length(rate * seconds);
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
});
