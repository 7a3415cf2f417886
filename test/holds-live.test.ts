/**
 * A holds set on Redis TIME (includes/channels.lua, liveHolds and writeHolds), through each
 * script that admits with channels: admit-lone-held.lua (a lone call), admit.lua deciding one
 * call, and admit.lua deciding a batch. The claims: a set is counted by its size while that is
 * below the limit, so a lapsed hold (a call never released, its hold over) stays in it until the
 * set fills up; at the limit the count is exact and the lapsed holds are dropped, 128 a call at
 * most, so a lapsed hold never refuses a call and no call drops thousands at once; a new set gets an expiry, and a set's expiry is only ever
 * lengthened, never shortened by a shorter hold.
 */
import { expect } from 'chai';
import { admitArgv, heldAdmitArgv, type AdmitEnv, type PendingAdmit } from '../src/store/redis/admit-args.js';
import { bucketArgsOf } from '../src/store/redis/bucket-args.js';
import { KnownLogs } from '../src/store/redis/known-logs.js';
import { RedisKeys } from '../src/store/redis/redis-keys.js';
import { RedisStore } from '../src/store/redis/redis-store.js';
import { scripts } from '../src/store/redis/scripts.js';
import { encodeId } from '../src/store/keys.js';
import type { Bucket } from '../src/store/types.js';
import { newRedisClient, redisRig } from './helpers/redis.js';
import { sleep } from './holds/harness.js';

const S = 1_000_000;
const MS = 1_000;

type Path = 'lone' | 'single' | 'batch';
const PATHS: readonly Path[] = ['lone', 'single', 'batch'];

describe('a holds set on Redis TIME: counted by its size below its limit, exact at it', function () {
  this.timeout(30_000);
  const rig = redisRig();

  /** A one-level peer bucket with a rate limit far off and `channels`, under its own prefix. */
  function setup(prefix: string, channels: number) {
    const keys = new RedisKeys(prefix, false);
    const bucket: Bucket = { name: 'p', limits: [{ limit: 1000, windowUs: S, algorithm: 'sliding-log' }], channels };
    const args = [bucketArgsOf('acct', keys.base('acct', 'p'), bucket)];
    let seq = 0;
    const env: AdmitEnv = {
      virtualTtlMs: 0,
      known: new KnownLogs(),
      member: () => `m${seq++}`,
      deadline: () => '',
      recordPrefix: (t) => keys.inboundRecord(t, ''),
      declareRecords: false,
    };
    const item = (id: string, forUs: number, now = ''): PendingAdmit => ({
      buckets: args,
      now,
      id: encodeId(id),
      forUs,
      signal: undefined,
      resolve: () => {},
      reject: () => {},
    });
    return { env, item, logKey: args[0]!.keys[0]!, holdsKey: args[0]!.keys[args[0]!.keys.length - 1]! };
  }

  const evalScript = (name: 'admit' | 'admit-lone-held', argv: readonly string[]) =>
    rig.raw.call('EVAL', scripts()[name].lua, ...argv) as Promise<number[]>;

  /** Decide calls [id, hold µs] on `path` (a batch: all in one script call): 'A' or why refused. */
  async function decide(path: Path, s: ReturnType<typeof setup>, calls: [string, number][]): Promise<string[]> {
    const outcome = (r: number[], i: number) => (r[4 * i] === 0 ? 'A' : r[4 * i + 3] === 1 ? 'channels' : 'rate');
    if (path === 'batch') {
      const r = await evalScript(
        'admit',
        admitArgv(
          calls.map(([id, h]) => s.item(id, h)),
          '',
          s.env,
        ) as string[],
      );
      return calls.map((_, i) => outcome(r, i));
    }
    const out: string[] = [];
    for (const [id, h] of calls) {
      const argv =
        path === 'lone'
          ? heldAdmitArgv(s.item(id, h), '', s.env)!
          : (admitArgv([s.item(id, h)], '', s.env) as string[]);
      out.push(outcome(await evalScript(path === 'lone' ? 'admit-lone-held' : 'admit', argv), 0));
    }
    return out;
  }

  const members = async (key: string) => (await rig.raw.zrange(key, '0', '-1')).sort();

  for (const path of PATHS) {
    it(`${path}: a lapsed hold stays below the limit, is dropped at it, and never refuses a call`, async () => {
      const s = setup(`lapse-${path}:`, 3);
      // 'a' holds 150 ms, 'b' 10 s: the set lives on with 'a' lapsed in it
      expect(
        await decide(path, s, [
          ['a', 150 * MS],
          ['b', 10 * S],
        ]),
      ).to.deep.equal(['A', 'A']);
      await sleep(200);
      const t = (await rig.raw.time()).map(Number);
      const nowUs = t[0]! * S + t[1]!;
      expect(await rig.raw.zcount(s.holdsKey, `(${nowUs}`, '+inf'), 'calls in progress').to.equal(1);
      // below the limit (2 entries of 3) 'c' is admitted on the set's size, 'a' left in it
      expect(await decide(path, s, [['c', 10 * S]])).to.deep.equal(['A']);
      expect(await members(s.holdsKey)).to.deep.equal(['a', 'b', 'c']);
      // at the limit (3 entries) the lapsed 'a' is dropped: 'd' is admitted, 'e' refused (b, c, d)
      expect(
        await decide(path, s, [
          ['d', 10 * S],
          ['e', 10 * S],
        ]),
      ).to.deep.equal(['A', 'channels']);
      expect(await members(s.holdsKey)).to.deep.equal(['b', 'c', 'd']);
    });

    it(`${path}: at the limit, lapsed holds go 128 a call, the count exact meanwhile`, async () => {
      // 300 lapsed holds (calls never released) in a set whose limit is 2: dropping them all at
      // once held Redis for every decision queued behind; a call drops 128, the lowest scores
      const s = setup(`steps-${path}:`, 2);
      const t = (await rig.raw.time()).map(Number);
      const past = t[0]! * S + t[1]! - S;
      const lapsed = Array.from({ length: 300 }, (_, i) => [String(past - i), `old${i}`]).flat();
      await rig.raw.zadd(s.holdsKey, ...lapsed);
      await rig.raw.pexpire(s.holdsKey, 60_000);
      expect(await decide(path, s, [['a', 10 * S]])).to.deep.equal(['A']);
      expect(await rig.raw.zcard(s.holdsKey), '300 - 128 lapsed, and a').to.equal(173);
      // no hold was in progress: the set's life is now a's, lapsed holds and all
      expect(await rig.raw.pttl(s.holdsKey)).to.be.within(9_000, 10_001);
      // the oldest went first: the 128 lowest scores, old299 .. old172
      expect(await rig.raw.zscore(s.holdsKey, 'old172')).to.equal(null);
      expect(await rig.raw.zscore(s.holdsKey, 'old171')).to.equal(String(past - 171));
      // 44 lapsed left after the next; 'c' sees a and b only: refused, and the last 44 go
      expect(await decide(path, s, [['b', 10 * S]])).to.deep.equal(['A']);
      expect(await rig.raw.zcard(s.holdsKey)).to.equal(46);
      expect(await decide(path, s, [['c', 10 * S]])).to.deep.equal(['channels']);
      expect(await members(s.holdsKey)).to.deep.equal(['a', 'b']);
    });

    it(`${path}: a new set gets an expiry; a shorter hold never shortens it`, async () => {
      const s = setup(`expiry-${path}:`, 10);
      expect(await decide(path, s, [['x', 10 * S]])).to.deep.equal(['A']);
      expect(await rig.raw.pttl(s.holdsKey), 'the new set expires with its hold').to.be.within(9_000, 10_001);
      expect(await decide(path, s, [['y', 1 * S]])).to.deep.equal(['A']);
      expect(await rig.raw.pttl(s.holdsKey), 'still until the longer hold ends').to.be.within(9_000, 10_001);
      // every hold lapsed, the set left by a longer hold released: dropped at the limit, the set
      // is made anew and must get an expiry (its count after the trim, 0, says it is new: a
      // count taken before the trim would send GT, which leaves the new set without one)
      const t = setup(`anew-${path}:`, 2);
      expect(
        await decide(path, t, [
          ['a', 150 * MS],
          ['b', 10 * S],
        ]),
      ).to.deep.equal(['A', 'A']);
      await rig.raw.zrem(t.holdsKey, 'b'); // b released (release.lua's ZREM), the set lives on
      expect(await decide(path, t, [['c', 150 * MS]])).to.deep.equal(['A']);
      await sleep(200);
      expect(await members(t.holdsKey), 'lapsed, in a set that lives on').to.deep.equal(['a', 'c']);
      expect(await decide(path, t, [['d', 2 * S]])).to.deep.equal(['A']);
      expect(await members(t.holdsKey)).to.deep.equal(['d']);
      expect(await rig.raw.pttl(t.holdsKey)).to.be.within(1_000, 2_001);
    });

    it(`${path}: a set without an expiry (made by another tool) gets one when it fills up`, async () => {
      const s = setup(`noexpiry-${path}:`, 2);
      const t = (await rig.raw.time()).map(Number);
      await rig.raw.zadd(s.holdsKey, String(t[0]! * S + t[1]! - S), 'x'); // lapsed, no expiry
      expect(await decide(path, s, [['a', 10 * S]])).to.deep.equal(['A']);
      expect(await rig.raw.pttl(s.holdsKey), 'below its limit: GT leaves it as it is').to.equal(-1);
      expect(await decide(path, s, [['b', 10 * S]])).to.deep.equal(['A']);
      expect(await members(s.holdsKey)).to.deep.equal(['a', 'b']);
      expect(await rig.raw.pttl(s.holdsKey), 'full: its lapsed hold dropped, an expiry given').to.be.within(
        9_000,
        10_001,
      );
    });
  }

  it('record on Redis TIME drops lapsed holds 128 at a time too', async () => {
    // an emergency call recorded unconditionally (lua/record.lua) into a set of 300 lapsed holds
    const redis = newRedisClient(rig.server);
    const store = new RedisStore({ redis, prefix: 'rec128:', holds: { syncMs: 0 } });
    try {
      const s = setup('rec128:', 2);
      const t = (await rig.raw.time()).map(Number);
      const past = t[0]! * S + t[1]! - S;
      await rig.raw.zadd(s.holdsKey, ...Array.from({ length: 300 }, (_, i) => [String(past - i), `old${i}`]).flat());
      await rig.raw.pexpire(s.holdsKey, 60_000);
      const bucket: Bucket = { name: 'p', limits: [], channels: 2 };
      await store.record({ tag: 'acct', buckets: [bucket], hold: { id: 'sos', forUs: 10 * S } });
      expect(await rig.raw.zcard(s.holdsKey), '300 - 128 lapsed, and sos').to.equal(173);
      expect(await rig.raw.zscore(s.holdsKey, 'old172')).to.equal(null);
      expect(await rig.raw.zscore(s.holdsKey, 'sos')).to.not.equal(null);
      expect(await rig.raw.pttl(s.holdsKey)).to.be.within(9_000, 10_001);
    } finally {
      await store.close();
      redis.disconnect(); // the store closes what it opened, not a client it was given
    }
  });

  it("reset with a caller-given time takes the bucket out of every record, a lapsed hold's too", async () => {
    // with a given now a record outlives its hold (a virtual-time floor): left naming the reset
    // bucket, a refresh at an earlier time would bring the hold back (lua/reset.lua)
    const s = setup('reset-virtual:', 3);
    const T0 = 1_700_000_000_000_000;
    const argv = admitArgv([s.item('v1', 10 * S, String(T0))], '', { ...s.env, virtualTtlMs: 3_600_000 });
    expect((await evalScript('admit', argv as string[]))[0]).to.equal(0);
    const record = 'reset-virtual:call:in:v1';
    expect(await rig.raw.get(record)).to.match(/^\d+ \S+$/);
    await rig.raw.call('EVAL', scripts().reset.lua, '2', s.logKey, s.holdsKey, String(T0 + 20 * S), 'reset-virtual:');
    expect(await rig.raw.get(record), 'the record names no hold any more').to.equal(String(T0 + 10 * S));
    expect(await rig.raw.exists(s.holdsKey)).to.equal(0);
  });

  it('batch: a group counts its own holds with the set, dropping lapsed ones when they reach the limit', async () => {
    const s = setup('group:', 3);
    expect(
      await decide('batch', s, [
        ['a', 150 * MS],
        ['b', 10 * S],
      ]),
    ).to.deep.equal(['A', 'A']);
    await sleep(200);
    // the set's size (2) and the group's first hold reach the limit at 'd': 'a' is dropped
    // there, so 'd' is admitted and 'e' is refused (b, c, d in progress)
    expect(
      await decide('batch', s, [
        ['c', 10 * S],
        ['d', 10 * S],
        ['e', 10 * S],
      ]),
    ).to.deep.equal(['A', 'A', 'channels']);
    expect(await members(s.holdsKey)).to.deep.equal(['b', 'c', 'd']);
  });
});

describe('a release on a single Redis: no read of its holds before the writes', function () {
  this.timeout(30_000);
  const rig = redisRig();

  it('reads its records, then drops the one found and its three holds; a second release finds nothing', async () => {
    const redis = newRedisClient(rig.server);
    const store = new RedisStore({ redis, prefix: 'rel1:', holds: { syncMs: 0 } });
    try {
      const buckets: Bucket[] = ['g', 'a', 'p'].map((name) => ({ name, limits: [], channels: 10 }));
      const hold = { id: 'r1', forUs: 60 * S };
      expect((await store.admit({ tag: 't', buckets, hold })).admitted).to.equal(true);
      await rig.raw.config('RESETSTAT');
      expect((await store.release({ id: 'r1' })).released).to.equal(1);
      const calls = Object.fromEntries(
        [...(await rig.raw.info('commandstats')).matchAll(/cmdstat_([a-z]+):calls=(\d+)/g)].map((m) => [
          m[1],
          Number(m[2]),
        ]),
      );
      // on a Cluster each hold is read first (PTTL), so that a slot being moved stops the script
      // before any write (test/slot-move.test.ts); a single Redis has no slots to move
      // its two records read (a release names the inbound and the outbound one), the holds of
      // the one found dropped with it
      expect({ get: calls.get, zrem: calls.zrem, del: calls.del, pttl: calls.pttl ?? 0 }).to.deep.equal({
        get: 2,
        zrem: 3,
        del: 1,
        pttl: 0,
      });
      expect(await rig.raw.keys('rel1:*').then((k) => k.filter((x) => !x.endsWith(':gen')))).to.deep.equal([]);
      expect((await store.release({ id: 'r1' })).released).to.equal(0);
    } finally {
      await store.close();
      redis.disconnect();
    }
  });
});
