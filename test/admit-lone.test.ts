/**
 * lua/admit-lone-held.lua against lua/admit.lua for one call: a lone call whose buckets have
 * sliding-log limits (or none) and a channel limit takes admit-lone-held.lua (admit-lone.lua
 * keeps the calls without channels); admit.lua decides the same call as a batch of one. The
 * claim: for the same calls, both give the same replies and leave the same keys (logs, holds
 * sets, call records, with the same contents and about the same expiries), with and without hash
 * tags; on Redis TIME the same decisions and the same members. Then, through RedisStore: calls
 * admitted by the lone script are found by a release from another process (with hash tags
 * through their locator), by the holds count, and by the holds keeper once Redis lost them.
 */
import { createHash } from 'node:crypto';
import { expect } from 'chai';
import type { Redis } from 'ioredis';
import {
  admitArgv,
  heldAdmitArgv,
  loneAdmitArgv,
  type AdmitEnv,
  type PendingAdmit,
} from '../src/store/redis/admit-args.js';
import { bucketArgsOf } from '../src/store/redis/bucket-args.js';
import { KnownLogs } from '../src/store/redis/known-logs.js';
import { RedisKeys } from '../src/store/redis/redis-keys.js';
import { RedisStore } from '../src/store/redis/redis-store.js';
import { scripts } from '../src/store/redis/scripts.js';
import { encodeId } from '../src/store/keys.js';
import type { Bucket, Limit, StoreLossEvent } from '../src/store/types.js';
import { newRedisClient, redisRig, startRedisServer, type RedisServer } from './helpers/redis.js';
import { sleep } from './holds/harness.js';

const S = 1_000_000;
const T0 = 1_700_000_000_000_000;
const SL = (limit: number, windowUs: number): Limit => ({ limit, windowUs, algorithm: 'sliding-log' });

/** One call: which levels (bucket lists) it names, its time offset (µs), its id and hold (µs). */
interface Call {
  readonly plan: number;
  readonly at: number;
  readonly id?: string;
  readonly forUs?: number;
  /** Its deadline has passed (skipped by both scripts). */
  readonly late?: boolean;
}

/** Buckets of 1 to 3 levels: rate limits small enough to refuse, channel limits too. */
const LEVELS: readonly (readonly Bucket[])[] = [
  // one level, channels
  [{ name: 'p1', limits: [SL(4, S), SL(6, 10 * S)], channels: 2 }],
  // two levels: channels on the second only
  [
    { name: 'g', limits: [SL(8, S)] },
    { name: 'p2', limits: [SL(3, S)], channels: 2 },
  ],
  // three levels, channels at every level; the account's only limit is its channels
  [
    { name: 'g', limits: [SL(8, S)], channels: 6 },
    { name: 'a', limits: [], channels: 3 },
    { name: 'p3', limits: [SL(5, S), SL(7, 10 * S)], channels: 2 },
  ],
  // three levels without channels (the layout without an id)
  [
    { name: 'g', limits: [SL(8, S)] },
    { name: 'a2', limits: [SL(6, 10 * S)] },
    { name: 'p4', limits: [SL(2, S)] },
  ],
];

/**
 * Calls that reach every outcome: admitted, refused by rate and by channels, repeated while
 * holding, late, no hold. `short`: some holds end during the run (90 ms), so channels free up.
 */
function callsOf(rounds: number, short: boolean): Call[] {
  const calls: Call[] = [];
  let at = 0;
  let n = 0;
  for (let round = 0; round < rounds; round++) {
    for (let plan = 0; plan < LEVELS.length; plan++) {
      const holds = LEVELS[plan]!.some((b) => (b.channels ?? 0) > 0);
      for (let k = 0; k < 3; k++) {
        at += 37_000 + ((round * 7 + k * 13) % 5) * 1_000;
        n++;
        // short holds end during the run (so channels free up again), long ones keep channels full
        const forUs = k === 2 ? 0 : short && n % 3 === 1 ? 90_000 : 2 * S;
        calls.push(holds ? { plan, at, id: `c${n}`, forUs } : { plan, at });
      }
    }
    // an admitted call's id again while it holds: admitted again, counted nowhere
    const again = calls.find((c) => c.id !== undefined && c.forUs === 2 * S && c.plan === 0);
    if (again) calls.push({ ...again, at: at + 1 });
    calls.push({ plan: 2, at: at + 2, id: `late${round}`, forUs: S, late: true });
    at += 250_000;
  }
  return calls;
}

describe('admit-lone-held.lua decides a lone call with channels as admit.lua does', function () {
  this.timeout(30_000);
  const rig = redisRig();

  /** The pending admit of `call` under `prefix` (its buckets' keys), and the script env. */
  function setup(prefix: string, hashTags: boolean) {
    const keys = new RedisKeys(prefix, hashTags);
    const tag = 'acct';
    const lists = LEVELS.map((list) => list.map((b) => bucketArgsOf(tag, keys.base(tag, b.name), b)));
    let seq = 0;
    const env = (late: boolean): AdmitEnv => ({
      virtualTtlMs: 0,
      known: new KnownLogs(),
      member: () => `m${seq++}`,
      // a deadline in the past (Redis TIME is now, far beyond 1 µs) or none
      deadline: () => (late ? '1' : ''),
      recordPrefix: (t) => keys.inboundRecord(t, ''),
      declareRecords: hashTags,
    });
    const item = (c: Call, now: string): PendingAdmit => ({
      buckets: lists[c.plan]!,
      now,
      id: c.id === undefined ? undefined : encodeId(c.id),
      forUs: c.forUs ?? 0,
      signal: undefined,
      resolve: () => {},
      reject: () => {},
    });
    return { env, item };
  }

  const evalScript = (name: 'admit' | 'admit-lone-held', argv: string[]) =>
    rig.raw.call('EVAL', scripts()[name].lua, ...argv) as Promise<number[]>;

  /**
   * Every key under `prefix` with more than 300 ms to live: its name past the prefix, type,
   * contents and PTTL. (Short holds expire in real time during the test: a key about to expire
   * may be gone from one dump and not yet from the other, read a moment later.)
   */
  async function dump(prefix: string, live: boolean) {
    const out: Record<string, unknown> = {};
    const names = (await rig.raw.keys(`${prefix}*`)).sort();
    for (const key of names) {
      const pttl = await rig.raw.pttl(key);
      if (pttl === -2 || (pttl >= 0 && pttl < 300)) continue; // -2: expired since KEYS
      const type = await rig.raw.type(key);
      const value =
        type === 'zset'
          ? live
            ? (await rig.raw.zrange(key, '0', '-1')).sort() // on Redis TIME the scores are each script's own time
            : await rig.raw.zrange(key, '0', '-1', 'WITHSCORES')
          : type === 'string'
            ? ((await rig.raw.get(key)) ?? '').replace(live ? /^\d+/ : /^$/, '')
            : type;
      out[key.slice(prefix.length)] = { type, value, pttl };
    }
    return out;
  }

  /** The PTTLs of two dumps agree within `ms` (each key has one), then the rest is equal. */
  function expectSame(a: Record<string, unknown>, b: Record<string, unknown>, ms: number) {
    expect(Object.keys(a)).to.deep.equal(Object.keys(b));
    const strip = (d: Record<string, unknown>) =>
      Object.fromEntries(Object.entries(d).map(([k, v]) => [k, { ...(v as object), pttl: undefined }]));
    for (const k of Object.keys(a)) {
      const pa = (a[k] as { pttl: number }).pttl;
      const pb = (b[k] as { pttl: number }).pttl;
      expect(pa, `${k} has an expiry`).to.be.greaterThan(0);
      expect(Math.abs(pa - pb), `${k}: PTTL ${pa} against ${pb}`).to.be.at.most(ms);
    }
    expect(strip(a)).to.deep.equal(strip(b));
  }

  it('routing: a call without channels takes admit-lone.lua, one with channels (or a level without limits) admit-lone-held.lua', () => {
    const { env, item } = setup('R:', false);
    LEVELS.forEach((list, plan) => {
      const holds = list.some((b) => (b.channels ?? 0) > 0);
      const c: Call = holds ? { plan, at: 0, id: 'r', forUs: S } : { plan, at: 0 };
      expect(loneAdmitArgv(item(c, ''), '', env(false)) === undefined, `plan ${plan}`).to.equal(holds);
      expect(heldAdmitArgv(item(c, ''), '', env(false)), `plan ${plan}`).to.be.an('array');
    });
  });

  for (const hashTags of [false, true]) {
    it(`virtual time${hashTags ? ', hash tags' : ''}: the same replies after every call and the same keys, contents and expiries`, async () => {
      const calls = callsOf(6, true);
      const lone = setup(`L${hashTags}:`, hashTags);
      const batch = setup(`B${hashTags}:`, hashTags);
      const flags = new Set<string>();
      for (const c of calls) {
        const now = String(T0 + c.at);
        const a = heldAdmitArgv(lone.item(c, now), '', lone.env(c.late === true));
        expect(a, 'the lone layout takes it').to.not.equal(undefined);
        const b = admitArgv([batch.item(c, now)], '', batch.env(c.late === true));
        expect(b).to.be.an('array');
        const ra = await evalScript('admit-lone-held', a!);
        const rb = await evalScript('admit', b as string[]);
        expect(ra, `call ${JSON.stringify(c)}`).to.deep.equal(rb);
        flags.add(`${ra[0] === 0 ? 'admitted' : 'refused'}:${ra[3]}`);
      }
      // every outcome was reached: admitted, refused by rate (0) and by channels (1), again (2), late (4)
      expect([...flags].sort()).to.deep.equal(['admitted:0', 'admitted:2', 'admitted:4', 'refused:0', 'refused:1']);
      expectSame(await dump(`L${hashTags}:`, false), await dump(`B${hashTags}:`, false), 250);
    });

    it(`Redis TIME${hashTags ? ', hash tags' : ''}: the same decisions and the same keys and members`, async () => {
      // within a second and with long holds only: no window rolls and no hold ends between the
      // two scripts' times (a few hundred µs apart), so every decision is the same
      const calls = callsOf(2, false);
      const lone = setup(`LT${hashTags}:`, hashTags);
      const batch = setup(`BT${hashTags}:`, hashTags);
      const flags = new Set<string>();
      let last = 0;
      for (const c of calls) {
        // a little real time between calls (~0.5 s in all)
        if (c.at - last > 100_000) await sleep(20);
        last = c.at;
        const a = heldAdmitArgv(lone.item(c, ''), '', lone.env(c.late === true))!;
        const b = admitArgv([batch.item(c, '')], '', batch.env(c.late === true)) as string[];
        const [ra, rb] = await Promise.all([evalScript('admit-lone-held', a), evalScript('admit', b)]);
        expect([ra[0], ra[3]], `call ${JSON.stringify(c)}`).to.deep.equal([rb[0], rb[3]]);
        // a retry-after is a time left, measured from each script's own now (a few ms apart)
        expect(Math.abs(ra[1]! - rb[1]!), 'retry-after').to.be.at.most(20_000);
        flags.add(`${ra[0] === 0 ? 'admitted' : 'refused'}:${ra[3]}`);
      }
      expect(flags.has('refused:1') && flags.has('admitted:0') && flags.has('admitted:2')).to.equal(true);
      expectSame(await dump(`LT${hashTags}:`, true), await dump(`BT${hashTags}:`, true), 1_000);
    });
  }
});

describe('RedisStore: calls admitted by admit-lone-held.lua are found by release, holds and the holds keeper', function () {
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
  const storeOf = (prefix: string, hashTags: boolean, syncMs = 0) => {
    const redis = newRedisClient(server);
    clients.push(redis);
    const s = new RedisStore({ redis, prefix, hashTags, holds: { syncMs, graceMs: 300 } });
    stores.push(s);
    return s;
  };
  const three = (peer: string): readonly Bucket[] =>
    Object.freeze([
      { name: 'g', limits: [SL(1000, S)], channels: 100 },
      { name: 'a', limits: [SL(500, S)], channels: 50 },
      { name: peer, limits: [SL(40, S), SL(250, 10 * S)], channels: 2 },
    ]);

  for (const hashTags of [false, true]) {
    it(`admitted alone, released by another process${hashTags ? ' (hash tags: through its locator)' : ''}; a third call finds the channel free again`, async () => {
      const prefix = `rel${hashTags}:`;
      const a = storeOf(prefix, hashTags);
      const b = storeOf(prefix, hashTags);
      const buckets = three('p');
      const tag = 'acct:x';
      const admit = (id: string) => a.admit({ tag, buckets, hold: { id, forUs: 60 * S } });
      expect((await admit('x1')).admitted).to.equal(true);
      expect((await admit('x2')).admitted).to.equal(true);
      expect(await admit('x3')).to.include({ admitted: false, reason: 'channels', limitedBy: 2 });
      // the lone script decided them: admit.lua was never loaded on this Redis
      const sha = (lua: string) => raw().script('EXISTS', lua) as Promise<number[]>;
      const shaOf = (lua: string) => createHash('sha1').update(lua).digest('hex');
      expect(await sha(shaOf(scripts()['admit-lone-held'].lua))).to.deep.equal([1]);
      expect(await sha(shaOf(scripts().admit.lua))).to.deep.equal([0]);
      expect((await a.holds({ tag, name: 'p' })).holds).to.equal(2);
      expect((await b.release({ id: 'x1' })).released).to.equal(1);
      expect((await a.holds({ tag, name: 'p' })).holds).to.equal(1);
      expect((await a.holds({ tag, name: 'a' })).holds).to.equal(1);
      expect((await admit('x3')).admitted).to.equal(true);
      expect((await b.release({ id: 'x2' })).released).to.equal(1);
      expect((await b.release({ id: 'x3' })).released).to.equal(1);
      for (const name of ['g', 'a', 'p']) expect((await a.holds({ tag, name })).holds, name).to.equal(0);
    });
  }

  it('keys lost (FLUSHALL): the holds keeper writes the lone-admitted holds back', async () => {
    const a = storeOf('keep:', false, 200);
    const buckets = three('k');
    for (const id of ['k1', 'k2'])
      expect((await a.admit({ tag: 't', buckets, hold: { id, forUs: 60 * S } })).admitted).to.equal(true);
    await sleep(500); // a sync learns the marker
    const losses: StoreLossEvent[] = [];
    a.events.on('storeLoss', (e) => losses.push(e));
    await raw().flushall();
    expect((await a.holds({ tag: 't', name: 'k' })).holds).to.equal(0);
    for (let i = 0; i < 40 && losses.length === 0; i++) await sleep(50);
    expect(losses.length).to.be.greaterThan(0);
    for (const name of ['g', 'a', 'k']) expect((await a.holds({ tag: 't', name })).holds, name).to.equal(2);
    expect((await a.release({ id: 'k1' })).released).to.equal(1);
    expect((await a.holds({ tag: 't', name: 'k' })).holds).to.equal(1);
  });

  function raw(): Redis {
    const c = newRedisClient(server);
    clients.push(c);
    return c;
  }
});
