/**
 * A leased global level in the scripts that decide it: admit-lone.lua (a lone call of plain
 * sliding logs, the common case under light load), admit-lone-held.lua (a lone call with channel
 * limits) and admit.lua (any batch). For the same calls against the same share (its calls c,
 * channels h and lease end e changed between calls: room, a share below the limit, none, a lease
 * run out), the lone script and admit.lua give the same replies, leave the same logs, holds and
 * records, and count the same refused-for-lack-of-share calls (rc, rh) on the share hash.
 */
import { expect } from 'chai';
import {
  admitArgv,
  heldAdmitArgv,
  loneAdmitArgv,
  loneRunArgv,
  type AdmitEnv,
  type PendingAdmit,
} from '../src/store/redis/admit-args.js';
import { bucketArgsOf } from '../src/store/redis/bucket-args.js';
import { KnownLogs } from '../src/store/redis/known-logs.js';
import { RedisKeys } from '../src/store/redis/redis-keys.js';
import { scripts } from '../src/store/redis/scripts.js';
import type { Bucket, Limit } from '../src/store/types.js';
import { redisRig } from './helpers/redis.js';

const S = 1_000_000;
const T0 = 1_700_000_000_000_000;
const SL = (limit: number, windowUs: number): Limit => ({ limit, windowUs, algorithm: 'sliding-log' });
const BUCKETS: Bucket[] = [
  { name: 'global', limits: [SL(6, S)] },
  { name: 'peer:p', limits: [SL(4, S), SL(9, 10 * S)] },
];
/** The same with channels: the level's 4 (leased) and the peer's 3. */
const HELD: Bucket[] = [
  { name: 'global', limits: [SL(6, S)], channels: 4 },
  { name: 'peer:p', limits: [SL(5, S)], channels: 3 },
];

/** The stop signal of a call past its deadline (setup's env gives it one long past). */
const LATE = { aborted: false };

describe('a leased level: admit-lone.lua decides a lone call as admit.lua does', function () {
  this.timeout(30_000);
  const rig = redisRig();

  function setup(prefix: string, buckets: Bucket[] = BUCKETS) {
    const keys = new RedisKeys(prefix, true);
    const tag = 'in:3';
    const list = buckets.map((b, i) => bucketArgsOf(tag, keys.base(tag, b.name), b, i === 0));
    let seq = 0;
    const env: AdmitEnv = {
      virtualTtlMs: 60_000,
      known: new KnownLogs(),
      // plain and held setups on one prefix must not share event ids
      member: () => `m${buckets === HELD ? 'h' : ''}${seq++}`,
      // a call marked LATE carries a deadline long past in Redis time: skipped
      deadline: (signal) => (signal === LATE ? '1' : ''),
      recordPrefix: (t) => keys.inboundRecord(t, ''),
      declareRecords: keys.hashTags,
    };
    const item = (now: string, id?: string, late = false): PendingAdmit => ({
      buckets: list,
      now,
      id,
      forUs: id === undefined ? 0 : 700_000,
      signal: late ? LATE : undefined,
      resolve: () => {},
      reject: () => {},
    });
    return { env, item, share: list[0]!.share! };
  }

  const ABSENT = -1;
  const FIELDLESS = -2;
  /** A share hash in the state a phase names: its fields, none at all, or its refusal counts alone. */
  async function setShare(share: string, c: number, endUs: number, h?: number): Promise<void> {
    if (c === ABSENT) await rig.raw.del(share);
    else if (c === FIELDLESS) {
      await rig.raw.hdel(share, 'c', 'h', 'e');
      expect(await rig.raw.hlen(share), 'the refusal counts are still there').to.be.greaterThan(0);
    } else if (h === undefined) await rig.raw.hset(share, 'c', String(c), 'e', String(T0 + endUs));
    else await rig.raw.hset(share, 'c', String(c), 'h', String(h), 'e', String(T0 + endUs));
  }

  const run = (name: 'admit' | 'admit-lone' | 'admit-lone-held' | 'admit-lone-run', argv: string[]) =>
    rig.raw.call('EVAL', scripts()[name].lua, ...argv) as Promise<number[]>;

  it('the same replies, logs and share counts, through every state of the share', async () => {
    const lone = setup('LL:');
    const batch = setup('LB:');
    const probe = setup('LX:');
    expect(loneAdmitArgv(probe.item(String(T0)), '', probe.env), 'the lone layout takes it').to.be.an('array');
    // [calls from, share calls c, lease end e (µs after T0)]; c ABSENT: no share hash yet (before
    // the first grant), c FIELDLESS: the hash holds the refusal counts alone
    const phases: [number, number, number][] = [
      [0, ABSENT, 0],
      [2, 6, 10 * S], // the whole limit: the peer's 4/s refuses first
      [10, 2, 10 * S], // a share below the limit: refused for lack of share
      [18, 0, 10 * S], // no share
      [24, 6, 3 * S], // the lease runs out at 3 s (call 25 comes at its very end)
      [30, FIELDLESS, 0],
    ];
    const outcomes = new Set<string>();
    for (let n = 0; n < 34; n++) {
      const phase = phases.filter((p) => p[0] <= n).at(-1)!;
      for (const s of [lone.share, batch.share]) await setShare(s, phase[1], phase[2]);
      const now = String(T0 + n * 120_000);
      const a = loneAdmitArgv(lone.item(now), '', lone.env)!;
      const b = admitArgv([batch.item(now)], '', batch.env) as string[];
      const [ra, rb] = [await run('admit-lone', a), await run('admit', b)];
      expect(ra, `call ${n}`).to.deep.equal(rb);
      outcomes.add(ra[0] === 0 ? 'admitted' : `refused by ${ra[0]}`);
    }
    expect([...outcomes].sort()).to.deep.equal(['admitted', 'refused by 1', 'refused by 2']);
    const counts = async (s: string) => rig.raw.hmget(s, 'rc', 'ad');
    const [ca, cb] = [await counts(lone.share), await counts(batch.share)];
    expect(ca).to.deep.equal(cb);
    expect(Number(ca[0])).to.be.greaterThan(0);
    expect(ca[1], 'an admission writes nothing to the share (lease-observe counts it in the log)').to.equal(null);
    for (const name of ['global:log', 'peer:p:log'])
      expect(await rig.raw.zrange(`LL:{in:3}:${name}`, '0', '-1', 'WITHSCORES')).to.deep.equal(
        await rig.raw.zrange(`LB:{in:3}:${name}`, '0', '-1', 'WITHSCORES'),
      );
  });
  it('with channels, admit-lone-held.lua: the same replies, logs, holds, records and share counts', async () => {
    const lone = setup('HL:', HELD);
    const batch = setup('HB:', HELD);
    const probe = setup('HX:', HELD);
    expect(heldAdmitArgv(probe.item(String(T0), 'x'), '', probe.env), 'the lone layout takes it').to.be.an('array');
    // [calls from, share calls c, share channels h, lease end e (µs after T0)]; ABSENT and
    // FIELDLESS as above
    const phases: [number, number, number, number][] = [
      [0, ABSENT, 0, 0],
      [2, 6, 4, 10 * S], // the whole level: the peer's channels (3) refuse first
      [8, 6, 1, 10 * S], // one channel of share: refused for lack of channel share
      [14, 2, 4, 10 * S], // a calls share below the limit
      [20, 6, 4, 3 * S], // the lease runs out at 3 s
      [28, FIELDLESS, 0, 0],
    ];
    const outcomes = new Set<string>();
    for (let n = 0; n < 32; n++) {
      const phase = phases.filter((p) => p[0] <= n).at(-1)!;
      for (const s of [lone.share, batch.share]) await setShare(s, phase[1], phase[3], phase[2]);
      const now = String(T0 + n * 110_000);
      const a = heldAdmitArgv(lone.item(now, `c${n}`), '', lone.env)!;
      const b = admitArgv([batch.item(now, `c${n}`)], '', batch.env) as string[];
      const [ra, rb] = [await run('admit-lone-held', a), await run('admit', b)];
      expect(ra, `call ${n}`).to.deep.equal(rb);
      outcomes.add(ra[0] === 0 ? 'admitted' : `refused by ${ra[0]}, flags ${ra[3]}`);
    }
    // flags 16: refused by the calls share alone (an overflow lane may take it); 1: by channels
    expect([...outcomes].sort()).to.include.members(['admitted', 'refused by 1, flags 16', 'refused by 1, flags 1']);
    const counts = async (s: string) => rig.raw.hmget(s, 'rc', 'rh');
    const [ca, cb] = [await counts(lone.share), await counts(batch.share)];
    expect(ca).to.deep.equal(cb);
    expect(
      ca.map(Number).every((x) => x > 0),
      `rc, rh: ${ca.join(', ')}`,
    ).to.equal(true);
    for (const name of ['global:log', 'peer:p:log', 'global:ch', 'peer:p:ch'])
      expect(await rig.raw.zrange(`HL:{in:3}:${name}`, '0', '-1', 'WITHSCORES'), name).to.deep.equal(
        await rig.raw.zrange(`HB:{in:3}:${name}`, '0', '-1', 'WITHSCORES'),
      );
    const records = async (p: string) =>
      Promise.all(
        (await rig.raw.keys(`${p}{in:3}:call:in:*`)).sort().map(async (k) => [k.slice(p.length), await rig.raw.get(k)]),
      );
    expect(await records('HL:'))
      .to.deep.equal(await records('HB:'))
      .and.to.have.length.greaterThan(0);
  });
  it('admit-lone-run.lua: runs of leased calls, plain and held, one past its deadline, decide as their lone scripts one by one', async () => {
    // plain and held calls on one prefix: the same level's log and share, other limits
    const one = { plain: setup('R1:'), held: setup('R1:', HELD) };
    const many = { plain: setup('RN:'), held: setup('RN:', HELD) };
    // [calls from, share calls c, share channels h, lease end e (µs after T0)], as above
    const phases: [number, number, number, number][] = [
      [0, ABSENT, 0, 0],
      [6, 6, 4, 10 * S],
      [18, 6, 1, 10 * S],
      [30, 2, 4, 10 * S],
      [42, 6, 4, 3 * S],
      [54, FIELDLESS, 0, 0],
    ];
    const outcomes = new Set<string>();
    for (let r = 0; r < 20; r++) {
      const phase = phases.filter((p) => p[0] <= 3 * r).at(-1)!;
      for (const s of [one.held.share, many.held.share]) await setShare(s, phase[1], phase[3], phase[2]);
      // a run of three at one time: a held call, a plain one, a held one (past its deadline in
      // every third run)
      const now = String(T0 + r * 250_000);
      const late = r % 3 === 2;
      const calls = (x: typeof one) => [x.held.item(now, `a${r}`), x.plain.item(now), x.held.item(now, `b${r}`, late)];
      const alone: number[][] = [];
      for (const [i, c] of calls(one).entries()) {
        const held = i !== 1;
        const env = held ? one.held.env : one.plain.env;
        const argv = held ? heldAdmitArgv(c, '', env)! : loneAdmitArgv(c, '', env)!;
        alone.push(await run(held ? 'admit-lone-held' : 'admit-lone', argv));
      }
      const items = calls(many);
      // each call's layout from its own setup (the plain and held lists differ), one run
      const parts = [
        loneRunArgv([items[0]!], '', many.held.env)!,
        loneRunArgv([items[1]!], '', many.plain.env)!,
        loneRunArgv([items[2]!], '', many.held.env)!,
      ];
      // one run of the three: every call's keys, the clock flag, then every call's part
      const keys = parts.flatMap((p) => p.slice(1, 1 + Number(p[0])));
      const rest = parts.flatMap((p) => p.slice(2 + Number(p[0])));
      const together = await run('admit-lone-run', [String(keys.length), ...keys, '', ...rest]);
      expect(together, `run ${r}`).to.deep.equal(alone.flat());
      for (const [i, x] of alone.entries())
        outcomes.add(x[3] === 4 ? `skipped (${i})` : x[0] === 0 ? 'admitted' : `refused, flags ${x[3]}`);
    }
    expect([...outcomes]).to.include.members(['admitted', 'skipped (2)', 'refused, flags 16', 'refused, flags 1']);
    for (const [a, b] of [['R1:', 'RN:']] as const) {
      expect(await rig.raw.hmget(`${a}{in:3}:global:share`, 'rc', 'rh')).to.deep.equal(
        await rig.raw.hmget(`${b}{in:3}:global:share`, 'rc', 'rh'),
      );
      for (const name of ['global:log', 'peer:p:log', 'global:ch', 'peer:p:ch'])
        expect(await rig.raw.zrange(`${b}{in:3}:${name}`, '0', '-1', 'WITHSCORES'), `${b} ${name}`).to.deep.equal(
          await rig.raw.zrange(`${a}{in:3}:${name}`, '0', '-1', 'WITHSCORES'),
        );
    }
  });
});
