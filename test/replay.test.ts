/**
 * Every fixture replayed through the engine, on the memory store and on a real Redis, compared
 * call by call with the naive reference model (test/reference/model.ts, written from the
 * contract alone and sharing no code with src/).
 */
import { expect } from 'chai';
import { readdirSync, readFileSync } from 'node:fs';
import { Redis } from 'ioredis';
import { loadConfigFile } from '../src/config/load.js';
import { replay, type DecisionLine } from '../src/replay/replay.js';
import { reportJson, reportText } from '../src/replay/report.js';
import { MemoryStore } from '../src/store/memory-store.js';
import { RedisStore } from '../src/store/redis/redis-store.js';
import type { Store } from '../src/store/types.js';
import { StoreUnavailableError } from '../src/errors/index.js';
import { TraceError } from '../src/errors/trace-error.js';
import { getRedis, startRedisServer, type RedisHandle } from './helpers/redis.js';
import { loadTraceForModel, modelFixture, runModel, type Decision } from './reference/model.js';
import { parseConfig, type CallGateConfigInput } from '../src/config/index.js';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const FIXTURES = new URL('../fixtures/', import.meta.url).pathname;
const names = readdirSync(FIXTURES)
  .filter((f) => f.endsWith('.trace.csv'))
  .map((f) => f.slice(0, -'.trace.csv'.length))
  .sort();

/** The contract's fields of a decision line (extra fields are welcome, not compared). */
function contractFields(d: DecisionLine | Decision): Record<string, unknown> {
  const { call_id, direction, outcome } = d;
  if (d.direction === 'in') return { call_id, direction, outcome, limited_by: d.limited_by, reason: d.reason };
  return {
    call_id,
    direction,
    outcome,
    carrier: d.carrier,
    delay_ms: d.delay_ms,
    rerouted_from: d.rerouted_from,
    reason: d.reason,
  };
}

async function engineDecisions(name: string, store: Store): Promise<DecisionLine[]> {
  const out: DecisionLine[] = [];
  await replay({
    config: await loadConfigFile(`${FIXTURES}${name}.config.json`),
    tracePath: `${FIXTURES}${name}.trace.csv`,
    store,
    onDecision: (d) => {
      out.push(d);
    },
  });
  return out;
}

function compare(actual: DecisionLine[], expected: Decision[]): void {
  expect(actual.length, 'number of decisions').to.equal(expected.length);
  for (let i = 0; i < expected.length; i++) {
    expect(contractFields(actual[i]!), `decision ${i + 1} (call ${expected[i]!.call_id})`).to.deep.equal(
      contractFields(expected[i]!),
    );
  }
}

describe('replay matches the reference model on every fixture', function () {
  this.timeout(120_000);
  let handle: RedisHandle;
  let redis: Redis;
  const expected = new Map<string, Decision[]>();

  before(async () => {
    expect(names.length, 'fixtures found').to.be.greaterThanOrEqual(6);
    for (const name of names) expected.set(name, modelFixture(FIXTURES, name).decisions);
    handle = await getRedis();
    redis = new Redis(handle.url);
  });
  after(async () => {
    redis?.disconnect();
    await handle?.stop();
  });

  for (const name of names) {
    it(`${name}: memory store`, async () => {
      compare(await engineDecisions(name, new MemoryStore()), expected.get(name)!);
    });
    it(`${name}: Redis store`, async () => {
      const store = new RedisStore({ redis, prefix: `t:replay:${name}:${Date.now()}:` });
      try {
        compare(await engineDecisions(name, store), expected.get(name)!);
      } finally {
        await store.clear();
      }
    });
  }

  it('the fixtures tell their stories (refusals, reroutes and congestion all occur)', () => {
    const all = [...expected.values()].flat();
    const reasons = new Set(all.map((d) => (d.direction === 'in' ? d.limited_by : d.reason)).filter(Boolean));
    for (const r of ['all-routes-congested', 'unknown-peer']) expect(reasons, r).to.include(r);
    expect(all.some((d) => d.direction === 'out' && d.rerouted_from.length > 0 && d.outcome === 'dispatched')).to.equal(
      true,
    );
    const boundary = expected.get('boundary')!;
    expect(readFileSync(`${FIXTURES}boundary.trace.csv`, 'utf8')).to.match(/\.999/);
    expect(boundary.filter((d) => d.outcome === 'rejected').length).to.be.greaterThan(0);
  });
});

describe('replay: a call id given again is a call of its own', function () {
  this.timeout(30_000);
  // live, a store takes an id it holds as the same call (an outbound one reserved again gives its
  // earlier hold up; the dispatcher refuses one still waiting for its slot): a trace's rows are
  // calls, each decided as the contract decides it, as the reference model does
  const config = {
    maxCallDuration: 'PT30S',
    outbound: { carriers: { A: { cps: 1, maxWait: 'PT5S', channels: 2 }, B: { cps: 1 } } },
  };
  const trace = [
    'time,call_id,direction,route,duration',
    '1709640000.000000,o1,out,A|B,10',
    '1709640000.000000,o2,out,A|B,10',
    // o2 again while the first o2 waits for its slot on A (1 s): a call of its own; A's two
    // channels hold o1 and o2, so B takes it, at once (the first o2 keeps its hold)
    '1709640000.100000,o2,out,A|B,10',
    // A full (o1, o2), B's next slot past its maxWait (0): o3, o4, o2 a third time refused;
    // o5 on A alone, refused
    '1709640000.200000,o3,out,A|B,10',
    '1709640000.300000,o4,out,A|B,10',
    '1709640000.400000,o2,out,A|B,10',
    '1709640000.500000,o5,out,A,10',
  ].join('\n');
  let dir: string;
  let handle: RedisHandle;
  let redis: Redis;
  before(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'callgate-repeat-out-'));
    writeFileSync(path.join(dir, 'trace.csv'), `${trace}\n`);
    handle = await getRedis();
    redis = new Redis(handle.url);
  });
  after(async () => {
    redis?.disconnect();
    await handle?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const decide = async (store: Store) => {
    const out: DecisionLine[] = [];
    const r = await replay({
      config: parseConfig(config),
      tracePath: path.join(dir, 'trace.csv'),
      store,
      onDecision: (d) => {
        out.push(d);
      },
    });
    return { out, r };
  };
  const expected = () => runModel(config, loadTraceForModel(path.join(dir, 'trace.csv')));

  it('on the memory store: every call decided, as the reference model; each dispatched call sent at its slot', async () => {
    const { out, r } = await decide(new MemoryStore());
    compare(out, expected());
    expect(out.map((d) => (d.direction === 'out' ? `${d.call_id} ${d.carrier} ${d.delay_ms}` : ''))).to.deep.equal([
      'o1 A 0',
      'o2 A 1000',
      'o2 B 0',
      'o3 null null',
      'o4 null null',
      'o2 null null',
      'o5 null null',
    ]);
    expect(r.outbound).to.deep.include({ offered: 7, dispatched: 3, rejected: 4 });
    // every dispatched call was sent at its slot, the first o2 too: A at 0 and 1 s, B at 0.1 s
    const t0 = 1_709_640_000_000_000;
    expect([r.carriers.get('A')!.lastSent, r.carriers.get('A')!.minSentSpacingUs]).to.deep.equal([
      t0 + 1_000_000,
      1_000_000,
    ]);
    expect(r.carriers.get('B')!.lastSent).to.equal(t0 + 100_000);
    // the report's channels of A, as the store held them
    expect(r.carriers.get('A')!.channels!.peak).to.equal(2);
    expect(r.carriers.get('A')!.channels!.held).to.equal(true);
  });

  /** Outbound rows (time, id, route) replayed on `store` under `cfg`, checked against the model. */
  const replayRows = async (
    name: string,
    rows: string[],
    cfg: CallGateConfigInput,
    store: Store,
    header = 'time,call_id,direction,route',
  ) => {
    const f = path.join(dir, name);
    writeFileSync(f, [header, ...rows].join('\n'));
    const out: DecisionLine[] = [];
    await replay({ config: parseConfig(cfg), tracePath: f, store, onDecision: (d) => void out.push(d) });
    compare(out, runModel(cfg, loadTraceForModel(f)));
    return out.map((d) => (d.direction === 'out' ? `${d.call_id} ${d.delay_ms}` : ''));
  };

  it('an id given again while its calls wait for their slots: each call paced as any', async () => {
    // x waits for its slot (1 s); x again at 1.0 s (x's first call is sent as the clock gets
    // there), again at 1.5 s and 2.5 s while the one before waits
    const rows = ['y', 'x', 'x', 'x', 'x'].map((id, i) => `${1709640000 + [0, 0, 1, 1.5, 2.5][i]!},${id},out,C`);
    const cfg = { outbound: { carriers: { C: { cps: 1, maxWait: 'PT10S' } } } };
    expect(await replayRows('waits.csv', rows, cfg, new MemoryStore())).to.deep.equal([
      'y 0',
      'x 1000',
      'x 1000',
      'x 1500',
      'x 1500',
    ]);
  });

  it('an id given again on the next row, a µs past its earlier call’s slot: decided, not refused', async () => {
    // the earlier x is sent at its slot (0.1 s) as the clock gets to the next row; its dispatch
    // ends a few microtasks later, and the next x must not find it still in progress
    const rows = ['1000000000.0,y', '1000000000.0,x', '1000000000.100001,x', '1000000000.100001,x'].map(
      (r) => `${r},out,A`,
    );
    const cfg = { outbound: { carriers: { A: { cps: 10, maxWait: '1s' } } } };
    for (const store of [new MemoryStore(), new RedisStore({ redis, prefix: `t:replay:next:${Date.now()}:` })]) {
      expect(await replayRows('next.csv', rows, cfg, store)).to.deep.equal(['y 0', 'x 100', 'x 99.999', 'x 199.999']);
      if (store instanceof RedisStore) await store.clear();
    }
  });

  // the slot is kept exactly (a base and k intervals), but its wait was one double, ahead + rest / p:
  // past a few digits of cps the fraction fell out of it (found by an independent probe)
  it('a wait a hair over maxWait is refused, and one a hair under a half µs rounds down, on both stores', async () => {
    const T = 1709640000;
    const burst = (n: number) => Array.from({ length: n }, (_, i) => `${T},c${i},out,A`);
    // 10 intervals of 1e15 / 588235294117647 µs: 17 µs and 1/588235294117647 more, over a maxWait of 17 µs
    const over = { outbound: { carriers: { A: { cps: 588235.294117647, maxWait: 'PT0.000017S' } } } };
    // 5 intervals of 1e15 / 143149576993 µs: 34928.49999999999650 µs, 34.928 ms (not 34.929)
    const half = { outbound: { carriers: { A: { cps: 143.149576993, maxWait: 'PT1S' } } } };
    for (const kind of ['memory', 'redis']) {
      const store = () =>
        kind === 'memory' ? new MemoryStore() : new RedisStore({ redis, prefix: `t:replay:hair:${Math.random()}:` });
      const a = await replayRows('over.csv', burst(11), over, store());
      expect(a.slice(9), kind).to.deep.equal(['c9 0.015', 'c10 null']);
      expect((await replayRows('half.csv', burst(6), half, store())).at(-1), kind).to.equal('c5 34.928');
    }
  });

  it("the memory store's sweep keeps a carrier whose next slot is a tenth of a µs ahead", async () => {
    // cps 9: `second` finds A's next slot 0.111 µs ahead, over its maxWait of 0. The 1,022 calls
    // before it bring the memory store to its sweep (every 1,024 operations), which took the slot,
    // one double near today's dates, as passed and forgot A: `second` went at once
    const T = 1709640000;
    const rows = [`${T}.000000,first,out,A`];
    for (let i = 0; i < 1022; i++) rows.push(`${T}.111111,f${i},out,B`);
    rows.push(`${T}.111111,second,out,A`);
    const cfg = { outbound: { carriers: { A: { cps: 9 }, B: { cps: 1000000, maxWait: 'PT1H' } } } };
    for (const store of [new MemoryStore(), new RedisStore({ redis, prefix: `t:replay:sweep:${Date.now()}:` })]) {
      expect((await replayRows('sweep.csv', rows, cfg, store)).at(-1)).to.equal('second null');
      if (store instanceof RedisStore) await store.clear();
    }
  });

  it("an id given again at its earlier call's last held µs: the earlier call still holds", async () => {
    // d's first call holds A's only channel from its slot, 111111.111 µs, for 2 s: until
    // 2111111.111 µs, so at 2111111 µs it still holds and e finds A full. The replay took the end
    // from the slot as one double, a µs short, and let the id go (its hold given up with it)
    const T = 1709640000;
    const rows = [
      `${T}.000000,a1,out,A,0`,
      `${T}.000000,d,out,A,2`,
      `${T + 2}.111111,d,out,B,0`,
      `${T + 2}.111111,e,out,A,0`,
    ];
    const cfg = { outbound: { carriers: { A: { cps: 9, maxWait: 'PT1S', channels: 1 }, B: { cps: 1000 } } } };
    const header = 'time,call_id,direction,route,duration';
    for (const store of [new MemoryStore(), new RedisStore({ redis, prefix: `t:replay:reuse:${Date.now()}:` })]) {
      expect(await replayRows('reuse.csv', rows, cfg, store, header)).to.deep.equal([
        'a1 0',
        'd 111.111',
        'd 0',
        'e null',
      ]);
      if (store instanceof RedisStore) await store.clear();
    }
  });

  it('an "out" row with an empty route is decided, rejected as all-routes-congested, not a problem', async () => {
    // a call that names no carrier is one whose carriers none can take, as the contract's loop
    // over an empty route decides it and as the library decides route: []; it stopped the whole
    // replay before ("empty route")
    const rows = ['1000000000.0,a,out,A', '1000000000.1,e1,out,', '1000000000.2,e2,out, | ', '1000000000.3,b,out,A'];
    const cfg = { outbound: { carriers: { A: { cps: 10 } } } };
    for (const store of [new MemoryStore(), new RedisStore({ redis, prefix: `t:replay:empty:${Date.now()}:` })]) {
      expect(await replayRows('empty-route.csv', rows, cfg, store)).to.deep.equal(['a 0', 'e1 null', 'e2 null', 'b 0']);
      if (store instanceof RedisStore) await store.clear();
    }
  });

  it('on Redis: the same decisions', async () => {
    const store = new RedisStore({ redis, prefix: `t:replay:repeat-out:${Date.now()}:` });
    try {
      compare((await decide(store)).out, expected());
    } finally {
      await store.clear();
    }
  });
});

describe('replay on a Redis that goes away', function () {
  this.timeout(60_000);
  it('stops with StoreUnavailableError instead of turning the failure into decisions', async () => {
    const server = await startRedisServer();
    const redis = new Redis(server.url, { maxRetriesPerRequest: 1 });
    redis.on('error', () => {});
    const seen: DecisionLine[] = [];
    try {
      const store = new RedisStore({ redis, prefix: 't:gone:', readyTimeoutMs: 500 });
      const run = replay({
        config: await loadConfigFile(`${FIXTURES}autodialer.config.json`),
        tracePath: `${FIXTURES}autodialer.trace.csv`,
        store,
        onDecision: async (d) => {
          seen.push(d);
          if (seen.length === 50) await server.kill();
        },
      });
      const err = await run.then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).to.be.instanceOf(StoreUnavailableError);
      expect(seen.length).to.equal(50);
      expect(seen.some((d) => d.direction === 'in' && d.limited_by === 'store-unavailable')).to.equal(false);
    } finally {
      redis.disconnect();
      await server.stop();
    }
  });
});

describe('replay stopped by an AbortSignal', () => {
  const config = () => loadConfigFile(`${FIXTURES}campaign.config.json`);
  const tracePath = `${FIXTURES}campaign.trace.csv`;

  it('mid-way: rejects with the signal reason, and no call starts after the abort', async () => {
    const controller = new AbortController();
    const reason = new Error('stop');
    const seen: DecisionLine[] = [];
    const store = new MemoryStore();
    const run = replay({
      config: await config(),
      tracePath,
      store,
      signal: controller.signal,
      onDecision: (d) => {
        seen.push(d);
        if (seen.length === 100) controller.abort(reason);
      },
    });
    let error: unknown;
    await run.catch((e: unknown) => (error = e));
    expect(error).to.equal(reason);
    expect(seen).to.have.length(100);
  });

  it('before it starts, or while the trace is validated: no decision at all', async () => {
    for (const abortAt of ['before', 'validating'] as const) {
      const controller = new AbortController();
      const reason = new Error(abortAt);
      if (abortAt === 'before') controller.abort(reason);
      else queueMicrotask(() => controller.abort(reason));
      let decisions = 0;
      const error = await replay({
        config: await config(),
        tracePath,
        store: new MemoryStore(),
        signal: controller.signal,
        onDecision: () => void decisions++,
      }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error, abortAt).to.equal(reason);
      expect(decisions, abortAt).to.equal(0);
    }
  });

  it('a trace that is no regular file is refused before reading (it is read twice)', async () => {
    for (const [path, what] of <[string, string][]>[
      [FIXTURES, 'it is a directory'],
      ['/dev/zero', 'it is not a regular file, and a replay reads its trace twice'],
    ]) {
      const error = await replay({ config: await config(), tracePath: path, store: new MemoryStore() }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error, path).to.be.instanceOf(TraceError);
      expect((error as TraceError).message).to.equal(`${path}: cannot read the trace: ${what}`);
    }
  });
});

describe('replay: a report at the last time a trace can state', () => {
  it('a fixed window that ends past Number.MAX_SAFE_INTEGER µs is shown ending there, not a RangeError', async () => {
    // the trace's latest time is 2^53 - 1 µs; a window of 1 s holding a call half a second before
    // it ends past it, and the report's busiest window threw after the decisions were written
    const dir = mkdtempSync(path.join(os.tmpdir(), 'callgate-last-time-'));
    try {
      const tracePath = path.join(dir, 'trace.csv');
      writeFileSync(tracePath, 'time,call_id,direction,peer\n9007199254.5,c1,in,P\n');
      const config = parseConfig({
        inbound: { peers: { P: [{ limit: 5, window: '1s', algorithm: 'fixed-window' }] } },
      });
      const r = await replay({ config, tracePath, store: new MemoryStore() });
      const level = reportJson(r).levels.find((l) => l.level === 'peer:P')!;
      expect(level.limits[0]!.busiest).to.deep.equal({
        from: '2255-06-05T23:47:34.000000Z',
        to: '2255-06-05T23:47:34.740991Z',
      });
      expect(reportText(r)).to.include('peer:P');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("a sliding window's peak just below its limit never reads as the limit beside held", async () => {
    // two calls in [0, 1 s), then one at 1.000001 s admitted under 0 + 2 x 0.999999 = 1.999998
    const dir = mkdtempSync(path.join(os.tmpdir(), 'callgate-peak-'));
    try {
      const tracePath = path.join(dir, 'trace.csv');
      writeFileSync(tracePath, 'time,call_id,direction,peer\n0.1,a,in,P\n0.2,b,in,P\n1.000001,c,in,P\n');
      const config = parseConfig({
        inbound: { peers: { P: [{ limit: 2, window: '1s', algorithm: 'sliding-window' }] } },
      });
      const r = await replay({ config, tracePath, store: new MemoryStore() });
      const limit = reportJson(r).levels.find((l) => l.level === 'peer:P')!.limits[0]!;
      expect([limit.peak, limit.held]).to.deep.equal([1.99, true]);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
