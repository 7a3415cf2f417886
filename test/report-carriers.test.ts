/**
 * The replay report's carriers (src/replay/report.ts, stats.ts) on small traces whose answers
 * are known: delay percentiles are delays some call was given (nearest rank, not a histogram's
 * bucket top), a route naming a carrier twice counts each call once, and a carrier that took no
 * call has no delays (null in JSON, `-` in the text).
 */
import { expect } from 'chai';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseConfig, type CallGateConfigInput } from '../src/config/index.js';
import { replay } from '../src/replay/replay.js';
import { reportJson, reportText } from '../src/replay/report.js';
import { MemoryStore } from '../src/store/memory-store.js';

describe('replay report: carriers', () => {
  let dir: string;
  before(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'callgate-report-carriers-'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  const run = async (name: string, cfg: CallGateConfigInput, rows: string[]) => {
    const f = path.join(dir, name);
    writeFileSync(f, ['time,call_id,direction,route', ...rows].join('\n'));
    const r = await replay({ config: parseConfig(cfg), tracePath: f, store: new MemoryStore() });
    return { json: reportJson(r), text: reportText(r) };
  };
  const carrier = (j: Awaited<ReturnType<typeof run>>['json'], id: string) => j.carriers.find((c) => c.carrier === id)!;

  it('delay percentiles are delays given: p50 of 0, 1000, 2000 ms is 1000', async () => {
    const cfg = { outbound: { carriers: { A: { cps: 1, maxWait: 'PT2S' } } } };
    const { json } = await run('three.csv', cfg, ['10,o1,out,A', '10,o2,out,A', '10,o3,out,A']);
    // a histogram of 3 significant digits said 1000.447
    expect(carrier(json, 'A').delay_ms).to.deep.equal({ p50: 1000, p99: 2000, max: 2000 });
  });

  it('by nearest rank: 101 delays of 0 to 10,000 ms give p50 5000 and p99 9900', async () => {
    const cfg = { outbound: { carriers: { A: { cps: 10, maxWait: 'PT20S' } } } };
    const rows = Array.from({ length: 101 }, (_, i) => `10,o${i},out,A`);
    const { json } = await run('hundred.csv', cfg, rows);
    // ranks ceil(0.50 x 101) = 51 and ceil(0.99 x 101) = 100 of 0, 100, ..., 10,000 ms
    expect(carrier(json, 'A').delay_ms).to.deep.equal({ p50: 5000, p99: 9900, max: 10_000 });
  });

  it('a route naming a carrier twice: each call passed it over once', async () => {
    const cfg = { outbound: { carriers: { A: { cps: 1 }, B: { cps: 1 } } } };
    const { json } = await run('twice.csv', cfg, ['10.0,o1,out,A', '10.1,o2,out,A|A|B', '10.2,o3,out,A|A|B']);
    expect(json.outbound).to.include({ dispatched: 2, rejected: 1, rerouted: 2 });
    // o2 and o3 passed A over (each tried it twice), and no carrier took o3
    expect(carrier(json, 'A')).to.include({ dispatched: 1, rerouted_away: 2, rejected: 1 });
    expect(carrier(json, 'B')).to.include({ dispatched: 1, rerouted_away: 1, rejected: 1 });
  });

  it('a carrier that took no call has no delays: null in JSON, - in the text', async () => {
    const cfg = { outbound: { carriers: { A: { cps: 1 }, B: { cps: 1 } } } };
    const { json, text } = await run('none.csv', cfg, ['10,o1,out,A', '10,o2,out,A']);
    expect(carrier(json, 'B').delay_ms).to.deep.equal({ p50: null, p99: null, max: null });
    expect(carrier(json, 'A').delay_ms).to.deep.equal({ p50: 0, p99: 0, max: 0 });
    const row = text.split('\n').find((l) => l.startsWith('B '))!;
    expect(row.trim().split(/\s+/).slice(0, 7)).to.deep.equal(['B', '0', '0', '0', '-', '-', '-']);
  });
});
