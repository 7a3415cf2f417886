/**
 * Script calls written as prepared bytes (src/store/redis/script-call.ts): the bytes must be
 * exactly those of ioredis' own EVALSHA for the same arguments, and a store on a single Redis
 * must write its decisions that way, load a script Redis lost, and leave a Cluster's or a
 * key-prefixed client's calls to ioredis.
 */
import { expect } from 'chai';
import { Command, Redis } from 'ioredis';
import { prng } from '../scripts/make-fixtures.js';
import { RedisStore } from '../src/store/redis/redis-store.js';
import { scriptBytes } from '../src/store/redis/script-call.js';
import { scripts } from '../src/store/redis/scripts.js';
import type { Bucket } from '../src/store/types.js';
import { newRedisClient, rawCommand, startRedisServer, type RedisServer } from './helpers/redis.js';

const S = 1_000_000;
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const SHA = scripts().admit.sha;

/** What ioredis writes for EVALSHA sha ...argv (or `name head ...argv`). */
function ioredisBytes(argv: readonly unknown[], name = 'evalsha', head = SHA): Buffer {
  const w = new Command(name, [head, ...(argv as string[])]).toWritable({});
  return typeof w === 'string' ? Buffer.from(w) : w;
}

describe('script calls as prepared bytes', () => {
  it('writes the bytes ioredis writes, for keys, µs times, empty strings, numbers and any Unicode', () => {
    const rand = prng(11);
    const pieces = ['', 'a', 'peer:é', '{in}:x', '☎', '𝄞', 'ab\r\ncd', '\u0000', '$3', '*2'];
    const one = (): string | number => {
      const k = Math.floor(rand() * 6);
      if (k === 0) return Math.floor(rand() * 2 ** (1 + Math.floor(rand() * 52)));
      if (k === 1) return [0, -1, 1.5, 2 ** 60, 2 ** 53 + 2, 1e21][Math.floor(rand() * 6)]!;
      let s = '';
      const n = Math.floor(rand() * 6);
      for (let i = 0; i < n; i++) s += pieces[Math.floor(rand() * pieces.length)];
      return s;
    };
    for (let c = 0; c < 3_000; c++) {
      const argv = Array.from({ length: Math.floor(rand() * 40) }, one);
      expect(scriptBytes('evalsha', SHA, argv).equals(ioredisBytes(argv)), JSON.stringify(argv)).to.equal(true);
    }
  });

  it('writes a command larger than its scratch buffer, and the next small one, each whole', () => {
    const big = ['1', 'k', 'x'.repeat(40_000), '€'.repeat(20_000)];
    expect(scriptBytes('evalsha', SHA, big).equals(ioredisBytes(big))).to.equal(true);
    const small = ['1', 'k', '5'];
    expect(scriptBytes('evalsha', SHA, small).equals(ioredisBytes(small))).to.equal(true);
  });

  it("writes EVAL with a script's source, numbers of any size and nothing (null, undefined) as ioredis does", () => {
    const lua = scripts()['admit-lone'].lua;
    const argv = ['2', 'k1', 'ключ', 7, 1e21, 2 ** 60];
    expect(scriptBytes('eval', lua, argv).equals(ioredisBytes(argv, 'eval', lua))).to.equal(true);
    const huge = Array.from({ length: 200 }, () => 1e300);
    expect(scriptBytes('evalsha', SHA, huge).equals(ioredisBytes(huge))).to.equal(true);
    const none = ['1', null, undefined, 'x'] as unknown as string[];
    expect(scriptBytes('evalsha', SHA, none).equals(ioredisBytes(none))).to.equal(true);
  });

  it('hands out a copy: a command written later does not change one written before', () => {
    const first = scriptBytes('evalsha', SHA, ['1', 'first']);
    const copy = Buffer.from(first);
    scriptBytes('evalsha', SHA, ['1', 'second, longer than the first']);
    expect(first.equals(copy)).to.equal(true);
  });
});

describe('RedisStore: script calls as prepared bytes, on a real Redis', function () {
  this.timeout(30_000);
  let server: RedisServer;
  const clients: Redis[] = [];
  const stores: RedisStore[] = [];
  before(async () => {
    server = await startRedisServer();
  });
  afterEach(async () => {
    for (const s of stores.splice(0)) await s.close();
    for (const c of clients.splice(0)) c.disconnect();
  });
  after(async () => {
    await server?.stop();
  });
  const peer = (name: string): readonly Bucket[] => [
    { name, limits: [{ limit: 2, windowUs: S, algorithm: 'sliding-log' }] },
  ];
  /** calls, failed calls of each command since the last reset (INFO commandstats). */
  const stats = async (): Promise<Record<string, [number, number]>> => {
    const info = (await rawCommand(server.port, ['INFO', 'commandstats'])) as string;
    const out: Record<string, [number, number]> = {};
    for (const m of info.matchAll(/cmdstat_(\w+):calls=(\d+),.*failed_calls=(\d+)/g))
      out[m[1]!] = [Number(m[2]), Number(m[3])];
    return out;
  };

  /** How many of callgate's scripts Redis holds. */
  const held = async (): Promise<number> => {
    const shas = Object.values(scripts()).map((x) => x.sha);
    const exists = (await rawCommand(server.port, ['SCRIPT', 'EXISTS', ...shas])) as number[];
    return exists.reduce((a, b) => a + b, 0);
  };

  it("a script's first call on a connection sends its source (EVAL), the next ones EVALSHA; after a SCRIPT FLUSH it is sent again", async () => {
    await rawCommand(server.port, ['SCRIPT', 'FLUSH']);
    await rawCommand(server.port, ['CONFIG', 'RESETSTAT']);
    const redis = newRedisClient(server);
    clients.push(redis);
    const store = new RedisStore({ redis, prefix: 'sc:' });
    stores.push(store);
    const at = 1_800_000_000 * S;
    const admitted = async (name: string, n: number): Promise<boolean[]> => {
      const out: boolean[] = [];
      for (let i = 0; i < n; i++)
        out.push((await store.admit({ tag: 'in', buckets: peer(name), now: at + i })).admitted);
      return out;
    };
    expect(await admitted('p', 4)).to.deep.equal([true, true, false, false]);
    const first = await stats();
    // each script run (admit-lone.lua, and reassert.lua as the store starts): its source once,
    // then prepared EVALSHAs (the three later decisions), none failed
    expect(first.eval, 'eval calls, failed').to.deep.equal([await held(), 0]);
    expect(first.evalsha, 'evalsha calls, failed').to.deep.equal([3, 0]);
    expect(await redis.zcard('sc:p:log')).to.equal(2);
    // the script flushed under an open connection: NOSCRIPT, and the call is decided all the same
    await rawCommand(server.port, ['SCRIPT', 'FLUSH']);
    await rawCommand(server.port, ['CONFIG', 'RESETSTAT']);
    expect(await admitted('p2', 3)).to.deep.equal([true, true, false]);
    const t = await stats();
    expect(t.eval?.[0], 'eval calls').to.equal(1);
    expect(t.evalsha![1], 'evalsha failed (NOSCRIPT)').to.be.at.least(1);
    expect(t.evalsha![0] - t.evalsha![1], 'evalsha that ran').to.equal(2);
    expect(await redis.zcard('sc:p2:log')).to.equal(2);
  });

  it('a call re-sent on a new connection to a Redis that restarted empty is sent with its source, no NOSCRIPT', async () => {
    const redis = new Redis(server.url, { maxRetriesPerRequest: null, retryStrategy: () => 50 });
    clients.push(redis);
    const store = new RedisStore({ redis, prefix: 'rs:' });
    stores.push(store);
    const at = 1_800_000_000 * S;
    expect((await store.admit({ tag: 'in', buckets: peer('r'), now: at })).admitted).to.equal(true);
    server.pause(); // the next call's EVALSHA is written and never answered
    const pending = store.admit({ tag: 'in', buckets: peer('r2'), now: at });
    await sleep(100);
    await server.kill();
    await server.restart(); // empty: no keys, no scripts
    expect((await pending).admitted).to.equal(true);
    const s = await stats();
    expect(s.evalsha?.[1] ?? 0, 'evalsha failed (NOSCRIPT)').to.equal(0);
    expect(s.eval?.[0], 'eval calls').to.be.at.least(1);
    expect(await redis.zcard('rs:r2:log')).to.equal(1);
  });

  it("an auto-pipelining client keeps ioredis' path: calls of one tick run in the order issued", async () => {
    const redis = new Redis(server.url, { enableAutoPipelining: true, maxRetriesPerRequest: 1 });
    clients.push(redis);
    const watcher = new Redis(server.url);
    clients.push(watcher);
    const monitor = await watcher.monitor();
    const seen: string[] = [];
    monitor.on('monitor', (_t: string, args: string[]) => {
      if (/^eval/i.test(args[0] ?? '')) seen.push(args.find((a) => a.startsWith('ap:')) ?? '?');
    });
    try {
      const store = new RedisStore({ redis, prefix: 'ap:', hashTags: true });
      stores.push(store);
      await redis.ping();
      const at = 1_800_000_000 * S;
      // two tags: two lanes, two script calls written in this order in one tick
      const a = store.admit({ tag: 'a', buckets: peer('x'), now: at });
      const b = store.admit({ tag: 'b', buckets: peer('x'), now: at });
      await Promise.all([a, b]);
      await sleep(100);
      expect(seen.filter((k) => k.includes('x:log'))).to.deep.equal(['ap:{a}:x:log', 'ap:{b}:x:log']);
    } finally {
      monitor.disconnect();
    }
  });

  it('leaves a client with a key prefix of its own to ioredis, which prefixes the keys', async () => {
    const redis = new Redis(server.url, { keyPrefix: 'kp:', maxRetriesPerRequest: 1 });
    clients.push(redis);
    const store = new RedisStore({ redis, prefix: 'sc2:' });
    stores.push(store);
    expect((await store.admit({ tag: 'in', buckets: peer('q'), now: 1_800_000_000 * S })).admitted).to.equal(true);
    expect(await rawCommand(server.port, ['ZCARD', 'kp:sc2:q:log'])).to.equal(1);
    expect(await rawCommand(server.port, ['ZCARD', 'sc2:q:log'])).to.equal(0);
  });
});
