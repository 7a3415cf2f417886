/**
 * The leased deployment on a replay's virtual clock (src/lease/replay-lanes.ts, `callgate replay
 * --lease-lanes N`): what a lane refuses for lack of share, worked out by hand from the rule;
 * one lane decides as the exact contract does; the level's limits hold at every admission over
 * the bundled traces; the CLI's what-if and its clear errors.
 */
import { expect } from 'chai';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfigFile } from '../src/config/load.js';
import { laneOf, leasedLevel } from '../src/lease/lanes.js';
import { LeasedMemoryStore } from '../src/lease/replay-lanes.js';
import { compare } from '../src/replay/compare.js';
import { MemoryStore } from '../src/store/memory-store.js';
import type { AdmitRequest, AdmitResult, Bucket } from '../src/store/types.js';
import { runNode } from './helpers/run.js';

const ROOT = new URL('..', import.meta.url).pathname;
const BIN = join(ROOT, 'bin/callgate.js');
const FIX = join(ROOT, 'fixtures');
const T0 = 1_700_000_000_000_000;
const W = 1_000_000;

const global10: Bucket = { name: 'global', limits: [{ limit: 10, windowUs: W, algorithm: 'sliding-log' }] };
const peer = (id: string): Bucket => ({
  name: `peer:${id}`,
  limits: [{ limit: 1000, windowUs: W, algorithm: 'sliding-log' }],
});

/** Two peers on different lanes of 2. */
function peersOnTwoLanes(): [string, string] {
  const ids = Array.from({ length: 20 }, (_, i) => `p${i}`);
  const a = ids.find((id) => laneOf([global10, peer(id)], 2) === 0)!;
  const b = ids.find((id) => laneOf([global10, peer(id)], 2) === 1)!;
  return [a, b];
}

describe('a leased deployment replayed (LeasedMemoryStore)', () => {
  it('refuses what a lane lacks share for, and follows demand tick by tick', () => {
    const [a, b] = peersOnTwoLanes();
    const lists = { [a]: [global10, peer(a)], [b]: [global10, peer(b)] };
    const leased = new LeasedMemoryStore({ lanes: 2, limit: { calls: 10, windowUs: W, channels: 0 } });
    const exact = new MemoryStore();
    const both = (id: string, now: number): [AdmitResult, AdmitResult] => {
      const req: AdmitRequest = { tag: 'in', buckets: lists[id]!, now };
      return [leased.admitSync(req), exact.admitSync(req)];
    };
    // the level starts split evenly (5 / 5); the first tick, at the first call, keeps it so
    // (both lanes want the same): lane a admits 5 of 10 calls in its first 50 ms
    const first = Array.from({ length: 10 }, (_, i) => both(a, T0 + i * 1000));
    expect(first.map(([l]) => l.admitted)).to.deep.equal([
      true,
      true,
      true,
      true,
      true,
      false,
      false,
      false,
      false,
      false,
    ]);
    expect(first.every(([, x]) => x.admitted)).to.equal(true);
    // refused by the global level (index 0) for rate; retry when the lane's oldest call leaves
    expect(first[5]![0]).to.deep.include({ limitedBy: 0, reason: 'rate', retryAfterUs: W - 5000 });
    expect(leased.refusedForShare).to.deep.equal({ calls: 5, channels: 0 });
    expect(leased.laneShares.map((s) => s.calls)).to.deep.equal([5, 5]);
    // lane b still has its 5
    expect(both(b, T0 + 20_000)[0].admitted).to.equal(true);
    // the tick at 50 ms moves lane b's unused share to lane a, which was refused
    both(a, T0 + 50_000);
    const [sa, sb] = leased.laneShares.map((s) => s.calls);
    expect(sa! + sb!).to.equal(10);
    expect(sa).to.be.greaterThan(5);
    expect(sb).to.be.at.least(1); // what b's call of 20 ms uses stays
    // 7 calls a second on lane a from 1 s on (70 % of the limit): once the shares have followed
    // (2 s), the leased level decides as the exact one
    let last = 0;
    for (let t = T0 + W; t < T0 + 5 * W; t += 142_857) {
      const [l, x] = both(a, t);
      last = t;
      if (t >= T0 + 3 * W) expect(l.admitted, `at +${(t - T0) / 1e6} s`).to.equal(x.admitted);
    }
    // a tick every 50 ms of the calls' time, from the first call to the last
    expect(leased.ticks).to.equal(Math.floor((last - T0) / 50_000) + 1);
  });

  it('a share of channels: refused by channels when the lane has used its share', () => {
    const [a] = peersOnTwoLanes();
    const g: Bucket = { ...global10, channels: 4 };
    const leased = new LeasedMemoryStore({ lanes: 2, limit: { calls: 10, windowUs: W, channels: 4 } });
    const admits = [0, 1, 2].map((i) =>
      leased.admitSync({ tag: 'in', buckets: [g, peer(a)], now: T0 + i * 1000, hold: { id: `c${i}`, forUs: 60e6 } }),
    );
    // 2 channels each: the third call is refused by the global level's channels
    expect(admits.map((r) => r.admitted)).to.deep.equal([true, true, false]);
    expect(admits[2]).to.deep.include({ limitedBy: 0, reason: 'channels', retryAfterUs: 0 });
    expect(leased.refusedForShare).to.deep.equal({ calls: 0, channels: 1 });
  });

  it('needs the calls’ own time', () => {
    const leased = new LeasedMemoryStore({ lanes: 2, limit: { calls: 10, windowUs: W, channels: 0 } });
    expect(() => leased.admitSync({ tag: 'in', buckets: [global10, peer('x')] })).to.throw(/now is required/);
  });

  it('skips the ticks of an idle stretch, deciding as when every tick runs; hours of idle cost little', () => {
    const ids = Array.from({ length: 12 }, (_, i) => `p${i}`);
    const g: Bucket = { ...global10, channels: 6 };
    const run = (skipIdle: boolean) => {
      const store = new LeasedMemoryStore({ lanes: 4, limit: { calls: 10, windowUs: W, channels: 6 }, skipIdle });
      const out: string[] = [];
      let t = T0;
      let n = 0;
      // bursts of 40 calls over 2 s, 20 min of silence between them (holds of 0.5 s)
      for (let burst = 0; burst < 3; burst++) {
        for (let i = 0; i < 40; i++) {
          t += 50_000;
          const id = ids[(i * 7 + burst) % ids.length]!;
          const r = store.admitSync({
            tag: 'in',
            buckets: [g, peer(id)],
            now: t,
            hold: { id: `c${n++}`, forUs: 500_000 },
          });
          out.push(`${r.admitted}:${r.limitedBy}:${r.reason ?? ''}:${r.retryAfterUs}`);
        }
        t += 20 * 60 * W;
      }
      return { out, shares: store.laneShares, ticks: store.ticks };
    };
    const every = run(false);
    const skipping = run(true);
    expect(skipping.out).to.deep.equal(every.out);
    expect(skipping.shares).to.deep.equal(every.shares);
    expect(skipping.ticks).to.equal(every.ticks);
    expect(every.out.some((d) => d.startsWith('false'))).to.equal(true);
    // six hours between two calls: well under a second
    const store = new LeasedMemoryStore({ lanes: 16, limit: { calls: 10, windowUs: W, channels: 0 } });
    const began = performance.now();
    store.admitSync({ tag: 'in', buckets: [global10, peer('a')], now: T0 });
    store.admitSync({ tag: 'in', buckets: [global10, peer('a')], now: T0 + 6 * 3600 * W });
    expect(performance.now() - began).to.be.below(1000);
    expect(store.ticks).to.equal(6 * 3600 * 20 + 1);
  });

  it('ticks run before any timed operation and read the lanes as they stand: sweeps and skips change nothing', () => {
    const [a, b] = peersOnTwoLanes();
    const carrier = { name: 'carrier:x', intervalUs: 1000, maxWaitUs: 0 };
    // an idle stretch, n unrelated reads (they move where the MemoryStore's periodic sweep falls),
    // lane a filling its share, lane b wanting more, then an outbound call after lane a's calls
    // left the window, before the ticks that must still see them
    const scenario = (o: { skipIdle: boolean; sweep: boolean; reads: number; sweepAtReserve?: boolean }) => {
      const s = new LeasedMemoryStore({ lanes: 2, limit: { calls: 10, windowUs: W, channels: 0 }, ...o });
      const out: string[] = [];
      const admit = (id: string, now: number) =>
        out.push(String(s.admitSync({ tag: 'in', buckets: [global10, peer(id)], now }).admitted));
      let t = T0;
      admit(a, t);
      t += 400 * W;
      for (let i = 0; i < o.reads; i++) s.countSync({ tag: 'in', bucket: 'unrelated', windowUs: W, now: t });
      admit(b, t);
      for (let i = 1; i <= 5; i++) admit(a, t + i * 1000);
      for (let u = t + 10_000; u <= t + 940_000; u += 10_000) admit(b, u);
      // the MemoryStore's periodic sweep made to fall on the outbound call (white box)
      if (o.sweepAtReserve) (s as unknown as { opsToSweep: number }).opsToSweep = 1;
      s.reserveSync({ route: [carrier], now: t + 1_006_000 });
      for (const d of [1_010_000, 1_011_000, 1_012_000]) admit(b, t + d);
      return { out, shares: s.laneShares };
    };
    const reference = scenario({ skipIdle: false, sweep: false, reads: 0 });
    expect(scenario({ skipIdle: false, sweep: true, reads: 0, sweepAtReserve: true })).to.deep.equal(reference);
    for (let reads = 0; reads < 300; reads += 7)
      for (const skipIdle of [false, true]) {
        const r = scenario({ skipIdle, sweep: true, reads });
        expect(r, `reads ${reads}, skipIdle ${skipIdle}`).to.deep.equal(reference);
      }
  });

  it('a peer whose calls name an account or none counts on each lane apart, as live', () => {
    // the lanes of 2: an account's whose lane is not peer p's own
    const p = 'p0';
    const own = laneOf([global10, peer(p)], 2);
    const acct = Array.from({ length: 20 }, (_, i) => `a${i}`).find(
      (id) => laneOf([global10, { name: `account:${id}`, limits: [] }, peer(p)], 2) !== own,
    )!;
    const strict: Bucket = { name: `peer:${p}`, limits: [{ limit: 5, windowUs: 10 * W, algorithm: 'sliding-log' }] };
    const account: Bucket = {
      name: `account:${acct}`,
      limits: [{ limit: 100, windowUs: W, algorithm: 'sliding-log' }],
    };
    // a global level far from its limit: only the peer's limit refuses
    const wide: Bucket = { name: 'global', limits: [{ limit: 1000, windowUs: W, algorithm: 'sliding-log' }] };
    const leased = new LeasedMemoryStore({ lanes: 2, limit: { calls: 1000, windowUs: W, channels: 0 } });
    const exact = new MemoryStore();
    let l = 0;
    let x = 0;
    for (let i = 0; i < 10; i++) {
      const buckets = i % 2 === 0 ? [wide, account, strict] : [wide, strict];
      const req: AdmitRequest = { tag: 'in', buckets, now: T0 + i * 100_000 };
      if (leased.admitSync(req).admitted) l++;
      if (exact.admitSync(req).admitted) x++;
    }
    expect(x).to.equal(5);
    expect(l).to.equal(10); // 5 on each lane: the peer's limit holds per lane only (docs/leasing.md)
  });

  it('with an overflow lane: what a lane lacks calls share for is counted there instead, once', () => {
    const [a, b] = peersOnTwoLanes();
    const leased = new LeasedMemoryStore({ lanes: 2, overflow: true, limit: { calls: 10, windowUs: W, channels: 0 } });
    const req = (id: string, now: number): AdmitRequest => ({ tag: 'in', buckets: [global10, peer(id)], now });
    const first = leased.admitSync(req(a, T0)); // after the first tick
    const shares = leased.laneShares;
    expect(shares).to.have.length(3);
    expect(shares.reduce((n, x) => n + x.calls, 0)).to.be.at.most(10);
    // lane a (lane 0) fills its share, then the overflow lane's, then refuses
    const rest = Array.from({ length: 14 }, (_, i) => leased.admitSync(req(a, T0 + (i + 1) * 1000)));
    const all = [first, ...rest];
    expect(shares[0]!.calls + shares[2]!.calls).to.be.below(15);
    expect(all.filter((r) => r.admitted)).to.have.length(shares[0]!.calls + shares[2]!.calls);
    const spilled = all.filter((r) => r.spilledAt !== undefined);
    expect(spilled).to.have.length(shares[2]!.calls);
    for (const r of spilled) expect(r.spilledAt).to.equal(r.now);
    expect(all.at(-1)).to.deep.include({ admitted: false, limitedBy: 0, reason: 'rate' });
    expect(leased.summary.overflow).to.deep.equal({ spilled: shares[2]!.calls });
    // the refusals for share are the calls refused in the end
    expect(leased.summary.refused_for_share.calls).to.equal(15 - shares[0]!.calls - shares[2]!.calls);
    // lane b keeps its own share
    expect(leased.admitSync(req(b, T0 + 20_000)).admitted).to.equal(true);
  });

  it('with an overflow lane: a call whose peer is full as well is not spilled', () => {
    const [a] = peersOnTwoLanes();
    const strict = (id: string): Bucket => ({
      name: `peer:${id}`,
      limits: [{ limit: 1, windowUs: W, algorithm: 'sliding-log' }],
    });
    const lim = Array.from({ length: 40 }, (_, i) => `q${i}`).find((id) => laneOf([global10, strict(id)], 2) === 0)!;
    const leased = new LeasedMemoryStore({ lanes: 2, overflow: true, limit: { calls: 10, windowUs: W, channels: 0 } });
    const admit = (buckets: Bucket[], now: number) => leased.admitSync({ tag: 'in', buckets, now });
    expect(admit([global10, strict(lim)], T0).admitted).to.equal(true); // its one call a second
    const lane0 = leased.laneShares[0]!.calls;
    for (let i = 1; i < lane0; i++) expect(admit([global10, peer(a)], T0 + i).admitted).to.equal(true);
    // lane 0's share used up, the overflow lane with room: the strict peer's call stays refused there
    const r = admit([global10, strict(lim)], T0 + 100);
    expect(r).to.deep.include({ admitted: false, limitedBy: 0, reason: 'rate' });
    expect(r.spilledAt).to.equal(undefined);
    expect(leased.summary.overflow).to.deep.equal({ spilled: 0 });
    // a call with room but for the share spills
    expect(admit([global10, peer(a)], T0 + 200).spilledAt).to.equal(T0 + 200);
    expect(leased.summary.overflow).to.deep.equal({ spilled: 1 });
  });

  /** Checks Σ lanes ≤ the level's limits after every admission (the overflow lane's too). */
  class Checked extends LeasedMemoryStore {
    violations = 0;
    admissions = 0;
    constructor(
      lanes: number,
      private readonly level: { calls: number; windowUs: number; channels: number },
      private readonly overflow = false,
    ) {
      super({ lanes, limit: level, overflow });
    }
    override admitSync(req: AdmitRequest): AdmitResult {
      const r = super.admitSync(req);
      if (req.buckets[0]?.name !== 'global' || !r.admitted) return r;
      this.admissions++;
      let calls = 0;
      let channels = 0;
      for (let k = 0; k < this.lanes + (this.overflow ? 1 : 0); k++) {
        const bucket = LeasedMemoryStore.laneBucket(k);
        calls += this.countSync({ tag: 'in', bucket, windowUs: this.level.windowUs, now: r.now }).count;
        channels += this.holdsSync({ tag: 'in', name: bucket, now: r.now }).holds;
      }
      if (calls > this.level.calls || (this.level.channels > 0 && channels > this.level.channels)) this.violations++;
      return r;
    }
  }

  for (const overflow of [false, true])
    it(`never over the limit when every lane wants more than there is${overflow ? ', with an overflow lane' : ''}`, () => {
      const [a, b] = peersOnTwoLanes();
      const level = { calls: 10, windowUs: W, channels: 0 };
      const checked = new Checked(2, level, overflow);
      const exact = new MemoryStore();
      let admitted = 0;
      // lane a fills its share at once, then both lanes offer 4 times the limit for 3 s: the
      // targets, split by demand, fall below what lane a's window holds
      for (let i = 0; i < 5; i++) checked.admitSync({ tag: 'in', buckets: [global10, peer(a)], now: T0 + i });
      for (let t = T0 + 1000; t < T0 + 3 * W; t += 25_000)
        for (const id of [b, b, b, a]) {
          const req: AdmitRequest = { tag: 'in', buckets: [global10, peer(id)], now: t };
          if (checked.admitSync(req).admitted) admitted++;
          exact.admitSync(req);
        }
      expect(checked.violations).to.equal(0);
      // and the lanes together use most of the limit: 10 a window, 3 windows
      expect(admitted).to.be.within(25, 30);
    });

  for (const name of ['trunks', 'autodialer', 'event-types'])
    it(`${name}: one lane decides as the exact contract; 8 lanes never exceed the level`, async function () {
      this.timeout(60_000);
      const config = await loadConfigFile(join(FIX, `${name}.config.json`));
      const tracePath = join(FIX, `${name}.trace.csv`);
      const level = leasedLevel(config);
      const one = await compare({
        config,
        baseline: config,
        configName: 'leased',
        baselineName: 'exact',
        tracePath,
        store: new LeasedMemoryStore({ lanes: 1, limit: level }),
        baselineStore: new MemoryStore(),
      });
      expect(one.whatif.differing).to.equal(0);
      for (const overflow of [false, true]) {
        const checked = new Checked(8, level, overflow);
        await compare({
          config,
          baseline: config,
          configName: 'leased',
          baselineName: 'exact',
          tracePath,
          store: checked,
          baselineStore: new MemoryStore(),
        });
        expect(checked.admissions).to.be.greaterThan(0);
        expect(checked.violations, `overflow ${overflow}`).to.equal(0);
      }
    });
});

describe('callgate replay --lease-lanes', function () {
  this.timeout(60_000);
  const run = (...args: string[]) => runNode([BIN, 'replay', '--no-progress', ...args], { cwd: ROOT });
  const trunks = ['--config', 'fixtures/trunks.config.json', '--trace', 'fixtures/trunks.trace.csv'];

  it('reports the leased deployment against the exact contract', async () => {
    const r = await run(...trunks, '--lease-lanes', '4', '--json');
    expect(r.code, r.stderr).to.equal(0);
    const out = JSON.parse(r.stdout);
    expect(out.whatif.config).to.equal('fixtures/trunks.config.json, global level leased over 4 lanes');
    expect(out.whatif.baseline_config).to.equal('fixtures/trunks.config.json, exact');
    // the same calls, decided by the same engine but for the global level's lanes
    expect(out.report.calls.total).to.equal(out.baseline.calls.total);
    expect(out.whatif.differing).to.be.greaterThan(0);
    // what the lease did: a tick every 50 ms of the trace, the refusals for lack of share
    expect(out.lease).to.deep.include({ lanes: 4, tick_ms: 50 });
    expect(out.lease.ticks).to.be.greaterThan(1000);
    expect(out.lease.refused_for_share.calls + out.lease.refused_for_share.channels).to.be.greaterThan(0);
    const text = await run(...trunks, '--lease-lanes', '1');
    expect(text.code, text.stderr).to.equal(0);
    expect(text.stdout).to.include('global level leased over 1 lane (new)');
    expect(text.stdout).to.match(/^0 of \d+ calls decided differently/m);
    expect(text.stdout).to.match(
      /^Leased: \d+ ticks of 50 ms; refused for lack of a lane's share: 0 \(calls\), 0 \(channels\)$/m,
    );
    // with an overflow lane: what it took, in the line and in the JSON
    const auto = ['--config', 'fixtures/autodialer.config.json', '--trace', 'fixtures/autodialer.trace.csv'];
    const ovf = await run(...auto, '--lease-lanes', '16', '--lease-overflow', '--json');
    expect(ovf.code, ovf.stderr).to.equal(0);
    expect(JSON.parse(ovf.stdout).lease.overflow.spilled).to.be.greaterThan(0);
    const line = await run(...auto, '--lease-lanes', '16', '--lease-overflow');
    expect(line.stdout).to.match(/; spilled to the overflow lane: [1-9]\d*$/m);
    // pinned: acme (hashed to lane 0) and sbc-big (lane 2) together on lane 3, so the lanes'
    // calls and their decisions change (a swap of two lanes would not: lanes are alike)
    const pin = ['--lease-pin', 'account:acme=3', '--lease-pin', 'peer:sbc-big=3'];
    const pinnedRun = await run(...trunks, '--lease-lanes', '4', ...pin, '--json');
    expect(pinnedRun.code, pinnedRun.stderr).to.equal(0);
    const pinnedOut = JSON.parse(pinnedRun.stdout);
    expect(pinnedOut.whatif.config).to.equal(
      'fixtures/trunks.config.json, global level leased over 4 lanes, 2 owners pinned',
    );
    expect(pinnedOut.report.calls.total).to.equal(out.report.calls.total);
    expect(pinnedOut.whatif.differing).to.not.equal(out.whatif.differing);
  });

  it('a limit below lanes × floor: a slow busy lane gets its unit (it was refused every call, for ever)', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'callgate-lease-floor-'));
    try {
      const config = join(dir, 'small.json');
      writeFileSync(
        config,
        JSON.stringify({
          maxCallDuration: 'PT60S',
          inbound: {
            global: [{ limit: 5, window: '1s' }, { channels: 3 }],
            peers: { p: [{ limit: 2, window: '1s' }] },
          },
        }),
      );
      const trace = join(dir, 'slow.csv');
      const rows = Array.from({ length: 300 }, (_, i) => `${1709640000 + 2 * i},c${i},in,p,,,1`);
      writeFileSync(trace, `time,call_id,direction,peer,account,route,duration\n${rows.join('\n')}\n`);
      // one call every 2 s, each 1 s long: far under both limits, on whichever lane p hashes to
      for (const lanes of ['4', '5', '8', '16']) {
        const r = await run('--config', config, '--trace', trace, '--lease-lanes', lanes, '--json');
        expect(r.code, r.stderr).to.equal(0);
        // at most the first call, before the first tick moves a unit to p's lane
        expect(JSON.parse(r.stdout).report.inbound.admitted, `${lanes} lanes`).to.be.at.least(299);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  const bad: [string, string[], RegExp][] = [
    ['a Redis store', [...trunks, '--lease-lanes', '4', '--store', 'redis'], /replays on the memory store/],
    ['--compare', [...trunks, '--lease-lanes', '4', '--compare', 'fixtures/trunks.config.json'], /not with --compare/],
    ['0 lanes', [...trunks, '--lease-lanes', '0'], /--lease-lanes: expected an integer from 1 to 1024, got 0/],
    ['too many lanes', [...trunks, '--lease-lanes', '2000'], /expected an integer from 1 to 1024, got 2000/],
    ['lanes not a number', [...trunks, '--lease-lanes', 'x'], /--lease-lanes: expected an integer/],
    ['a tick alone', [...trunks, '--lease-tick-ms', '20'], /--lease-tick-ms needs --lease-lanes/],
    ['an overflow lane alone', [...trunks, '--lease-overflow'], /--lease-overflow needs --lease-lanes/],
    ['a pin alone', [...trunks, '--lease-pin', 'account:acme=0'], /--lease-pin needs --lease-lanes/],
    [
      'a pin of no kind',
      [...trunks, '--lease-lanes', '4', '--lease-pin', 'acme=0'],
      /--lease-pin: expected account:<id>=<lane> or peer:<id>=<lane>, got "acme=0"/,
    ],
    [
      'a pin past the last lane',
      [...trunks, '--lease-lanes', '4', '--lease-pin', 'account:acme=4'],
      /--lease-pin account:acme=4: a lane from 0 to 3 \(of 4\)$/,
    ],
    [
      'a negative lane',
      [...trunks, '--lease-lanes', '4', '--lease-pin', 'account:acme=-1'],
      /--lease-pin account:acme=-1: the lane must be an integer from 0, got "-1"/,
    ],
    [
      'a list in one pin',
      [...trunks, '--lease-lanes', '4', '--lease-pin', 'account:acme=0,peer:x=1'],
      /one owner per --lease-pin \(repeat the option\)/,
    ],
    [
      'an account the configuration lacks',
      [...trunks, '--lease-lanes', '4', '--lease-pin', 'account:acm=0'],
      /--lease-pin account:acm: the configuration has no account "acm"/,
    ],
    [
      'an owner pinned twice',
      [...trunks, '--lease-lanes', '4', '--lease-pin', 'peer:a=1', '--lease-pin', 'peer:a=2'],
      /--lease-pin: peer:a is pinned twice/,
    ],
    ['a tick of 0', [...trunks, '--lease-lanes', '4', '--lease-tick-ms', '0'], /--lease-tick-ms: expected/],
    ['a tick not a number', [...trunks, '--lease-lanes', '4', '--lease-tick-ms', 'abc'], /got "abc"/],
    [
      'no global level',
      ['--config', 'fixtures/campaign.config.json', '--trace', 'fixtures/campaign.trace.csv', '--lease-lanes', '4'],
      /a leased global level must be configured/,
    ],
    [
      'attribute levels',
      ['--config', 'examples/limits/attributes.json', '--trace', 'fixtures/trunks.trace.csv', '--lease-lanes', '4'],
      /does not combine with attribute levels/,
    ],
  ];
  for (const [what, args, message] of bad)
    it(`refuses ${what} in one line`, async () => {
      const r = await run(...args);
      expect(r.code, r.stderr).to.equal(2);
      const lines = r.stderr.trimEnd().split('\n');
      expect(lines, r.stderr).to.have.length(1);
      expect(lines[0]).to.match(message);
    });
});
