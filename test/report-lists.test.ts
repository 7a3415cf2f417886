/**
 * The replay report stays readable on large traces and says what its counts are: the summary's
 * "rejected (…)" names the buckets that refused most and counts the rest; the level table says
 * why its "rejected" differs from the summary's; the HTML carrier list is busiest first (calls
 * that tried the carrier), as it says.
 */
import { expect } from 'chai';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig, type CallGateConfigInput } from '../src/config/index.js';
import { reportHtml } from '../src/replay/html.js';
import { replay } from '../src/replay/replay.js';
import { rejectedBy, reportText } from '../src/replay/report.js';
import { ReplaySeries } from '../src/replay/series.js';
import { MemoryStore } from '../src/store/memory-store.js';

const HEADER = 'time,call_id,direction,peer,account,route,duration\n';

describe('replay report: long lists and what the counts mean', () => {
  let dir: string;
  before(() => {
    dir = mkdtempSync(join(tmpdir(), 'callgate-report-'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  async function run(config: CallGateConfigInput, rows: string[]) {
    const tracePath = join(dir, `t${Math.random()}.csv`);
    writeFileSync(tracePath, HEADER + rows.join('\n'));
    const cfg = await loadConfig(config);
    const series = new ReplaySeries();
    const result = await replay({ config: cfg, tracePath, store: new MemoryStore(), series });
    return { result, html: reportHtml({ result, series, config: cfg, configPath: 'c.json', tracePath }) };
  }

  it('an id with a space, a comma or a parenthesis is quoted in the summary', () => {
    expect(rejectedBy({ 'peer:sip:gw 7, east': 1117, 'account:a(1)': 2, 'peer:p1': 3, 'unknown-peer': 4 })).to.equal(
      'peer:"sip:gw 7, east" 1117, account:"a(1)" 2, peer:p1 3, unknown-peer 4',
    );
  });

  it('few refusing buckets: all listed in level order; many: the top ten by refusals and a count of the rest', () => {
    expect(rejectedBy({ global: 2, 'peer:a': 5 })).to.equal('global 2, peer:a 5');
    const many = Object.fromEntries(
      Array.from({ length: 25 }, (_, i) => [`peer:p${String(i).padStart(2, '0')}`, i + 1]),
    );
    const text = rejectedBy(many);
    expect(text.split(', ').slice(0, 10)).to.deep.equal(
      Array.from({ length: 10 }, (_, i) => `peer:p${String(24 - i).padStart(2, '0')} ${25 - i}`),
    );
    // the 15 others: 1 + … + 15 calls
    expect(text).to.match(/, and 15 more buckets with 120 calls \(--json lists all\)$/);
  });

  it('text and HTML: the summary is cut, the level note explains the two counts, carriers busiest first', async () => {
    const peers: Record<string, { limit: number; window: string }[]> = {};
    const rows: string[] = [];
    for (let p = 0; p < 30; p++) {
      peers[`p${p}`] = [{ limit: 1, window: 'PT10S' }];
      // peer p gets p + 2 calls in the same second: p + 1 refused
      for (let i = 0; i < p + 2; i++) rows.push(`1.0,i${p}-${i},in,p${p},,,`);
    }
    // X takes one call, then passes every other over to Y: X was tried by all 20, Y by 19
    for (let i = 0; i < 20; i++) rows.push(`2.0,o${i},out,,,X|Y,`);
    const { result, html } = await run(
      {
        inbound: { peers, global: [{ limit: 100_000, window: 'PT1S' }] },
        outbound: { carriers: { Y: { cps: 1000, maxWait: '1s' }, X: { cps: 1, maxWait: '0ms' } } },
      },
      rows,
    );
    const text = reportText(result);
    const summary = text.split('\n')[1]!;
    expect(summary).to.match(/rejected \(peer:p29 30, peer:p28 29, .*, and 20 more buckets with \d+ calls/);
    expect(summary.length).to.be.lessThan(400);
    expect(text).to.include('one refusal counts at each level of the call; the summary line counts it once');
    // the global level counts every refusal, the summary names none under global
    expect(summary).to.not.include('global');
    // every column of every table has a name: as many words in a header as dash groups under it
    // (the levels' last column, held / EXCEEDED, had none)
    const lines = text.split('\n');
    const tables = lines.flatMap((l, i): [string, string][] => (/^-+( +-+)*$/.test(l) ? [[lines[i - 1]!, l]] : []));
    expect(tables.length).to.be.at.least(2);
    for (const [header, dashes] of tables)
      expect(header.trim().split(/ {2,}/).length, header).to.equal(dashes.split(/ +/).length);
    expect(html).to.include('and 20 more buckets');
    expect(html).to.include('one refusal counts at each level of the call');
    const data = JSON.parse(/<script id="data" type="application\/json">(.*?)<\/script>/s.exec(html)![1]!) as {
      carriers: { id: string; dispatched: number; rerouted_away: number }[];
    };
    expect(data.carriers.map((c) => [c.id, c.dispatched, c.rerouted_away])).to.deep.equal([
      ['X', 1, 19],
      ['Y', 19, 0],
    ]);
  });
});
