/**
 * RedisStore batching of admit() and reserve(): admissions issued in one tick go to Redis as one
 * call of lua/admit.lua per lane (one lane on a single Redis, one per tag with hash tags; a lone
 * call of sliding logs as one call of lua/admit-lone.lua, or lua/admit-lone-held.lua with channels),
 * reservations as one call of lua/reserve.lua (one lane on a single Redis; with hash tags one per
 * carrier, a route tried carrier by carrier in issue order: carrier-lanes.ts),
 * both cut at maxBatch; other operations flush pending batches first; aborted calls never leave.
 *
 * The claim under test: every result is EXACTLY what MemoryStore gives when the same requests are
 * applied one by one in issue order (src/store/types.ts is the normative semantics). Run on a
 * real single Redis (the harness' getRedis) and on the harness' three-master Redis Cluster.
 */
import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import { Redis, type Cluster } from 'ioredis';
import { prng } from '../../scripts/make-fixtures.js';
import { InvalidArgumentError, StoreUnavailableError } from '../../src/errors/index.js';
import { MemoryStore } from '../../src/store/memory-store.js';
import { RECOMMENDED_REDIS_OPTIONS, RedisStore, type RedisStoreOptions } from '../../src/store/redis/redis-store.js';
import type {
  AdmitResult,
  Bucket,
  Carrier,
  CountResult,
  Hold,
  HoldsResult,
  Limit,
  RecordResult,
  RefreshResult,
  ReleaseResult,
  ReserveResult,
  StopSignal,
  WaitResult,
} from '../../src/store/types.js';
import { OUTBOUND_TAG } from '../../src/store/keys.js';
import { logScripts, scriptsRun, type Send, stopLoggingScripts } from '../helpers/script-log.js';
import {
  getRedis,
  newClusterClient,
  newRedisClient,
  startCluster,
  startRedisServer,
  type RedisClusterHandle,
  type RedisHandle,
} from '../helpers/redis.js';

const S = 1_000_000;
/** A base time near 1.7e15 µs, aligned to 10 s (so window boundaries are easy to aim at). */
const T0 = 1_700_000_000_000_000;

const SL = (limit: number, windowUs: number): Limit => ({ limit, windowUs, algorithm: 'sliding-log' });
const FW = (limit: number, windowUs: number): Limit => ({ limit, windowUs, algorithm: 'fixed-window' });
const SW = (limit: number, windowUs: number): Limit => ({ limit, windowUs, algorithm: 'sliding-window' });

/** Buckets and lists are readonly and reused (both stores cache per list object). */
function deepFreeze<T>(o: T): T {
  if (o !== null && typeof o === 'object' && !Object.isFrozen(o)) {
    for (const v of Object.values(o)) deepFreeze(v);
    Object.freeze(o);
  }
  return o;
}
const bucket = (name: string, ...limits: Limit[]): Bucket => deepFreeze({ name, limits });
const list = (...buckets: Bucket[]): readonly Bucket[] => deepFreeze(buckets);

const freshPrefix = () => `cgbatch:${randomBytes(6).toString('hex')}:`;

/**
 * The reference: a MemoryStore applied one request at a time, in issue order.
 *
 * Its periodic sweep is switched off (`sweep: false`). The sweep trims every log at the LATEST
 * time the store has seen, while types.ts (and Redis) trim a bucket's log only when recording in
 * it, at that call's time. The two agree as long as time never goes backwards; this test sends
 * earlier times after later ones on purpose.
 */
function reference(): MemoryStore {
  return new MemoryStore({
    sweep: false,
    clock: () => {
      throw new Error('the reference is only given explicit times');
    },
  });
}

// ---------------------------------------------------------------------------
// Operations (issued against a RedisStore without awaiting, applied to the reference in order)

type Op =
  | {
      readonly kind: 'admit';
      readonly tag: string;
      readonly buckets: readonly Bucket[];
      readonly now?: number;
      readonly signal?: StopSignal;
      readonly hold?: Hold;
    }
  | {
      readonly kind: 'record';
      readonly tag: string;
      readonly buckets: readonly Bucket[];
      readonly now: number;
      readonly hold?: Hold;
    }
  | {
      readonly kind: 'count';
      readonly tag: string;
      readonly bucket: string;
      readonly windowUs: number;
      readonly now: number;
    }
  | {
      readonly kind: 'reserve';
      readonly route: readonly Carrier[];
      readonly now?: number;
      readonly signal?: StopSignal;
      readonly hold?: Hold;
    }
  | { readonly kind: 'wait'; readonly carrier: Carrier; readonly now: number }
  | { readonly kind: 'release'; readonly id: string; readonly direction?: 'in' | 'out'; readonly now: number }
  | { readonly kind: 'refresh'; readonly id: string; readonly forUs: number; readonly now: number }
  | { readonly kind: 'holds'; readonly tag: string; readonly name: string; readonly now: number };

type Result =
  | AdmitResult
  | RecordResult
  | CountResult
  | ReserveResult
  | WaitResult
  | ReleaseResult
  | RefreshResult
  | HoldsResult;

const admit = (tag: string, buckets: readonly Bucket[], now?: number): Op => ({ kind: 'admit', tag, buckets, now });
const record = (tag: string, buckets: readonly Bucket[], now: number): Op => ({ kind: 'record', tag, buckets, now });
const count = (tag: string, bucketName: string, windowUs: number, now: number): Op => ({
  kind: 'count',
  tag,
  bucket: bucketName,
  windowUs,
  now,
});
const reserve = (route: readonly Carrier[], now?: number): Op => ({ kind: 'reserve', route, now });
const wait = (carrier: Carrier, now: number): Op => ({ kind: 'wait', carrier, now });

function issue(store: RedisStore, op: Op): Promise<Result> {
  switch (op.kind) {
    case 'admit':
      return store.admit({ tag: op.tag, buckets: op.buckets, now: op.now, signal: op.signal, hold: op.hold });
    case 'record':
      return store.record({ tag: op.tag, buckets: op.buckets, now: op.now, hold: op.hold });
    case 'count':
      return store.count({ tag: op.tag, bucket: op.bucket, windowUs: op.windowUs, now: op.now });
    case 'reserve':
      return store.reserve({ route: op.route, now: op.now, signal: op.signal, hold: op.hold });
    case 'wait':
      return store.wait({ carrier: op.carrier, now: op.now });
    case 'release':
      return store.release({ id: op.id, direction: op.direction, now: op.now });
    case 'refresh':
      return store.refresh({ id: op.id, forUs: op.forUs, now: op.now });
    case 'holds':
      return store.holds({ tag: op.tag, name: op.name, now: op.now });
  }
}

function apply(mem: MemoryStore, op: Op, now = op.now): Result {
  switch (op.kind) {
    case 'admit':
      return mem.admitSync({ tag: op.tag, buckets: op.buckets, now, hold: op.hold });
    case 'record':
      return mem.recordSync({ tag: op.tag, buckets: op.buckets, now, hold: op.hold });
    case 'count':
      return mem.countSync({ tag: op.tag, bucket: op.bucket, windowUs: op.windowUs, now });
    case 'reserve':
      return mem.reserveSync({ route: op.route, now, hold: op.hold });
    case 'wait':
      return mem.waitSync({ carrier: op.carrier, now });
    case 'release':
      return mem.releaseSync({ id: op.id, direction: op.direction, now: now! });
    case 'refresh':
      return mem.refreshSync({ id: op.id, forUs: op.forUs, now: now! });
    case 'holds':
      return mem.holdsSync({ tag: op.tag, name: op.name, now: now! });
  }
}

const describeCarrier = (c: Carrier): string => `${c.name}(I=${c.intervalUs},max=${c.maxWaitUs})`;

function describeOp(op: Op): string {
  const at = op.now === undefined ? 'store clock' : `T0${op.now - T0 >= 0 ? '+' : ''}${op.now - T0}`;
  const held = 'hold' in op && op.hold ? ` ${op.hold.id}+${op.hold.forUs}` : '';
  if (op.kind === 'count') return `count {${op.tag}} ${op.bucket} W=${op.windowUs} @${at}`;
  if (op.kind === 'reserve') return `reserve [${op.route.map(describeCarrier).join(', ')}]${held} @${at}`;
  if (op.kind === 'wait') return `wait ${describeCarrier(op.carrier)} @${at}`;
  if (op.kind === 'release') return `release ${op.id} ${op.direction ?? 'both'} @${at}`;
  if (op.kind === 'refresh') return `refresh ${op.id} +${op.forUs} @${at}`;
  if (op.kind === 'holds') return `holds {${op.tag}} ${op.name} @${at}`;
  const names = op.buckets.map(
    (b) =>
      `${b.name}(${b.limits.map((l) => `${l.algorithm[0]}${l.algorithm.split('-')[1]![0]}${l.limit}/${l.windowUs}`).join(',')})`,
  );
  return `${op.kind} {${op.tag}} [${names.join(', ')}${op.buckets.some((b) => b.channels) ? ` ch ${op.buckets.map((b) => b.channels ?? '-').join('/')}` : ''}]${held} @${at}`;
}

/**
 * Issue every op in one synchronous loop (one tick), then compare each result with the
 * reference applied in issue order. Returns the results.
 */
async function runTick(store: RedisStore, mem: MemoryStore, ops: readonly Op[], ctx: string): Promise<Result[]> {
  const pending = ops.map((op) => issue(store, op));
  const expected = ops.map((op) => apply(mem, op));
  const actual = await Promise.all(pending);
  for (let i = 0; i < ops.length; i++) {
    expect(actual[i], `${ctx}, op #${i} of ${ops.length}: ${describeOp(ops[i]!)}`).to.deep.equal(expected[i]);
  }
  return actual;
}

// ---------------------------------------------------------------------------
// The random workload

interface Pool {
  readonly tag: string;
  /** Every bucket list calls may name (each list object created once). */
  readonly lists: readonly (readonly Bucket[])[];
  /** Buckets with a sliding log, with the windows to count them over. */
  readonly logs: readonly { readonly name: string; readonly windows: readonly number[] }[];
}

/**
 * A global bucket, 3 accounts, 8 peers (peer i belongs to account i % 3); small limits mixing the
 * three algorithms (one or two sliding-log windows, fixed and sliding windows, a fixed and a
 * sliding window sharing one window hash), so that many calls are refused. Lists per peer:
 * [global, account, peer], [peer], [account, peer]; per account: [account].
 */
function makePool(tag: string, ns: string): Pool {
  const global = bucket(`${ns}global`, SL(12, S), SW(40, 10 * S));
  const accountLimits: Limit[][] = [[SL(3, S), SL(5, 10 * S)], [FW(4, S)], [SW(4, 2 * S), SL(6, 10 * S)]];
  const peerLimits: Limit[][] = [
    [SL(3, S), SL(5, 10 * S)],
    [FW(2, S)],
    [SW(3, S)],
    [SL(2, S), FW(4, 10 * S)],
    [FW(3, S), SW(2, S)],
    [SL(3, S), SL(5, 10 * S)],
    [SW(2, S), SL(4, 5 * S)],
    [FW(2, 2 * S), SW(5, 10 * S), SL(3, S)],
  ];
  const accounts = accountLimits.map((l, i) => bucket(`${ns}account:a${i}`, ...l));
  const peers = peerLimits.map((l, i) => bucket(`${ns}peer:p${i}`, ...l));
  const lists: (readonly Bucket[])[] = [];
  peers.forEach((p, i) => {
    const a = accounts[i % 3]!;
    lists.push(list(global, a, p), list(p), list(a, p));
  });
  for (const a of accounts) lists.push(list(a));
  const logs = [global, ...accounts, ...peers]
    .map((b) => ({
      name: b.name,
      windows: [...new Set(b.limits.filter((l) => l.algorithm === 'sliding-log').map((l) => l.windowUs))],
    }))
    .filter((l) => l.windows.length > 0);
  return deepFreeze({ tag, lists, logs });
}

/** makePool's shape with sliding logs only: every list fits a lone script (RedisStore loneUpTo). */
function makeLogPool(tag: string, ns: string): Pool {
  const global = bucket(`${ns}global`, SL(12, S), SL(30, 10 * S));
  const accounts = [[SL(3, S), SL(5, 10 * S)], [SL(4, S)], [SL(2, 2 * S), SL(6, 10 * S)]].map((l, i) =>
    bucket(`${ns}account:a${i}`, ...l),
  );
  const peers = [[SL(3, S), SL(5, 10 * S)], [SL(2, S)], [SL(3, S)], [SL(2, S), SL(4, 5 * S)]].map((l, i) =>
    bucket(`${ns}peer:p${i}`, ...l),
  );
  const lists: (readonly Bucket[])[] = [];
  peers.forEach((p, i) => {
    const a = accounts[i % 3]!;
    lists.push(list(global, a, p), list(p), list(a, p));
  });
  const logs = [global, ...accounts, ...peers].map((b) => ({
    name: b.name,
    windows: [...new Set(b.limits.map((l) => l.windowUs))],
  }));
  return deepFreeze({ tag, lists, logs });
}

/**
 * Attribute levels with bans: caller buckets (some sharing a window hash with their log) that
 * ban for 1-3 s after 2-4 strikes per 0.5-1 s span, behind and before a peer; many calls are
 * refused, banned and let in again.
 */
function makeBanPool(tag: string, ns: string): Pool {
  const global = bucket(`${ns}global`, SL(30, S));
  const peers = [bucket(`${ns}peer:p0`, SL(4, S)), bucket(`${ns}peer:p1`, FW(3, S))];
  const bans = [
    { threshold: 2, spanUs: S / 2, forUs: S },
    { threshold: 3, spanUs: S, forUs: 2 * S },
    { threshold: 4, spanUs: S, forUs: 3 * S },
  ];
  const limits: Limit[][] = [[SL(1, S)], [SL(2, S), FW(3, 2 * S)], [SW(2, S)]];
  const callers = limits.map((l, i) => deepFreeze({ ...bucket(`${ns}attr:caller:c${i}`, ...l), ban: bans[i]! }));
  const lists: (readonly Bucket[])[] = [];
  for (const c of callers) for (const p of peers) lists.push(list(global, p, c), list(c, p), list(c));
  const logs = [global, peers[0]!, callers[0]!, callers[1]!].map((b) => ({ name: b.name, windows: [S] }));
  return deepFreeze({ tag, lists, logs });
}

/**
 * Pools of the "config reload" workload: peers named by two Bucket objects with different limits
 * (same structures; a sliding log dropped while a window hash stays; non-log limits reordered; a
 * log's profile changed; a limit changed).
 */
function makeReloadPool(tag: string, ns: string): Pool {
  const global = bucket(`${ns}global`, SL(20, S), FW(60, 10 * S));
  const account = bucket(`${ns}account`, SL(8, S));
  const versions: [Limit[], Limit[]][] = [
    [[SL(2, S), FW(3, 10 * S)], [FW(2, 10 * S)]],
    [
      [FW(2, S), FW(4, 10 * S)],
      [FW(4, 10 * S), FW(1, S)],
    ],
    [[SL(3, S)], [SL(1, S), SL(4, 10 * S)]],
    [[FW(1, S)], [FW(5, S)]],
    [[SW(2, S)], [SW(4, S), SL(2, S)]],
  ];
  const lists: (readonly Bucket[])[] = [];
  versions.forEach(([v1, v2], i) => {
    for (const limits of [v1, v2]) {
      const p = bucket(`${ns}peer:r${i}`, ...limits);
      lists.push(list(p), list(global, account, p), list(account, p));
    }
  });
  const names = [global.name, account.name, ...versions.map((_, i) => `${ns}peer:r${i}`)];
  const logs = names.map((name) => ({ name, windows: [S, 10 * S] }));
  return deepFreeze({ tag, lists, logs });
}

interface Workload {
  readonly seed: number;
  readonly rounds: number;
  readonly pools: readonly Pool[];
  /** Tags a call may carry, per pool (default: the pool's tag). */
  readonly tagsOf?: (pool: Pool, rand: () => number) => string;
}

/**
 * `rounds` rounds; each issues K (1..80) ops in one tick (mostly admit, some record, a few count),
 * with caller-given times: repeated times, times going backwards, times next to fixed-window
 * boundaries, occasional jumps far ahead, and whole rounds at one time. After each round, a
 * count of every sliding log over each of its windows. Everything is compared with the reference.
 */
async function randomEquivalence(store: RedisStore, w: Workload): Promise<void> {
  const rand = prng(w.seed);
  const int = (n: number) => Math.floor(rand() * n);
  const mem = reference();
  let base = T0 + int(10 * S);
  let admitted = 0;
  let refused = 0;
  let records = 0;
  let counts = 0;
  let nonZeroCounts = 0;
  let backwards = 0;
  let repeats = 0;
  let banned = 0;
  const bans = w.pools.some((p) => p.lists.some((l) => l.some((b) => b.ban !== undefined)));
  for (let round = 0; round < w.rounds; round++) {
    base += int(700_000);
    if (rand() < 0.03) base += 20 * S + int(100 * S);
    const k = 1 + int(80);
    const oneTime = rand() < 0.1;
    let prev = base;
    const ops: Op[] = [];
    for (let i = 0; i < k; i++) {
      let t: number;
      const r = rand();
      if (oneTime || r < 0.3) t = prev;
      else if (r < 0.5) t = prev + 1 + int(200_000);
      else if (r < 0.65) t = prev - 1 - int(400_000);
      else if (r < 0.8) {
        const W = [S, S, 2 * S, 10 * S][int(4)]!;
        t = (Math.floor(prev / W) + 1) * W + int(3) - 1; // just before, at, just after a boundary
      } else t = base + int(S);
      if (i > 0 && t === prev) repeats++;
      if (t < prev) backwards++;
      prev = t;
      const pool = w.pools[int(w.pools.length)]!;
      const tag = w.tagsOf ? w.tagsOf(pool, rand) : pool.tag;
      const kind = rand();
      if (kind < 0.84) ops.push(admit(tag, pool.lists[int(pool.lists.length)]!, t));
      else if (kind < 0.95) ops.push(record(tag, pool.lists[int(pool.lists.length)]!, t));
      else {
        const log = pool.logs[int(pool.logs.length)]!;
        ops.push(count(tag, log.name, log.windows[int(log.windows.length)]!, t));
      }
    }
    const results = await runTick(store, mem, ops, `seed ${w.seed} round ${round}`);
    results.forEach((res, i) => {
      const op = ops[i]!;
      if (op.kind === 'admit') {
        (res as AdmitResult).admitted ? admitted++ : refused++;
        if ((res as AdmitResult).reason === 'banned') banned++;
      } else if (op.kind === 'record') records++;
    });
    // every sliding log, counted at the round's last time and at its base time
    const after: Op[] = [];
    for (const pool of w.pools) {
      for (const log of pool.logs)
        for (const W of log.windows) for (const t of [prev, base]) after.push(count(pool.tag, log.name, W, t));
    }
    const countResults = await runTick(store, mem, after, `seed ${w.seed} after round ${round}`);
    for (const c of countResults) {
      counts++;
      if ((c as CountResult).count > 0) nonZeroCounts++;
    }
  }
  // the workload is not vacuous: both outcomes, records, counts that see events, repeated and
  // backward times all occur often
  const total = admitted + refused;
  expect(admitted, 'admitted calls').to.be.above(total / 10);
  expect(refused, 'refused calls').to.be.above(total / 10);
  expect(records, 'records').to.be.above(w.rounds);
  expect(nonZeroCounts, 'counts that saw events').to.be.above(counts / 10);
  expect(repeats, 'repeated times').to.be.above(w.rounds);
  expect(backwards, 'times going backwards').to.be.above(w.rounds);
  if (bans) expect(banned, 'calls refused by a ban').to.be.above(total / 20);
}

// ---------------------------------------------------------------------------
// The random pacing workload (reserve and wait)

/** Fractional intervals (3 and 7 calls per second), µs. */
const I3 = 1e6 / 3;
const I7 = 1e6 / 7;

const carrier = (name: string, intervalUs: number, maxWaitUs: number): Carrier =>
  Object.freeze({ name, intervalUs, maxWaitUs });

interface CarrierPool {
  /**
   * Per carrier name, the configurations calls give it: the first is its usual one, the others
   * come from a config reload (another maxWait, or another interval too). Frozen, reused.
   */
  readonly configs: readonly (readonly Carrier[])[];
  /** Routes built once and handed to many calls (as a plan does), besides the ones built per call. */
  readonly routes: readonly (readonly Carrier[])[];
}

/**
 * Five carriers of 3, 7, 4000, ~999.5 and 50 calls per second, with maxWait from 0 to several
 * intervals; reloads change maxWait or the interval (to 2/s, 5/s, ~999.5/s, 3/s).
 */
function makeCarrierPool(): CarrierPool {
  const n = (i: number) => `carrier:c${i}`;
  const configs = [
    [carrier(n(0), I3, 3 * I3), carrier(n(0), I3, 0), carrier(n(0), I3, 6 * I3), carrier(n(0), 1e6 / 2, I3)],
    [carrier(n(1), I7, 4 * I7), carrier(n(1), I7, 0), carrier(n(1), 1e6 / 5, 1.5 * I7)],
    [carrier(n(2), 250, 4_000), carrier(n(2), 250, 0), carrier(n(2), 1000.5, 500)],
    [carrier(n(3), 1000.5, 5_002.5), carrier(n(3), 1000.5, 0), carrier(n(3), 1000.5, 10_000)],
    [carrier(n(4), 20_000, 80_000), carrier(n(4), I3, 0)],
  ].map((c) => Object.freeze(c));
  const c = (i: number, v = 0) => configs[i]![v]!;
  const routes = [[c(0), c(1), c(2)], [c(0, 1), c(0, 2)], [c(3)], [c(4), c(3), c(2), c(1)], [c(1, 1), c(4), c(1)]].map(
    (r) => Object.freeze(r),
  );
  return Object.freeze({ configs, routes });
}

interface PacingWorkload {
  readonly seed: number;
  readonly rounds: number;
  /** Where time starts (default T0). Near 1.7e15 µs a double resolves 1/4 µs only. */
  readonly t0?: number;
  /** Admissions (and records) of this pool mixed into every round, in the same ticks. */
  readonly admissions?: Pool;
}

/**
 * `rounds` rounds; each issues K (1..80) ops in one tick: mostly reserve, some wait (and, with
 * `admissions`, admits and records too), with caller-given times: repeated times, times going
 * backwards, small steps comparable to the intervals, jumps far ahead, whole rounds at one
 * time. Routes of 1..4 carriers, a name may come twice in a route and with other intervals or
 * maxWaits in other calls of the same batch (a reload); Carrier objects are reused or made per
 * call. After each round, the wait of every carrier at the round's last and base times.
 * Everything is compared with the reference.
 */
async function pacingEquivalence(store: RedisStore, w: PacingWorkload): Promise<void> {
  const rand = prng(w.seed);
  const int = (n: number) => Math.floor(rand() * n);
  const pool = makeCarrierPool();
  const intervals = pool.configs.flatMap((cs) => cs.map((c) => c.intervalUs));
  const mem = reference();
  let base = (w.t0 ?? T0) + int(10 * S);
  const n = {
    reserves: 0,
    refused: 0,
    rerouted: 0,
    waited: 0,
    atMaxWait: 0,
    fractional: 0,
    waits: 0,
    waitsSeeing: 0,
    twiceInRoute: 0,
    reloads: 0,
    admitted: 0,
    admitRefused: 0,
  };
  let backwards = 0;
  let repeats = 0;
  let prev = base;
  for (let round = 0; round < w.rounds; round++) {
    // a round starts after the last one's last time, sometimes before it, sometimes far later
    const r0 = rand();
    if (r0 < 0.1) base = Math.max(0, prev - int(S));
    else if (r0 < 0.13) base = prev + 20 * S + int(100 * S);
    else base = prev + int(300_000);
    const k = 1 + int(80);
    const oneTime = rand() < 0.1;
    prev = base;
    const ops: Op[] = [];
    const configsSeen = new Map<string, Set<string>>();
    const pick = (): Carrier => {
      const configs = pool.configs[int(pool.configs.length)]!;
      // mostly the usual configuration; a new object per call half of the time (as the Dispatcher does)
      const c = rand() < 0.7 ? configs[0]! : configs[1 + int(configs.length - 1)]!;
      let seen = configsSeen.get(c.name);
      if (!seen) configsSeen.set(c.name, (seen = new Set()));
      seen.add(`${c.intervalUs}/${c.maxWaitUs}`);
      return rand() < 0.5 ? c : { ...c };
    };
    for (let i = 0; i < k; i++) {
      let t: number;
      const r = rand();
      if (oneTime || r < 0.2) t = prev;
      else if (r < 0.65)
        t = prev + 1 + int(intervals[int(intervals.length)]!); // steps like the intervals
      else if (r < 0.8) t = prev - 1 - int(rand() < 0.8 ? 3_000 : 400_000);
      else if (r < 0.9)
        t = prev + 250 * (1 + int(4)); // on the 250 µs grid
      else t = base + int(S);
      t = Math.max(0, t);
      if (i > 0 && t === prev) repeats++;
      if (t < prev) backwards++;
      prev = t;
      const kind = rand();
      if (w.admissions && kind < 0.3) {
        const lists = w.admissions.lists;
        const op = kind < 0.25 ? admit : record;
        ops.push(op(w.admissions.tag, lists[int(lists.length)]!, t));
      } else if (kind < 0.85) {
        let route: readonly Carrier[];
        if (rand() < 0.25) route = pool.routes[int(pool.routes.length)]!;
        else route = Array.from({ length: 1 + int(4) }, pick);
        if (new Set(route.map((c) => c.name)).size < route.length) n.twiceInRoute++;
        ops.push(reserve(route, t));
      } else ops.push(wait(pick(), t));
    }
    if ([...configsSeen.values()].some((s) => s.size > 1)) n.reloads++;
    const results = await runTick(store, mem, ops, `seed ${w.seed} round ${round}`);
    results.forEach((res, i) => {
      const op = ops[i]!;
      if (op.kind === 'reserve') {
        const r = res as ReserveResult;
        n.reserves++;
        if (r.index < 0) n.refused++;
        if (r.index > 0) n.rerouted++;
        if (r.waitUs > 0) n.waited++;
        if (r.index >= 0 && r.waitUs > 0 && r.waitUs === op.route[r.index]!.maxWaitUs) n.atMaxWait++;
        if (!Number.isInteger(r.waitUs)) n.fractional++;
      } else if (op.kind === 'admit') (res as AdmitResult).admitted ? n.admitted++ : n.admitRefused++;
    });
    // every carrier's queue, at the round's last time and at its base time
    const after: Op[] = [];
    for (const configs of pool.configs) for (const t of [prev, base]) after.push(wait(configs[0]!, t));
    for (const res of await runTick(store, mem, after, `seed ${w.seed} after round ${round}`)) {
      n.waits++;
      if ((res as WaitResult).waitUs > 0) n.waitsSeeing++;
    }
  }
  // the workload is not vacuous: refusals, reroutes, waits (fractional ones too), routes naming
  // a carrier twice, reloads within a batch, repeated and backward times all occur often
  const stats = JSON.stringify(n);
  expect(n.refused, `refused reservations ${stats}`).to.be.above(n.reserves / 5);
  expect(n.rerouted, `rerouted reservations ${stats}`).to.be.above(n.reserves / 12);
  expect(n.waited, `reservations that wait ${stats}`).to.be.above(n.reserves / 8);
  expect(n.atMaxWait, `reservations taken at exactly maxWait ${stats}`).to.be.at.least(5);
  expect(n.fractional, `fractional waits ${stats}`).to.be.above(n.reserves / 16);
  expect(n.waitsSeeing, `waits that see a queue ${stats}`).to.be.above(n.waits / 10);
  expect(n.twiceInRoute, `routes naming a carrier twice ${stats}`).to.be.above(w.rounds);
  expect(n.reloads, `rounds with a reload ${stats}`).to.be.above(w.rounds / 2);
  expect(repeats, 'repeated times').to.be.above(w.rounds);
  expect(backwards, 'times going backwards').to.be.above(w.rounds);
  if (w.admissions) {
    expect(n.admitted, `admitted calls ${stats}`).to.be.above(w.rounds);
    expect(n.admitRefused, `refused admissions ${stats}`).to.be.above(w.rounds);
  }
}

// ---------------------------------------------------------------------------
// The random channels workload (holds, records, release, refresh)

const withCh = (b: Bucket, channels: number): Bucket => deepFreeze({ ...b, channels });
const carrierCh = (name: string, intervalUs: number, maxWaitUs: number, channels?: number): Carrier =>
  Object.freeze(channels === undefined ? { name, intervalUs, maxWaitUs } : { name, intervalUs, maxWaitUs, channels });

/**
 * `rounds` rounds of one tick each: admits and records of calls holding their channels (small
 * channel limits at every level, beside rate limits; a bucket list without any), reservations
 * over carriers with and without channel limits, releases (both legs, or one), refreshes and
 * holds counts. Call ids come from a small pool, so repeated admits of calls still holding,
 * re-admits after a release or a lapse, a second outbound hold of one id, and releases of ids
 * that hold nothing all happen. Hold times from 0 to 4 s, times going backwards and repeating.
 * With `tagged` (hash tags: a release first reads a locator), releases and refreshes come last
 * in their tick, at most one per tick (see RedisStore: recordGroups). Every result is compared
 * with the reference.
 */
async function channelEquivalence(store: RedisStore, seed: number, rounds: number, tagged: boolean): Promise<void> {
  const rand = prng(seed);
  const int = (n: number) => Math.floor(rand() * n);
  const mem = reference();
  const g = withCh(bucket('global', SL(40, S)), 8);
  const a0 = withCh(bucket('account:a0'), 4);
  const a1 = bucket('account:a1', SL(6, S));
  const p0 = withCh(bucket('peer:p0', SL(5, S)), 3);
  const p1 = withCh(bucket('peer:p1'), 2);
  const p2 = bucket('peer:p2', FW(4, S));
  const p3 = withCh(bucket('peer:p3', SW(4, S)), 1);
  const lists = [
    list(g, a0, p0),
    list(g, a0, p1),
    list(g, a1, p2),
    list(g, p3),
    list(a0, p1),
    list(p2),
    list(g, a1, p0),
  ];
  const holdBuckets = [g, a0, p0, p1, p3];
  const carriers = [
    carrierCh('carrier:h1', 100_000, 300_000, 2),
    carrierCh('carrier:h2', I3, 0, 1),
    carrierCh('carrier:h3', 1_000, 5_000),
    carrierCh('carrier:h4', 250_000, S, 3),
  ];
  const routes = [
    [carriers[0]!, carriers[1]!],
    [carriers[1]!, carriers[3]!, carriers[2]!],
    [carriers[0]!],
    [carriers[3]!, carriers[0]!],
  ].map((r) => Object.freeze(r));
  const ids = Array.from({ length: 24 }, (_, i) => (i % 5 === 4 ? `call {${i}}: x y` : `c${i}`));
  const forUs = () => [0, 1 + int(S), 1 + int(4 * S), 2 * S][int(4)]!;
  const n = {
    admitted: 0,
    refusedRate: 0,
    refusedChannels: 0,
    duplicates: 0,
    reserved: 0,
    passedFull: 0,
    released: 0,
    releasedNothing: 0,
    refreshed: 0,
    holdsSeen: 0,
  };
  let base = T0 + int(10 * S);
  let prev = base;
  for (let round = 0; round < rounds; round++) {
    base = rand() < 0.1 ? Math.max(0, prev - int(S)) : prev + int(400_000);
    prev = base;
    const ops: Op[] = [];
    const last: Op[] = [];
    const k = 1 + int(40);
    for (let i = 0; i < k; i++) {
      const r = rand();
      let t = r < 0.3 ? prev : r < 0.75 ? prev + 1 + int(150_000) : r < 0.9 ? prev - 1 - int(200_000) : base + int(S);
      t = Math.max(0, t);
      prev = t;
      const id = ids[int(ids.length)]!;
      const kind = rand();
      if (kind < 0.42)
        ops.push({
          kind: 'admit',
          tag: 'in',
          buckets: lists[int(lists.length)]!,
          now: t,
          hold: { id, forUs: forUs() },
        });
      else if (kind < 0.46)
        ops.push({
          kind: 'record',
          tag: 'in',
          buckets: lists[int(lists.length)]!,
          now: t,
          hold: { id, forUs: forUs() },
        });
      else if (kind < 0.7)
        ops.push({ kind: 'reserve', route: routes[int(routes.length)]!, now: t, hold: { id, forUs: forUs() } });
      else if (kind < 0.85) {
        const b = holdBuckets[int(holdBuckets.length)]!;
        ops.push(
          rand() < 0.7
            ? { kind: 'holds', tag: 'in', name: b.name, now: t }
            : { kind: 'holds', tag: OUTBOUND_TAG, name: carriers[int(carriers.length)]!.name, now: t },
        );
      } else {
        const op: Op =
          kind < 0.95
            ? { kind: 'release', id, direction: ([undefined, 'in', 'out'] as const)[int(3)], now: t }
            : { kind: 'refresh', id, forUs: forUs(), now: t };
        if (!tagged) ops.push(op);
        else if (last.length === 0) last.push(op);
      }
    }
    ops.push(...last);
    const results = await runTick(store, mem, ops, `seed ${seed} round ${round}`);
    results.forEach((res, i) => {
      const op = ops[i]!;
      if (op.kind === 'admit') {
        const a = res as AdmitResult;
        if (a.duplicate) n.duplicates++;
        else if (a.admitted) n.admitted++;
        else if (a.reason === 'channels') n.refusedChannels++;
        else n.refusedRate++;
      } else if (op.kind === 'reserve') {
        const r = res as ReserveResult;
        if (r.index >= 0) n.reserved++;
        if (r.full.some((f) => f)) n.passedFull++;
      } else if (op.kind === 'release') (res as ReleaseResult).released > 0 ? n.released++ : n.releasedNothing++;
      else if (op.kind === 'refresh') n.refreshed += (res as RefreshResult).refreshed;
      else if (op.kind === 'holds' && (res as HoldsResult).holds > 0) n.holdsSeen++;
    });
  }
  // not vacuous: every path is taken many times
  const stats = JSON.stringify(n);
  for (const [key, v] of Object.entries(n)) expect(v, `${key} ${stats}`).to.be.above(rounds / (tagged ? 40 : 15));
}

/** The holds keeper's checks are script calls too: off where a test counts them. */
const NO_SYNC = { syncMs: 0 };

/** A redis-server of the test's own: a plain client for its stats, and a ready one for stores. */
async function onOwnServer(run: (raw: Redis, client: Redis) => Promise<void>): Promise<void> {
  const server = await startRedisServer();
  const raw = newRedisClient(server);
  const client = newRedisClient(server);
  try {
    await ready(client);
    await run(raw, client);
  } finally {
    raw.disconnect();
    client.disconnect();
    await server.stop();
  }
}

/** INFO commandstats: calls of the given commands, summed. */
async function commandCalls(raw: Redis, ...cmds: string[]): Promise<number> {
  const info = await raw.info('commandstats');
  let n = 0;
  for (const cmd of cmds) {
    const m = new RegExp(`^cmdstat_${cmd}:calls=(\\d+)`, 'm').exec(info);
    if (m) n += Number(m[1]);
  }
  return n;
}

/** INFO commandstats: calls of EVALSHA plus EVAL. */
const scriptCalls = (raw: Redis): Promise<number> => commandCalls(raw, 'evalsha', 'eval');

async function rejection(p: Promise<unknown>): Promise<unknown> {
  try {
    const r = await p;
    return new Error(`expected a rejection, got ${JSON.stringify(r)}`);
  } catch (err) {
    return err;
  }
}

// ---------------------------------------------------------------------------
// The tests, per backend

interface Backend {
  client(): Redis | Cluster;
  /** Stores made by the current test (cleared and closed after it). */
  store(opts?: Omit<RedisStoreOptions, 'redis' | 'prefix'>): RedisStore;
}

function backendHooks(start: () => Promise<{ client: Redis | Cluster; stop(): Promise<void> }>): Backend {
  let backend: { client: Redis | Cluster; stop(): Promise<void> } | undefined;
  const made: RedisStore[] = [];
  before(async function () {
    this.timeout(60_000);
    backend = await start();
  });
  afterEach(async () => {
    for (const s of made.splice(0)) {
      await s.clear();
      await s.close();
    }
  });
  after(async () => {
    backend?.client.disconnect();
    await backend?.stop();
  });
  return {
    client: () => backend!.client,
    store: (opts = {}) => {
      const s = new RedisStore({ redis: backend!.client, prefix: freshPrefix(), ...opts });
      made.push(s);
      return s;
    },
  };
}

async function ready(client: Redis | Cluster): Promise<void> {
  if (client.status === 'ready') return;
  await new Promise<void>((resolve, reject) => {
    client.once('ready', () => resolve());
    client.once('error', reject);
  });
}

/** The tests both backends run (`cluster`: keys carry hash tags, lanes are per tag). */
function sharedTests(b: Backend, cluster: boolean): void {
  it('live time (no now): a burst of 300 admits equals a MemoryStore replay in execution order', async () => {
    const store = b.store();
    const ns = randomBytes(3).toString('hex');
    const A = bucket(`${ns}:A`, SL(40, S));
    const B = bucket(`${ns}:B`, FW(1000, 10 * S));
    const C = bucket(`${ns}:C`, FW(7, S), SL(9, S));
    const lists = [list(A), list(B, A), list(C)];
    const ops = Array.from({ length: 300 }, (_, i) => admit('t', lists[i % 3]!));
    const results = (await Promise.all(ops.map((op) => issue(store, op)))) as AdmitResult[];
    // execution order: by the time each decision was taken at, ties in issue order
    const order = results.map((r, i) => ({ r, i })).sort((x, y) => x.r.now - y.r.now || x.i - y.i);
    const mem = reference();
    for (const { r, i } of order) {
      expect(
        Number.isSafeInteger(r.now) && Math.abs(r.now - Date.now() * 1000) < 10 * S,
        `call ${i}: now ${r.now}`,
      ).to.equal(true);
      expect(r, `call ${i} (${describeOp(ops[i]!)}) at ${r.now}`).to.deep.equal(apply(mem, ops[i]!, r.now));
    }
    const span = order[order.length - 1]!.r.now - order[0]!.r.now;
    if (span < S) {
      const onA = results.filter((r, i) => i % 3 !== 2 && r.admitted).length;
      expect(onA, `admitted on A (40/s), burst over ${span} µs`).to.equal(40);
    }
    expect(results.filter((r) => r.admitted).length).to.be.above(40);
  });

  it('a bucket named with different limits in one batch: each call is checked against its own limits', async () => {
    const store = b.store();
    const mem = reference();
    const t = T0 + 123_456;
    // same structures, different limits (limit 1 vs limit 5), interleaved
    const X1 = list(bucket('x', SL(1, S)));
    const X5 = list(bucket('x', SL(5, S)));
    const Y1 = list(bucket('y', FW(1, S), SW(2, 10 * S)));
    const Y5 = list(bucket('y', FW(5, S), SW(6, 10 * S)));
    const G = bucket('g', SL(100, S));
    const GZ1 = list(G, bucket('z', SW(1, S)));
    const GZ5 = list(G, bucket('z', SW(5, S)));
    const seq = (l1: readonly Bucket[], l5: readonly Bucket[], at: number) =>
      [l5, l1, l5, l5, l1, l5, l5, l5, l1].map((l) => admit('t', l, at));
    const first = await runTick(
      store,
      mem,
      [...seq(X1, X5, t), ...seq(Y1, Y5, t), ...seq(GZ1, GZ5, t)],
      'limits 1 vs 5, one time',
    );
    // not vacuous: the limit-1 calls are refused where the limit-5 ones are admitted
    expect((first as AdmitResult[]).slice(0, 9).map((r) => r.admitted)).to.deep.equal([
      true,
      false,
      true,
      true,
      false,
      true,
      true,
      false,
      false,
    ]);
    // the same again with a time per call (groups of one), and across a window boundary
    const ops: Op[] = [];
    for (let i = 0; i < 30; i++) ops.push(admit('t', [X1, X5, Y1, Y5, GZ1, GZ5][i % 6]!, T0 + 900_000 + i * 10_000));
    await runTick(store, mem, ops, 'limits 1 vs 5, times across a boundary');
    await runTick(store, mem, [count('t', 'x', S, T0 + 1_100_000), count('t', 'g', S, T0 + 1_100_000)], 'counts after');
  });

  // A reload can change a bucket's structures, not only its numbers: then the bucket's first key
  // (its log, else its first window hash) differs between the two versions while a window hash
  // is common to both.
  it('limits changed in one batch: a sliding log dropped while a window hash stays', async () => {
    const store = b.store();
    const mem = reference();
    const t = T0 + 2 * S + 5;
    // v1: a sliding log and a 10 s window hash; v2: only that hash (no log)
    const V1 = list(bucket('v', SL(5, S), FW(5, 10 * S)));
    const V2 = list(bucket('v', FW(1, 10 * S)));
    const res = (await runTick(
      store,
      mem,
      [admit('t', V1, t), admit('t', V2, t), admit('t', V2, t)],
      'one batch',
    )) as AdmitResult[];
    expect(res.map((r) => r.admitted)).to.deep.equal([true, false, false]);
    // and what the batch left in Redis, seen by the next one
    await runTick(
      store,
      mem,
      [
        admit('t', V1, t + 1),
        admit('t', V1, t + 1),
        admit('t', V1, t + 1),
        admit('t', V1, t + 1),
        admit('t', V1, t + 1),
      ],
      'the batch after',
    );
  });

  it('limits changed in one batch: the same window limits listed in another order', async () => {
    const store = b.store();
    const mem = reference();
    const t = T0 + 2 * S + 5;
    // w1 and w2 name the same two window hashes (1 s and 10 s), in another order
    const W1 = list(bucket('w', FW(5, S), FW(5, 10 * S)));
    const W2 = list(bucket('w', FW(1, 10 * S), FW(5, S)));
    const res = (await runTick(
      store,
      mem,
      [admit('t', W1, t), admit('t', W2, t), admit('t', W1, t)],
      'one batch',
    )) as AdmitResult[];
    expect(res.map((r) => r.admitted)).to.deep.equal([true, false, true]);
    await runTick(
      store,
      mem,
      [admit('t', W1, t + 1), admit('t', W1, t + 1), admit('t', W1, t + 1), admit('t', W1, t + 1)],
      'the batch after',
    );
  });

  it('an aborted call never leaves; the others of its batch are decided as if it had not been issued', async () => {
    const store = b.store();
    const mem = reference();
    const t = T0 + 7 * S;
    const one = list(bucket('ab', SL(5, S)));
    const flag = { aborted: false };
    const p1 = store.admit({ tag: 't', buckets: one, now: t, signal: flag });
    const p2 = store.admit({ tag: 't', buckets: one, now: t });
    flag.aborted = true;
    expect(await rejection(p1)).to.be.instanceOf(StoreUnavailableError);
    expect(await p2).to.deep.equal(mem.admitSync({ tag: 't', buckets: one, now: t }));
    expect((await p2).admitted).to.equal(true);
    expect(await store.count({ tag: 't', bucket: 'ab', windowUs: S, now: t })).to.deep.equal({ count: 1, now: t });

    // an already-aborted AbortSignal, and an AbortController aborted in the same tick
    expect(
      await rejection(store.admit({ tag: 't', buckets: one, now: t, signal: AbortSignal.abort() })),
    ).to.be.instanceOf(StoreUnavailableError);
    const ctrl = new AbortController();
    const p3 = store.admit({ tag: 't', buckets: one, now: t, signal: ctrl.signal });
    ctrl.abort();
    expect(await rejection(p3)).to.be.instanceOf(StoreUnavailableError);
    expect(await store.count({ tag: 't', bucket: 'ab', windowUs: S, now: t })).to.deep.equal({ count: 1, now: t });

    // aborted calls mixed into a batch on a limit of 2: the others take the room
    const two = list(bucket('ab2', SL(2, S)));
    const flags = [{ aborted: false }, { aborted: false }, { aborted: false }];
    const pending = [
      store.admit({ tag: 't', buckets: two, now: t, signal: flags[0] }),
      store.admit({ tag: 't', buckets: two, now: t }),
      store.admit({ tag: 't', buckets: two, now: t, signal: flags[1] }),
      store.admit({ tag: 't', buckets: two, now: t, signal: { aborted: false } }),
      store.admit({ tag: 't', buckets: two, now: t, signal: flags[2] }),
      store.admit({ tag: 't', buckets: two, now: t + 1 }),
    ];
    for (const f of flags) f.aborted = true;
    const settled = await Promise.allSettled(pending);
    for (const i of [0, 2, 4]) {
      expect(settled[i]!.status, `call ${i}`).to.equal('rejected');
      expect((settled[i] as PromiseRejectedResult).reason).to.be.instanceOf(StoreUnavailableError);
    }
    const expected = [t, t, t + 1].map((now) => mem.admitSync({ tag: 't', buckets: two, now }));
    expect([1, 3, 5].map((i) => (settled[i] as PromiseFulfilledResult<AdmitResult>).value)).to.deep.equal(expected);
    expect(expected.map((r) => r.admitted)).to.deep.equal([true, true, false]);
    expect(await store.count({ tag: 't', bucket: 'ab2', windowUs: S, now: t + 1 })).to.deep.equal({
      count: 2,
      now: t + 1,
    });

    // aborted after its batch left: it was decided (and counted)
    const late = { aborted: false };
    const p4 = store.admit({ tag: 't', buckets: one, now: t, signal: late });
    await new Promise((r) => setImmediate(r));
    late.aborted = true;
    expect(await p4).to.deep.equal(mem.admitSync({ tag: 't', buckets: one, now: t }));
    expect(await store.count({ tag: 't', bucket: 'ab', windowUs: S, now: t })).to.deep.equal({ count: 2, now: t });
  });

  it('order with other operations: record and count issued between admits see and are seen in issue order', async () => {
    const store = b.store();
    const mem = reference();
    const t = T0 + 20 * S + 100;
    // admit A, record B, admit C on one bucket of limit 2, increasing times
    const X = list(bucket('ox', SL(2, S)));
    const r1 = await runTick(
      store,
      mem,
      [admit('t', X, t), record('t', X, t + 1), admit('t', X, t + 2)],
      'admit, record, admit',
    );
    expect((r1[0] as AdmitResult).admitted).to.equal(true);
    expect(r1[1]).to.deep.equal({ now: t + 1 });
    expect((r1[2] as AdmitResult).admitted).to.equal(false);

    // where order shows: two admits, a record, an admit in one fixed window of limit 2
    const Y = list(bucket('oy', FW(2, S)));
    const inOrder = [admit('t', Y, t), admit('t', Y, t + 1), record('t', Y, t + 2), admit('t', Y, t + 3)];
    const recordFirst = [inOrder[2]!, inOrder[0]!, inOrder[1]!, inOrder[3]!];
    const other = reference();
    const swapped = recordFirst.map((op) => apply(other, op));
    const r2 = await runTick(store, mem, inOrder, 'admit, admit, record, admit (fixed window)');
    expect(r2.map((r) => ('admitted' in r ? r.admitted : 'recorded'))).to.deep.equal([true, true, 'recorded', false]);
    // (the record sent before the admits would have refused the second one)
    expect((swapped[2] as AdmitResult).admitted).to.equal(false);

    // counts between admits, all at one time
    const Z = list(bucket('oz', SL(3, S)));
    const r3 = await runTick(
      store,
      mem,
      [
        count('t', 'oz', S, t),
        admit('t', Z, t),
        count('t', 'oz', S, t),
        admit('t', Z, t),
        record('t', Z, t),
        count('t', 'oz', S, t),
        admit('t', Z, t),
        count('t', 'oz', S, t),
      ],
      'counts between admits',
    );
    expect([0, 2, 5, 7].map((i) => (r3[i] as CountResult).count)).to.deep.equal([0, 1, 3, 3]);
  });

  const lanes = cluster ? 'a lane per carrier tag' : 'one lane';
  it(`seeded random equivalence with MemoryStore: ${lanes}`, async function () {
    this.timeout(60_000);
    await randomEquivalence(b.store(), {
      seed: cluster ? 0xc1057e1 : 0x5eed01,
      rounds: 300,
      pools: [makePool('t', 't.')],
    });
  });

  it('seeded random equivalence with MemoryStore: two tags with disjoint buckets (two lanes with hash tags)', async function () {
    this.timeout(60_000);
    // on a single Redis, hash tags are switched on here so that the two tags are two lanes too
    await randomEquivalence(b.store(cluster ? {} : { hashTags: true }), {
      seed: cluster ? 0xc1057e2 : 0x5eed02,
      rounds: 250,
      pools: [makePool('t', 't.'), makePool('u', 'u.')],
    });
  });

  it('seeded random equivalence with MemoryStore: attribute levels with bans', async function () {
    this.timeout(60_000);
    await randomEquivalence(b.store(), {
      seed: cluster ? 0xba2c1 : 0xba201,
      rounds: 200,
      pools: [makeBanPool('t', 't.')],
    });
  });

  // ------------------------------------------------------------------------- channels

  it('channels: seeded random equivalence with MemoryStore (holds, repeats, release, refresh, full carriers)', async function () {
    this.timeout(90_000);
    await channelEquivalence(b.store(), cluster ? 0xc4a7e1 : 0xc4a701, 300, cluster);
  });

  // ------------------------------------------------------------------------- reservations

  it(`reservations: seeded random equivalence with MemoryStore (reserve and wait, ${lanes})`, async function () {
    this.timeout(60_000);
    await pacingEquivalence(b.store(), { seed: cluster ? 0xc10e5e1 : 0x9ace01, rounds: 300 });
  });

  it('reservations and admissions issued in one tick (both batchers): each equals the reference in issue order', async function () {
    this.timeout(60_000);
    await pacingEquivalence(b.store(), {
      seed: cluster ? 0xc10e5e2 : 0x9ace02,
      rounds: 150,
      admissions: makePool('t', 't.'),
    });
  });

  it('reservations, live time (no now): a burst of 300 equals a MemoryStore replay in execution order', async () => {
    const store = b.store();
    const I = 1e6 / 4000;
    // a first carrier that fills fast, then two with more patience: reroutes, and refusals when the burst is quick
    const route = [carrier('carrier:lA', I, 5_000), carrier('carrier:lB', I, 10_000), carrier('carrier:lC', I, 25_000)];
    const ops = Array.from({ length: 300 }, () => reserve(route));
    const results = (await Promise.all(ops.map((op) => issue(store, op)))) as ReserveResult[];
    // execution order: by the time each decision was taken at, ties in issue order
    const order = results.map((r, i) => ({ r, i })).sort((x, y) => x.r.now - y.r.now || x.i - y.i);
    const mem = reference();
    for (const { r, i } of order) {
      expect(
        Number.isSafeInteger(r.now) && Math.abs(r.now - Date.now() * 1000) < 10 * S,
        `call ${i}: now ${r.now}`,
      ).to.equal(true);
      expect(r, `call ${i} at ${r.now}`).to.deep.equal(apply(mem, ops[i]!, r.now));
    }
    // each carrier gives slots at least one interval apart
    for (let c = 0; c < route.length; c++) {
      const slots = results
        .filter((r) => r.index === c)
        .map((r) => r.slotUs)
        .sort((x, y) => x - y);
      expect(slots.length, `calls on carrier ${c}`).to.be.above(0);
      for (let j = 1; j < slots.length; j++)
        expect(slots[j]! - slots[j - 1]!, `carrier ${c}, slots ${j - 1} and ${j}`).to.be.at.least(I);
    }
    // the first batch (64 calls at one time) alone fills carrier 0 (21 slots in 5 ms)
    expect(results.filter((r) => r.index > 0).length, 'rerouted').to.be.above(0);
    const span = order[order.length - 1]!.r.now - order[0]!.r.now;
    // the slots a carrier can give to calls decided within `span`, at least I apart, all in
    // [first now, last now + maxWait]: floor((span + maxWait) / I) + 1 (21 + 41 + 101 at one
    // time, 12 more per ms that passes); more calls than that on the route: some are refused
    const room = route.reduce((n, c) => n + Math.floor((span + c.maxWaitUs) / c.intervalUs) + 1, 0);
    if (ops.length > room)
      expect(results.filter((r) => r.index < 0).length, `refused, burst over ${span} µs`).to.be.above(0);
  });

  it('reservations: an aborted call never leaves; the others of its batch are decided as if it had not been issued', async () => {
    const store = b.store();
    const mem = reference();
    const t = T0 + 30 * S;
    const X = carrier('carrier:ab', I3, S);
    const flag = { aborted: false };
    const p1 = store.reserve({ route: [X], now: t, signal: flag });
    const p2 = store.reserve({ route: [X], now: t });
    flag.aborted = true;
    expect(await rejection(p1)).to.be.instanceOf(StoreUnavailableError);
    const r2 = await p2;
    expect(r2).to.deep.equal(mem.reserveSync({ route: [X], now: t }));
    expect(r2.waitUs, 'the first slot (the aborted call would have taken it)').to.equal(0);
    // (slots near 1.7e15 µs are doubles in steps of 1/4 µs: a wait is I3 to within that)
    expect(await store.wait({ carrier: X, now: t })).to.deep.equal(mem.waitSync({ carrier: X, now: t }));
    expect((await store.wait({ carrier: X, now: t })).waitUs, 'one call on X').to.be.closeTo(I3, 0.25);

    // an already-aborted AbortSignal, and an AbortController aborted in the same tick
    expect(await rejection(store.reserve({ route: [X], now: t, signal: AbortSignal.abort() }))).to.be.instanceOf(
      StoreUnavailableError,
    );
    const ctrl = new AbortController();
    const p3 = store.reserve({ route: [X], now: t, signal: ctrl.signal });
    const p4 = store.reserve({ route: [X], now: t });
    ctrl.abort();
    expect(await rejection(p3)).to.be.instanceOf(StoreUnavailableError);
    const r4 = await p4;
    expect(r4).to.deep.equal(mem.reserveSync({ route: [X], now: t }));
    expect(r4.waitUs, 'the second slot').to.be.closeTo(I3, 0.25);
    expect(await store.wait({ carrier: X, now: t })).to.deep.equal(mem.waitSync({ carrier: X, now: t }));

    // aborted calls mixed into a batch over [Y (two calls: waits 0 and I), Z (no wait)]: the others take the room
    const Y = carrier('carrier:ab2', I7, 1.5 * I7);
    const Z = carrier('carrier:ab3', 1000.5, 0);
    const route = [Y, Z];
    const flags = [{ aborted: false }, { aborted: false }, { aborted: false }];
    const pending = [
      store.reserve({ route, now: t, signal: flags[0] }),
      store.reserve({ route, now: t }),
      store.reserve({ route, now: t, signal: flags[1] }),
      store.reserve({ route, now: t, signal: { aborted: false } }),
      store.reserve({ route, now: t, signal: flags[2] }),
      store.reserve({ route, now: t + 1 }),
    ];
    for (const f of flags) f.aborted = true;
    const settled = await Promise.allSettled(pending);
    for (const i of [0, 2, 4]) {
      expect(settled[i]!.status, `call ${i}`).to.equal('rejected');
      expect((settled[i] as PromiseRejectedResult).reason).to.be.instanceOf(StoreUnavailableError);
    }
    const expected = [t, t, t + 1].map((now) => mem.reserveSync({ route, now }));
    expect([1, 3, 5].map((i) => (settled[i] as PromiseFulfilledResult<ReserveResult>).value)).to.deep.equal(expected);
    expect(expected.map((r) => r.index)).to.deep.equal([0, 0, 1]);
    expect(expected[1]!.waitUs).to.be.closeTo(I7, 0.25);
    for (const c of route)
      expect(await store.wait({ carrier: c, now: t + 1 }), c.name).to.deep.equal(
        mem.waitSync({ carrier: c, now: t + 1 }),
      );

    // a full batch leaves at once: a call of it aborted later in the tick was decided; the next
    // batch has not left yet
    const small = b.store({ maxBatch: 4 });
    const W = carrier('carrier:ab4', 1000.5, 3_000);
    const fullFlags = [0, 1, 2, 3, 4, 5].map(() => ({ aborted: false }));
    const inFull = fullFlags.map((signal, i) => small.reserve({ route: [W], now: t + i, signal }));
    fullFlags[0]!.aborted = true;
    fullFlags[4]!.aborted = true;
    const fullSettled = await Promise.allSettled(inFull);
    expect(fullSettled.map((s) => s.status)).to.deep.equal([
      'fulfilled',
      'fulfilled',
      'fulfilled',
      'fulfilled',
      'rejected',
      'fulfilled',
    ]);
    const memSmall = reference();
    const wantFull = [0, 1, 2, 3, 5].map((i) => memSmall.reserveSync({ route: [W], now: t + i }));
    expect([0, 1, 2, 3, 5].map((i) => (fullSettled[i] as PromiseFulfilledResult<ReserveResult>).value)).to.deep.equal(
      wantFull,
    );
    expect(wantFull.map((r) => r.index)).to.deep.equal([0, 0, 0, 0, -1]);

    // aborted after its batch left: it was decided (and counted)
    const late = { aborted: false };
    const p5 = store.reserve({ route: [X], now: t, signal: late });
    await new Promise((r) => setImmediate(r));
    late.aborted = true;
    expect(await p5).to.deep.equal(mem.reserveSync({ route: [X], now: t }));
    expect(await store.wait({ carrier: X, now: t })).to.deep.equal(mem.waitSync({ carrier: X, now: t }));
    expect((await store.wait({ carrier: X, now: t })).waitUs, 'three calls on X').to.be.closeTo(3 * I3, 0.5);
  });

  it('reservations, order with other operations: a wait issued between reservations sees and is seen in issue order', async () => {
    const store = b.store();
    const mem = reference();
    const t = T0 + 40 * S + 100;
    // reserve A, wait, reserve B on one carrier, increasing times
    const X = carrier('carrier:ox', 1000.5, 10_000);
    const r1 = await runTick(
      store,
      mem,
      [reserve([X], t), wait(X, t + 1), reserve([X], t + 2)],
      'reserve, wait, reserve',
    );
    expect(r1[0]).to.deep.equal({ index: 0, waitUs: 0, slotUs: t, waits: [0], full: [false], now: t });
    expect(r1[1], 'the wait sees A').to.deep.equal({ waitUs: 999.5, now: t + 1 });
    expect(r1[2], 'B sees A').to.deep.equal({
      index: 0,
      waitUs: 998.5,
      slotUs: t + 1000.5,
      waits: [998.5],
      full: [false],
      now: t + 2,
    });

    // waits first, between and last in one tick at one time, each sees the reservations before it
    const Y = carrier('carrier:oy', I7, 3.5 * I7);
    const r2 = await runTick(
      store,
      mem,
      [
        wait(Y, t),
        reserve([Y], t),
        wait(Y, t),
        reserve([Y], t),
        reserve([Y], t),
        wait(Y, t),
        reserve([Y], t),
        reserve([Y], t),
        wait(Y, t),
      ],
      'waits between reservations, one time',
    );
    [0, I7, 3 * I7, 4 * I7].forEach((want, j) => {
      expect((r2[[0, 2, 5, 8][j]!] as WaitResult).waitUs, `wait #${j}`).to.be.closeTo(want, 0.5);
    });
    expect((r2[7] as ReserveResult).index, 'the fifth reservation finds no room').to.equal(-1);

    // and admissions and counts in between, with time going back and forth
    const Z = list(bucket('oz', SL(2, S)));
    await runTick(
      store,
      mem,
      [
        reserve([X, Y], t + 5),
        admit('t', Z, t + 5),
        wait(X, t + 3),
        count('t', 'oz', S, t + 5),
        reserve([Y, X], t + 4),
        admit('t', Z, t + 6),
        wait(Y, t + 5),
        reserve([X], t + 2_000),
        wait(X, t + 1_000),
      ],
      'reservations, waits, admissions and counts',
    );
  });
}

describe('RedisStore: batched admissions and reservations', function () {
  this.timeout(30_000);

  describe('single Redis', () => {
    const b = backendHooks(async () => {
      const handle: RedisHandle = await getRedis();
      const client = newRedisClient(handle);
      await ready(client);
      return { client, stop: () => handle.stop() };
    });

    sharedTests(b, false);

    it('seeded random equivalence with MemoryStore: tags vary over shared buckets (no hash tags: one lane), maxBatch 7', async function () {
      this.timeout(60_000);
      await randomEquivalence(b.store({ maxBatch: 7 }), {
        seed: 0x5eed03,
        rounds: 250,
        pools: [makePool('t', '')],
        tagsOf: (_, rand) => ['t', 'u', 'v'][Math.floor(rand() * 3)]!,
      });
    });

    it('seeded random equivalence with MemoryStore: config reloads (a bucket named with two sets of limits)', async function () {
      this.timeout(60_000);
      await randomEquivalence(b.store(), { seed: 0x5eed04, rounds: 200, pools: [makeReloadPool('t', '')] });
    });

    it('maxBatch (1 to 1000), loneUpTo (1 to 1000) and maxInFlight (1 to 64) must be integers in range', () => {
      const redis = b.client();
      const bounds = [
        ['maxBatch', [0, 1.5, 1001, Number.NaN, -1, Number.POSITIVE_INFINITY], [1, 1000, undefined]],
        ['loneUpTo', [0, 2.5, 1001, Number.NaN, -1], [1, 1000, undefined]],
        ['maxInFlight', [0, 1.5, 65, Number.NaN, -1], [1, 64, undefined]],
      ] as const;
      for (const [name, bad, good] of bounds) {
        for (const v of bad)
          expect(() => new RedisStore({ redis, [name]: v }), `${name} ${v}`).to.throw(InvalidArgumentError);
        // stores made by b.store are closed after the test
        for (const v of good) expect(() => b.store({ [name]: v }), `${name} ${v}`).not.to.throw();
      }
    });

    it('a batch of up to loneUpTo calls that fit lone scripts: one admit-lone-run call; a larger one, or another call, admit.lua', async () => {
      await onOwnServer(async (raw, client) => {
        const send: Send = (args) => raw.call(args[0]!, ...args.slice(1));
        const plain = list(bucket('p', SL(3, S)), bucket('q', SL(5, S), SL(8, 10 * S)));
        const held = list(withCh(bucket('h', SL(3, S)), 2));
        // [loneUpTo, lists of the calls issued in one tick, the scripts expected]
        for (const [loneUpTo, lists, expected] of [
          [undefined, [plain, plain], ['admit-lone-run']],
          [undefined, [held, held], ['admit-lone-run']],
          [undefined, Array(4).fill(plain), ['admit-lone-run']],
          [undefined, Array(5).fill(plain), ['admit']],
          [1, [plain, plain], ['admit']],
          [8, [plain, plain, plain, plain, plain, plain], ['admit-lone-run']],
          // calls of both lone scripts in one run
          [8, [held, plain, held], ['admit-lone-run']],
          // a fixed window fits no lone script: the batch goes to admit.lua
          [8, [plain, list(bucket('f', FW(3, S)))], ['admit']],
        ] as const) {
          const what = `${lists.length} calls, loneUpTo ${loneUpTo ?? 'default'}`;
          const store = new RedisStore({ redis: client, prefix: freshPrefix(), loneUpTo, holds: NO_SYNC });
          const mem = reference();
          await runTick(store, mem, [admit('t', plain, T0)], `${what}: warm-up`);
          await logScripts(send);
          const ops = lists.map((l, i) =>
            l === held
              ? ({ kind: 'admit', tag: 't', buckets: l, now: T0 + S, hold: { id: `c${i}`, forUs: S } } as const)
              : admit('t', l, T0 + S),
          );
          await runTick(store, mem, ops, what);
          expect(await scriptsRun(send), what).to.deep.equal(expected);
          await store.clear();
        }
        await stopLoggingScripts(send);
      });
    });

    it('runs on Redis TIME: two calls for one place at one time, the first issued takes it (a rate, a channel)', async () => {
      await onOwnServer(async (raw, client) => {
        const send: Send = (args) => raw.call(args[0]!, ...args.slice(1));
        const store = new RedisStore({ redis: client, prefix: freshPrefix(), holds: NO_SYNC });
        const one = list(bucket('one', SL(1, 10 * S)));
        const channel = list(withCh(bucket('ch', SL(5, 10 * S)), 1));
        await store.admit({ tag: 't', buckets: list(bucket('other', SL(5, 10 * S))) }); // Redis' clock known
        await logScripts(send);
        let id = 0;
        for (const [buckets, script] of [
          [one, 'rate'],
          [channel, 'channel'],
        ] as const) {
          const runs: string[] = [];
          for (let round = 0; round < 20; round++) {
            await store.clear();
            const hold = buckets === channel ? () => ({ hold: { id: `h${id++}`, forUs: 10 * S } }) : () => ({});
            const [a, b] = await Promise.all([
              store.admit({ tag: 't', buckets, ...hold() }),
              store.admit({ tag: 't', buckets, ...hold() }),
            ]);
            expect([a!.admitted, b!.admitted], `${script}, round ${round}`).to.deep.equal([true, false]);
            expect(b!.now, 'a run decides at one Redis time, as a batch does').to.equal(a!.now);
            runs.push(...(await scriptsRun(send)).filter((n) => n.startsWith('admit')));
          }
          expect(runs, script).to.deep.equal(Array(20).fill('admit-lone-run'));
        }
        await stopLoggingScripts(send);
        await store.close();
      });
    });

    it('a run with one held call id twice, a refusal by channels and a plain call: each as the memory store decides', async () => {
      await onOwnServer(async (raw, client) => {
        const send: Send = (args) => raw.call(args[0]!, ...args.slice(1));
        const store = new RedisStore({ redis: client, prefix: freshPrefix(), holds: NO_SYNC, loneUpTo: 8 });
        const mem = reference();
        const held = list(withCh(bucket('h', SL(5, S)), 2));
        const plain = list(bucket('p', SL(1, S)));
        const hold = (id: string, now: number) =>
          ({ kind: 'admit', tag: 't', buckets: held, now, hold: { id, forUs: 10 * S } }) as const;
        await logScripts(send);
        // x admitted, x again (still holding: counted nowhere), y admitted, z refused by the
        // channel limit of 2; the plain log's second call refused
        const rs = await runTick(
          store,
          mem,
          [hold('x', T0), hold('x', T0), admit('t', plain, T0), hold('y', T0), hold('z', T0), admit('t', plain, T0)],
          'one run',
        );
        expect(rs.map((r) => (r as { admitted?: boolean }).admitted)).to.deep.equal([
          true,
          true,
          true,
          true,
          false,
          false,
        ]);
        expect(await scriptsRun(send)).to.deep.equal(['admit-lone-run']);
        await stopLoggingScripts(send);
        await store.close();
      });
    });

    it('seeded random equivalence with MemoryStore: batches of up to 8 as runs of lone decisions (loneUpTo 8)', async function () {
      this.timeout(60_000);
      await randomEquivalence(b.store({ maxBatch: 8, loneUpTo: 8 }), {
        seed: 0x10ae01,
        rounds: 200,
        pools: [makeLogPool('t', 't.')],
      });
    });

    it('channels: seeded random equivalence with MemoryStore, batches of up to 8 as runs of lone decisions', async function () {
      this.timeout(90_000);
      await channelEquivalence(b.store({ maxBatch: 8, loneUpTo: 8 }), 0x10ae02, 200, false);
    });

    it('batching happens: 100 concurrent admits are 4 script calls with maxBatch 32, 100 with maxBatch 1', async () => {
      await onOwnServer(async (raw, client) => {
        const bucketList = list(bucket('burst', SL(40, S), FW(60, 10 * S)));
        // maxBatch 32: batches of 32, 32, 32 (each sent once full) and 4 (at the end of the
        // tick); the default must batch too (at most as many calls as with 32)
        for (const [maxBatch, low, high] of [
          [32, 4, 4],
          [1, 100, 100],
          [undefined, 1, 4],
        ] as const) {
          const what = `script calls with maxBatch ${maxBatch ?? 'default'}`;
          const store = new RedisStore({ redis: client, prefix: freshPrefix(), maxBatch, holds: NO_SYNC });
          // warm-up: the script is loaded (EVALSHA, NOSCRIPT, EVAL) before the stats are reset
          await store.admit({ tag: 't', buckets: list(bucket('warm', SL(1, S))), now: T0 });
          await raw.config('RESETSTAT');
          expect(await scriptCalls(raw), 'after RESETSTAT').to.equal(0);
          const mem = reference();
          const ops = Array.from({ length: 100 }, (_, i) => admit('t', bucketList, T0 + S + Math.floor(i / 10)));
          const res = (await runTick(store, mem, ops, what)) as AdmitResult[];
          expect(res.filter((r) => r.admitted).length).to.equal(40);
          const n = await scriptCalls(raw);
          expect(n, what).to.be.at.least(low);
          expect(n, what).to.be.at.most(high);
          await store.clear();
        }
      });
    });
    it('group commit (maxInFlight 1): calls arriving while a batch is in flight wait for it and leave together; a waiting call that aborts never leaves', async () => {
      const server = await startRedisServer();
      const raw = newRedisClient(server);
      const client = newRedisClient(server);
      try {
        await ready(client);
        const store = new RedisStore({
          redis: client,
          prefix: freshPrefix(),
          maxBatch: 16,
          maxInFlight: 1,
          holds: NO_SYNC,
        });
        const one = list(bucket('gc', SL(5, S)));
        await store.admit({ tag: 't', buckets: list(bucket('warm', SL(1, S))), now: T0 });
        await raw.config('RESETSTAT');
        const mem = reference();
        const expected: AdmitResult[] = [];
        const issue = (now: number, signal?: StopSignal): Promise<AdmitResult> => {
          if (!signal) expected.push(mem.admitSync({ tag: 't', buckets: one, now }));
          return store.admit({ tag: 't', buckets: one, now, signal });
        };
        // Redis frozen: the first call leaves at the end of its tick, alone (the store is idle),
        // and stays in flight while 11 more arrive, each in a tick of its own
        server.pause();
        const first = issue(T0 + S);
        await new Promise((r) => setImmediate(r));
        const waiting: Promise<AdmitResult>[] = [];
        const flag = { aborted: false };
        let aborted: Promise<AdmitResult> | undefined;
        for (let i = 1; i <= 11; i++) {
          if (i === 4)
            (aborted = store.admit({ tag: 't', buckets: one, now: T0 + S + i, signal: flag })).catch(() => undefined);
          else waiting.push(issue(T0 + S + i));
          await new Promise((r) => setImmediate(r));
        }
        flag.aborted = true; // its caller gave up while it waited: it must never reach Redis
        server.resume();
        const got = [await first, ...(await Promise.all(waiting))];
        expect(await rejection(aborted!)).to.be.instanceOf(StoreUnavailableError);
        expect(got).to.deep.equal(expected);
        expect(got.filter((r) => r.admitted).length).to.equal(5);
        // the first alone, then the 10 that waited (the aborted one dropped) in one batch
        const sizes = store.batchSizes().admit;
        expect(sizes[1], 'batches of 1').to.equal(2); // the warm-up and the first
        expect(sizes[10], 'batches of 10').to.equal(1);
        expect(
          sizes.reduce((x, y) => x + y, 0),
          'batches',
        ).to.equal(3);
        expect(await scriptCalls(raw)).to.equal(2);
        await store.clear();
      } finally {
        server.resume();
        raw.disconnect();
        client.disconnect();
        await server.stop();
      }
    });

    it('pipelined (maxInFlight 3): a call leaves while others are in flight, up to 3; the rest wait and leave together, decided in issue order', async () => {
      const server = await startRedisServer();
      const raw = newRedisClient(server);
      const client = newRedisClient(server);
      try {
        await ready(client);
        const store = new RedisStore({
          redis: client,
          prefix: freshPrefix(),
          maxBatch: 16,
          maxInFlight: 3,
          holds: NO_SYNC,
        });
        const one = list(bucket('pl', SL(5, S)));
        await store.admit({ tag: 't', buckets: list(bucket('warm', SL(1, S))), now: T0 });
        await raw.config('RESETSTAT');
        const mem = reference();
        const expected: AdmitResult[] = [];
        const issue = (now: number, signal?: StopSignal): Promise<AdmitResult> => {
          if (!signal) expected.push(mem.admitSync({ tag: 't', buckets: one, now }));
          return store.admit({ tag: 't', buckets: one, now, signal });
        };
        // Redis frozen: the first three calls leave alone, each at the end of its own tick; the
        // next 8 wait (the lane has 3 in flight) and one of them aborts meanwhile
        server.pause();
        const got: Promise<AdmitResult>[] = [];
        const flag = { aborted: false };
        let aborted: Promise<AdmitResult> | undefined;
        for (let i = 0; i < 11; i++) {
          if (i === 5)
            (aborted = store.admit({ tag: 't', buckets: one, now: T0 + S + i, signal: flag })).catch(() => undefined);
          else got.push(issue(T0 + S + i));
          await new Promise((r) => setImmediate(r));
        }
        expect(store.batchSizes().admit[1], 'batches of 1 sent while Redis is frozen').to.equal(4);
        flag.aborted = true;
        server.resume();
        expect(await Promise.all(got)).to.deep.equal(expected);
        expect(await rejection(aborted!)).to.be.instanceOf(StoreUnavailableError);
        const sizes = store.batchSizes().admit;
        expect(sizes[1], 'batches of 1').to.equal(4); // the warm-up and the first three
        expect(sizes[7], 'batches of 7').to.equal(1);
        expect(await scriptCalls(raw)).to.equal(4);
        await store.clear();
      } finally {
        server.resume();
        raw.disconnect();
        client.disconnect();
        await server.stop();
      }
    });

    it('pipelined (maxInFlight 4), live time: 600 admits, each in a tick of its own, equal a MemoryStore replay in execution order', async () => {
      const store = b.store({ maxInFlight: 4 });
      const ns = randomBytes(3).toString('hex');
      const A = bucket(`${ns}:A`, SL(40, S));
      const B = bucket(`${ns}:B`, FW(1000, 10 * S));
      const C = bucket(`${ns}:C`, FW(7, S), SL(9, S));
      const lists = [list(A), list(B, A), list(C)];
      const ops = Array.from({ length: 600 }, (_, i) => admit('t', lists[i % 3]!));
      const pending: Promise<unknown>[] = [];
      for (const op of ops) {
        pending.push(issue(store, op));
        await new Promise((r) => setImmediate(r));
      }
      const results = (await Promise.all(pending)) as AdmitResult[];
      const order = results.map((r, i) => ({ r, i })).sort((x, y) => x.r.now - y.r.now || x.i - y.i);
      const mem = reference();
      for (const { r, i } of order)
        expect(r, `call ${i} (${describeOp(ops[i]!)}) at ${r.now}`).to.deep.equal(apply(mem, ops[i]!, r.now));
      expect(results.filter((r) => r.admitted).length).to.be.above(40);
    });

    it('batching happens: 100 concurrent reserves are 2 script calls with maxBatch 64 (64 + 36), 100 with maxBatch 1', async () => {
      await onOwnServer(async (raw, client) => {
        // a route of two carriers; at one time, 21 calls fit on the first, the rest go to the second
        const route = [carrier('carrier:b1', 250, 5_000), carrier('carrier:b2', I7, 1_000 * S)];
        // maxBatch 64: one batch sent once full, the other 36 at the end of the tick; the
        // default (64) the same
        for (const [maxBatch, calls] of [
          [64, 2],
          [1, 100],
          [undefined, 2],
        ] as const) {
          const what = `script calls with maxBatch ${maxBatch ?? 'default'}`;
          const store = new RedisStore({ redis: client, prefix: freshPrefix(), maxBatch, holds: NO_SYNC });
          // warm-up: the script is loaded before the stats are reset
          await store.reserve({ route: [carrier('carrier:warm', 250, 0)], now: T0 });
          await raw.config('RESETSTAT');
          expect(await scriptCalls(raw), 'after RESETSTAT').to.equal(0);
          const mem = reference();
          const ops = Array.from({ length: 100 }, (_, i) =>
            reserve(i % 2 ? route : [...route], T0 + S + (i < 50 ? 0 : 1)),
          );
          const res = (await runTick(store, mem, ops, what)) as ReserveResult[];
          expect(res.filter((r) => r.index === 0).length).to.equal(21);
          expect(await scriptCalls(raw), what).to.equal(calls);
          if (calls === 2) {
            // calls at one time share work: per batch and time, each carrier read once, and
            // written once if it took a call: the first batch is 50 calls at t (both carriers
            // take some) and 14 at t + 1 (all on the second), the other 36 calls at t + 1
            expect(await commandCalls(raw, 'get'), `GETs, ${what}`).to.equal(2 + 2 + 2);
            expect(await commandCalls(raw, 'set'), `SETs, ${what}`).to.equal(2 + 1 + 1);
            // written with a caller-given now: kept at least virtualTimeTtlMs (default 24 h)
            for (const c of route)
              expect(await raw.pttl(`${store.prefix}${c.name}`), `pttl of ${c.name}`).to.be.above(86_400_000 - 60_000);
            // on Redis TIME: kept until slot + I (+ 1 ms) only: the second slot is t + 100 ms,
            // so 201 ms from t, less the time the writes and the read took (measured, + 1 ms)
            const started = Date.now();
            await Promise.all([
              store.reserve({ route: [carrier('carrier:live', 100_000, 0)] }),
              store.reserve({ route: [carrier('carrier:live', 100_000, 200_000)] }),
            ]);
            const pttl = await raw.pttl(`${store.prefix}carrier:live`);
            const took = Date.now() - started + 1;
            expect(pttl, 'pttl of a carrier written on Redis TIME').to.be.within(201 - took, 201);
          }
          await store.clear();
        }
      });
    });

    it('reservations: seeded random equivalence with MemoryStore, maxBatch 5', async function () {
      this.timeout(60_000);
      await pacingEquivalence(b.store({ maxBatch: 5 }), { seed: 0x9ace03, rounds: 120 });
    });

    it('reservations: seeded random equivalence with MemoryStore, times near 0 (fractional intervals to full precision)', async function () {
      this.timeout(60_000);
      await pacingEquivalence(b.store(), { seed: 0x9ace04, rounds: 120, t0: 60 * S });
    });

    it('Redis away when a batch is due: its calls wait on their own deadlines, then go in issue order; an aborted one never leaves', async () => {
      const server = await startRedisServer();
      const client = new Redis(server.url, { ...RECOMMENDED_REDIS_OPTIONS, retryStrategy: () => 20 });
      client.on('error', () => undefined);
      try {
        await ready(client);
        const store = new RedisStore({ redis: client, prefix: freshPrefix() });
        const away = list(bucket('away', SL(3, S)));
        expect((await store.admit({ tag: 't', buckets: away, now: T0 })).admitted).to.equal(true);
        await server.kill();
        while (client.status === 'ready') await new Promise((r) => setTimeout(r, 5));
        const flag = { aborted: false };
        const calls = [1, 2, 3, 4, 5].map((i) =>
          store.admit({ tag: 't', buckets: away, now: T0 + i, ...(i === 2 && { signal: flag }) }),
        );
        const settled = Promise.allSettled(calls);
        await new Promise((r) => setTimeout(r, 100));
        flag.aborted = true; // the policy decided call 2 while Redis was away
        await server.restart();
        const results = await settled;
        expect(results[1]!.status).to.equal('rejected');
        expect((results[1] as PromiseRejectedResult).reason).to.be.instanceOf(StoreUnavailableError);
        // the others, as the reference decides them in issue order without call 2 (the
        // restarted server starts empty: the event at T0 is gone, and so are the scripts)
        const mem = reference();
        for (const i of [0, 2, 3, 4]) {
          expect(results[i]!.status, `call ${i + 1}`).to.equal('fulfilled');
          const want = mem.admitSync({ tag: 't', buckets: away, now: T0 + i + 1 });
          expect((results[i] as PromiseFulfilledResult<AdmitResult>).value, `call ${i + 1}`).to.deep.equal(want);
        }
        expect((await store.count({ tag: 't', bucket: 'away', windowUs: S, now: T0 + 10 })).count).to.equal(3);
      } finally {
        client.disconnect();
        await server.stop();
      }
    });
  });

  describe('Redis Cluster (three masters, hash tags)', () => {
    const b = backendHooks(async () => {
      const handle: RedisClusterHandle = await startCluster();
      const client = newClusterClient(handle);
      await ready(client);
      return { client, stop: () => handle.stop() };
    });

    sharedTests(b, true);

    it('runs on a Cluster: two admits of one tag in one tick, plain or held, are one admit-lone-run call', async () => {
      const cluster = b.client() as Cluster;
      const store = b.store({ holds: NO_SYNC });
      const mem = reference();
      const plain = list(bucket('p', SL(3, S)));
      const held = list(withCh(bucket('h', SL(3, S)), 2));
      const heldAdmit = (id: string, now: number) =>
        ({ kind: 'admit', tag: 't', buckets: held, now, hold: { id, forUs: S } }) as const;
      // warm-up: each script loaded on the master (ioredis' first EVALSHA of it is a NOSCRIPT)
      await runTick(store, mem, [admit('t', plain, T0), admit('t', plain, T0)], 'warm-up');
      await runTick(store, mem, [heldAdmit('w1', T0), heldAdmit('w2', T0)], 'warm-up, held');
      const masters = cluster.nodes('master');
      const sends: Send[] = masters.map((m) => (args) => m.call(args[0]!, ...args.slice(1)));
      for (const send of sends) await logScripts(send);
      const run = async () => (await Promise.all(sends.map((send) => scriptsRun(send)))).flat();
      await runTick(store, mem, [admit('t', plain, T0 + S), admit('t', plain, T0 + S)], 'two plain in one tick');
      expect(await run()).to.deep.equal(['admit-lone-run']);
      await runTick(store, mem, [heldAdmit('h1', T0 + S), heldAdmit('h2', T0 + S)], 'two held in one tick');
      expect(await run()).to.deep.equal(['admit-lone-run']);
      for (const send of sends) await stopLoggingScripts(send);
    });
  });
});
