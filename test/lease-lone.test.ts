/**
 * A leased global level in the two scripts that decide it: admit-lone.lua (a lone call of plain
 * sliding logs, the common case under light load) and admit.lua (any batch). For the same calls
 * against the same share (its calls c and lease end e changed between calls: room, a share
 * below the limit, none, a lease run out), both give the same replies, leave the same logs, and
 * count the same admitted (ad) and refused-for-lack-of-share (rc) calls on the share hash.
 */
import { expect } from 'chai';
import type { Redis } from 'ioredis';
import { admitArgv, loneAdmitArgv, type AdmitEnv, type PendingAdmit } from '../src/store/redis/admit-args.js';
import { bucketArgsOf } from '../src/store/redis/bucket-args.js';
import { KnownLogs } from '../src/store/redis/known-logs.js';
import { RedisKeys } from '../src/store/redis/redis-keys.js';
import { scripts } from '../src/store/redis/scripts.js';
import type { Bucket, Limit } from '../src/store/types.js';
import { newRedisClient, startRedisServer, type RedisServer } from './helpers/redis.js';

const S = 1_000_000;
const T0 = 1_700_000_000_000_000;
const SL = (limit: number, windowUs: number): Limit => ({ limit, windowUs, algorithm: 'sliding-log' });
const BUCKETS: Bucket[] = [
  { name: 'global', limits: [SL(6, S)] },
  { name: 'peer:p', limits: [SL(4, S), SL(9, 10 * S)] },
];

describe('a leased level: admit-lone.lua decides a lone call as admit.lua does', function () {
  this.timeout(30_000);
  let server: RedisServer;
  let raw: Redis;
  before(async () => {
    server = await startRedisServer();
    raw = newRedisClient(server);
  });
  after(async () => {
    raw?.disconnect();
    await server?.stop();
  });

  function setup(prefix: string) {
    const keys = new RedisKeys(prefix, true);
    const tag = 'in:3';
    const list = BUCKETS.map((b, i) => bucketArgsOf(tag, keys.base(tag, b.name), b, i === 0));
    let seq = 0;
    const env: AdmitEnv = {
      virtualTtlMs: 60_000,
      known: new KnownLogs(),
      member: () => `m${seq++}`,
      deadline: () => '',
      recordPrefix: (t) => keys.inboundRecord(t, ''),
    };
    const item = (now: string): PendingAdmit => ({
      buckets: list,
      now,
      id: undefined,
      forUs: 0,
      signal: undefined,
      resolve: () => {},
      reject: () => {},
    });
    return { env, item, share: list[0]!.share! };
  }

  const run = (name: 'admit' | 'admit-lone', argv: string[]) =>
    raw.call('EVAL', scripts()[name].lua, ...argv) as Promise<number[]>;

  it('the same replies, logs and share counts, through every state of the share', async () => {
    const lone = setup('LL:');
    const batch = setup('LB:');
    const probe = setup('LX:');
    expect(loneAdmitArgv(probe.item(String(T0)), '', probe.env), 'the lone layout takes it').to.be.an('array');
    // [calls from, share calls c, lease end e (µs after T0)]
    const phases: [number, number, number][] = [
      [0, 6, 10 * S], // the whole limit: the peer's 4/s refuses first
      [8, 2, 10 * S], // a share below the limit: refused for lack of share
      [16, 0, 10 * S], // no share
      [22, 6, 3 * S], // the lease runs out at 3 s
    ];
    const outcomes = new Set<string>();
    for (let n = 0; n < 32; n++) {
      const phase = phases.filter((p) => p[0] <= n).at(-1)!;
      for (const s of [lone.share, batch.share]) await raw.hset(s, 'c', String(phase[1]), 'e', String(T0 + phase[2]));
      const now = String(T0 + n * 120_000);
      const a = loneAdmitArgv(lone.item(now), '', lone.env)!;
      const b = admitArgv([batch.item(now)], '', batch.env) as string[];
      const [ra, rb] = [await run('admit-lone', a), await run('admit', b)];
      expect(ra, `call ${n}`).to.deep.equal(rb);
      outcomes.add(ra[0] === 0 ? 'admitted' : `refused by ${ra[0]}`);
    }
    expect([...outcomes].sort()).to.deep.equal(['admitted', 'refused by 1', 'refused by 2']);
    const counts = async (s: string) => raw.hmget(s, 'ad', 'rc');
    const [ca, cb] = [await counts(lone.share), await counts(batch.share)];
    expect(ca).to.deep.equal(cb);
    expect(Number(ca[0])).to.be.greaterThan(0);
    expect(Number(ca[1])).to.be.greaterThan(0);
    for (const name of ['global:log', 'peer:p:log'])
      expect(await raw.zrange(`LL:{in:3}:${name}`, '0', '-1', 'WITHSCORES')).to.deep.equal(
        await raw.zrange(`LB:{in:3}:${name}`, '0', '-1', 'WITHSCORES'),
      );
  });
});
