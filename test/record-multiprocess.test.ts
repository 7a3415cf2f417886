/**
 * Recording live traffic, for real: two routing processes (child processes, each its own ioredis
 * connection and CallGate) share one Redis and decide inbound and outbound calls as fast as they
 * can on Redis TIME, hanging most calls up a little later (channels are limited), each recording
 * its decisions' inputs and the calls' durations into rotating files. The files of both,
 * merged, replayed on the memory store, must give every call its live decision, except calls
 * decided in a microsecond that both processes used: their order across the two processes is not
 * in the files, so only their decisions as a group must match. The test names them.
 */
import { expect } from 'chai';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadConfig } from '../src/config/load.js';
import type { CallGateConfigInput } from '../src/config/types.js';
import { replay, type DecisionLine } from '../src/replay/replay.js';
import { mergeTraces } from '../src/replay/trace-merge.js';
import { MemoryStore } from '../src/store/memory-store.js';
import { uniquePrefix } from './admission/stores.js';
import { getRedis, type RedisHandle } from './helpers/redis.js';
import { startWorker, type Worker } from './helpers/worker.js';
import type { RecordWorkerArgs, RecordWorkerReport } from './record/worker.js';

const WORKER = fileURLToPath(new URL('./record/worker.ts', import.meta.url));
const ROOT = fileURLToPath(new URL('..', import.meta.url));

const CONFIG: CallGateConfigInput = {
  maxCallDuration: 'PT10S',
  inbound: {
    global: [{ limit: 50, window: 'PT1S' }],
    accounts: { acme: [{ limit: 25, window: 'PT1S' }] },
    peers: {
      p1: [{ limit: 40, window: 'PT1S' }, { limit: 60, window: 'PT5S' }, { channels: 12 }],
      'p {2}': [{ limit: 8, window: 'PT1S', algorithm: 'fixed-window' }],
    },
    defaultPeer: [{ limit: 10, window: 'PT1S', algorithm: 'sliding-window' }, { channels: 3 }],
  },
  outbound: {
    carriers: {
      A: { cps: 300, maxWait: 'PT0.02S', channels: 8 },
      B: { cps: 100, maxWait: 'PT0.05S' },
      C: { cps: 40, channels: 4 },
    },
  },
};

/** A decision without its call id: what must match within a shared microsecond. */
const what = (d: DecisionLine): string => JSON.stringify({ ...d, call_id: undefined });

describe('recording live traffic: two processes on one Redis, traces merged and replayed', function () {
  this.timeout(60_000);
  let handle: RedisHandle;
  let dir: string;
  const workers: Worker<RecordWorkerReport>[] = [];
  before(async () => {
    handle = await getRedis();
    dir = mkdtempSync(join(tmpdir(), 'callgate-recmp-'));
  });
  after(async () => {
    for (const w of workers) w.kill();
    await handle?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('the replay decides every call as live, except calls in a microsecond both processes used', async () => {
    const prefix = uniquePrefix('rec');
    for (const id of ['w1', 'w2']) {
      const args: RecordWorkerArgs = {
        id,
        url: handle.url,
        prefix,
        config: CONFIG,
        dir: join(dir, id),
        maxBytes: 16_384,
        peers: [
          { peer: 'p1', account: 'acme' },
          { peer: 'p {2}', account: 'acme' },
          { peer: 'p1' },
          { peer: 'other, "3"' },
        ],
        routes: [['A', 'B'], ['B', 'C'], ['C'], ['A', 'C', 'B']],
        durationMs: 1_500,
        maxCalls: 20_000,
        concurrency: 4,
        maxHoldMs: 400,
      };
      workers.push(
        startWorker<RecordWorkerReport>(WORKER, args, { cwd: ROOT, timeoutMs: 40_000, name: `worker ${id}` }),
      );
    }
    await Promise.all(workers.map((w) => w.ready));
    for (const w of workers) w.go();
    const reports = await Promise.all(workers.map((w) => w.report));
    for (const r of reports) {
      expect(r.errors, r.id).to.deep.equal([]);
      expect(r.files.length, `${r.id} rotated its files`).to.be.greaterThan(1);
    }

    const merged = join(dir, 'merged.csv');
    const files = reports.flatMap((r) => r.files);
    const { rows } = await mergeTraces(files, merged);
    const live = new Map(reports.flatMap((r) => r.decisions.map((d) => [d.call_id, d] as const)));
    expect(rows, 'one row per decision').to.equal(live.size);

    const replayed: DecisionLine[] = [];
    await replay({
      config: await loadConfig(CONFIG),
      tracePath: merged,
      store: new MemoryStore(),
      onDecision: (d) => void replayed.push(d),
    });
    expect(replayed).to.have.length(live.size);

    // microseconds in which both processes had a call decided
    const times = reports.map((r) => new Set(r.decisions.map((d) => d.time_us)));
    const shared = new Set([...times[0]!].filter((t) => times[1]!.has(t)));
    const named = replayed.filter((d) => shared.has(d.time_us)).map((d) => d.call_id);
    console.log(
      `      ${live.size} calls (${reports.map((r) => `${r.id}: ${r.decisions.length}, ${r.files.length} files`).join('; ')}); ` +
        `${named.length} decided in ${shared.size} microseconds both processes used${named.length ? `: ${named.join(', ')}` : ''}`,
    );

    const groups = new Map<number, { live: string[]; replay: string[] }>();
    for (const d of replayed) {
      const l = live.get(d.call_id);
      expect(l, `call ${d.call_id} was decided live`).to.not.equal(undefined);
      if (shared.has(d.time_us)) {
        const g = groups.get(d.time_us) ?? { live: [], replay: [] };
        groups.set(d.time_us, g);
        g.live.push(what(l!));
        g.replay.push(what(d));
        continue;
      }
      const { retry_after_ms: _r, ...same } = d as DecisionLine & { retry_after_ms?: number };
      expect(same, `call ${d.call_id}`).to.deep.equal(l);
    }
    // within a shared microsecond the same decisions were taken, maybe by other calls
    for (const [t, g] of groups) expect(g.replay.sort(), `microsecond ${t}`).to.deep.equal(g.live.sort());

    // the run exercised every kind of decision
    const all = [...live.values()];
    const limitedBy = new Set(all.map((d) => (d.direction === 'in' ? d.limited_by : undefined)));
    console.log(`      refused by: ${[...limitedBy].filter(Boolean).join(', ')}`);
    // which levels run out first depends on the two processes' speed: several must have
    expect([...limitedBy].filter(Boolean).length, 'levels that refused calls').to.be.at.least(3);
    expect(
      all.some((d) => d.direction === 'out' && d.outcome === 'dispatched' && d.rerouted_from.length > 0),
      'a reroute',
    ).to.equal(true);
    expect(
      all.some((d) => d.direction === 'out' && d.outcome === 'rejected'),
      'an outbound rejection',
    ).to.equal(true);
    expect(
      all.some((d) => d.direction === 'in' && d.reason === 'channels'),
      'an inbound refusal for channels',
    ).to.equal(true);
    // the rows carry the durations of the calls that hung up
    const { readTrace } = await import('../src/replay/trace.js');
    let withDuration = 0;
    for await (const c of readTrace(merged)) if (c.durationUs !== undefined) withDuration++;
    expect(withDuration).to.be.greaterThan(20);
  });
});
