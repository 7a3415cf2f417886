/**
 * Stores for the admission / gate suites: the same tests run on a MemoryStore and on a
 * RedisStore over a real Redis (getRedis), each test on a fresh key prefix.
 */
import type { Redis } from 'ioredis';
import { MemoryStore } from '../../src/store/memory-store.js';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import type { Store } from '../../src/store/types.js';
import { getRedis, newRedisClient, type RedisHandle } from '../helpers/redis.js';

export interface StoreKind {
  readonly name: 'memory' | 'redis';
  /** A fresh, empty store (its own prefix on Redis). */
  make(opts?: { hashTags?: boolean }): Store;
  /** The shared client (redis only), for inspection. */
  readonly client?: Redis;
  readonly handle?: RedisHandle;
}

let seq = 0;
export const uniquePrefix = (label: string): string =>
  `cgt:${label}:${process.pid}:${Date.now().toString(36)}:${seq++}:`;

/** Registers mocha hooks and calls `body` once per store kind, inside a describe per kind. */
export function forEachStore(label: string, body: (kind: () => StoreKind, name: 'memory' | 'redis') => void): void {
  describe(`${label} [memory]`, () => {
    const kind: StoreKind = { name: 'memory', make: () => new MemoryStore() };
    body(() => kind, 'memory');
  });

  describe(`${label} [redis]`, function () {
    this.timeout(20_000);
    let handle: RedisHandle;
    let client: Redis;
    let kind: StoreKind;
    before(async () => {
      handle = await getRedis();
      client = newRedisClient(handle);
      kind = {
        name: 'redis',
        client,
        handle,
        make: (opts = {}) =>
          new RedisStore({ redis: client, prefix: uniquePrefix(label.replace(/\W+/g, '-')), ...opts }),
      };
    });
    after(async () => {
      client?.disconnect();
      await handle?.stop();
    });
    body(() => kind, 'redis');
  });
}

/** Base time for exact cases: a whole second (also a whole 10 s) of the epoch, in µs. */
export const T0 = 1_700_000_000_000_000;
export const S = 1_000_000;
export const MS = 1_000;
