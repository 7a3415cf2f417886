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
import { MemoryStore } from '../src/store/memory-store.js';
import { RedisStore } from '../src/store/redis/redis-store.js';
import type { Store } from '../src/store/types.js';
import { StoreUnavailableError } from '../src/errors/index.js';
import { TraceError } from '../src/errors/trace-error.js';
import { getRedis, startRedisServer, type RedisHandle } from './helpers/redis.js';
import { modelFixture, type Decision } from './reference/model.js';

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
