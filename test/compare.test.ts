/**
 * What-if (src/replay/compare.ts, `callgate replay --compare`): a small hand-made trace whose
 * decisions under two configurations were worked out by hand from the contract, so every
 * differing call, its group and every count is known exactly.
 *
 * old: peer p1 2/1s; carrier A 1 cps (no wait), B 1 cps (maxWait 2 s)
 * new: peer p1 3/1s, account acme 1/1s; carrier A 1 cps (maxWait 1 s), B 2 cps (maxWait 2 s)
 *
 *   call  t (s)  old                          new
 *   c1    0.0    admitted                     admitted
 *   c2    0.1    admitted                     admitted
 *   c3    0.2    rejected by peer:p1          admitted          (3/1s)
 *   c4    0.3    rejected by peer:p1          rejected by peer:p1
 *   c5    0.4    rejected by unknown-peer     rejected by unknown-peer
 *   o1    1.0    A, 0 ms                      A, 0 ms
 *   o2    1.2    B, 0 ms (A would wait 0.8 s) A, 800 ms         (A may wait 1 s)
 *   o3    1.3    B, 900 ms                    B, 0 ms           (delay only: not a difference)
 *   o4    1.4    rejected (A: 0.6 s)          rejected (A: 1.6 s)
 *   c6    2.0    admitted                     admitted
 *   c7    2.1    admitted                     rejected by account:acme
 *   o5    10.0   A, 0 ms                      A, 0 ms
 *   o6    10.5   rejected (A: 0.5 s)          A, 500 ms
 */
import { expect } from 'chai';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfigFile } from '../src/config/load.js';
import { compare, compareText, type CompareJson } from '../src/replay/compare.js';
import { replay, type DecisionLine } from '../src/replay/replay.js';
import { MemoryStore } from '../src/store/memory-store.js';
import type { AdmitRequest, AdmitResult } from '../src/store/types.js';
import { getRedis, type RedisHandle } from './helpers/redis.js';
import { runNode } from './helpers/run.js';

const ROOT = new URL('..', import.meta.url).pathname;
const BIN = join(ROOT, 'bin/callgate.js');
const T = 1_700_000_000;

const OLD = {
  inbound: { peers: { p1: [{ limit: 2, window: 'PT1S' }] } },
  outbound: { carriers: { A: { cps: 1 }, B: { cps: 1, maxWait: 'PT2S' } } },
};
const NEW = {
  inbound: { peers: { p1: [{ limit: 3, window: 'PT1S' }] }, accounts: { acme: [{ limit: 1, window: 'PT1S' }] } },
  outbound: { carriers: { A: { cps: 1, maxWait: 'PT1S' }, B: { cps: 2, maxWait: 'PT2S' } } },
};
const ROWS: [number, string, 'in' | 'out', string, string, string][] = [
  [0.0, 'c1', 'in', 'p1', '', ''],
  [0.1, 'c2', 'in', 'p1', '', ''],
  [0.2, 'c3', 'in', 'p1', '', ''],
  [0.3, 'c4', 'in', 'p1', '', ''],
  [0.4, 'c5', 'in', 'p2', '', ''],
  [1.0, 'o1', 'out', '', '', 'A|B'],
  [1.2, 'o2', 'out', '', '', 'A|B'],
  [1.3, 'o3', 'out', '', '', 'A|B'],
  [1.4, 'o4', 'out', '', '', 'A'],
  [2.0, 'c6', 'in', 'p1', 'acme', ''],
  [2.1, 'c7', 'in', 'p1', 'acme', ''],
  [10.0, 'o5', 'out', '', '', 'A'],
  [10.5, 'o6', 'out', '', '', 'A'],
];

const EXPECTED_GROUPS: CompareJson['groups'] = [
  { direction: 'in', from: 'admitted', to: 'rejected by account:acme (rate)', count: 1, calls: ['c7'] },
  { direction: 'in', from: 'rejected by peer:p1 (rate)', to: 'admitted', count: 1, calls: ['c3'] },
  { direction: 'out', from: 'dispatched on B', to: 'dispatched on A', count: 1, calls: ['o2'] },
  { direction: 'out', from: 'rejected (all-routes-congested)', to: 'dispatched on A', count: 1, calls: ['o6'] },
];
const iso = (s: number) => new Date((T + s) * 1000).toISOString().replace(/\.(\d{3})Z$/, '.$1000Z');
const EXPECTED_CALLS: CompareJson['calls_listed'] = [
  { call_id: 'c3', time: iso(0.2), direction: 'in', old: 'rejected by peer:p1 (rate)', new: 'admitted' },
  { call_id: 'o2', time: iso(1.2), direction: 'out', old: 'dispatched on B', new: 'dispatched on A' },
  { call_id: 'c7', time: iso(2.1), direction: 'in', old: 'admitted', new: 'rejected by account:acme (rate)' },
  { call_id: 'o6', time: iso(10.5), direction: 'out', old: 'rejected (all-routes-congested)', new: 'dispatched on A' },
];

function expectWhatif(w: CompareJson, newName: string, oldName: string): void {
  expect(w.config).to.equal(newName);
  expect(w.baseline_config).to.equal(oldName);
  expect(w.calls).to.equal(13);
  expect(w.differing).to.equal(4);
  expect(w.inbound).to.deep.equal({ differing: 2, now_admitted: 1, now_rejected: 1, rejected_elsewhere: 0 });
  expect(w.outbound).to.deep.equal({
    differing: 2,
    now_dispatched: 1,
    now_rejected: 0,
    other_carrier: 1,
    delay_only: 1,
  });
  expect(w.groups).to.deep.equal(EXPECTED_GROUPS);
  expect(w.calls_listed).to.deep.equal(EXPECTED_CALLS);
  expect(w.totals).to.deep.equal([
    { metric: 'inbound admitted', old: 4, new: 4 },
    { metric: 'inbound rejected', old: 3, new: 3 },
    { metric: '  rejected by account:acme', old: 0, new: 1 },
    { metric: '  rejected by peer:p1', old: 2, new: 1 },
    { metric: 'outbound dispatched', old: 4, new: 5 },
    { metric: 'outbound rejected', old: 2, new: 1 },
    { metric: 'outbound rerouted', old: 4, new: 2 },
    { metric: '  dispatched on A', old: 2, new: 4 },
    { metric: '  dispatched on B', old: 2, new: 1 },
  ]);
}

describe('what-if: one trace under two configurations', function () {
  this.timeout(60_000);
  let dir: string;
  let trace: string;
  let oldPath: string;
  let newPath: string;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'callgate-compare-'));
    trace = join(dir, 't.csv');
    oldPath = join(dir, 'old.json');
    newPath = join(dir, 'new.json');
    writeFileSync(
      trace,
      `${[
        'time,call_id,direction,peer,account,route',
        ...ROWS.map(([t, ...r]) => [(T + t).toFixed(6), ...r].join(',')),
      ].join('\n')}\n`,
    );
    writeFileSync(oldPath, JSON.stringify(OLD));
    writeFileSync(newPath, JSON.stringify(NEW));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  async function decisions(config: string): Promise<DecisionLine[]> {
    const out: DecisionLine[] = [];
    await replay({
      config: await loadConfigFile(config),
      tracePath: trace,
      store: new MemoryStore(),
      onDecision: (d) => void out.push(d),
    });
    return out;
  }

  it('the library: exactly the differing calls worked out by hand, and each run as if alone', async () => {
    const seen: DecisionLine[] = [];
    const c = await compare({
      config: await loadConfigFile(newPath),
      baseline: await loadConfigFile(oldPath),
      configName: 'new.json',
      baselineName: 'old.json',
      tracePath: trace,
      store: new MemoryStore(),
      baselineStore: new MemoryStore(),
      onDecision: (d) => void seen.push(d),
    });
    expectWhatif(c.whatif, 'new.json', 'old.json');
    // the decisions passed on are the new configuration's, as a replay alone gives them
    expect(seen).to.deep.equal(await decisions(newPath));
    expect(c.result.inbound).to.deep.include({ admitted: 4, rejected: 3 });
    expect(c.baseline.outbound).to.deep.equal({ offered: 6, dispatched: 4, rejected: 2, rerouted: 4 });
    // the hand-made table above, decision by decision, for the old configuration
    const old = await decisions(oldPath);
    expect(
      old.map((d) =>
        (d.direction === 'in'
          ? `${d.call_id} ${d.outcome} ${d.limited_by ?? ''}`
          : `${d.call_id} ${d.outcome} ${d.carrier} ${d.delay_ms}`
        ).trim(),
      ),
    ).to.deep.equal([
      'c1 admitted',
      'c2 admitted',
      'c3 rejected peer:p1',
      'c4 rejected peer:p1',
      'c5 rejected unknown-peer',
      'o1 dispatched A 0',
      'o2 dispatched B 0',
      'o3 dispatched B 900',
      'o4 rejected null null',
      'c6 admitted',
      'c7 admitted',
      'o5 dispatched A 0',
      'o6 rejected null null',
    ]);
  });

  it('the same configuration on both sides: no difference', async () => {
    const cfg = await loadConfigFile(newPath);
    const c = await compare({
      config: cfg,
      baseline: cfg,
      configName: 'a',
      baselineName: 'a',
      tracePath: trace,
      store: new MemoryStore(),
      baselineStore: new MemoryStore(),
    });
    expect(c.whatif.differing).to.equal(0);
    expect(c.whatif.groups).to.deep.equal([]);
    expect(c.whatif.outbound.delay_only).to.equal(0);
  });

  it('a store that fails on either side ends the what-if with its error (no hang)', async () => {
    class FailingStore extends MemoryStore {
      private n = 0;
      override admit(req: AdmitRequest): Promise<AdmitResult> {
        if (++this.n === 3) return Promise.reject(new Error('disk on fire'));
        return super.admit(req);
      }
    }
    const cfg = await loadConfigFile(newPath);
    for (const side of ['store', 'baselineStore'] as const) {
      const stores = { store: new MemoryStore(), baselineStore: new MemoryStore(), [side]: new FailingStore() };
      let error: Error | undefined;
      await compare({
        config: cfg,
        baseline: cfg,
        configName: 'a',
        baselineName: 'b',
        tracePath: trace,
        ...stores,
      }).catch((e: Error) => (error = e));
      expect(error?.message, side).to.match(/disk on fire/);
    }
  });

  it('the command: text and --json report the same differences', async () => {
    const text = await runNode([BIN, 'replay', '--config', newPath, '--compare', oldPath, '--trace', trace], {
      cwd: ROOT,
    });
    expect(text.code, text.stderr).to.equal(0);
    expect(text.stderr).to.equal('');
    const tail = text.stdout.slice(text.stdout.indexOf('\nWhat-if: '));
    expect(tail.trim().split('\n')).to.deep.equal([
      `What-if: ${newPath} (new) against ${oldPath} (old)`,
      `4 of 13 calls decided differently under ${newPath} than under ${oldPath}: inbound 2 (1 now admitted, 1 now rejected, 0 rejected by another level or reason); outbound 2 (1 now dispatched, 0 now rejected, 1 on another carrier); 1 more outbound calls changed only their delay.`,
      '',
      '                            old  new  change',
      'inbound admitted              4    4  0',
      'inbound rejected              3    3  0',
      '  rejected by account:acme    0    1  +1',
      '  rejected by peer:p1         2    1  -1',
      'outbound dispatched           4    5  +1',
      'outbound rejected             2    1  -1',
      'outbound rerouted             4    2  -2',
      '  dispatched on A             2    4  +2',
      '  dispatched on B             2    1  -1',
      '',
      'Calls decided differently (old decision → new decision: calls, first calls)',
      '  in   admitted → rejected by account:acme (rate): 1 (c7)',
      '  in   rejected by peer:p1 (rate) → admitted: 1 (c3)',
      '  out  dispatched on B → dispatched on A: 1 (o2)',
      '  out  rejected (all-routes-congested) → dispatched on A: 1 (o6)',
    ]);
    const json = await runNode([BIN, 'replay', '--config', newPath, '--compare', oldPath, '--trace', trace, '--json'], {
      cwd: ROOT,
    });
    expect(json.code, json.stderr).to.equal(0);
    const j = JSON.parse(json.stdout) as {
      report: { inbound: unknown };
      baseline: { inbound: unknown };
      whatif: CompareJson;
    };
    expectWhatif(j.whatif, newPath, oldPath);
    expect(compareText(j.whatif)).to.equal(tail.trimEnd());
    expect(j.report.inbound).to.deep.include({
      admitted: 4,
      rejected: 3,
      rejected_by: { 'account:acme': 1, 'peer:p1': 1, 'unknown-peer': 1 },
    });
    expect(j.baseline.inbound).to.deep.include({
      admitted: 4,
      rejected: 3,
      rejected_by: { 'peer:p1': 2, 'unknown-peer': 1 },
    });
  });

  it('bad paths: exit 2 with one line, before replaying', async () => {
    const missing = await runNode(
      [BIN, 'replay', '--config', newPath, '--compare', join(dir, 'nope.json'), '--trace', trace],
      { cwd: ROOT },
    );
    expect(missing.code).to.equal(2);
    expect(missing.stderr).to.match(/^error: .*nope\.json: cannot read file: no such file or directory \(ENOENT\)\n$/);
    const html = await runNode(
      [
        BIN,
        'replay',
        '--config',
        newPath,
        '--compare',
        oldPath,
        '--trace',
        trace,
        '--html',
        join(dir, 'no/such/dir/r.html'),
      ],
      { cwd: ROOT },
    );
    expect(html.code).to.equal(2);
    expect(html.stderr).to.match(
      /^error: cannot write the HTML report .*r\.html: no such file or directory \(ENOENT\)\n$/,
    );
    expect(html.stderr.trim().split('\n')).to.have.length(1);
    expect(html.stdout).to.equal('');
  });

  describe('on Redis', () => {
    let handle: RedisHandle;
    before(async () => {
      handle = await getRedis();
    });
    after(async () => handle?.stop());

    it('--store redis: two independent stores, the same differences', async () => {
      const r = await runNode(
        [
          BIN,
          'replay',
          '--config',
          newPath,
          '--compare',
          oldPath,
          '--trace',
          trace,
          '--json',
          '--store',
          'redis',
          '--redis-url',
          handle.url,
        ],
        { cwd: ROOT },
      );
      expect(r.code, r.stderr).to.equal(0);
      expectWhatif((JSON.parse(r.stdout) as { whatif: CompareJson }).whatif, newPath, oldPath);
      const { Redis } = await import('ioredis');
      const redis = new Redis(handle.url);
      try {
        expect(await redis.keys('callgate:replay:*'), 'both stores cleared').to.deep.equal([]);
      } finally {
        redis.disconnect();
      }
    });
  });
});
