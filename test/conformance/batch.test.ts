/**
 * RedisStore batching of admit(): admissions issued in one tick go to Redis as one call of
 * lua/admit.lua per lane (one lane on a single Redis, one per tag with hash tags), cut at
 * maxBatch; other operations flush pending admissions first; aborted calls never leave.
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
import { MemoryStore } from '../../src/store/MemoryStore.js';
import { RECOMMENDED_REDIS_OPTIONS, RedisStore, type RedisStoreOptions } from '../../src/store/RedisStore.js';
import type { AdmitResult, Bucket, CountResult, Limit, RecordResult, StopSignal } from '../../src/store/types.js';
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
  | { readonly kind: 'admit'; readonly tag: string; readonly buckets: readonly Bucket[]; readonly now?: number; readonly signal?: StopSignal }
  | { readonly kind: 'record'; readonly tag: string; readonly buckets: readonly Bucket[]; readonly now: number }
  | { readonly kind: 'count'; readonly tag: string; readonly bucket: string; readonly windowUs: number; readonly now: number };

type Result = AdmitResult | RecordResult | CountResult;

const admit = (tag: string, buckets: readonly Bucket[], now?: number): Op => ({ kind: 'admit', tag, buckets, now });
const record = (tag: string, buckets: readonly Bucket[], now: number): Op => ({ kind: 'record', tag, buckets, now });
const count = (tag: string, bucketName: string, windowUs: number, now: number): Op => ({ kind: 'count', tag, bucket: bucketName, windowUs, now });

function issue(store: RedisStore, op: Op): Promise<Result> {
  switch (op.kind) {
    case 'admit':
      return store.admit({ tag: op.tag, buckets: op.buckets, now: op.now, signal: op.signal });
    case 'record':
      return store.record({ tag: op.tag, buckets: op.buckets, now: op.now });
    case 'count':
      return store.count({ tag: op.tag, bucket: op.bucket, windowUs: op.windowUs, now: op.now });
  }
}

function apply(mem: MemoryStore, op: Op, now = op.now): Result {
  switch (op.kind) {
    case 'admit':
      return mem.admitSync({ tag: op.tag, buckets: op.buckets, now });
    case 'record':
      return mem.recordSync({ tag: op.tag, buckets: op.buckets, now });
    case 'count':
      return mem.countSync({ tag: op.tag, bucket: op.bucket, windowUs: op.windowUs, now });
  }
}

function describeOp(op: Op): string {
  const at = op.now === undefined ? 'store clock' : `T0${op.now - T0 >= 0 ? '+' : ''}${op.now - T0}`;
  if (op.kind === 'count') return `count {${op.tag}} ${op.bucket} W=${op.windowUs} @${at}`;
  const names = op.buckets.map((b) => `${b.name}(${b.limits.map((l) => `${l.algorithm[0]}${l.algorithm.split('-')[1]![0]}${l.limit}/${l.windowUs}`).join(',')})`);
  return `${op.kind} {${op.tag}} [${names.join(', ')}] @${at}`;
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
  const accountLimits: Limit[][] = [
    [SL(3, S), SL(5, 10 * S)],
    [FW(4, S)],
    [SW(4, 2 * S), SL(6, 10 * S)],
  ];
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
    .map((b) => ({ name: b.name, windows: [...new Set(b.limits.filter((l) => l.algorithm === 'sliding-log').map((l) => l.windowUs))] }))
    .filter((l) => l.windows.length > 0);
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
    [[FW(2, S), FW(4, 10 * S)], [FW(4, 10 * S), FW(1, S)]],
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
      if (op.kind === 'admit') (res as AdmitResult).admitted ? admitted++ : refused++;
      else if (op.kind === 'record') records++;
    });
    // every sliding log, counted at the round's last time and at its base time
    const after: Op[] = [];
    for (const pool of w.pools) {
      for (const log of pool.logs) for (const W of log.windows) for (const t of [prev, base]) after.push(count(pool.tag, log.name, W, t));
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
}

/** INFO commandstats: calls of EVALSHA plus EVAL. */
async function scriptCalls(raw: Redis): Promise<number> {
  const info = await raw.info('commandstats');
  let n = 0;
  for (const cmd of ['evalsha', 'eval']) {
    const m = new RegExp(`^cmdstat_${cmd}:calls=(\\d+)`, 'm').exec(info);
    if (m) n += Number(m[1]);
  }
  return n;
}

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
      expect(Number.isSafeInteger(r.now) && Math.abs(r.now - Date.now() * 1000) < 10 * S, `call ${i}: now ${r.now}`).to.equal(true);
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
    const first = await runTick(store, mem, [...seq(X1, X5, t), ...seq(Y1, Y5, t), ...seq(GZ1, GZ5, t)], 'limits 1 vs 5, one time');
    // not vacuous: the limit-1 calls are refused where the limit-5 ones are admitted
    expect((first as AdmitResult[]).slice(0, 9).map((r) => r.admitted)).to.deep.equal([true, false, true, true, false, true, true, false, false]);
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
    const res = (await runTick(store, mem, [admit('t', V1, t), admit('t', V2, t), admit('t', V2, t)], 'one batch')) as AdmitResult[];
    expect(res.map((r) => r.admitted)).to.deep.equal([true, false, false]);
    // and what the batch left in Redis, seen by the next one
    await runTick(store, mem, [admit('t', V1, t + 1), admit('t', V1, t + 1), admit('t', V1, t + 1), admit('t', V1, t + 1), admit('t', V1, t + 1)], 'the batch after');
  });

  it('limits changed in one batch: the same window limits listed in another order', async () => {
    const store = b.store();
    const mem = reference();
    const t = T0 + 2 * S + 5;
    // w1 and w2 name the same two window hashes (1 s and 10 s), in another order
    const W1 = list(bucket('w', FW(5, S), FW(5, 10 * S)));
    const W2 = list(bucket('w', FW(1, 10 * S), FW(5, S)));
    const res = (await runTick(store, mem, [admit('t', W1, t), admit('t', W2, t), admit('t', W1, t)], 'one batch')) as AdmitResult[];
    expect(res.map((r) => r.admitted)).to.deep.equal([true, false, true]);
    await runTick(store, mem, [admit('t', W1, t + 1), admit('t', W1, t + 1), admit('t', W1, t + 1), admit('t', W1, t + 1)], 'the batch after');
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
    expect(await rejection(store.admit({ tag: 't', buckets: one, now: t, signal: AbortSignal.abort() }))).to.be.instanceOf(StoreUnavailableError);
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
    expect(await store.count({ tag: 't', bucket: 'ab2', windowUs: S, now: t + 1 })).to.deep.equal({ count: 2, now: t + 1 });

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
    const r1 = await runTick(store, mem, [admit('t', X, t), record('t', X, t + 1), admit('t', X, t + 2)], 'admit, record, admit');
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
      [count('t', 'oz', S, t), admit('t', Z, t), count('t', 'oz', S, t), admit('t', Z, t), record('t', Z, t), count('t', 'oz', S, t), admit('t', Z, t), count('t', 'oz', S, t)],
      'counts between admits',
    );
    expect([0, 2, 5, 7].map((i) => (r3[i] as CountResult).count)).to.deep.equal([0, 1, 3, 3]);
  });

  const lanes = cluster ? 'one lane (one tag)' : 'one lane';
  it(`seeded random equivalence with MemoryStore: ${lanes}`, async function () {
    this.timeout(60_000);
    await randomEquivalence(b.store(), { seed: cluster ? 0xc1057e1 : 0x5eed01, rounds: 300, pools: [makePool('t', 't.')] });
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
}

describe('RedisStore: batched admissions', function () {
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

    it('maxBatch must be an integer from 1 to 1000', () => {
      const redis = b.client();
      for (const maxBatch of [0, 1.5, 1001, Number.NaN, -1, Number.POSITIVE_INFINITY]) {
        expect(() => new RedisStore({ redis, maxBatch }), `maxBatch ${maxBatch}`).to.throw(InvalidArgumentError);
      }
      for (const maxBatch of [1, 1000, undefined]) {
        expect(() => new RedisStore({ redis, maxBatch }), `maxBatch ${maxBatch}`).not.to.throw();
      }
    });

    it('batching happens: 100 concurrent admits are 4 script calls with maxBatch 32, 100 with maxBatch 1', async () => {
      const server = await startRedisServer();
      const raw = newRedisClient(server);
      const client = newRedisClient(server);
      try {
        await ready(client);
        const bucketList = list(bucket('burst', SL(40, S), FW(60, 10 * S)));
        // maxBatch 32: batches of 32, 32, 32 (each sent once full) and 4 (at the end of the
        // tick); the default must batch too (at most as many calls as with 32)
        for (const [maxBatch, low, high] of [
          [32, 4, 4],
          [1, 100, 100],
          [undefined, 1, 4],
        ] as const) {
          const what = `script calls with maxBatch ${maxBatch ?? 'default'}`;
          const store = new RedisStore({ redis: client, prefix: freshPrefix(), maxBatch });
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
      } finally {
        raw.disconnect();
        client.disconnect();
        await server.stop();
      }
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
        const calls = [1, 2, 3, 4, 5].map((i) => store.admit({ tag: 't', buckets: away, now: T0 + i, ...(i === 2 && { signal: flag }) }));
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
  });
});
