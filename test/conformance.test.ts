/**
 * The Store conformance suite (test/conformance/) run against every store: MemoryStore,
 * RedisStore on a single Redis, RedisStore on a three-master Redis Cluster.
 */
import { randomBytes } from 'node:crypto';
import type { Cluster, Redis } from 'ioredis';
import { expect } from 'chai';
import { MemoryStore } from '../src/store/memory-store.js';
import type { Bucket } from '../src/store/types.js';
import { RedisStore } from '../src/store/redis/redis-store.js';
import { runConformance } from './conformance/run.js';
import {
  getRedis,
  newClusterClient,
  newRedisClient,
  startCluster,
  type RedisClusterHandle,
  type RedisHandle,
} from './helpers/redis.js';

const freshPrefix = () => `cgconf:${randomBytes(6).toString('hex')}:`;

/** Counts every command the client sends (the store's I/O), on the client instance itself. */
function countCommands(client: Redis | Cluster): () => number {
  let n = 0;
  const c = client as unknown as { sendCommand: (...args: unknown[]) => unknown };
  const orig = c.sendCommand.bind(client);
  c.sendCommand = (...args: unknown[]) => {
    n++;
    return orig(...args);
  };
  return () => n;
}

/** The RedisStore suite over clients from `connect` (one shared, plus fresh ones for concurrency). */
function redisSuite(name: string, start: () => Promise<{ connect(): Redis | Cluster; stop(): Promise<void> }>): void {
  describe(name, function () {
    this.timeout(60_000);
    let backend: { connect(): Redis | Cluster; stop(): Promise<void> } | undefined;
    let client: Redis | Cluster;
    let ioCount: () => number;
    before(async () => {
      backend = await start();
      client = backend.connect();
      // ready before any store: a store created on a connecting client learns the marker when it
      // is ready (holds-keeper.ts), which would race the reassert case's first call
      await client.ping();
      ioCount = countCommands(client);
    });
    after(async () => {
      client?.disconnect();
      await backend?.stop();
    });

    runConformance(name, async () => {
      const prefix = freshPrefix();
      const store = new RedisStore({ redis: client, prefix });
      return {
        store,
        ioCount: () => ioCount(),
        cleanup: async () => {
          await store.clear();
          await store.close();
        },
        siblings: async (n: number) => {
          const clients = Array.from({ length: n }, () => backend!.connect());
          const stores = clients.map((redis) => new RedisStore({ redis, prefix }));
          return {
            stores,
            close: async () => {
              await Promise.all(stores.map((s) => s.close()));
              for (const c of clients) c.disconnect();
            },
          };
        },
      };
    });
  });
}

runConformance('MemoryStore', async () => {
  const store = new MemoryStore();
  return { store, cleanup: () => store.close() };
});

describe('MemoryStore sweep', () => {
  const T = 1_700_000_000_000_000;
  const log = (name: string): Bucket[] => [
    { name, limits: [{ limit: 5, windowUs: 10_000_000, algorithm: 'sliding-log' }] },
  ];
  const x = log('x');
  const y = log('y');
  /** An event on x at T, then 1100 calls on y past x's window, then x counted back at T + 5 s. */
  const scenario = (store: MemoryStore) => {
    store.recordSync({ tag: 't', buckets: x, now: T });
    for (let i = 0; i < 1100; i++) store.admitSync({ tag: 't', buckets: y, now: T + 10_000_001 + i });
    return {
      count: store.countSync({ tag: 't', bucket: 'x', windowUs: 10_000_000, now: T + 5_000_000 }).count,
      logs: store.size.logs,
    };
  };
  it('drops what the latest time makes irrelevant: memory stays bounded, an old event is forgotten', () => {
    expect(scenario(new MemoryStore())).to.deep.equal({ count: 0, logs: 1 });
  });
  it('sweep: false keeps every structure until a call trims it (exact for times going backwards, as Redis)', () => {
    expect(scenario(new MemoryStore({ sweep: false }))).to.deep.equal({ count: 1, logs: 2 });
  });
});

redisSuite('RedisStore (single Redis)', async () => {
  const handle: RedisHandle = await getRedis();
  return { connect: () => newRedisClient(handle), stop: () => handle.stop() };
});

redisSuite('RedisStore (Redis Cluster, three masters)', async () => {
  const handle: RedisClusterHandle = await startCluster();
  return { connect: () => newClusterClient(handle), stop: () => handle.stop() };
});
