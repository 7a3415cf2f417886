/**
 * Redis trouble never crashes the process. A redis-server child is killed mid-run: the policy
 * decides (fail-closed refuses as `store-unavailable`, fail-open admits degraded, local decides
 * on an in-process store with the same limits, exactly), every decision comes back within the
 * timeout bound, and once the server is restarted (empty, no scripts loaded) decisions resume on
 * Redis without recreating the engine.
 *
 * Each test starts its own redis-server and engines (beforeEach), kills and restarts it itself:
 * the tests run alone and in any order.
 */
import { createHash } from 'node:crypto';
import { expect } from 'chai';
import { Redis } from 'ioredis';
import type { AdmissionDecision, StorePolicy } from '../src/admission/admission.js';
import { toSipResponse } from '../src/admission/sip.js';
import type { CallGateConfigInput } from '../src/config/index.js';
import { StoreUnavailableError } from '../src/errors/index.js';
import { CallGate } from '../src/gate.js';
import { RedisStore } from '../src/store/redis/redis-store.js';
import { scripts } from '../src/store/redis/scripts.js';
import { rawCommand, startRedisServer, type RedisServer } from './helpers/redis.js';
import { S, T0, uniquePrefix } from './admission/stores.js';

const TIMEOUT_MS = 150;
/**
 * Every decision comes back within TIMEOUT_MS + SLACK_MS. The slack is room for a loaded 2-core
 * machine (timers and the event loop late by a few hundred ms); a decision that waited for the
 * client instead (its reconnection, connectTimeout 1 s, or its retries) takes seconds.
 */
const SLACK_MS = 450;
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const outcome = (d: AdmissionDecision): string => (d.admitted ? 'A' : d.limitedBy!);

const config: CallGateConfigInput = {
  inbound: {
    global: [{ limit: 100, window: 'PT1S' }],
    peers: {
      p: [
        { limit: 3, window: 'PT1S' },
        { limit: 5, window: 'PT10S' },
      ],
      r: [],
    },
  },
};

interface Subject {
  name: string;
  policy: StorePolicy;
  client: Redis;
  prefix: string;
  gate: CallGate;
  degraded: { callId: string; policy: StorePolicy; error: Error }[];
  errors: Error[];
}

describe('CallGate when Redis goes away and comes back', function () {
  this.timeout(40_000);
  let server: RedisServer;
  let subjects: Subject[] = [];
  let unhandled: unknown[] = [];
  const onUnhandled = (reason: unknown) => unhandled.push(reason);
  let n = 0;

  const timed = async (
    s: Subject,
    input: { peer: string; at?: number; account?: string },
    op: 'admit' | 'record' = 'admit',
  ) => {
    const t = performance.now();
    const d = await s.gate[op]({ callId: `${s.name}-${n++}`, ...input });
    const ms = performance.now() - t;
    expect(ms, `${s.name} ${op} took ${ms.toFixed(0)} ms`).to.be.below(TIMEOUT_MS + SLACK_MS);
    return d;
  };

  beforeEach(async () => {
    unhandled = [];
    process.on('unhandledRejection', onUnhandled);
    server = await startRedisServer();
    const make = async (name: string, policy: StorePolicy, client: Redis): Promise<Subject> => {
      client.on('error', () => {}); // connection errors are expected here
      const prefix = uniquePrefix(`fault-${name}`);
      const gate = await CallGate.create({
        config,
        store: new RedisStore({ redis: client, prefix }),
        policy,
        timeoutMs: TIMEOUT_MS,
      });
      const s: Subject = { name, policy, client, prefix, gate, degraded: [], errors: [] };
      gate.on('degraded', (e) => s.degraded.push(e));
      gate.on('error', (e) => s.errors.push(e));
      return s;
    };
    const quick = () => new Redis(server.url, { maxRetriesPerRequest: 1, connectTimeout: 1_000 });
    subjects = [
      await make('closed', 'fail-closed', quick()),
      await make('open', 'fail-open', quick()),
      await make('local', 'local', quick()),
      // ioredis defaults (maxRetriesPerRequest 20, offline queue on)
      await make('closed-default', 'fail-closed', new Redis(server.url)),
    ];
    // every engine decides once on Redis before the test begins, as any engine has after its
    // first call: until a reply has told a RedisStore Redis' clock, its calls carry no deadline
    // (RedisStore's deadline()), and these clients (without RECOMMENDED_REDIS_OPTIONS) re-send a
    // call that was in flight when the connection broke: it would be counted after its refusal
    // (its first call loads the scripts: on a loaded machine it may pass the 150 ms timeout, and
    // is then tried again, a few times at most, on peer r that no test counts)
    for (const s of subjects) {
      let d = await timed(s, { peer: 'r', at: T0 - 10 * S });
      for (let i = 0; i < 5 && d.degraded !== undefined; i++) d = await timed(s, { peer: 'r', at: T0 - 10 * S });
      expect(d.degraded).to.equal(undefined);
    }
  });

  afterEach(async () => {
    process.off('unhandledRejection', onUnhandled);
    for (const s of subjects) {
      await s.gate.close();
      s.client.disconnect();
    }
    subjects = [];
    await server?.stop();
  });

  const get = (name: string) => subjects.find((s) => s.name === name)!;
  const closedOnes = () => [get('closed'), get('closed-default')];

  /** Resolves once every engine decides on Redis again (after a restart). */
  async function resume(): Promise<void> {
    const started = Date.now();
    for (const s of subjects) {
      // a bounded wait for the client to reconnect; every decision meanwhile stays within the bound
      for (let k = 0; ; k++) {
        const d = await timed(s, { peer: 'r', at: T0 - S - k });
        if (!d.degraded) break;
        expect(Date.now() - started, `${s.name} did not resume`).to.be.below(15_000);
        await sleep(100);
      }
    }
  }

  async function restartAndResume(): Promise<void> {
    await server.restart();
    await resume();
  }

  it('healthy: decisions on Redis, not degraded', async () => {
    for (const s of subjects) {
      const d = await timed(s, { peer: 'p', at: T0 });
      expect(d, s.name).to.deep.equal({ callId: d.callId, direction: 'in', admitted: true, retryAfterMs: 0, at: T0 });
      expect(s.degraded, s.name).to.deep.equal([]);
    }
  });

  it('server killed: fail-closed refuses as store-unavailable within the bound', async () => {
    await server.kill();
    for (const s of closedOnes()) {
      for (let i = 0; i < 3; i++) {
        const d = await timed(s, { peer: 'p', at: T0 + 100 * S + i });
        expect(d).to.include({
          admitted: false,
          limitedBy: 'store-unavailable',
          retryAfterMs: 0,
          degraded: 'fail-closed',
          at: T0 + 100 * S + i,
        });
        expect(toSipResponse(d)).to.deep.equal({ status: 503, reason: 'Service Unavailable' });
      }
      // live time too (no at): the process clock stands in for Redis TIME
      const before = Date.now() * 1000;
      const live = await timed(s, { peer: 'p' });
      expect(live).to.include({ admitted: false, limitedBy: 'store-unavailable' });
      expect(live.at).to.be.within(before - 1_000, Date.now() * 1000 + 1_000);
      expect(s.degraded).to.have.length(4);
      expect(s.degraded.every((e) => e.policy === 'fail-closed' && e.error instanceof StoreUnavailableError)).to.equal(
        true,
      );
      // an unknown peer needs no store: still unknown-peer, not degraded
      const u = await timed(s, { peer: 'stranger' });
      expect(u).to.include({ admitted: false, limitedBy: 'unknown-peer' });
      expect(u.degraded).to.equal(undefined);
    }
  });

  it('server killed: fail-open admits, marked degraded, with a degraded event', async () => {
    await server.kill();
    const s = get('open');
    for (let i = 0; i < 6; i++) {
      const d = await timed(s, { peer: 'p', at: T0 + 100 * S + i }); // over 3/s: nobody counts
      expect(d).to.include({ admitted: true, degraded: 'fail-open', retryAfterMs: 0 });
    }
    expect(s.degraded.map((e) => e.callId)).to.have.length(6);
    expect(s.degraded.every((e) => e.policy === 'fail-open' && e.error instanceof StoreUnavailableError)).to.equal(
      true,
    );
    const r = await timed(s, { peer: 'p', at: T0 + 100 * S + 7 }, 'record');
    expect(r).to.include({ admitted: true, forced: true, degraded: 'fail-open' });
  });

  it('server killed: local decides on the in-process store with the same limits, exactly', async () => {
    const s = get('local');
    // counted on Redis before the outage: the in-process store starts empty all the same
    expect(outcome(await timed(s, { peer: 'p', at: T0 }))).to.equal('A');
    await server.kill();
    const T1 = T0 + 100 * S;
    const plan: [number, string, number][] = [
      [T1, 'A', 0],
      [T1 + 1, 'A', 0],
      [T1 + 2, 'A', 0],
      [T1 + 3, 'peer:p', 1_000], // 3/s full: T1 leaves at T1+1s
      [T1 + S, 'A', 0],
      [T1 + S + 1, 'A', 0], // 5 in 10 s now
      [T1 + S + 2, 'peer:p', 9_000], // 10 s window full: T1 leaves at T1+10s
    ];
    for (const [at, expected, retry] of plan) {
      const d = await timed(s, { peer: 'p', at });
      expect(outcome(d), String(at - T1)).to.equal(expected);
      expect(d).to.include({ degraded: 'local', retryAfterMs: retry, at });
    }
    const r = await timed(s, { peer: 'p', at: T1 + 2 * S }, 'record');
    expect(r).to.include({ admitted: true, forced: true, degraded: 'local' });
    const after = await timed(s, { peer: 'p', at: T1 + 10 * S }); // log: T1+1, T1+2, T1+S, T1+S+1, record T1+2S
    expect(after).to.include({ admitted: false, limitedBy: 'peer:p', degraded: 'local' });
    expect(s.degraded.length).to.equal(plan.length + 2);
  });

  it('restarted (empty, no scripts): decisions resume on Redis with the same engine', async () => {
    await server.kill();
    for (const s of subjects) expect((await timed(s, { peer: 'p', at: T0 + 100 * S })).degraded).to.equal(s.policy);
    await server.restart();
    await resume();
    // the calls below are lone calls of sliding logs only: admit-lone.lua decides them. A call
    // from the outage that a default client re-sent on reconnecting may have loaded it already
    // (its deadline passed, it counted nothing): flush, so that they meet NOSCRIPT as the first
    // calls on a restarted Redis do
    await rawCommand(server.port, ['SCRIPT', 'FLUSH']);
    const sha = createHash('sha1').update(scripts()['admit-lone'].lua).digest('hex');
    expect(await rawCommand(server.port, ['SCRIPT', 'EXISTS', sha])).to.deep.equal([0]);
    const T2 = T0 + 1_000 * S;
    for (const s of subjects) {
      // exact decisions, from Redis: 3/s on peer p
      const ds: AdmissionDecision[] = [];
      for (let i = 0; i < 4; i++) ds.push(await timed(s, { peer: 'p', at: T2 + i }));
      expect(ds.map(outcome), s.name).to.deep.equal(['A', 'A', 'A', 'peer:p']);
      expect(ds.every((x) => x.degraded === undefined)).to.equal(true);
      expect(await s.client.zcard(`${s.prefix}peer:p:log`)).to.equal(3);
    }
    expect(await rawCommand(server.port, ['SCRIPT', 'EXISTS', sha])).to.deep.equal([1]);
  });

  it('calls refused while Redis was away (a second and more, the clients retrying) are not recorded on Redis once it is back', async () => {
    await server.kill();
    for (const s of closedOnes()) {
      for (let i = 0; i < 3; i++)
        expect(await timed(s, { peer: 'p', at: T0 + 100 * S + i })).to.include({ limitedBy: 'store-unavailable' });
    }
    await sleep(1_000); // ioredis retries meanwhile (the default client with its offline queue)
    await restartAndResume();
    await sleep(500); // let any command still queued in a client reach Redis
    for (const s of closedOnes()) {
      const stale = await s.client.zrangebyscore(`${s.prefix}peer:p:log`, T0 + 100 * S, T0 + 100 * S + 10);
      expect(stale, `${s.name}: refused calls counted on Redis`).to.deep.equal([]);
    }
  });

  // A decision that timed out must not be counted on Redis later: RedisStore sends a command
  // only on a ready connection, never queues it offline nor re-sends it after a reconnect.
  it('a call refused during a short outage is not recorded on Redis when it comes back', async () => {
    await server.kill();
    const T3 = T0 + 2_000 * S;
    for (const s of closedOnes()) {
      expect(await timed(s, { peer: 'p', at: T3 })).to.include({ limitedBy: 'store-unavailable' });
    }
    await server.restart();
    const started = Date.now();
    while (subjects.some((s) => s.client.status !== 'ready')) {
      expect(Date.now() - started).to.be.below(10_000);
      await sleep(50);
    }
    await sleep(200);
    for (const s of closedOnes()) {
      expect(await s.client.zrangebyscore(`${s.prefix}peer:p:log`, T3, T3), s.name).to.deep.equal([]);
    }
  });

  it('nothing crashed: no unhandled rejection; each of two outages reported once on the error event', async () => {
    for (let outage = 0; outage < 2; outage++) {
      await server.kill();
      for (const s of subjects) {
        for (let i = 0; i < 3; i++) await timed(s, { peer: 'p', at: T0 + 100 * S + 10 * outage + i });
      }
      await restartAndResume();
    }
    expect(unhandled).to.deep.equal([]);
    for (const s of subjects) {
      expect(
        s.errors.map((e) => e instanceof StoreUnavailableError && /^Redis connection lost: /.test(e.message)),
        s.name,
      ).to.deep.equal([true, true]);
    }
  });
});
