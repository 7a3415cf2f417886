/**
 * Recording live traffic (CallGate option `recordTrace`, src/recording/trace-recorder.ts) in one process: the
 * rows are the contract's trace (odd ids survive the round trip), files rotate by size, the
 * merged files replay to the very decisions the live engine took, and a failing disk is
 * reported without breaking a decision.
 */
import { expect } from 'chai';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { VirtualClock } from '../src/clock.js';
import { loadConfig } from '../src/config/load.js';
import type { CallGateConfigInput } from '../src/config/types.js';
import { CallGate } from '../src/gate.js';
import { TRACE_HEADER, TraceRecorder, epochSeconds } from '../src/recording/trace-recorder.js';
import type { Reservation } from '../src/dispatch/dispatcher.js';
import { replay, type DecisionLine } from '../src/replay/replay.js';
import { mergeTraces } from '../src/replay/trace-merge.js';
import { TraceError } from '../src/errors/trace-error.js';
import { readTrace, type TraceCall } from '../src/replay/trace.js';
import { MemoryStore } from '../src/store/memory-store.js';
import { prng } from '../scripts/make-fixtures.js';
import { runNode } from './helpers/run.js';

const ROOT = new URL('..', import.meta.url).pathname;
const BIN = join(ROOT, 'bin/callgate.js');

const CONFIG: CallGateConfigInput = {
  maxCallDuration: 'PT8S',
  inbound: {
    global: [{ limit: 40, window: 'PT1S' }],
    accounts: { 'acme, "inc"': [{ limit: 15, window: 'PT1S' }] },
    peers: { 'trunk {7}: a': [{ limit: 6, window: 'PT1S' }, { limit: 30, window: 'PT10S' }, { channels: 4 }] },
    defaultPeer: [{ limit: 3, window: 'PT1S', algorithm: 'sliding-window' }, { channels: 3 }],
  },
  outbound: { carriers: { A: { cps: 5, maxWait: 'PT0.5S', channels: 3 }, 'B b': { cps: 2, maxWait: 'PT1S' } } },
};
const PEERS = ['trunk {7}: a', 'pbx\n"2"', 'p,3', '#hash'];
const ROUTES = [['A', 'B b'], ['B b'], ['A', 'unknown']];
const MAX_CALL_US = 8_000_000;

interface LiveRun {
  decisions: DecisionLine[];
  /** What each call's row must say: its duration in µs, or undefined (a refusal, a lapsed hold). */
  durations: Map<string, number | undefined>;
  ends: { released: number; refreshed: number; lapsed: number };
}

/**
 * Decide `n` calls live on a VirtualClock (times in µs, some equal), recording them; most calls
 * that hold channels hang up (release) after a while, some are refreshed and left to lapse, some
 * just lapse.
 */
async function runLive(gate: CallGate, clock: VirtualClock, n: number, seed: number): Promise<LiveRun> {
  const rand = prng(seed);
  const decisions: DecisionLine[] = [];
  const durations = new Map<string, number | undefined>();
  const ends = { released: 0, refreshed: 0, lapsed: 0 };
  // hang-ups and refreshes to come, in time order
  const later: { at: number; callId: string; start: number; refresh: boolean }[] = [];
  const schedule = (callId: string, start: number) => {
    const r = rand();
    if (r < 0.1) {
      ends.lapsed++;
      durations.set(callId, undefined);
    } else if (r < 0.2) {
      later.push({ at: start + 1_000_000 + Math.floor(rand() * 3_000_000), callId, start, refresh: true });
    } else later.push({ at: start + 1_000 + Math.floor(rand() * 6_000_000), callId, start, refresh: false });
    later.sort((a, b) => a.at - b.at);
  };
  const until = async (t: number) => {
    while (later.length > 0 && later[0]!.at <= t) {
      const e = later.shift()!;
      clock.advance(e.at);
      if (e.refresh) {
        await gate.refresh(e.callId); // (false for a call on carrier "B b": it holds no channel)
        ends.refreshed++;
        durations.set(e.callId, e.at + MAX_CALL_US - e.start);
      } else {
        // 'not-held' for a call on "B b"; its duration is recorded all the same
        expect(await gate.release(e.callId)).to.be.oneOf(['released', 'not-held']);
        ends.released++;
        durations.set(e.callId, e.at - e.start);
      }
    }
    clock.advance(t);
  };
  let t = clock.now();
  const pending: Promise<unknown>[] = [];
  for (let i = 0; i < n; i++) {
    t += i % 7 === 0 ? 0 : Math.floor(rand() * 120_000);
    await until(t);
    const callId = `c,${i}"${i % 5 === 0 ? '\n' : ''}`;
    if (rand() < 0.6) {
      const peer = PEERS[Math.floor(rand() * PEERS.length)]!;
      const account = rand() < 0.5 ? 'acme, "inc"' : undefined;
      const d = await gate.admit({ callId, peer, account });
      decisions.push(
        d.admitted
          ? { call_id: callId, direction: 'in', outcome: 'admitted', time_us: d.at }
          : {
              call_id: callId,
              direction: 'in',
              outcome: 'rejected',
              limited_by: d.limitedBy!,
              ...(d.reason && { reason: d.reason }),
              time_us: d.at,
              retry_after_ms: d.retryAfterMs,
            },
      );
      if (d.admitted) schedule(callId, d.at);
      else durations.set(callId, undefined);
    } else {
      const route = ROUTES[Math.floor(rand() * ROUTES.length)]!;
      const r = await new Promise<Reservation>((resolve) =>
        pending.push(gate.dispatch({ callId, route }, undefined, { onReserved: resolve })),
      );
      const line: DecisionLine = {
        call_id: callId,
        direction: 'out',
        outcome: r.outcome,
        carrier: r.carrier,
        delay_ms: r.delayMs,
        rerouted_from: r.reroutedFrom,
        time_us: r.at,
      };
      if (r.reason) line.reason = r.reason;
      if (r.skipped) line.skipped = r.skipped;
      decisions.push(line);
      if (r.outcome === 'dispatched') schedule(callId, r.slotAt!);
      else durations.set(callId, undefined);
    }
  }
  await until(Number.MAX_SAFE_INTEGER - 1);
  for (let next = clock.nextTimer; next !== undefined; next = clock.nextTimer) clock.advance(next);
  await Promise.all(pending);
  return { decisions, durations, ends };
}

async function readAll(path: string): Promise<TraceCall[]> {
  const rows: TraceCall[] = [];
  for await (const c of readTrace(path)) rows.push(c);
  return rows;
}

describe('recording live decisions as a trace', function () {
  this.timeout(60_000);
  let dir: string;
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'callgate-rec-'));
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('epochSeconds writes µs exactly', () => {
    expect(epochSeconds(1_700_000_000_000_001)).to.equal('1700000000.000001');
    expect(epochSeconds(5)).to.equal('0.000005');
    expect(epochSeconds(1_700_000_000_123_456)).to.equal('1700000000.123456');
  });

  it('rows round-trip through the trace reader, files rotate by size, the merged trace replays to the same decisions', async () => {
    const config = await loadConfig(CONFIG);
    const clock = new VirtualClock(1_700_000_000_000_000);
    const gate = new CallGate({ config, clock, recordTrace: { dir, prefix: 'rec', maxBytes: 4096 } });
    const errors: Error[] = [];
    gate.on('error', (e) => errors.push(e));
    const { decisions: live, durations, ends } = await runLive(gate, clock, 600, 11);
    await gate.close();
    expect(errors).to.deep.equal([]);
    expect(ends.released).to.be.greaterThan(100);
    expect(ends.refreshed).to.be.greaterThan(10);
    expect(ends.lapsed).to.be.greaterThan(10);

    const rec = gate.recorder!;
    expect(rec.rows).to.equal(600);
    expect(rec.dropped).to.equal(0);
    expect(rec.inProgress).to.equal(0);
    const files = readdirSync(dir).sort();
    expect(files.map((f) => join(dir, f))).to.deep.equal(rec.files);
    expect(files.length).to.be.greaterThan(5);
    for (const f of files) {
      expect(f).to.match(/^rec-\d{8}T\d{6}Z-\d+-\d{4}\.csv$/);
      const text = readFileSync(join(dir, f), 'utf8');
      expect(text.startsWith(`${TRACE_HEADER}\n`), f).to.equal(true);
      expect(Buffer.byteLength(text), f).to.be.at.most(4096);
    }
    // every row is the call's input, with the decision time and the duration its hold lasted
    const rows = (await Promise.all(rec.files.map(readAll))).flat();
    expect(rows).to.have.length(600);
    const byId = new Map(rows.map((r) => [r.callId, r]));
    for (const d of live) {
      const row = byId.get(d.call_id)!;
      expect([row.direction, row.time, row.durationUs], d.call_id).to.deep.equal([
        d.direction,
        d.time_us,
        durations.get(d.call_id),
      ]);
    }
    expect(new Set(rows.filter((r) => r.direction === 'in').map((r) => r.peer))).to.deep.equal(new Set(PEERS));
    expect(rows.filter((r) => r.direction === 'out').map((r) => r.route!.join('|'))).to.include('A|unknown');

    const merged = join(dir, 'merged.csv');
    expect((await mergeTraces(rec.files, merged)).rows).to.equal(600);
    const replayed: DecisionLine[] = [];
    await replay({ config, tracePath: merged, store: new MemoryStore(), onDecision: (d) => void replayed.push(d) });
    // every decision is the live one (retry-after too), in the same order
    expect(replayed.length).to.equal(live.length);
    replayed.forEach((d, i) => {
      expect(d, `decision ${i}`).to.deep.equal(live[i]);
    });
    expect(live.filter((d) => d.outcome === 'rejected').length).to.be.greaterThan(50);
    expect(
      live.filter((d) => d.direction === 'in' && d.reason === 'channels').length,
      'refused for channels',
    ).to.be.greaterThan(5);
    expect(
      live.filter((d) => d.direction === 'out' && d.outcome === 'dispatched' && d.delay_ms! > 0).length,
    ).to.be.greaterThan(20);
  });

  it('record() (a call that passes whatever the limits) is written as an ordinary `in` row', async () => {
    const gate = new CallGate({
      config: await loadConfig(CONFIG),
      clock: new VirtualClock(1_700_000_000_000_000),
      recordTrace: { dir },
    });
    await gate.record({ callId: 'sos', peer: 'trunk {7}: a', account: 'acme, "inc"' });
    await gate.close();
    expect(readFileSync(gate.recorder!.files[0]!, 'utf8')).to.equal(
      `${TRACE_HEADER}\n1700000000.000000,sos,in,trunk {7}: a,"acme, ""inc""",,\n`,
    );
  });

  it('a repeated admit of a call still holding (an INVITE sent again) is no row: a replay decides rows as calls', async () => {
    const clock = new VirtualClock(1_700_000_000_000_000);
    const gate = new CallGate({ config: await loadConfig(CONFIG), clock, recordTrace: { dir } });
    const first = await gate.admit({ callId: 'x', peer: 'trunk {7}: a' });
    clock.advance(1_700_000_000_200_000);
    const again = await gate.admit({ callId: 'x', peer: 'trunk {7}: a' });
    expect([first.admitted, again.duplicate]).to.deep.equal([true, true]);
    clock.advance(1_700_000_001_000_000);
    await gate.release('x');
    await gate.close();
    expect(readFileSync(gate.recorder!.files[0]!, 'utf8')).to.equal(
      `${TRACE_HEADER}\n1700000000.000000,x,in,trunk {7}: a,,,1.000000\n`,
    );
  });

  it('mergeTraces: equal times keep the order of the inputs; a bad input leaves no output', async () => {
    const a = join(dir, 'a.csv');
    const b = join(dir, 'b.csv');
    writeFileSync(a, `${TRACE_HEADER}\n1.000001,a1,in,p,,,\n1.000003,a2,in,p,,,\n`);
    writeFileSync(b, 'time,call_id,direction,peer\n1.000001,b1,in,q\n1.000002,b2,in,q\n');
    const out = join(dir, 'm.csv');
    expect(await mergeTraces([a, b], out)).to.deep.equal({ rows: 4, spilled: 0 });
    expect(readFileSync(out, 'utf8')).to.equal(
      `${TRACE_HEADER}\n1.000001,a1,in,p,,,\n1.000001,b1,in,q,,,\n1.000002,b2,in,q,,,\n1.000003,a2,in,p,,,\n`,
    );
    writeFileSync(b, 'time,call_id,direction,peer\n1.000001,b1,in,q\nlater,b2,in,q\n');
    const bad = join(dir, 'bad.csv');
    let error: unknown;
    await mergeTraces([a, b], bad).catch((e) => (error = e));
    expect(error).to.be.instanceOf(TraceError);
    expect(readdirSync(dir).filter((f) => f.startsWith('bad.csv'))).to.deep.equal([]);
  });

  it('mergeTraces sorts unsorted files in bounded memory (runs spilled), equal times in input then file order', async () => {
    const rand = prng(9);
    const inputs: string[] = [];
    const all: { time: number; id: string; input: number; pos: number }[] = [];
    for (let f = 0; f < 3; f++) {
      const lines = [TRACE_HEADER];
      for (let i = 0; i < 300; i++) {
        const time = 1_700_000_000_000_000 + Math.floor(rand() * 50) * 1000; // many equal times, any order
        const id = `f${f}-${i}`;
        lines.push(`${epochSeconds(time)},${id},in,p,,,${i % 3 === 0 ? '1.5' : ''}`);
        all.push({ time, id, input: f, pos: i });
      }
      inputs.push(join(dir, `u${f}.csv`));
      writeFileSync(inputs[f]!, `${lines.join('\n')}\n`);
    }
    const out = join(dir, 'sorted.csv');
    expect(await mergeTraces(inputs, out, { chunkRows: 64 })).to.deep.equal({ rows: 900, spilled: 14 });
    const rows = await readAll(out);
    const want = [...all].sort((x, y) => x.time - y.time || x.input - y.input || x.pos - y.pos);
    expect(rows.map((r) => r.callId)).to.deep.equal(want.map((w) => w.id));
    expect(rows.filter((r) => r.durationUs === 1_500_000)).to.have.length(300);
    expect(readdirSync(dir).filter((f) => f.includes('.tmp-'))).to.deep.equal([]);
  });

  it('callgate merge-traces: the merged file, or exit 2 and one line per problem', async () => {
    const a = join(dir, 'a.csv');
    const b = join(dir, 'b.csv');
    writeFileSync(a, `${TRACE_HEADER}\n2.5,a1,out,,,A|B,\n`);
    writeFileSync(b, `${TRACE_HEADER}\n1.25,b1,in,p,acme,,\n`);
    const out = join(dir, 'm.csv');
    const ok = await runNode([BIN, 'merge-traces', '--out', out, a, b], { cwd: ROOT });
    expect(ok.code, ok.stderr).to.equal(0);
    expect(ok.stdout).to.equal(`${out}: 2 calls from 2 files\n`);
    expect(readFileSync(out, 'utf8')).to.equal(`${TRACE_HEADER}\n1.250000,b1,in,p,acme,,\n2.500000,a1,out,,,A|B,\n`);
    writeFileSync(b, `${TRACE_HEADER}\nnever,b1,in,p,acme,,\n`);
    const bad = await runNode([BIN, 'merge-traces', '--out', join(dir, 'x.csv'), a, b], { cwd: ROOT });
    expect(bad.code).to.equal(2);
    expect(bad.stderr).to.equal(`error: ${b}:2: column "time": bad time "never"\n`);
    // `-` is no standard output here: refused, rather than a file named "-"
    const dash = await runNode([BIN, 'merge-traces', '--out', '-', a], { cwd: dir });
    expect([dash.code, dash.stderr]).to.deep.equal([
      2,
      'error: --out -: merge-traces writes a file, whole or not at all (a replay reads its trace twice): name one\n',
    ]);
    expect(existsSync(join(dir, '-'))).to.equal(false);
    const one = await runNode([BIN, 'merge-traces', '--out', out, a], { cwd: ROOT });
    expect(one.stdout).to.equal(`${out}: 1 call from 1 file\n`);
  });

  it('a failing disk is reported on the error event; decisions go on', async () => {
    const config = await loadConfig(CONFIG);
    const target = join(dir, 'gone');
    const recorder = new TraceRecorder({ dir: target });
    rmSync(target, { recursive: true }); // the folder disappears: opening the first file fails
    const gate = new CallGate({ config, clock: new VirtualClock(1_700_000_000_000_000), recordTrace: recorder });
    const errors: Error[] = [];
    gate.on('error', (e) => errors.push(e));
    // (durations given: the rows are whole at the decision and go to the file at once)
    const d1 = await gate.admit({ callId: 'x1', peer: 'trunk {7}: a', durationUs: 1_000 });
    await new Promise((r) => setTimeout(r, 50));
    const d2 = await gate.admit({ callId: 'x2', peer: 'trunk {7}: a', durationUs: 1_000 });
    expect([d1.admitted, d2.admitted]).to.deep.equal([true, true]);
    await gate.close();
    expect(errors.map((e) => e.message)).to.have.length(1);
    expect(errors[0]!.message).to.match(/^trace recorder: ENOENT/);
    expect(recorder.error).to.be.instanceOf(Error);
    expect(recorder.rows).to.equal(1);
    expect(recorder.dropped).to.equal(1);
  });

  it('a disk that cannot keep up: rows beyond maxPendingBytes are dropped and counted, once reported', async () => {
    const config = await loadConfig(CONFIG);
    const gate = new CallGate({
      config,
      clock: new VirtualClock(1_700_000_000_000_000),
      recordTrace: { dir, maxPendingBytes: 1 },
    });
    const errors: Error[] = [];
    gate.on('error', (e) => errors.push(e));
    await gate.admit({ callId: 'first', peer: 'p', durationUs: 0 });
    await new Promise((r) => setImmediate(r)); // the first rows are handed to the file: the write is in flight
    await Promise.all(Array.from({ length: 20 }, (_, i) => gate.admit({ callId: `n${i}`, peer: 'p', durationUs: 0 })));
    await gate.close();
    const rec = gate.recorder!;
    expect(rec.dropped).to.be.greaterThan(0);
    expect(rec.rows + rec.dropped).to.equal(21);
    expect(errors.map((e) => e.message)).to.deep.equal([
      'trace recorder: the disk is behind by more than 1 bytes; rows are being dropped',
    ]);
    const rows = await readAll(rec.files[0]!);
    expect(rows.map((r) => r.callId)).to.deep.equal([
      'first',
      ...Array.from({ length: rec.rows - 1 }, (_, i) => `n${i}`),
    ]);
  });
});
