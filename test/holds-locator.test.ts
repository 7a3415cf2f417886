/**
 * No lost locator (issue 25): on a Redis Cluster a call's inbound record is found from its id
 * through a locator on another shard. A release from another routing process (its own
 * connection) issued the moment the admit answered always finds the call.
 */
import { expect } from 'chai';
import type { Cluster } from 'ioredis';
import { RedisStore } from '../src/store/redis/redis-store.js';
import { peerTag } from '../src/store/keys.js';
import { uniquePrefix } from './admission/stores.js';
import { newClusterClient, redisRig, startCluster, type RedisClusterHandle } from './helpers/redis.js';
import { CallGate } from '../src/gate.js';
import { listHolds } from '../src/observe/operate.js';

describe('locators on a Cluster: a release right after the admit finds the call', function () {
  this.timeout(60_000);
  let handle: RedisClusterHandle | undefined;
  const clients: Cluster[] = [];
  after(async () => {
    for (const c of clients) c.disconnect();
    await handle?.stop();
  });

  it('2,000 calls released by another process as soon as admitted: every release answers released', async () => {
    handle = await startCluster();
    const prefix = uniquePrefix('holds-locator');
    const [a, b] = [0, 1].map(() => {
      const redis = newClusterClient(handle!);
      clients.push(redis);
      return new RedisStore({ redis, prefix });
    }) as [RedisStore, RedisStore];
    const bucket = { name: 'peer:loc', limits: [], channels: 100_000 };
    let missed = 0;
    const one = async (i: number) => {
      const id = `loc-${i}`;
      const r = await a.admit({ tag: peerTag('loc'), buckets: [bucket], hold: { id, forUs: 60_000_000 } });
      expect(r.admitted).to.equal(true);
      if ((await b.release({ id })).released !== 1) missed++;
    };
    for (let i = 0; i < 2_000; i += 50) await Promise.all(Array.from({ length: 50 }, (_, k) => one(i + k)));
    expect(missed).to.equal(0);
    await a.close();
    await b.close();
  });
});

describe('locators with hash tags: a reservation sent before the connection is ready', function () {
  this.timeout(30_000);
  const rig = redisRig();

  it('rerouted, it is released: a retried locator write for the carrier it passed over gives way', async () => {
    const prefix = uniquePrefix('locator-retry');
    const config = {
      maxCallDuration: 'PT1H',
      outbound: {
        carriers: {
          A: { cps: 1000, maxWait: 'PT1S', channels: 1 },
          B: { cps: 1000, maxWait: 'PT1S', channels: 5 },
        },
      },
    };
    const other = await CallGate.create({
      config,
      store: RedisStore.connect(rig.server.url, { prefix, hashTags: true }),
    });
    await other.reserve({ callId: 'fills-A', route: ['A'] }); // A's one channel, another process
    const gate = await CallGate.create({
      config,
      store: RedisStore.connect(rig.server.url, { prefix, hashTags: true }),
    });
    try {
      // issued while this gate's connection is still being made: its first locator write (naming
      // A's record, tried first) failed and was retried 200 ms later, over the one naming B's
      const r = await gate.reserve({ callId: 'x', route: ['A', 'B'] });
      expect([r.outcome, r.carrier]).to.deep.equal(['dispatched', 'B']);
      await new Promise((resolve) => setTimeout(resolve, 400));
      expect(await gate.release('x')).to.equal('released');
      expect((await listHolds(gate.config, gate.store, { carrier: 'B' })).holds).to.deep.equal([]);
    } finally {
      await gate.close();
      await other.close();
    }
  });
});
