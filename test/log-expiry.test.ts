/**
 * A sliding log's life on Redis TIME (includes/common.lua, logTtlMs): a lone admit trims its logs
 * at a rounded bound and sends PEXPIRE only when the trim removed something, the log may be new,
 * or the process does not yet know the expiry was set for the bucket's current limits. These
 * tests hold it to what that must keep: every event lives at least its retention past its time
 * (so no count is ever lost), the log stays bounded, and the PEXPIREs saved are real.
 */
import { expect } from 'chai';
import type { Redis } from 'ioredis';
import { RedisStore } from '../src/store/RedisStore.js';
import type { Bucket } from '../src/store/types.js';
import { newRedisClient, startRedisServer, type RedisServer } from './helpers/redis.js';

const MS = 1_000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

const logBucket = (name: string, limit: number, windowMs: number): readonly Bucket[] =>
  Object.freeze([Object.freeze({ name, limits: Object.freeze([Object.freeze({ limit, windowUs: windowMs * MS, algorithm: 'sliding-log' as const })]) })]);

/** Milliseconds a log of retention r (µs) is kept after a write that sets its expiry. */
const ttlMsOf = (r: number) => Math.ceil((2 * r + Math.floor(r / 4) + 1) / 1000) + 1;

async function calls(raw: Redis, cmd: string): Promise<number> {
  const m = new RegExp(`^cmdstat_${cmd}:calls=(\\d+)`, 'm').exec(await raw.info('commandstats'));
  return m ? Number(m[1]) : 0;
}

describe('RedisStore: a sliding log on Redis TIME keeps every event for its retention, with few PEXPIREs', function () {
  this.timeout(30_000);
  let server: RedisServer;
  let raw: Redis;
  let client: Redis;
  before(async () => {
    server = await startRedisServer();
    raw = newRedisClient(server);
    client = newRedisClient(server);
  });
  after(async () => {
    raw?.disconnect();
    client?.disconnect();
    await server?.stop();
  });

  it('lone admits every 20 ms for 1.6 s: after each, the log outlives the new event by its window; PEXPIRE on a fraction of them; the log holds no more than r + r/4 of events', async () => {
    const store = new RedisStore({ redis: client, prefix: 'exp1:' });
    const buckets = logBucket('peer:a', 1_000, 400); // r = 400 ms
    const key = 'exp1:peer:a:log';
    await store.admit({ tag: 'in', buckets }); // the first call: sets the expiry (new log, and this process asks)
    expect(await raw.pttl(key)).to.be.within(ttlMsOf(400 * MS) - 50, ttlMsOf(400 * MS));
    await raw.config('RESETSTAT');
    const admitted: number[] = [];
    for (let i = 0; i < 80; i++) {
      await sleep(20);
      const r = await store.admit({ tag: 'in', buckets });
      expect(r.admitted, `call ${i}`).to.equal(true);
      admitted.push(r.now);
      // the event just written must be there for its whole window (400 ms) at least
      const pttl = await raw.pttl(key);
      expect(pttl, `pttl after call ${i}`).to.be.at.least(400);
      // trimmed below t - r rounded down to r/4 + 1 µs: nothing older than r + r/4 (+ 1 ms of rounding) is kept
      const held = await raw.zcard(key);
      const recent = admitted.filter((t) => t > r.now - 500 * MS - MS).length + 1; // + the first call's event
      expect(held, `events held after call ${i}`).to.be.at.most(recent);
    }
    const admits = await calls(raw, 'evalsha');
    const pexpires = await calls(raw, 'pexpire');
    expect(admits).to.equal(80);
    // one refresh per r/4 (100 ms) at most, plus one: ~17 of 80
    expect(pexpires, 'PEXPIREs of 80 lone admits').to.be.within(1, 25);
    await store.close();
  });

  it('an idle log expires, and the next call (nothing in its window) sets the expiry again', async () => {
    const store = new RedisStore({ redis: client, prefix: 'exp2:' });
    const buckets = logBucket('peer:b', 10, 100); // r = 100 ms: kept ~227 ms
    const key = 'exp2:peer:b:log';
    await store.admit({ tag: 'in', buckets });
    await store.admit({ tag: 'in', buckets });
    await sleep(ttlMsOf(100 * MS) + 50);
    expect(await raw.exists(key), 'expired').to.equal(0);
    const r = await store.admit({ tag: 'in', buckets }); // this process knows the expiry: only "new log" sets it
    expect(r.admitted).to.equal(true);
    expect(await raw.pttl(key)).to.be.within(ttlMsOf(100 * MS) - 50, ttlMsOf(100 * MS));
    await store.close();
  });

  it('a reload that widens the window: the first lone admit with the new limits sets the expiry for them, in each process', async () => {
    const first = new RedisStore({ redis: client, prefix: 'exp3:' });
    const second = new RedisStore({ redis: client, prefix: 'exp3:' });
    const key = 'exp3:peer:c:log';
    const narrow = logBucket('peer:c', 100, 200);
    for (const store of [first, second]) await store.admit({ tag: 'in', buckets: narrow });
    await sleep(10);
    for (const store of [first, second]) await store.admit({ tag: 'in', buckets: narrow });
    expect(await raw.pttl(key)).to.be.at.most(ttlMsOf(200 * MS));
    // reloaded: the same bucket with a 20 s window (new objects, as a reload builds them); the
    // log holds events within 1 ms and far from r + r/4, so its trim removes nothing
    const wide = logBucket('peer:c', 100, 20_000);
    expect((await first.admit({ tag: 'in', buckets: wide })).admitted).to.equal(true);
    expect(await raw.pttl(key), 'after the first process').to.be.above(ttlMsOf(20_000 * MS) - 1_000);
    // the other process: the log was set for the new limits already, but this one does not know
    await raw.pexpire(key, 5_000);
    expect((await second.admit({ tag: 'in', buckets: wide })).admitted).to.equal(true);
    expect(await raw.pttl(key), 'after the second process').to.be.above(ttlMsOf(20_000 * MS) - 1_000);
    // and then both know: a further lone admit leaves the expiry as it is (nothing removed, log not new)
    await raw.pexpire(key, 30_000);
    for (const store of [first, second]) expect((await store.admit({ tag: 'in', buckets: wide })).admitted).to.equal(true);
    expect(await raw.pttl(key), 'no PEXPIRE once known').to.be.within(29_000, 30_000);
    await first.close();
    await second.close();
  });
});
