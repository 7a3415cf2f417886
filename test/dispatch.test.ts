/**
 * Dispatcher: leaky-bucket pacing with reroute, on MemoryStore and on RedisStore over a real
 * Redis (test/helpers/redis.ts; never mocks). Contract rules and every way a call can end run on a
 * VirtualClock; fault injection, pacing precision and two routing processes run on the real clock.
 */
import { expect } from 'chai';
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createInterface } from 'node:readline';
import { Redis } from 'ioredis';
import { SystemClock, VirtualClock, systemClockUs, type Clock } from '../src/clock.js';
import type { CarrierConfig } from '../src/config/types.js';
import {
  Dispatcher,
  DispatcherClosedError,
  type DispatchResult,
  type DispatcherEvents,
  type Reservation,
} from '../src/dispatch/dispatcher.js';
import { InvalidArgumentError, StoreUnavailableError } from '../src/errors/index.js';
import { SafeEmitter } from '../src/events.js';
import { MemoryStore } from '../src/store/memory-store.js';
import { RedisStore } from '../src/store/redis/redis-store.js';
import type { ReserveRequest, ReserveResult, Store } from '../src/store/types.js';
import { getRedis, newRedisClient, startRedisServer, type RedisHandle, type RedisServer } from './helpers/redis.js';
import type { WorkerArgs, WorkerReport } from './dispatch/worker.js';

const T0 = 1_700_000_000_000_000;
const S = 1_000_000;
const MS = 1_000;

type CarrierSpec = Record<string, { cps: number; maxWaitUs?: number }>;

function carriers(spec: CarrierSpec): Map<string, CarrierConfig> {
  return new Map(
    Object.entries(spec).map(([id, c]) => [id, { cps: c.cps, intervalUs: 1e6 / c.cps, maxWaitUs: c.maxWaitUs ?? 0 }]),
  );
}

const ENDINGS = ['dispatched', 'rejected', 'cancelled', 'failed'] as const;

/** A Dispatcher on its own emitter, recording every event. */
function setup(
  store: Store,
  clock: Clock,
  spec: CarrierSpec | (() => ReadonlyMap<string, CarrierConfig>),
  extra: { timeoutMs?: number; sendTimeoutMs?: number } = {},
) {
  const events = new SafeEmitter<DispatcherEvents>();
  const log: { event: string; payload: unknown }[] = [];
  for (const e of [...ENDINGS, 'rerouted', 'error'] as const)
    events.on(e, (p: unknown) => log.push({ event: e, payload: p }));
  const map = typeof spec === 'function' ? undefined : carriers(spec);
  const d = new Dispatcher({
    store,
    clock,
    carriers: typeof spec === 'function' ? spec : () => map!,
    events,
    ...extra,
  });
  /** Ending events of one call. */
  const endings = (callId: string) =>
    log.filter(
      (l) => (ENDINGS as readonly string[]).includes(l.event) && (l.payload as DispatchResult).callId === callId,
    );
  const of = (event: string) => log.filter((l) => l.event === event).map((l) => l.payload);
  return { d, events, log, endings, of };
}

/** Every call ended exactly once: one ending event per call id, matching its promise's outcome. */
function expectEachEndedOnce(
  results: DispatchResult[],
  endings: (id: string) => { event: string; payload: unknown }[],
): void {
  for (const r of results) {
    const e = endings(r.callId);
    expect(e, `events of ${r.callId}`).to.have.length(1);
    expect(e[0]!.event).to.equal(r.outcome);
    expect(e[0]!.payload).to.deep.equal(r);
  }
}

/** A promise's state without waiting for it. */
async function settled<T>(p: Promise<T>): Promise<boolean> {
  let done = false;
  p.then(
    () => (done = true),
    () => (done = true),
  );
  await new Promise((r) => setImmediate(r));
  return done;
}

/** A store wrapper counting reserve calls (the real store underneath). */
class CountingStore implements Store {
  reserves = 0;
  constructor(private readonly inner: Store) {}
  get kind() {
    return this.inner.kind;
  }
  admit = (r: Parameters<Store['admit']>[0]) => this.inner.admit(r);
  record = (r: Parameters<Store['record']>[0]) => this.inner.record(r);
  count = (r: Parameters<Store['count']>[0]) => this.inner.count(r);
  reserve = (r: ReserveRequest): Promise<ReserveResult> => {
    this.reserves++;
    return this.inner.reserve(r);
  };
  wait = (r: Parameters<Store['wait']>[0]) => this.inner.wait(r);
  release = (r: Parameters<Store['release']>[0]) => this.inner.release(r);
  refresh = (r: Parameters<Store['refresh']>[0]) => this.inner.refresh(r);
  holds = (r: Parameters<Store['holds']>[0]) => this.inner.holds(r);
  inspect = (r: Parameters<Store['inspect']>[0]) => this.inner.inspect(r);
  clear = () => this.inner.clear();
  close = () => this.inner.close();
}

function quantile(sorted: number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))]!;
}

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

// -------------------------------------------------------------------------------------------------

describe('Dispatcher', function () {
  this.timeout(20_000);

  let redisHandle: RedisHandle;
  let redis: Redis;
  before(async () => {
    redisHandle = await getRedis();
    redis = newRedisClient(redisHandle);
  });
  after(async () => {
    redis?.disconnect();
    await redisHandle?.stop();
  });

  const kinds: { name: string; make: () => Store }[] = [
    { name: 'MemoryStore', make: () => new MemoryStore() },
    {
      name: 'RedisStore',
      make: () => new RedisStore({ redis, prefix: `dispatch-test:${randomBytes(4).toString('hex')}:` }),
    },
  ];

  for (const kind of kinds) {
    describe(`on ${kind.name} (VirtualClock)`, () => {
      let store: Store;
      let clock: VirtualClock;
      beforeEach(() => {
        store = kind.make();
        clock = new VirtualClock(T0);
      });
      afterEach(async () => {
        await store.clear();
      });

      describe('contract rules (reserve)', () => {
        it('cps 2.5: delays 0, 400, 800 … ms; wait == maxWait is taken, beyond it rejected', async () => {
          const { d, log } = setup(store, clock, { B: { cps: 2.5, maxWaitUs: 2 * S } });
          const got: Reservation[] = [];
          for (let i = 0; i < 7; i++) got.push(await d.reserve({ callId: `c${i}`, route: ['B'] }));
          for (let i = 0; i < 6; i++) {
            expect(got[i]).to.deep.equal({
              callId: `c${i}`,
              direction: 'out',
              outcome: 'dispatched',
              carrier: 'B',
              delayMs: i * 400,
              reroutedFrom: [],
              at: T0,
              slotAt: T0 + i * 400_000,
              waitUs: i * 400_000,
            });
          }
          // c5 waited exactly maxWait (2 s) and was taken; c6 would wait 2.4 s
          expect(got[6]).to.deep.equal({
            callId: 'c6',
            direction: 'out',
            outcome: 'rejected',
            carrier: null,
            delayMs: null,
            reroutedFrom: ['B'],
            reason: 'all-routes-congested',
            at: T0,
          });
          expect(log, 'reserve() emits nothing').to.deep.equal([]);
        });

        it('cps 3: delays 0, 333.333, 666.667, 1000 ms (µs precision), and time frees slots', async () => {
          const { d } = setup(store, clock, { D: { cps: 3, maxWaitUs: 1.5 * S } });
          const delays: (number | null)[] = [];
          for (let i = 0; i < 5; i++) delays.push((await d.reserve({ callId: `d${i}`, route: ['D'] })).delayMs);
          expect(delays).to.deep.equal([0, 333.333, 666.667, 1000, 1333.333]);
          // 3 s later the bucket is empty again
          clock.advance(T0 + 3 * S);
          const r = await d.reserve({ callId: 'd5', route: ['D'] });
          expect(r).to.include({ delayMs: 0, at: T0 + 3 * S, slotAt: T0 + 3 * S });
          // an explicit `at` overrides the clock
          const r2 = await d.reserve({ callId: 'd6', route: ['D'], at: T0 + 10 * S });
          expect(r2).to.include({ delayMs: 0, at: T0 + 10 * S, slotAt: T0 + 10 * S });
        });

        it('reroutes in route order, skips unconfigured carriers (listed in skipped, never tried), rejects when none can', async () => {
          const { d } = setup(store, clock, {
            A: { cps: 1 },
            B: { cps: 1 },
            C: { cps: 1, maxWaitUs: 500 * MS },
          });
          const route = ['X', 'A', 'Y', 'B', 'C', 'Z'];
          const r1 = await d.reserve({ callId: 'r1', route });
          const r2 = await d.reserve({ callId: 'r2', route });
          const r3 = await d.reserve({ callId: 'r3', route });
          const r4 = await d.reserve({ callId: 'r4', route });
          expect(r1).to.deep.equal({
            callId: 'r1',
            direction: 'out',
            outcome: 'dispatched',
            carrier: 'A',
            delayMs: 0,
            reroutedFrom: [],
            skipped: ['X', 'Y', 'Z'],
            at: T0,
            slotAt: T0,
            waitUs: 0,
          });
          expect(r2).to.deep.equal({
            callId: 'r2',
            direction: 'out',
            outcome: 'dispatched',
            carrier: 'B',
            delayMs: 0,
            reroutedFrom: ['A'],
            skipped: ['X', 'Y', 'Z'],
            at: T0,
            slotAt: T0,
            waitUs: 0,
          });
          expect(r3).to.deep.equal({
            callId: 'r3',
            direction: 'out',
            outcome: 'dispatched',
            carrier: 'C',
            delayMs: 0,
            reroutedFrom: ['A', 'B'],
            skipped: ['X', 'Y', 'Z'],
            at: T0,
            slotAt: T0,
            waitUs: 0,
          });
          // C would wait 1 s > 500 ms
          expect(r4).to.deep.equal({
            callId: 'r4',
            direction: 'out',
            outcome: 'rejected',
            carrier: null,
            delayMs: null,
            reroutedFrom: ['A', 'B', 'C'],
            reason: 'all-routes-congested',
            skipped: ['X', 'Y', 'Z'],
            at: T0,
          });
          // a refused carrier kept its state; 600 ms later C takes a call with 400 ms of wait
          clock.advance(T0 + 600 * MS);
          const r5 = await d.reserve({ callId: 'r5', route: ['B', 'C'] });
          expect(r5).to.deep.equal({
            callId: 'r5',
            direction: 'out',
            outcome: 'dispatched',
            carrier: 'C',
            delayMs: 400,
            reroutedFrom: ['B'],
            at: T0 + 600 * MS,
            slotAt: T0 + S,
            waitUs: 400 * MS,
          });
        });

        it('a repeated carrier id is tried again, refused again, and listed each time (contract: each carrier in order)', async () => {
          const { d } = setup(store, clock, { A: { cps: 1 }, B: { cps: 1 } });
          await d.reserve({ callId: 'a', route: ['A'] });
          const r = await d.reserve({ callId: 'b', route: ['A', 'X', 'A', 'B', 'A'] });
          expect(r).to.include({ carrier: 'B' });
          expect(r.reroutedFrom).to.deep.equal(['A', 'A']);
          const none = await d.reserve({ callId: 'c', route: ['A', 'B', 'A'] });
          expect(none).to.include({ outcome: 'rejected', reason: 'all-routes-congested' });
          expect(none.reroutedFrom).to.deep.equal(['A', 'B', 'A']);
        });

        it('ids of any shape work and never collide', async () => {
          const { d } = setup(store, clock, { '{a}:b c': { cps: 1 }, '%007Ba%007D:b c': { cps: 1 } });
          expect(await d.reserve({ callId: '1', route: ['{a}:b c'] })).to.include({ carrier: '{a}:b c', delayMs: 0 });
          expect(await d.reserve({ callId: '2', route: ['%007Ba%007D:b c'] })).to.include({
            carrier: '%007Ba%007D:b c',
            delayMs: 0,
          });
        });

        it('no configured carrier: rejected all-routes-congested without a store call', async () => {
          const counting = new CountingStore(store);
          const { d, of } = setup(counting, clock, { A: { cps: 1 } });
          expect(await d.reserve({ callId: 'n1', route: ['X', 'Y'] })).to.deep.equal({
            callId: 'n1',
            direction: 'out',
            outcome: 'rejected',
            carrier: null,
            delayMs: null,
            reroutedFrom: [],
            reason: 'all-routes-congested',
            at: T0,
            skipped: ['X', 'Y'],
          });
          const res = await d.dispatch({ callId: 'n2', route: [] });
          expect(res).to.deep.equal({
            callId: 'n2',
            direction: 'out',
            outcome: 'rejected',
            carrier: null,
            delayMs: null,
            reroutedFrom: [],
            reason: 'all-routes-congested',
            at: T0,
          });
          expect(counting.reserves).to.equal(0);
          expect(of('rejected')).to.deep.equal([res]);
          expect(of('rerouted')).to.deep.equal([]);
        });

        it('reads the carriers on every call: a reload applies to the next call', async () => {
          let map = carriers({ A: { cps: 1 } });
          const { d } = setup(store, clock, () => map);
          expect(await d.reserve({ callId: '1', route: ['B', 'A'] })).to.include({ carrier: 'A' });
          map = carriers({ A: { cps: 1 }, B: { cps: 10 } });
          expect(await d.reserve({ callId: '2', route: ['B', 'A'] })).to.include({ carrier: 'B', delayMs: 0 });
          map = carriers({ A: { cps: 1, maxWaitUs: 2 * S } });
          expect(await d.reserve({ callId: '3', route: ['B', 'A'] })).to.include({ carrier: 'A', delayMs: 1000 });
        });

        it('refuses invalid input with InvalidArgumentError, before any I/O and with no event', async () => {
          const counting = new CountingStore(store);
          const { d, log } = setup(counting, clock, { A: { cps: 1 } });
          const bad: unknown[] = [
            { callId: '', route: ['A'] },
            { callId: 7, route: ['A'] },
            { callId: 'x', route: 'A' },
            { callId: 'x', route: ['A', 3] },
            { callId: 'x', route: ['A'], at: -1 },
            { callId: 'x', route: ['A'], at: 1.5 },
            null,
          ];
          for (const input of bad) {
            for (const op of ['reserve', 'dispatch'] as const) {
              let err: unknown;
              try {
                await (d[op] as (i: unknown) => Promise<unknown>)(input);
              } catch (e) {
                err = e;
              }
              expect(err, `${op}(${JSON.stringify(input)})`).to.be.instanceOf(InvalidArgumentError);
            }
          }
          let err: unknown;
          await d.dispatch({ callId: 'x', route: ['A'] }, 'nope' as never).catch((e) => (err = e));
          expect(err).to.be.instanceOf(InvalidArgumentError);
          expect(counting.reserves).to.equal(0);
          expect(log).to.deep.equal([]);
          expect(d.active).to.equal(0);
        });
      });

      describe('every way a call ends, exactly once', () => {
        it('held until its slot on the clock, then sent (sentAt = slot); replay never sleeps', async () => {
          const { d, endings, of } = setup(store, clock, { A: { cps: 2, maxWaitUs: 10 * S } });
          const sent: { id: string; carrier: string; at: number }[] = [];
          const reserved: Reservation[] = [];
          const ps = [0, 1, 2, 3].map((i) =>
            d.dispatch(
              { callId: `h${i}`, route: ['A'] },
              (carrier) => void sent.push({ id: `h${i}`, carrier, at: clock.now() }),
              { onReserved: (r) => reserved.push(r) },
            ),
          );
          // decisions known at once; h0 (wait 0) sent at once, the rest held
          while (reserved.length < 4) await new Promise((r) => setImmediate(r));
          expect(reserved.map((r) => r.delayMs)).to.deep.equal([0, 500, 1000, 1500]);
          await new Promise((r) => setImmediate(r));
          expect(sent.map((s) => s.id)).to.deep.equal(['h0']);
          expect(d.held).to.equal(3);
          expect(clock.pending).to.equal(3);
          clock.advance(T0 + 499_999);
          expect(sent).to.have.length(1);
          clock.advance(T0 + 1000 * MS);
          expect(sent.map((s) => s.at)).to.deep.equal([T0, T0 + 500 * MS, T0 + 1000 * MS]);
          clock.advance(T0 + 60 * S);
          const results = await Promise.all(ps);
          expect(results[3]).to.deep.equal({
            callId: 'h3',
            direction: 'out',
            outcome: 'dispatched',
            carrier: 'A',
            delayMs: 1500,
            reroutedFrom: [],
            at: T0,
            slotAt: T0 + 1500 * MS,
            waitUs: 1500 * MS,
            sentAt: T0 + 1500 * MS, // the clock passes through each timer's time on its way
          });
          expect(results.map((r) => r.sentAt)).to.deep.equal([T0, T0 + 500 * MS, T0 + 1000 * MS, T0 + 1500 * MS]);
          expectEachEndedOnce(results, endings);
          expect(of('dispatched')).to.have.length(4);
          expect(d.held).to.equal(0);
          expect(clock.pending).to.equal(0);
        });

        it('without send: dispatched is announced at the slot', async () => {
          const { d, of } = setup(store, clock, { A: { cps: 1, maxWaitUs: 5 * S } });
          const p0 = d.dispatch({ callId: 'a', route: ['A'] });
          const p1 = d.dispatch({ callId: 'b', route: ['A'] });
          expect((await p0).sentAt).to.equal(T0);
          while (d.held < 1) await new Promise((r) => setImmediate(r));
          expect(of('dispatched')).to.have.length(1);
          clock.advance(T0 + S);
          expect(await p1).to.include({ outcome: 'dispatched', sentAt: T0 + S, delayMs: 1000 });
          expect(of('dispatched')).to.have.length(2);
        });

        it('rerouted event: placed on a later carrier, or rejected after trying several', async () => {
          const { d, of, endings } = setup(store, clock, { A: { cps: 1 }, B: { cps: 1 } });
          const results = [
            await d.dispatch({ callId: 'e1', route: ['A', 'B'] }),
            await d.dispatch({ callId: 'e2', route: ['A', 'B'] }),
            await d.dispatch({ callId: 'e3', route: ['A', 'B'] }),
            await d.dispatch({ callId: 'e4', route: ['A'] }), // rejected after one carrier: no reroute
          ];
          expect(results.map((r) => r.outcome)).to.deep.equal(['dispatched', 'dispatched', 'rejected', 'rejected']);
          expect(of('rerouted')).to.deep.equal([
            { callId: 'e2', from: ['A'], to: 'B' },
            { callId: 'e3', from: ['A', 'B'], to: null },
          ]);
          expect(results[2]).to.deep.equal({
            callId: 'e3',
            direction: 'out',
            outcome: 'rejected',
            carrier: null,
            delayMs: null,
            reroutedFrom: ['A', 'B'],
            reason: 'all-routes-congested',
            at: T0,
          });
          expectEachEndedOnce(results, endings);
        });

        it('cancel while held: cancelled, send never runs, the timer is gone', async () => {
          const { d, endings, of } = setup(store, clock, { A: { cps: 1, maxWaitUs: 10 * S } });
          let sends = 0;
          const send = () => void sends++;
          const p0 = d.dispatch({ callId: 'k0', route: ['A'] }, send);
          const p1 = d.dispatch({ callId: 'k1', route: ['A'] }, send);
          const p2 = d.dispatch({ callId: 'k2', route: ['A'] }, send);
          await p0;
          expect(d.cancel('k0'), 'k0 is no longer held').to.equal(false);
          while (d.held < 2) await new Promise((r) => setImmediate(r));
          expect(d.cancel('k1')).to.equal(true);
          expect(d.cancel('k1')).to.equal(false);
          expect(d.cancel('nobody')).to.equal(false);
          expect(d.held).to.equal(1);
          expect(clock.pending).to.equal(1);
          const r1 = await p1;
          expect(r1).to.deep.equal({
            callId: 'k1',
            direction: 'out',
            outcome: 'cancelled',
            carrier: 'A',
            delayMs: 1000,
            reroutedFrom: [],
            reason: 'cancelled',
            at: T0,
            slotAt: T0 + S,
            waitUs: S,
          });
          clock.advance(T0 + 10 * S);
          const r2 = await p2;
          expect(r2.outcome).to.equal('dispatched');
          expect(sends).to.equal(2);
          expectEachEndedOnce([await p0, r1, r2], endings);
          expect(of('cancelled')).to.have.length(1);
          expect(d.held).to.equal(0);
          expect(clock.pending).to.equal(0);
        });

        it('send throwing or rejecting: failed send-failed, with the error', async () => {
          const { d, endings } = setup(store, clock, { A: { cps: 1, maxWaitUs: 10 * S } });
          const boom = new Error('boom');
          const r1 = await d.dispatch({ callId: 's1', route: ['A'] }, () => {
            throw boom;
          });
          const p2 = d.dispatch({ callId: 's2', route: ['A'] }, async () => {
            throw 'plain string';
          });
          while (d.held < 1) await new Promise((r) => setImmediate(r));
          clock.advance(T0 + S);
          const r2 = await p2;
          expect(r1).to.deep.equal({
            callId: 's1',
            direction: 'out',
            outcome: 'failed',
            carrier: 'A',
            delayMs: 0,
            reroutedFrom: [],
            reason: 'send-failed',
            at: T0,
            slotAt: T0,
            waitUs: 0,
            sentAt: T0,
            error: boom,
          });
          expect(r2).to.include({ outcome: 'failed', reason: 'send-failed', sentAt: T0 + S });
          expect(r2.error).to.be.instanceOf(Error);
          expect(r2.error!.message).to.equal('plain string');
          expectEachEndedOnce([r1, r2], endings);
        });

        it('a send that never settles ends failed after sendTimeoutMs', async () => {
          const { d, endings } = setup(store, clock, { A: { cps: 1 } }, { sendTimeoutMs: 50 });
          const r = await d.dispatch({ callId: 'hang', route: ['A'] }, () => new Promise(() => {}));
          expect(r).to.include({ outcome: 'failed', reason: 'send-failed' });
          expect(r.error!.message).to.match(/did not settle within 50 ms/);
          expectEachEndedOnce([r], endings);
          expect(d.active).to.equal(0);
        });

        it('listeners and onReserved that throw do not break the call', async () => {
          const { d, events, of } = setup(store, clock, { A: { cps: 1 } });
          events.on('dispatched', () => {
            throw new Error('listener');
          });
          const r = await d.dispatch({ callId: 'l', route: ['A'] }, undefined, {
            onReserved: () => {
              throw new Error('onReserved');
            },
          });
          expect(r.outcome).to.equal('dispatched');
          expect((of('error') as Error[]).map((e) => e.message)).to.deep.equal(['onReserved', 'listener']);
        });

        it('a callId still in progress is refused; once ended it may come again', async () => {
          const { d, endings } = setup(store, clock, { A: { cps: 1, maxWaitUs: 5 * S } });
          await d.dispatch({ callId: 'first', route: ['A'] });
          const p = d.dispatch({ callId: 'dup', route: ['A'] });
          let err: unknown;
          await d.dispatch({ callId: 'dup', route: ['A'] }).catch((e) => (err = e));
          expect(err).to.be.instanceOf(InvalidArgumentError);
          clock.advance(T0 + S);
          expect((await p).outcome).to.equal('dispatched');
          expect(endings('dup')).to.have.length(1);
          clock.advance(T0 + 3 * S);
          expect((await d.dispatch({ callId: 'dup', route: ['A'] })).outcome).to.equal('dispatched');
        });

        it('close drain: waits for held calls to be sent; later calls fail closed', async () => {
          const { d, endings, of } = setup(store, clock, { A: { cps: 1, maxWaitUs: 10 * S } });
          const sent: string[] = [];
          const ps = [0, 1, 2].map((i) => d.dispatch({ callId: `w${i}`, route: ['A'] }, () => void sent.push(`w${i}`)));
          while (d.held < 2) await new Promise((r) => setImmediate(r));
          const closing = d.close();
          expect(await settled(closing)).to.equal(false);
          const late = await d.dispatch({ callId: 'late', route: ['A'] });
          expect(late).to.deep.include({
            callId: 'late',
            outcome: 'failed',
            reason: 'closed',
            carrier: null,
            delayMs: null,
            reroutedFrom: [],
          });
          expect(late.error).to.be.instanceOf(DispatcherClosedError);
          let err: unknown;
          await d.reserve({ callId: 'late2', route: ['A'] }).catch((e) => (err = e));
          expect(err).to.be.instanceOf(DispatcherClosedError);
          clock.advance(T0 + S);
          expect(await settled(closing)).to.equal(false);
          clock.advance(T0 + 2 * S);
          await closing;
          expect(sent).to.deep.equal(['w0', 'w1', 'w2']);
          const results = await Promise.all(ps);
          expectEachEndedOnce([...results, late], endings);
          expect(of('dispatched')).to.have.length(3);
          expect(of('failed')).to.have.length(1);
          expect(d.held).to.equal(0);
          expect(d.active).to.equal(0);
          expect(clock.pending).to.equal(0);
        });

        it('close cancel: held calls end cancelled (reason closed) at once; calls still reserving too', async () => {
          const { d, endings } = setup(store, clock, { A: { cps: 1, maxWaitUs: 10 * S } });
          let sends = 0;
          const ps = [0, 1, 2].map((i) => d.dispatch({ callId: `x${i}`, route: ['A'] }, () => void sends++));
          while (d.held < 2) await new Promise((r) => setImmediate(r));
          const inFlight = d.dispatch({ callId: 'x3', route: ['A'] }, () => void sends++); // still waiting for the store
          await d.close({ mode: 'cancel' });
          expect(d.held).to.equal(0);
          expect(d.active).to.equal(0);
          expect(clock.pending).to.equal(0);
          const results = [...(await Promise.all(ps)), await inFlight];
          expect(results.map((r) => [r.outcome, r.reason])).to.deep.equal([
            ['dispatched', undefined],
            ['cancelled', 'closed'],
            ['cancelled', 'closed'],
            ['cancelled', 'closed'],
          ]);
          expect(results[3]).to.include({ carrier: 'A', delayMs: 3000, slotAt: T0 + 3 * S });
          expect(sends).to.equal(1);
          clock.advance(T0 + 100 * S);
          expect(sends).to.equal(1);
          expectEachEndedOnce(results, endings);
        });

        it('close cancel after close drain cancels what is still held', async () => {
          const { d } = setup(store, clock, { A: { cps: 1, maxWaitUs: 10 * S } });
          const ps = [0, 1].map((i) => d.dispatch({ callId: `y${i}`, route: ['A'] }));
          while (d.held < 1) await new Promise((r) => setImmediate(r));
          const draining = d.close({ mode: 'drain' });
          await d.close({ mode: 'cancel' });
          await draining;
          expect((await Promise.all(ps)).map((r) => r.outcome)).to.deep.equal(['dispatched', 'cancelled']);
          expect(clock.pending).to.equal(0);
          await d.close(); // idempotent
        });
      });
    });
  }

  // -----------------------------------------------------------------------------------------------

  describe('Redis killed while calls are held (live, store time)', () => {
    let server: RedisServer;
    let client: Redis;
    before(async () => {
      server = await startRedisServer();
      client = new Redis(server.url, {
        maxRetriesPerRequest: 1,
        connectTimeout: 500,
        retryStrategy: () => 100,
      });
      client.on('error', () => {}); // reconnect attempts while down
    });
    after(async () => {
      client?.disconnect();
      await server?.stop();
    });

    it('held calls still end; new calls fail store-unavailable within the timeout; works again after restart', async () => {
      const store = new RedisStore({ redis: client, prefix: 'dispatch-kill:' });
      const timeoutMs = 400;
      const { d, endings, of } = setup(
        store,
        new SystemClock(true),
        { A: { cps: 10, maxWaitUs: 5 * S } },
        { timeoutMs },
      );
      const reserved: Reservation[] = [];
      const sent: string[] = [];
      const held = Array.from({ length: 8 }, (_, i) =>
        d.dispatch({ callId: `held${i}`, route: ['A'] }, (c) => void sent.push(c), {
          onReserved: (r) => reserved.push(r),
        }),
      );
      const deadline = Date.now() + 3_000;
      while (reserved.length < 8 && Date.now() < deadline) await sleep(5);
      expect(reserved.map((r) => r.outcome)).to.deep.equal(Array(8).fill('dispatched'));
      expect(d.held).to.be.greaterThan(4);

      // calls racing the kill: whatever the timing, each ends dispatched or failed
      const racing = [0, 1].map((i) => d.dispatch({ callId: `racing${i}`, route: ['A'] }));
      await server.kill();
      // calls during the outage: each fails within the timeout (plus scheduling slack)
      const t0 = Date.now();
      const down = await Promise.all(
        [0, 1, 2].map((i) => d.dispatch({ callId: `down${i}`, route: ['A'] }, (c) => void sent.push(c))),
      );
      const elapsed = Date.now() - t0;
      for (const r of down) {
        expect(r).to.include({ outcome: 'failed', reason: 'store-unavailable', carrier: null, delayMs: null });
        expect(r.error).to.be.instanceOf(StoreUnavailableError);
      }
      // slack: room for a loaded 2-core machine; a call that waited for the client instead
      // (reconnecting every 100 ms, connectTimeout 500 ms, a retry) would take longer
      expect(elapsed).to.be.lessThan(timeoutMs + 600);

      const heldResults = await Promise.all(held);
      expect(heldResults.map((r) => r.outcome)).to.deep.equal(Array(8).fill('dispatched'));
      expect(sent).to.have.length(8);
      const raced = await Promise.all(racing);
      for (const r of raced) expect(['dispatched', 'failed']).to.include(r.outcome);
      expect(d.held).to.equal(0);

      await server.restart();
      let again: DispatchResult | undefined;
      const until = Date.now() + 5_000;
      for (let i = 0; Date.now() < until; i++) {
        again = await d.dispatch({ callId: `after${i}`, route: ['A'] });
        if (again.outcome === 'dispatched') break;
        await sleep(50);
      }
      expect(again?.outcome).to.equal('dispatched');
      expect(again?.at).to.be.closeTo(systemClockUs(), 5 * S); // Redis TIME
      await d.close();
      expectEachEndedOnce([...heldResults, ...down, ...raced], endings);
      expect(of('dispatched').length + of('failed').length).to.be.greaterThanOrEqual(12);
    });
  });

  // -----------------------------------------------------------------------------------------------

  describe('pacing precision (live, SystemClock, MemoryStore)', () => {
    it('200 calls at cps 100: each send close to its slot (or to 1/cps after the send before, when that one left late), never before', async function () {
      this.timeout(10_000);
      const clock = new SystemClock();
      const { d, endings } = setup(new MemoryStore(), clock, { A: { cps: 100, maxWaitUs: 10 * S } });
      const late: number[] = [];
      const sends: number[] = [];
      const ps: Promise<DispatchResult>[] = [];
      for (let i = 0; i < 200; i++) {
        let slot = 0;
        ps.push(
          d.dispatch(
            { callId: `p${i}`, route: ['A'] },
            () => {
              const now = systemClockUs();
              sends.push(now);
              late.push(now - slot);
            },
            { onReserved: (r) => (slot = r.slotAt!) },
          ),
        );
      }
      const results = await Promise.all(ps);
      expect(results.every((r) => r.outcome === 'dispatched')).to.equal(true);
      expectEachEndedOnce(results, endings);
      // wire spacing: a late send pushes the next one back, so lateness counts from the later of
      // the slot and 1/cps after the send before
      // (on the Dispatcher's own clock readings)
      for (let i = 1; i < late.length; i++)
        late[i] = Math.min(late[i]!, results[i]!.sentAt! - results[i - 1]!.sentAt! - 10 * MS);
      const ms = late.map((us) => us / 1000).sort((a, b) => a - b);
      const gaps = sends.slice(1).map((t, i) => (t - sends[i]!) / 1000);
      const p50 = quantile(ms, 0.5);
      const p99 = quantile(ms, 0.99);
      const max = ms[ms.length - 1]!;
      console.log(
        `      pacing: lateness vs slot over ${ms.length} sends: p50 ${p50.toFixed(3)} ms, p99 ${p99.toFixed(3)} ms, ` +
          `max ${max.toFixed(3)} ms, min ${ms[0]!.toFixed(3)} ms; min gap between sends ${Math.min(...gaps).toFixed(3)} ms (slot gap 10 ms)`,
      );
      expect(ms[0]).to.be.at.least(0); // never before the slot
      // close to it: the typical send within one slot interval (10 ms) of its slot. How close
      // (p99, max) is a performance figure, logged above: a loaded 2-core machine delays some
      // timers by tens of ms, which says nothing of the pacing.
      expect(p50, 'median lateness (ms)').to.be.lessThan(10);
      expect(d.held).to.equal(0);
    });
  });

  // -----------------------------------------------------------------------------------------------

  describe('two routing processes sharing carriers on one Redis (store time)', () => {
    it('slots on each carrier are at least 1/cps apart, and so are the actual sends (small tolerance)', async function () {
      this.timeout(25_000);
      const CLOCK_TOL = 1_000;
      const prefix = `dispatch-2p:${randomBytes(4).toString('hex')}:`;
      const spec = { A: { cps: 50, maxWaitUs: 300 * MS }, B: { cps: 40, maxWaitUs: 300 * MS } };
      const base: Omit<WorkerArgs, 'id' | 'routes'> = {
        url: redisHandle.url,
        prefix,
        carriers: spec,
        calls: 150,
        rate: 60,
        durationMs: 2_000,
      };
      const workers = [
        {
          ...base,
          id: 'p1',
          routes: [
            ['A', 'B'],
            ['A', 'B'],
            ['B', 'A'],
          ],
        },
        {
          ...base,
          id: 'p2',
          routes: [
            ['B', 'A'],
            ['A', 'B'],
          ],
        },
      ].map((args) => {
        const child = spawn(process.execPath, ['--import', 'tsx', 'test/dispatch/worker.ts', JSON.stringify(args)], {
          cwd: process.cwd(),
          stdio: ['pipe', 'pipe', 'pipe'],
        });
        let stderr = '';
        child.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
        const lines: string[] = [];
        const waiters: (() => void)[] = [];
        createInterface({ input: child.stdout }).on('line', (line) => {
          lines.push(line);
          waiters.splice(0).forEach((w) => {
            w();
          });
        });
        const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
        const nextLine = async (ms: number): Promise<string> => {
          const until = Date.now() + ms;
          while (lines.length === 0) {
            if (Date.now() > until || child.exitCode !== null)
              throw new Error(`worker ${args.id}: no output (stderr: ${stderr})`);
            await Promise.race([new Promise<void>((r) => waiters.push(r)), sleep(100)]);
          }
          return lines.shift()!;
        };
        return { child, nextLine, exited, stderr: () => stderr };
      });
      try {
        for (const w of workers) expect(JSON.parse(await w.nextLine(15_000))).to.deep.equal({ ready: true });
        for (const w of workers) w.child.stdin.write('go\n');
        const reports = (await Promise.all(workers.map((w) => w.nextLine(10_000)))).map(
          (l) => JSON.parse(l) as WorkerReport,
        );
        expect(await Promise.all(workers.map((w) => w.exited))).to.deep.equal([0, 0]);

        let totalSent = 0;
        for (const rep of reports) {
          const ended = Object.values(rep.outcomes).reduce((a, b) => a + b, 0);
          expect(ended, `${rep.id}: every call ended`).to.equal(rep.offered);
          expect(rep.outcomes.failed ?? 0, `${rep.id} failures: ${rep.errors.join('; ')}`).to.equal(0);
          expect(rep.sends).to.have.length(rep.outcomes.dispatched ?? 0);
          totalSent += rep.sends.length;
        }
        const lines: string[] = [];
        for (const [carrier, { cps }] of Object.entries(spec)) {
          const interval = 1e6 / cps;
          const sends = reports
            .flatMap((rep) => rep.sends.map((s) => ({ ...s, proc: rep.id })))
            .filter((s) => s.carrier === carrier)
            .sort((a, b) => a.slotUs - b.slotUs);
          expect(new Set(sends.map((s) => s.proc)).size, `both processes used ${carrier}`).to.equal(2);
          // lag: how long after its Redis-time slot a send actually ran, on this host's clocks
          // (Redis TIME and the process clock agree to well under CLOCK_TOL on one host)
          const lag = sends.map((s) => s.sendLocalUs - s.slotUs);
          let minSlotGap = Infinity;
          let minSendGap = Infinity;
          let crossProc = 0;
          for (let i = 1; i < sends.length; i++) {
            const slotGap = sends[i]!.slotUs - sends[i - 1]!.slotUs;
            const sendGap = sends[i]!.sendLocalUs - sends[i - 1]!.sendLocalUs;
            minSlotGap = Math.min(minSlotGap, slotGap);
            minSendGap = Math.min(minSendGap, sendGap);
            if (sends[i]!.proc !== sends[i - 1]!.proc) crossProc++;
            expect(slotGap, `${carrier} slot spacing at ${i}`).to.be.at.least(interval);
            // two sends come closer than 1/cps only by as much as the earlier one ran late
            // (a process the OS did not schedule in time), never because a slot was shared
            expect(sendGap, `${carrier} send spacing at ${i}`).to.be.at.least(
              interval - CLOCK_TOL - Math.max(0, lag[i - 1]!),
            );
          }
          const sorted = [...lag].sort((a, b) => a - b);
          expect(sorted[0], `${carrier}: no send before its slot`).to.be.at.least(-CLOCK_TOL);
          const q = (x: number) => (quantile(sorted, x) / 1000).toFixed(3);
          lines.push(
            `${carrier} (1/cps ${interval / 1000} ms): ${sends.length} sends, ${crossProc} consecutive pairs across processes; ` +
              `min slot gap ${(minSlotGap / 1000).toFixed(3)} ms, min local send gap ${(minSendGap / 1000).toFixed(3)} ms; ` +
              `send after slot p50 ${q(0.5)} / p99 ${q(0.99)} / max ${q(1)} / min ${(sorted[0]! / 1000).toFixed(3)} ms`,
          );
        }
        console.log(`      two processes, ${totalSent} sends:\n${lines.map((l) => `        ${l}`).join('\n')}`);
      } finally {
        for (const w of workers) if (w.child.exitCode === null) w.child.kill('SIGKILL');
        const cleaner = new RedisStore({ redis, prefix });
        await cleaner.clear();
      }
    });
  });
});
