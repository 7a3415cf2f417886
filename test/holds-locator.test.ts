/**
 * No lost locator (issue 25): on a Redis Cluster a call's inbound record is found from its id
 * through a locator on another shard. A release from another routing process (its own
 * connection) issued the moment the admit answered always finds the call.
 */
import { expect } from 'chai';
import { Cluster as IORedisCluster, type Cluster } from 'ioredis';
import { RECOMMENDED_REDIS_OPTIONS, RedisStore } from '../src/store/redis/redis-store.js';
import { peerTag } from '../src/store/keys.js';
import { uniquePrefix } from './admission/stores.js';
import { newClusterClient, rawCommand, redisRig, startCluster, type RedisClusterHandle } from './helpers/redis.js';
import { clusterOk, startReplicatedCluster, type ReplicatedCluster } from './holds/cluster.js';
import { sleep } from './holds/harness.js';
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

describe('a Cluster master deposed without a lost connection (its replica took over)', function () {
  this.timeout(60_000);
  let cluster: ReplicatedCluster | undefined;
  const clients: Cluster[] = [];
  after(async () => {
    for (const c of clients) c.disconnect();
    await cluster?.stop();
  });

  it('every tag is written again: a locator lost with the old master comes back', async () => {
    cluster = await startReplicatedCluster();
    const prefix = uniquePrefix('holds-deposed');
    const redis = new IORedisCluster(cluster.nodes, { redisOptions: RECOMMENDED_REDIS_OPTIONS });
    clients.push(redis);
    const store = new RedisStore({ redis, prefix, holds: { syncMs: 0 } });
    try {
      const tag = peerTag('dep');
      const bucket = { name: 'peer:dep', limits: [], channels: 10 };
      for (const id of ['d1', 'd2'])
        expect((await store.admit({ tag, buckets: [bucket], hold: { id, forUs: 60_000_000 } })).admitted).to.equal(
          true,
        );
      // d1's locator was written to a master that went before its replica copied it
      const locator = `${prefix}{c:d1}:loc`;
      expect(await redis.del(locator)).to.equal(1);
      const back: string[] = [];
      store.events.on('holdsReasserted', (e) => back.push(e.tag));
      // a graceful failover of the calls' master: nothing lost, no connection lost; the
      // client learns of it from the MOVED its next command gets
      const victim = await cluster.masterOf(`${prefix}{${tag}}:x`);
      await rawCommand(cluster.replicas[victim]!.port, ['CLUSTER', 'FAILOVER']);
      await clusterOk(cluster.replicas[victim]!.port);
      for (let i = 0; i < 100 && back.length === 0; i++) {
        await store.holds({ tag, name: bucket.name }).catch(() => undefined);
        await sleep(50);
      }
      expect(back).to.include(tag);
      expect(await redis.get(locator)).to.equal(`${prefix}{${tag}}:call:in:d1`);
      expect((await store.holds({ tag, name: bucket.name })).holds).to.equal(2);
    } finally {
      await store.close();
    }
  });
});
