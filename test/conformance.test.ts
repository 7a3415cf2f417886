/**
 * The Store conformance suite (test/conformance/) run against every store: MemoryStore,
 * RedisStore on a single Redis, RedisStore on a three-master Redis Cluster.
 */
import { randomBytes } from 'node:crypto';
import type { Cluster, Redis } from 'ioredis';
import { MemoryStore } from '../src/store/MemoryStore.js';
import { RedisStore } from '../src/store/RedisStore.js';
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

redisSuite('RedisStore (single Redis)', async () => {
  const handle: RedisHandle = await getRedis();
  return { connect: () => newRedisClient(handle), stop: () => handle.stop() };
});

redisSuite('RedisStore (Redis Cluster, three masters)', async () => {
  const handle: RedisClusterHandle = await startCluster();
  return { connect: () => newClusterClient(handle), stop: () => handle.stop() };
});
