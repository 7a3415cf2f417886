/**
 * The replay's time series (src/replay/series.ts): the per-second bins agree with the decisions
 * and with the report, and the buckets the HTML report embeds keep every peak exact while a long
 * trace stays within MAX_POINTS per chart and LEVEL_BUDGET over the minor levels.
 */
import { expect } from 'chai';
import { loadConfig, loadConfigFile } from '../src/config/load.js';
import { replay, type DecisionLine } from '../src/replay/replay.js';
import { reportJson, shownPeak } from '../src/replay/report.js';
import { Bins, LEVEL_BUDGET, MAX_POINTS, ReplaySeries, seriesJson, stepFor } from '../src/replay/series.js';
import { MemoryStore } from '../src/store/memory-store.js';
import { prng } from '../scripts/make-fixtures.js';

const FIX = new URL('../fixtures/', import.meta.url).pathname;

/** Column `col` of a Bins as a Map second → value. */
function column(b: Bins, col: number): Map<number, number> {
  const m = new Map<number, number>();
  for (let i = 0; i < b.length; i++) m.set(b.secs[i]!, b.cols[col]![i]!);
  return m;
}

const sum = (m: Map<number, number>): number => [...m.values()].reduce((a, b) => a + b, 0);
const max = (m: Map<number, number>): number => Math.max(...[...m.values()].filter((v) => !Number.isNaN(v)));

describe('replay time series', () => {
  it('Bins: seconds out of order are inserted in order; sum and max columns merge per second', () => {
    const b = new Bins(['sum', 'max']);
    for (const [sec, v] of [
      [10, 1],
      [12, 5],
      [12, 2],
      [11, 7],
      [40, 1],
      [5, 3],
      [11, 1],
      [5, 9],
    ] as const)
      b.add(sec, [1, v]);
    for (let i = 0; i < 100; i++) b.add(100 + i, [1, undefined]); // grows past the first arrays
    expect([...b.secs.subarray(0, 5)]).to.deep.equal([5, 10, 11, 12, 40]);
    expect([...b.cols[0]!.subarray(0, 5)]).to.deep.equal([2, 1, 2, 2, 1]);
    expect([...b.cols[1]!.subarray(0, 5)]).to.deep.equal([9, 1, 7, 5, 1]);
    expect(b.length).to.equal(105);
    expect(Number.isNaN(b.cols[1]![104]!)).to.equal(true); // no value given: none
  });

  for (const name of ['campaign', 'autodialer', 'algorithms', 'trunks']) {
    it(`${name}: per-second bins equal the decisions counted per second, and their peaks the report's`, async () => {
      const series = new ReplaySeries();
      const lines: DecisionLine[] = [];
      const result = await replay({
        config: await loadConfigFile(`${FIX}${name}.config.json`),
        tracePath: `${FIX}${name}.trace.csv`,
        store: new MemoryStore(),
        series,
        onDecision: (d) => void lines.push(d),
      });
      const report = reportJson(result);
      // all inbound calls, per second, counted straight from the decision lines
      const perSecond = (pick: (d: DecisionLine) => boolean) => {
        const m = new Map<number, number>();
        for (const d of lines)
          if (pick(d)) m.set(Math.floor(d.time_us / 1e6), (m.get(Math.floor(d.time_us / 1e6)) ?? 0) + 1);
        return m;
      };
      const nonZero = (m: Map<number, number>) => new Map([...m].filter(([, v]) => v !== 0));
      expect(nonZero(column(series.inbound, 0))).to.deep.equal(perSecond((d) => d.direction === 'in'));
      expect(nonZero(column(series.inbound, 1))).to.deep.equal(
        perSecond((d) => d.direction === 'in' && d.outcome === 'admitted'),
      );
      expect(nonZero(column(series.outbound, 2))).to.deep.equal(
        perSecond((d) => d.direction === 'out' && d.outcome === 'rejected'),
      );
      // per level: totals and window peaks are the report's
      for (const l of report.levels) {
        const b = series.levels.get(l.level)!;
        expect([sum(column(b, 0)), sum(column(b, 1)), sum(column(b, 2))], l.level).to.deep.equal([
          l.offered,
          l.admitted,
          l.rejected,
        ]);
        l.limits.forEach((x, i) => {
          // as the report shows a peak (2 decimals, below its limit when it stayed below)
          expect(shownPeak(max(column(b, 3 + i)), x.limit), `${l.level} ${x.limit}/${x.window}`).to.equal(x.peak);
        });
      }
      expect(series.levels.size).to.equal(report.levels.length);
      // calls in progress: the most at once is the report's channel peak
      for (const l of report.levels)
        if (l.channels)
          expect(max(column(series.levelChannels.get(l.level)!, 0)), `${l.level} channels`).to.equal(l.channels.peak);
      for (const c of report.carriers)
        if (c.channels && c.channels.peak > 0)
          expect(max(column(series.carrierChannels.get(c.carrier)!, 0)), `${c.carrier} channels`).to.equal(
            c.channels.peak,
          );
      // per carrier: counts, sends by slot, longest wait
      for (const c of report.carriers) {
        const b = series.carriers.get(c.carrier);
        if (!b) {
          expect(c.dispatched + c.rerouted_away + c.rejected, c.carrier).to.equal(0);
          continue;
        }
        expect(
          [sum(column(b.decisions, 0)), sum(column(b.decisions, 1)), sum(column(b.decisions, 2))],
          c.carrier,
        ).to.deep.equal([c.dispatched, c.rerouted_away, c.rejected]);
        expect(sum(column(b.slots, 0)), c.carrier).to.equal(c.dispatched);
        if (c.dispatched > 0) expect(max(column(b.decisions, 4)), c.carrier).to.be.closeTo(c.delay_ms.max!, 0.002);
      }
    });
  }

  it('calls in progress: every second shows the most at once, as counted from the decisions and durations', async () => {
    const { mkdtempSync, rmSync, writeFileSync } = await import('node:fs');
    const { tmpdir } = await import('node:os');
    const { join } = await import('node:path');
    const dir = mkdtempSync(join(tmpdir(), 'callgate-series-'));
    try {
      const rand = prng(5);
      const rows = ['time,call_id,direction,peer,route,duration'];
      let t = 1_700_000_000_000_000;
      for (let i = 0; i < 400; i++) {
        t += Math.floor(rand() * 400_000);
        const duration = rand() < 0.1 ? '' : (rand() * 6).toFixed(3);
        rows.push(i % 3 === 0 ? `${t / 1e6},o${i},out,,A|B,${duration}` : `${t / 1e6},c${i},in,p${i % 2},,${duration}`);
      }
      writeFileSync(join(dir, 't.csv'), `${rows.join('\n')}\n`);
      const config = await loadConfig({
        maxCallDuration: 'PT8S',
        inbound: { peers: { p0: [{ limit: 100, window: 'PT1S' }, { channels: 4 }] }, defaultPeer: [{ channels: 3 }] },
        outbound: { carriers: { A: { cps: 2, maxWait: 'PT1S', channels: 3 }, B: { cps: 1, maxWait: 'PT2S' } } },
      });
      const series = new ReplaySeries();
      const lines: DecisionLine[] = [];
      const result = await replay({
        config,
        tracePath: join(dir, 't.csv'),
        store: new MemoryStore(),
        series,
        onDecision: (d) => void lines.push(d),
      });
      const json = seriesJson(series, result.firstUs!, new Set());
      expect(json.step).to.equal(1);
      // the holds, from the decisions and the trace's durations (outbound: from the decision to slot + duration)
      const durations = new Map(
        rows.slice(1).map((r) => {
          const c = r.split(',');
          return [c[1]!, c[5] === '' ? 8e6 : Math.round(Number(c[5]) * 1e6)] as const;
        }),
      );
      const holds = new Map<string, [number, number][]>();
      for (const d of lines) {
        let key: string | undefined;
        let end = 0;
        if (d.direction === 'in' && d.outcome === 'admitted') {
          key = `peer:p${Number(d.call_id.slice(1)) % 2}`;
          end = d.time_us + durations.get(d.call_id)!;
        }
        if (d.direction === 'out' && d.outcome === 'dispatched' && d.carrier === 'A') {
          key = 'A';
          end = d.time_us + Math.round(d.delay_ms! * 1000) + durations.get(d.call_id)!;
        }
        if (key) holds.set(key, [...(holds.get(key) ?? []), [d.time_us, end]]);
      }
      const lastSec = Math.floor(result.lastUs! / 1e6);
      const check = (
        sj: { idx: number[]; cols: Record<string, (number | null)[]> },
        hs: [number, number][],
        label: string,
      ) => {
        const inUse = (x: number) => hs.filter(([a, e]) => a <= x && e > x).length;
        let carry = 0;
        let k = 0;
        let peak = 0;
        for (let sec = json.origin; sec <= lastSec; sec++) {
          const i = sec - json.origin;
          // the most at once in [sec, sec + 1): at its start, or right after a decision in it
          const times = [sec * 1e6, ...hs.map(([a]) => a).filter((a) => Math.floor(a / 1e6) === sec)];
          const want = Math.max(...times.map(inUse));
          let got = carry;
          if (sj.idx[k] === i) {
            got = sj.cols.used![k]!;
            carry = sj.cols.after![k]!;
            k++;
          }
          expect(got, `${label} at second ${i}`).to.equal(want);
          peak = Math.max(peak, want);
        }
        return peak;
      };
      const p0 = check(json.levelChannels['peer:p0']!, holds.get('peer:p0')!, 'p0');
      const p1 = check(json.levelChannels['peer:p1']!, holds.get('peer:p1')!, 'p1');
      const a = check(json.carrierChannels.A!, holds.get('A')!, 'A');
      expect([p0, p1, a]).to.deep.equal([
        result.levels.get('peer:p0')!.channels!.peak,
        result.levels.get('peer:p1')!.channels!.peak,
        result.carriers.get('A')!.channels!.peak,
      ]);
      expect([p0, p1, a]).to.deep.equal([4, 3, 3]); // full at times
      expect(json.carrierChannels.B).to.equal(undefined);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it('stepFor: the smallest nice step that shows the span in MAX_POINTS buckets', () => {
    expect(stepFor(1)).to.equal(1);
    expect(stepFor(MAX_POINTS)).to.equal(1);
    expect(stepFor(MAX_POINTS + 1)).to.equal(2);
    expect(stepFor(86_400)).to.equal(30);
    expect(stepFor(365 * 86_400)).to.equal(10_800);
  });

  it('a day of traffic on 3000 peers: buckets within bounds, every bucket its busiest second, peaks exact', () => {
    const series = new ReplaySeries();
    const rand = prng(3);
    const t0 = Date.UTC(2024, 0, 1) * 1000;
    // one busy peer all day, 3000 peers now and then, a burst at 13:00:07
    const perSecond = new Map<number, number>();
    let n = 0;
    for (let s = 0; s < 86_400; s += 1 + Math.floor(rand() * 3)) {
      const calls = s === 13 * 3600 + 7 ? 500 : 2 + Math.floor(rand() * 9);
      for (let i = 0; i < calls; i++) {
        const at = t0 + s * 1e6 + i;
        series.inboundCall(at, true);
        series.levelCall('peer:busy', 1, at, 'admitted', [calls]);
        const peer = `peer:p${Math.floor(rand() * 3000)}`;
        series.levelCall(peer, 1, at, i % 2 === 0 ? 'admitted' : 'rejected', i % 2 === 0 ? [1] : undefined);
        series.levelChannel(peer, at, i % 3); // with a channel limit: a channel series each
        n++;
      }
      perSecond.set(s, calls);
    }
    const json = seriesJson(series, t0, new Set(['peer:busy']));
    expect(json.step).to.equal(30);
    expect(json.buckets).to.be.at.most(MAX_POINTS);
    // the busy peer at the main step: bucket i shows the busiest second of [i·30, (i+1)·30)
    const busy = json.levels['peer:busy']!;
    expect(busy.step).to.equal(30);
    const expected = new Map<number, number>();
    for (const [s, c] of perSecond)
      expected.set(Math.floor(s / 30), Math.max(expected.get(Math.floor(s / 30)) ?? 0, c));
    expect(new Map(busy.idx.map((b, k) => [b, busy.cols.offered![k]]))).to.deep.equal(expected);
    expect(Math.max(...(busy.cols.offered as number[]))).to.equal(500);
    expect(Math.max(...(busy.cols.w0 as number[]))).to.equal(500);
    expect(Math.max(...(json.inbound.cols.offered as number[]))).to.equal(500);
    // the 3000 minor peers share the budget at a coarser step
    const minor = Object.entries(json.levels).filter(([k]) => k !== 'peer:busy');
    expect(minor).to.have.length(3000);
    // their rate and channel series together (the channel series were once left at the main step)
    const minorChannels = Object.entries(json.levelChannels).filter(([k]) => k !== 'peer:busy');
    expect(minorChannels).to.have.length(3000);
    const listed = [...minor, ...minorChannels].reduce((a, [, s]) => a + s.idx.length, 0);
    expect(listed).to.be.at.most(LEVEL_BUDGET);
    expect(minor[0]![1].step).to.be.greaterThan(30);
    expect(minorChannels[0]![1].step).to.equal(minor[0]![1].step);
    // at the main step they would have needed more than the budget
    expect(n).to.be.greaterThan(LEVEL_BUDGET);
    const size = JSON.stringify(json).length;
    expect(size, 'embedded series, bytes').to.be.below(6_000_000);
  });
});
