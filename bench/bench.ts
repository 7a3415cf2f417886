/**
 * npm run bench [-- --json] [-- --quick] [-- --pipeline auto|off|both] [-- --commandstats] [-- --max-batch N]
 *
 * Starts its own redis-server on a free loopback port and measures, in one run on that Redis and
 * with the same offered load (one seeded Zipf sequence of peers, N calls in flight):
 *   - callgate admission, one peer-level limit, and three levels (global, account, peer) x two windows;
 *   - rate-limiter-flexible RateLimiterRedis.consume on the same per-peer limit;
 *   - a hand-rolled single-key sliding-log Lua script through plain ioredis;
 *   - callgate dispatch reservations (store.reserve over a 3-carrier route);
 *   - the memory store (Store API and admitSync/reserveSync), in process;
 *   - Redis memory per peer at steady state, 10/100/1000 CPS, per algorithm;
 *   - the sidecar (`callgate serve`) over keep-alive HTTP, open loop at several rates, beside the
 *     library in process on the same Redis (sidecar.ts; --sidecar-rates, --sidecar-seconds, --connections).
 *   - open loop (bench/openloop.ts): lone decisions; fixed-rate arrivals at several rates
 *     (latency from the scheduled time), like with like (shield off / plain RLF, shield on / RLF
 *     inMemoryBlockOnConsumed, 3 levels + channels / plain RLF) beside the driver alone
 *     (--rates, --open-rounds, --open-seconds, --in-flight, --open-only g3,rlf,g3s,rlfb,g3ch,driver,
 *     --steady: the global and account logs start as full as a steady platform's);
 *     group commit against pipelined
 *     batches (batching: --batch-rates, --bounds, --batch-rounds); saturation (--sat-rates,
 *     --sat-rounds); and a 10x flood of one peer beside normal traffic.
 * Every run is checked: admitted times are scanned for any window over its limit, and callgate's
 * Redis decisions are replayed through the MemoryStore in execution order (they must be equal).
 * A run that fails a check prints FAIL instead of being a result.
 */
import { execSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import { performance } from 'node:perf_hooks';
import { Redis, type RedisOptions } from 'ioredis';
import { RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';
// callgate as users run it: compiled (dist/, see shipped.ts)
import { CallGate, MemoryStore, RedisStore } from 'callgate';
import type { Algorithm, Bucket, Carrier, ReserveResult, Store } from '../src/store/types.js';
// the same redis-server starter the tests use (free loopback port, nothing on disk)
import { startRedisServer, type RedisServer as BenchRedis } from '../test/helpers/redis.js';
import { CPU_RLF, cpuSection } from './node-cpu.js';
import { builtEntry } from './shipped.js';
import { sidecarSection, type SidecarRow } from './sidecar.js';
import { AdmittedLog, reservationViolations, slidingLogViolations, type LimitSpec } from './verify.js';
import { closedLoop, cpuSecondsOf, syncLatency, syncLoop, wallUs, zipfSequence, type Histogram } from './workload.js';
import { callIdOf } from './driver.js';
import {
  floodSection,
  LONE_SERVE_CLIENT,
  loneSection,
  median,
  batchesName,
  batchingSection,
  OPEN_DRIVER,
  OPEN_RLF,
  OPEN_PAIRS,
  OPEN_SYSTEMS,
  openLoopSection,
  printBatchShares,
  printOpenRows,
  saturationSection,
  type OpenRow,
  type PairRatios,
  type StoreBatches,
  type Workload,
  LONE_NAMES,
} from './openloop.js';
import {
  ACCOUNTS,
  accountName,
  CALLER_1,
  callerOf,
  CHANNELS_3,
  CONFIG_1,
  CONFIG_3,
  CONFIG_3A,
  CONFIG_3CH,
  GLOBAL_3,
  HOLD_US,
  ACCOUNT_3,
  PEER_1,
  PEER_3,
  peerName,
  SOURCE_1,
  sourceOf,
  W1,
} from './limits.js';

// ---------------------------------------------------------------------------------------------
// Options

const argv = process.argv.slice(2);
const flag = (name: string): boolean => argv.includes(`--${name}`);
const opt = (name: string, dflt: string): string => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 && argv[i + 1] !== undefined ? argv[i + 1]! : dflt;
};
const QUICK = flag('quick');
const JSON_OUT = flag('json');
const PEERS = Number(opt('peers', '1000'));
const CONCURRENCY = Number(opt('concurrency', '128'));
const CALLS = Number(opt('calls', QUICK ? '20000' : '150000'));
const SECONDS = Number(opt('seconds', QUICK ? '2' : '6'));
const WARMUP = Math.min(CALLS, QUICK ? 3000 : 10000);
const ZIPF_S = Number(opt('zipf', '1.1'));
const SEED = Number(opt('seed', '1'));
const PIPELINE = opt('pipeline', 'both') as 'auto' | 'off' | 'both';
const MEM_CALLS = Number(opt('memory-calls', QUICK ? '200000' : '2000000'));
const MEM_SECONDS = Number(opt('memory-seconds', QUICK ? '1' : '2'));
/** Virtual-time spacing of the memory store's calls: the same 20,000 calls/s offered load. */
const MEM_STEP_US = 50;
const ONLY = opt('only', '');
const want = (section: string): boolean => ONLY === '' || ONLY.split(',').includes(section);
/** Only the Redis systems whose name contains this (profiling); rate-limiter-flexible always runs. */
const FILTER = opt('filter', '');
const ROUNDS = Number(opt('rounds', QUICK ? '1' : '2'));
/** Print, after each Redis run, every Redis command's calls and µs per decision (profiling). */
const COMMANDSTATS = flag('commandstats');
/** RedisStore maxBatch for the admission, open-loop and saturation runs (default: the store's). */
const MAX_BATCH = argv.includes('--max-batch') ? Number(opt('max-batch', '')) : undefined;
/** Sidecar section: offered rates (calls/s), seconds per rate, HTTP connections. */
const SIDECAR_RATES = opt('sidecar-rates', QUICK ? '1000,4000' : '1000,2500,5000,10000,15000')
  .split(',')
  .map(Number);
const SIDECAR_SECONDS = Number(opt('sidecar-seconds', QUICK ? '1' : '3'));
const SIDECAR_CONNECTIONS = Number(opt('connections', '32'));
/** Open loop: offered rates (calls/s), seconds per run, lone calls, flood: normal rate and the dialer's limit. */
const RATES = opt('rates', QUICK ? '5000,20000' : '5000,10000,20000,30000')
  .split(',')
  .map(Number);
/** The RedisStore's maxInFlight in the open-loop and saturation sections (default: the store's). */
const MAX_IN_FLIGHT = argv.includes('--in-flight') ? Number(opt('in-flight', '')) : undefined;
/** The store's batch settings in the open-loop and saturation sections. */
const BATCHES: StoreBatches = {
  ...(MAX_IN_FLIGHT !== undefined && { maxInFlight: MAX_IN_FLIGHT }),
  ...(MAX_BATCH !== undefined && { maxBatch: MAX_BATCH }),
};
/** Batching section: rates, bounds on batches in flight (the first is the baseline), rounds. */
const BATCH_RATES = opt('batch-rates', QUICK ? '5000,20000' : '5000,10000,20000,30000')
  .split(',')
  .map(Number);
/**
 * Each `B` (B batches in flight), `BxS` (and batches of at most S calls) or `BxSxL` (and lone
 * script calls for batches of up to L): RedisStore maxInFlight, maxBatch, loneUpTo.
 */
const BOUNDS: StoreBatches[] = opt('bounds', '1,2,4')
  .split(',')
  .map((b) => {
    const [inFlight, size, lone] = b.split('x').map(Number);
    return {
      maxInFlight: inFlight,
      ...(size !== undefined && { maxBatch: size }),
      ...(lone !== undefined && { loneUpTo: lone }),
    };
  });
const BATCH_ROUNDS = Number(opt('batch-rounds', QUICK ? '1' : '3'));
/** Saturation section: rising rates, rounds. */
const SAT_RATES = opt(
  'sat-rates',
  QUICK ? '20000,40000' : '10000,20000,30000,40000,50000,60000,80000,100000,120000,160000',
)
  .split(',')
  .map(Number);
const SAT_ROUNDS = Number(opt('sat-rounds', QUICK ? '1' : '2'));
/** Saturation: the RedisStore maxBatch of each callgate system side by side (default: the store's, or --max-batch). */
const SAT_BATCHES = argv.includes('--sat-batches') ? opt('sat-batches', '').split(',').map(Number) : [MAX_BATCH];
/** Saturation: the p99 bound of a rate kept up with, ms. */
const SAT_P99_MS = Number(opt('sat-p99-ms', '50'));
const OPEN_SECONDS = Number(opt('open-seconds', QUICK ? '1' : '2'));
/** Three-level open-loop runs start with the global and account logs full (openloop.ts, steadyLogs). */
const STEADY = flag('steady');
const OPEN_ROUNDS = Number(opt('open-rounds', QUICK ? '1' : '3'));
/** The open-loop systems to run (OPEN_SYSTEMS keys, comma-separated; default all). */
const OPEN_ONLY = argv.includes('--open-only') ? opt('open-only', '').split(',') : undefined;
for (const key of OPEN_ONLY ?? [])
  if (!(OPEN_SYSTEMS as readonly string[]).includes(key))
    throw new Error(`--open-only: unknown system ${key}; one of ${OPEN_SYSTEMS.join(', ')}`);
const LONE_CALLS = Number(opt('lone-calls', QUICK ? '1000' : '3000'));
const LONE_ROUNDS = Number(opt('lone-rounds', QUICK ? '1' : '5'));
/** CPU section: calls per 1 ms timer firing (comma-separated: one table each), calls per run, rounds. */
const CPU_PER_TICK = opt('cpu-per-tick', QUICK ? '10' : '2,10,40')
  .split(',')
  .map(Number);
const CPU_CALLS = Number(opt('cpu-calls', QUICK ? '2000' : '20000'));
const CPU_ROUNDS = Number(opt('cpu-rounds', QUICK ? '1' : '3'));
/** CPU section: three levels, without and with channels, again with each of these RedisStore loneUpTo values (beside the default). */
const CPU_LONE = argv.includes('--cpu-lone') ? opt('cpu-lone', '').split(',').map(Number) : [];
const FLOOD_NORMAL = Number(opt('flood-normal', '10000'));
const FLOOD_LIMIT = Number(opt('flood-limit', '1000'));

type Levels = 1 | 3 | '3ch' | '3attr';

/** The buckets of a call at each level count, as the bench names them (for checks and replays). */
function bucketsOf(levels: Levels, p: number): { buckets: Bucket[]; labels: string[] } {
  if (levels === 1) return { buckets: [{ name: `p${p}`, limits: PEER_1 }], labels: [`peer:${peerName(p)}`] };
  const ch = levels === '3ch';
  const three = {
    buckets: [
      { name: 'g', limits: GLOBAL_3, ...(ch && { channels: CHANNELS_3.global }) },
      { name: `a${p % ACCOUNTS}`, limits: ACCOUNT_3, ...(ch && { channels: CHANNELS_3.account }) },
      { name: `p${p}`, limits: PEER_3, ...(ch && { channels: CHANNELS_3.peer }) },
    ],
    labels: ['global', `account:${accountName(p)}`, `peer:${peerName(p)}`],
  };
  if (levels !== '3attr') return three;
  const subnet = `10.0.${p % 50}.0/24`;
  return {
    buckets: [...three.buckets, { name: `c${p % 300}`, limits: CALLER_1 }, { name: `s${p % 50}`, limits: SOURCE_1 }],
    labels: [...three.labels, `caller:${callerOf(p)}`, `source:${subnet}`],
  };
}

const ROUTE: Carrier[] = ['A', 'B', 'C'].map((c) => ({
  name: `carrier:${c}`,
  intervalUs: 1e6 / 4000,
  maxWaitUs: 25_000,
}));

// ---------------------------------------------------------------------------------------------
// Results

interface Row {
  type: 'run';
  name: string;
  client: string;
  decisions: number;
  seconds: number;
  perSecond: number;
  admittedPct: number;
  p50us: number;
  p99us: number;
  maxUs: number;
  /** Redis time spent in the scripts per decision (INFO commandstats, EVALSHA + EVAL). */
  redisUsPerCall?: number;
  redisCores?: number;
  nodeCores?: number;
  check: 'ok' | 'FAIL';
  checkDetail: string;
  vsRlf?: { perSecond: number; p99: number };
  rounds?: number;
  note?: string;
}

const rows: Row[] = [];

function lat(h: Histogram): { p50us: number; p99us: number; maxUs: number } {
  return {
    p50us: h.getValueAtPercentile(50) / 1000,
    p99us: h.getValueAtPercentile(99) / 1000,
    maxUs: h.maxValue / 1000,
  };
}

function log(line: string): void {
  if (!JSON_OUT) process.stdout.write(`${line}\n`);
}

function emit(obj: object): void {
  if (JSON_OUT) process.stdout.write(`${JSON.stringify(obj)}\n`);
}

// ---------------------------------------------------------------------------------------------
// Redis runs

interface Outcome {
  admitted: Uint8Array;
  /** Decision time, µs (Redis TIME from the result, or the client's wall clock). */
  at: Float64Array;
  /** Completion order. */
  order: Uint32Array;
  errors: number;
}

function outcome(n: number): Outcome {
  return { admitted: new Uint8Array(n), at: new Float64Array(n), order: new Uint32Array(n), errors: 0 };
}

interface System {
  op(i: number): Promise<void>;
  /** Check the first `done` results; returns a failure description or '' when correct. */
  check(done: number): string;
  admittedPct(done: number): number;
}

interface RedisStats {
  usec: number;
  cpu: number;
}

async function redisStats(admin: Redis): Promise<RedisStats> {
  const info = (await admin.info('commandstats')) + (await admin.info('cpu'));
  let usec = 0;
  for (const m of info.matchAll(/^cmdstat_(evalsha|eval):calls=\d+,usec=(\d+)/gm)) usec += Number(m[2]);
  return { usec, cpu: cpuSecondsOf(info) };
}

/** Each command's calls and µs per decision since the last RESETSTAT, busiest first. */
async function printCommandStats(admin: Redis, name: string, decisions: number): Promise<void> {
  const info = await admin.info('commandstats');
  const lines: [string, number, number][] = [];
  for (const m of info.matchAll(/^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/gm)) {
    if (m[1] === 'info' || m[1] === 'config') continue;
    lines.push([m[1]!, Number(m[2]) / decisions, Number(m[3]) / decisions]);
  }
  lines.sort((a, b) => b[2] - a[2]);
  process.stderr.write(`commandstats per decision, ${name}:\n`);
  for (const [cmd, calls, us] of lines)
    process.stderr.write(`  ${cmd.padEnd(18)} ${calls.toFixed(3).padStart(8)} calls ${us.toFixed(2).padStart(8)} µs\n`);
}

/** Indices 0..done-1 sorted by decision time, ties by completion order: the execution order. */
function executionOrder(o: Outcome, done: number): Uint32Array {
  const idx = Uint32Array.from({ length: done }, (_, i) => i);
  return idx.sort((a, b) => o.at[a]! - o.at[b]! || o.order[a]! - o.order[b]!);
}

function pct(a: Uint8Array, done: number): number {
  let n = 0;
  for (let i = 0; i < done; i++) n += a[i]!;
  return done === 0 ? 0 : (100 * n) / done;
}

let seq: Uint16Array;

/** Callgate admission through CallGate.admit (Redis TIME), checked two ways. */
function gateSystem(gate: CallGate, levels: Levels, n: number): System {
  const o = outcome(n);
  const limitedBy: (string | undefined)[] = new Array(n);
  let k = 0;
  const plans = Array.from({ length: PEERS }, (_, p) => ({
    peer: peerName(p),
    account: levels !== 1 ? accountName(p) : undefined,
    ...(levels === '3attr' && { caller: callerOf(p), source: sourceOf(p) }),
  }));
  return {
    async op(i) {
      const p = plans[seq[i]!]!;
      const d = await gate.admit({ callId: callIdOf('c', i), ...p });
      o.order[i] = k++;
      o.at[i] = d.at;
      if (d.admitted) o.admitted[i] = 1;
      else limitedBy[i] = d.limitedBy;
      if (d.degraded) o.errors++;
    },
    admittedPct: (done) => pct(o.admitted, done),
    check(done) {
      if (o.errors > 0) return `${o.errors} decisions degraded (store unavailable or timed out)`;
      // 1) no window of any bucket over its limit
      const admittedLog = new AdmittedLog();
      const limits = new Map<string, readonly LimitSpec[]>();
      for (let i = 0; i < done; i++) {
        if (!o.admitted[i]) continue;
        for (const b of bucketsOf(levels, seq[i]!).buckets) {
          admittedLog.add(b.name, o.at[i]!);
          limits.set(b.name, b.limits);
        }
      }
      const scan = admittedLog.check((b) => limits.get(b)!);
      if (scan.violations > 0) return `${scan.violations} windows over their limit`;
      // 2) the same decisions as the reference semantics (MemoryStore) in execution order
      const ref = new MemoryStore();
      let diff = 0;
      let first = '';
      const lists = Array.from({ length: PEERS }, (_, p) => bucketsOf(levels, p));
      for (const i of executionOrder(o, done)) {
        const { buckets, labels } = lists[seq[i]!]!;
        const hold = levels === '3ch' ? { id: `c${i}`, forUs: HOLD_US } : undefined;
        const r = ref.admitSync({ tag: 't', buckets, now: o.at[i]!, hold });
        const same = r.admitted === (o.admitted[i] === 1) && (r.admitted || labels[r.limitedBy] === limitedBy[i]);
        if (!same && diff++ === 0)
          first = `call ${i} at ${o.at[i]}: redis ${o.admitted[i] ? 'admitted' : limitedBy[i]}, reference ${r.admitted ? 'admitted' : labels[r.limitedBy]}`;
      }
      if (diff > 0) return `${diff} decisions differ from the reference (first: ${first})`;
      return '';
    },
  };
}

/** rate-limiter-flexible: fixed window anchored at the key's first event, `points` per `duration`. */
function rlfSystem(client: Redis, prefix: string, n: number): System {
  const L = PEER_1[0]!.limit;
  const W = PEER_1[0]!.windowUs;
  const limiter = new RateLimiterRedis({ storeClient: client, points: L, duration: W / 1e6, keyPrefix: prefix });
  const o = outcome(n);
  const consumed = new Uint32Array(n);
  /** Estimated end of the window the call fell in (µs): its key's expiry, from msBeforeNext. */
  const windowEnd = new Float64Array(n);
  let maxLatencyUs = 0;
  return {
    async op(i) {
      const t0 = wallUs();
      let res: RateLimiterRes;
      try {
        res = await limiter.consume(peerName(seq[i]!));
        o.admitted[i] = 1;
      } catch (e) {
        if (!(e instanceof RateLimiterRes)) {
          o.errors++;
          return;
        }
        res = e;
      }
      const t1 = wallUs();
      o.at[i] = t1;
      if (t1 - t0 > maxLatencyUs) maxLatencyUs = t1 - t0;
      consumed[i] = res.consumedPoints;
      windowEnd[i] = (t0 + t1) / 2 + res.msBeforeNext * 1000;
    },
    admittedPct: (done) => pct(o.admitted, done),
    check(done) {
      if (o.errors > 0) return `${o.errors} calls failed`;
      // Its contract: per peer, windows of W, each starting at the first call after the previous
      // one expired; at most L admitted in each (the counter of admitted calls runs 1..L, each
      // value once); window ends at least W apart; hence at most 2L admitted in any span of W.
      // Windows are told apart by their expiry (now + msBeforeNext), known within the latency.
      const slack = maxLatencyUs + 2000;
      const byPeer = new Map<number, number[]>();
      for (let i = 0; i < done; i++) {
        let a = byPeer.get(seq[i]!);
        if (!a) byPeer.set(seq[i]!, (a = []));
        a.push(i);
      }
      let bad = 0;
      for (const list of byPeer.values()) {
        list.sort((x, y) => windowEnd[x]! - windowEnd[y]!);
        let end = -Infinity;
        let seen = new Set<number>();
        const times: number[] = [];
        for (const i of list) {
          if (windowEnd[i]! - end > W / 2) {
            if (windowEnd[i]! - end < W - slack) bad++;
            end = windowEnd[i]!;
            seen = new Set();
          }
          if (!o.admitted[i]) continue;
          times.push(o.at[i]!);
          if (consumed[i]! > L || seen.has(consumed[i]!)) bad++;
          seen.add(consumed[i]!);
        }
        bad += slidingLogViolations(Float64Array.from(times).sort(), 2 * L, W - slack);
      }
      return bad > 0 ? `${bad} windows over the limit` : '';
    },
  };
}

const HAND_ROLLED = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local W = tonumber(ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%.17g', now - W))
if redis.call('ZCARD', KEYS[1]) < tonumber(ARGV[2]) then
  redis.call('ZADD', KEYS[1], string.format('%.17g', now), ARGV[3])
  redis.call('PEXPIRE', KEYS[1], math.ceil(W / 1000) + 1)
  return { 1, now }
end
return { 0, now }`;

/** The hand-rolled way: one sorted set per peer, ZREMRANGEBYSCORE / ZCARD / ZADD / PEXPIRE in one EVALSHA. */
function handRolledSystem(client: Redis, prefix: string, n: number): System {
  const { limit: L, windowUs: W } = PEER_1[0]!;
  if (!('benchSlidingLog' in client)) client.defineCommand('benchSlidingLog', { numberOfKeys: 1, lua: HAND_ROLLED });
  const call = (
    client as unknown as { benchSlidingLog(key: string, w: number, l: number, m: string): Promise<[number, number]> }
  ).benchSlidingLog;
  const o = outcome(n);
  return {
    async op(i) {
      try {
        const [ok, now] = await call.call(client, `${prefix}${peerName(seq[i]!)}`, W, L, `m${i}`);
        o.admitted[i] = ok;
        o.at[i] = now;
      } catch {
        o.errors++;
      }
    },
    admittedPct: (done) => pct(o.admitted, done),
    check(done) {
      if (o.errors > 0) return `${o.errors} calls failed`;
      const admittedLog = new AdmittedLog();
      for (let i = 0; i < done; i++) if (o.admitted[i]) admittedLog.add(String(seq[i]), o.at[i]!);
      const scan = admittedLog.check(() => PEER_1);
      return scan.violations > 0 ? `${scan.violations} windows over the limit` : '';
    },
  };
}

/** callgate dispatch: store.reserve over a 3-carrier route (Redis TIME), checked two ways. */
function reserveSystem(store: Store, n: number): System {
  const o = outcome(n);
  const index = new Int8Array(n);
  const wait = new Float64Array(n);
  const slot = new Float64Array(n);
  let k = 0;
  return {
    async op(i) {
      try {
        const r = await store.reserve({ route: ROUTE });
        o.order[i] = k++;
        o.at[i] = r.now;
        index[i] = r.index;
        wait[i] = r.waitUs;
        slot[i] = r.slotUs;
        if (r.index >= 0) o.admitted[i] = 1;
      } catch {
        o.errors++;
      }
    },
    admittedPct: (done) => pct(o.admitted, done),
    check(done) {
      if (o.errors > 0) return `${o.errors} calls failed`;
      return checkReservations(done, index, wait, slot, o.at, executionOrder(o, done));
    },
  };
}

function checkReservations(
  done: number,
  index: Int8Array,
  wait: Float64Array,
  slot: Float64Array,
  at: Float64Array,
  order: Uint32Array | null,
): string {
  const slots = new Map<string, number[]>();
  let bad = 0;
  for (let i = 0; i < done; i++) {
    if (index[i]! < 0) continue;
    const c = ROUTE[index[i]!]!;
    if (wait[i]! > c.maxWaitUs || slot[i] !== at[i]! + wait[i]!) bad++;
    let a = slots.get(c.name);
    if (!a) slots.set(c.name, (a = []));
    a.push(slot[i]!);
  }
  bad += reservationViolations(slots, () => ROUTE[0]!.intervalUs);
  if (bad > 0) return `${bad} slots closer than the carrier's interval or beyond maxWait`;
  if (order) {
    const ref = new MemoryStore();
    let diff = 0;
    for (const i of order) {
      const r = ref.reserveSync({ route: ROUTE, now: at[i]! });
      if (r.index !== index[i] || (r.index >= 0 && r.waitUs !== wait[i])) diff++;
    }
    if (diff > 0) return `${diff} reservations differ from the reference`;
  }
  return '';
}

async function measureRedis(
  name: string,
  client: string,
  admin: Redis,
  build: (n: number, prefix: string) => Promise<System> | System,
  note?: string,
): Promise<Row> {
  // warm up (JIT, script cache, connections) on other keys, then start from an empty Redis
  const warm = await build(WARMUP, 'warm:');
  await closedLoop(WARMUP, SECONDS, CONCURRENCY, (i) => warm.op(i));
  await admin.flushdb();
  await admin.config('RESETSTAT');
  const sys = await build(CALLS, 'bench:');
  const before = await redisStats(admin);
  const run = await closedLoop(CALLS, SECONDS, CONCURRENCY, (i) => sys.op(i));
  const after = await redisStats(admin);
  if (COMMANDSTATS) await printCommandStats(admin, name, run.done);
  const failure = sys.check(run.done);
  await admin.flushdb();
  const row: Row = {
    type: 'run',
    name,
    client,
    decisions: run.done,
    seconds: run.seconds,
    perSecond: run.done / run.seconds,
    admittedPct: sys.admittedPct(run.done),
    ...lat(run.hist),
    redisUsPerCall: (after.usec - before.usec) / run.done,
    redisCores: (after.cpu - before.cpu) / run.seconds,
    nodeCores: run.nodeCores,
    check: failure ? 'FAIL' : 'ok',
    checkDetail:
      failure || `no window over its limit${name.startsWith('callgate') ? '; identical to the reference replay' : ''}`,
    ...(note && { note }),
  };
  return row;
}

async function redisSection(server: BenchRedis, mode: 'auto' | 'off'): Promise<Row[]> {
  const clientOpts: RedisOptions = { enableAutoPipelining: mode === 'auto', maxRetriesPerRequest: 1 };
  const label = mode === 'auto' ? 'autopipeline' : 'plain';
  const admin = new Redis(server.url);
  const out: Row[] = [];
  // connected before a run starts (a burst on a connecting client only measures the connect)
  const client = async () => {
    const c = new Redis(server.url, clientOpts);
    await c.ping();
    return c;
  };

  const gateRow = async (name: string, levels: Levels) => {
    const c = await client();
    let gate: CallGate | undefined;
    const row = await measureRedis(name, label, admin, async (n, prefix) => {
      await gate?.close();
      const config = levels === 1 ? CONFIG_1 : levels === 3 ? CONFIG_3 : levels === '3attr' ? CONFIG_3A : CONFIG_3CH;
      // the closed loop is the throughput ceiling of the store itself: no flood shield
      gate = await CallGate.create({
        config,
        store: new RedisStore({ redis: c, prefix, maxBatch: MAX_BATCH }),
        timeoutMs: 5000,
        shield: false,
      });
      return gateSystem(gate, levels, n);
    });
    await gate?.close();
    c.disconnect();
    return row;
  };

  const systems: [string, () => Promise<Row | undefined>][] = [
    ['callgate admit, 1 level (gate.admit)', () => gateRow('callgate admit, 1 level (gate.admit)', 1)],
    ['callgate admit, 3 levels x 2 windows', () => gateRow('callgate admit, 3 levels x 2 windows', 3)],
    [
      'callgate admit, 3 levels x 2 windows + 2 attribute levels',
      () => gateRow('callgate admit, 3 levels x 2 windows + 2 attribute levels', '3attr'),
    ],
    [
      'callgate admit, 3 levels x 2 windows + channels',
      () => gateRow('callgate admit, 3 levels x 2 windows + channels', '3ch'),
    ],
    [
      'rate-limiter-flexible consume',
      async () => {
        const c = await client();
        const row = await measureRedis(
          'rate-limiter-flexible consume',
          label,
          admin,
          (n, prefix) => rlfSystem(c, prefix, n),
          'fixed window anchored at first hit',
        );
        c.disconnect();
        return row;
      },
    ],
    [
      'hand-rolled sliding-log EVALSHA',
      async () => {
        const c = await client();
        const row = await measureRedis('hand-rolled sliding-log EVALSHA', label, admin, (n, prefix) =>
          handRolledSystem(c, prefix, n),
        );
        c.disconnect();
        return row;
      },
    ],
    [
      'callgate reserve, 3 carriers (store)',
      async () => {
        const c = await client();
        const row = await measureRedis('callgate reserve, 3 carriers (store)', label, admin, (n, prefix) =>
          reserveSystem(new RedisStore({ redis: c, prefix }), n),
        );
        c.disconnect();
        return row;
      },
    ],
  ];
  // Rounds interleave the systems, so that a disturbance of the machine hits them alike; each
  // system reports its best round (by decisions/s), and fails if any round failed its check.
  const best = new Map<string, Row>();
  const failures = new Map<string, string>();
  for (let round = 0; round < ROUNDS; round++) {
    for (const [name, run] of systems) {
      if (!name.includes(FILTER) && !name.startsWith('rate-limiter-flexible')) continue;
      const row = await run();
      if (!row) continue;
      if (row.check === 'FAIL') failures.set(name, row.checkDetail);
      const prev = best.get(name);
      if (!prev || row.perSecond > prev.perSecond) best.set(name, row);
    }
  }
  for (const [name, row] of best) {
    const failure = failures.get(name);
    out.push(failure ? { ...row, check: 'FAIL', checkDetail: failure, rounds: ROUNDS } : { ...row, rounds: ROUNDS });
  }
  admin.disconnect();
  const rlf = out.find((r) => r.name.startsWith('rate-limiter-flexible'))!;
  for (const r of out) r.vsRlf = { perSecond: r.perSecond / rlf.perSecond, p99: r.p99us / rlf.p99us };
  return out;
}

// ---------------------------------------------------------------------------------------------
// Memory store (in process; virtual time at MEM_STEP_US per call, i.e. 20,000 calls/s offered)

async function memorySection(): Promise<Row[]> {
  const out: Row[] = [];
  const memSeq = zipfSequence(MEM_CALLS, PEERS, ZIPF_S, SEED + 1);
  const t0 = Math.round(Date.now() * 1000);
  const at = (i: number) => t0 + i * MEM_STEP_US;
  const plans = {
    1: Array.from({ length: PEERS }, (_, p) => bucketsOf(1, p).buckets),
    3: Array.from({ length: PEERS }, (_, p) => bucketsOf(3, p).buckets),
  };
  const warmCalls = Math.min(MEM_CALLS, 300_000);

  const admitCheck = (levels: 1 | 3, done: number, admitted: Uint8Array): string => {
    const admittedLog = new AdmittedLog();
    const limits = new Map<string, readonly LimitSpec[]>();
    for (let i = 0; i < done; i++) {
      if (!admitted[i]) continue;
      for (const b of plans[levels][memSeq[i]!]!) {
        admittedLog.add(b.name, at(i));
        limits.set(b.name, b.limits);
      }
    }
    const scan = admittedLog.check((b) => limits.get(b)!);
    return scan.violations > 0 ? `${scan.violations} windows over their limit` : '';
  };

  const row = (
    name: string,
    done: number,
    seconds: number,
    admittedPct: number,
    h: Histogram,
    failure: string,
  ): Row => ({
    type: 'run',
    name,
    client: 'in-process',
    decisions: done,
    seconds,
    perSecond: done / seconds,
    admittedPct,
    ...lat(h),
    check: failure ? 'FAIL' : 'ok',
    checkDetail: failure || 'no window over its limit',
  });

  for (const levels of [1, 3] as const) {
    const what = levels === 1 ? '1 level' : '3 levels x 2 windows';
    const buckets = plans[levels];
    const req = (i: number) => ({ tag: 't', buckets: buckets[memSeq[i]!]!, now: at(i) });
    // sync: a warm-up, an untimed pass (throughput, checked), a timed pass (latency), each on a fresh store
    {
      const warm = new MemoryStore();
      syncLoop(warmCalls, MEM_SECONDS, (i) => warm.admitSync(req(i)));
      const store = new MemoryStore();
      const admitted = new Uint8Array(MEM_CALLS);
      const run = syncLoop(MEM_CALLS, MEM_SECONDS, (i) => {
        if (store.admitSync(req(i)).admitted) admitted[i] = 1;
      });
      const timed = new MemoryStore();
      const h = syncLatency(MEM_CALLS, MEM_SECONDS, (i) => timed.admitSync(req(i)));
      out.push(
        row(
          `memory admit, ${what} (admitSync)`,
          run.done,
          run.seconds,
          pct(admitted, run.done),
          h,
          admitCheck(levels, run.done, admitted),
        ),
      );
    }
    // async Store API, one call awaited at a time (in process, more in flight changes nothing)
    {
      const warm: Store = new MemoryStore();
      await closedLoop(warmCalls, MEM_SECONDS, 1, async (i) => void (await warm.admit(req(i))));
      const store: Store = new MemoryStore();
      const admitted = new Uint8Array(MEM_CALLS);
      const run = await closedLoop(MEM_CALLS, MEM_SECONDS, 1, async (i) => {
        if ((await store.admit(req(i))).admitted) admitted[i] = 1;
      });
      out.push(
        row(
          `memory admit, ${what} (Store API)`,
          run.done,
          run.seconds,
          pct(admitted, run.done),
          run.hist,
          admitCheck(levels, run.done, admitted),
        ),
      );
    }
  }

  for (const api of ['sync', 'async'] as const) {
    const index = new Int8Array(MEM_CALLS);
    const wait = new Float64Array(MEM_CALLS);
    const slot = new Float64Array(MEM_CALLS);
    const now = new Float64Array(MEM_CALLS);
    const keep = (i: number, res: ReserveResult) => {
      index[i] = res.index;
      wait[i] = res.waitUs;
      slot[i] = res.slotUs;
      now[i] = res.now;
    };
    const req = (i: number) => ({ route: ROUTE, now: at(i) });
    let done: number;
    let seconds: number;
    let h: Histogram;
    if (api === 'sync') {
      const warm = new MemoryStore();
      syncLoop(warmCalls, MEM_SECONDS, (i) => warm.reserveSync(req(i)));
      const store = new MemoryStore();
      ({ done, seconds } = syncLoop(MEM_CALLS, MEM_SECONDS, (i) => keep(i, store.reserveSync(req(i)))));
      const timed = new MemoryStore();
      h = syncLatency(MEM_CALLS, MEM_SECONDS, (i) => timed.reserveSync(req(i)));
    } else {
      const warm: Store = new MemoryStore();
      await closedLoop(warmCalls, MEM_SECONDS, 1, async (i) => void (await warm.reserve(req(i))));
      const store: Store = new MemoryStore();
      ({
        done,
        seconds,
        hist: h,
      } = await closedLoop(MEM_CALLS, MEM_SECONDS, 1, async (i) => keep(i, await store.reserve(req(i)))));
    }
    let ok = 0;
    for (let i = 0; i < done; i++) if (index[i]! >= 0) ok++;
    const name = `memory reserve, 3 carriers (${api === 'sync' ? 'reserveSync' : 'Store API'})`;
    out.push(row(name, done, seconds, (100 * ok) / done, h, checkReservations(done, index, wait, slot, now, null)));
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// Redis memory per peer at steady state

interface MemRow {
  type: 'memory';
  algorithm: Algorithm | 'rate-limiter-flexible';
  cps: number;
  keys: number;
  bytes: number;
  events: number;
  check: 'ok' | 'FAIL';
}

async function memoryUsageSection(server: BenchRedis): Promise<MemRow[]> {
  const admin = new Redis(server.url);
  const c = new Redis(server.url);
  await admin.flushdb();
  const RATES = [10, 100, 1000];
  const ALGOS: Algorithm[] = ['sliding-log', 'fixed-window', 'sliding-window'];
  const runSeconds = 2.5; // > one window of 1 s, plus the previous window of the window counters
  interface Peer {
    algorithm: Algorithm | 'rate-limiter-flexible';
    cps: number;
    prefix: string;
    call(): Promise<number | undefined>;
    times: number[];
  }
  const peers: Peer[] = [];
  for (const cps of RATES) {
    for (const algorithm of ALGOS) {
      const prefix = `mem:${algorithm}:${cps}:`;
      const store = new RedisStore({ redis: c, prefix });
      const req = { tag: 'p', buckets: [{ name: 'peer:p', limits: [{ limit: 2 * cps, windowUs: W1, algorithm }] }] };
      peers.push({
        algorithm,
        cps,
        prefix,
        times: [],
        call: async () => ((r) => (r.admitted ? r.now : undefined))(await store.admit(req)),
      });
    }
    const prefix = `mem:rlf:${cps}:`;
    const limiter = new RateLimiterRedis({
      storeClient: c,
      points: 2 * cps,
      duration: 1,
      keyPrefix: prefix.slice(0, -1),
    });
    peers.push({
      algorithm: 'rate-limiter-flexible',
      cps,
      prefix,
      times: [],
      call: () =>
        limiter.consume('p').then(
          () => wallUs(),
          () => undefined,
        ),
    });
  }
  const start = performance.now();
  const issued = new Array<number>(peers.length).fill(0);
  const inflight = new Set<Promise<void>>();
  while (performance.now() - start < runSeconds * 1000) {
    const elapsed = (performance.now() - start) / 1000;
    peers.forEach((p, j) => {
      const due = Math.floor(elapsed * p.cps);
      for (; issued[j]! < due; issued[j]!++) {
        const pr: Promise<void> = p.call().then((t) => {
          if (t !== undefined) p.times.push(t);
          inflight.delete(pr);
        });
        inflight.add(pr);
      }
    });
    await new Promise((r) => setTimeout(r, 5));
  }
  await Promise.all(inflight);
  const out: MemRow[] = [];
  for (const p of peers) {
    const keys = await admin.keys(`${p.prefix}*`);
    let bytes = 0;
    for (const k of keys) bytes += Number(await admin.memory('USAGE', k, 'SAMPLES', 0)) || 0;
    const times = Float64Array.from(p.times).sort();
    const lim = 2 * p.cps;
    // every run is checked too: the callgate peers by their algorithm, rlf by its 2L-per-window bound
    let bad = 0;
    if (p.algorithm === 'rate-limiter-flexible') bad = slidingLogViolations(times, 2 * lim, W1 - 50_000);
    else {
      const log = new AdmittedLog();
      for (const t of times) log.add('p', t);
      bad = log.check(() => [{ limit: lim, windowUs: W1, algorithm: p.algorithm as Algorithm }]).violations;
    }
    out.push({
      type: 'memory',
      algorithm: p.algorithm,
      cps: p.cps,
      keys: keys.length,
      bytes,
      events: times.length,
      check: bad ? 'FAIL' : 'ok',
    });
  }
  await admin.flushdb();
  c.disconnect();
  admin.disconnect();
  return out;
}

// ---------------------------------------------------------------------------------------------
// Report

function machine(redisVersion: string) {
  let cpu = os.cpus()[0]?.model ?? 'unknown';
  try {
    cpu = /model name\s*:\s*(.*)/.exec(readFileSync('/proc/cpuinfo', 'utf8'))?.[1] ?? cpu;
  } catch {
    /* not Linux */
  }
  let nproc = os.cpus().length;
  try {
    nproc = Number(execSync('nproc', { encoding: 'utf8' }).trim());
  } catch {
    /* keep os.cpus() */
  }
  return { type: 'machine', nproc, cpu, redis: redisVersion, node: process.version };
}

const fmtInt = (x: number) => Math.round(x).toLocaleString('en-US');
const fmtUs = (x: number) => (x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2));
const pad = (s: string, n: number) => (s.length >= n ? s : s + ' '.repeat(n - s.length));
const lpad = (s: string, n: number) => (s.length >= n ? s : ' '.repeat(n - s.length) + s);
/** The lowest and highest of a list, as text. */
const rangeOf = (xs: readonly number[]) => `${Math.min(...xs).toFixed(2)}-${Math.max(...xs).toFixed(2)}`;

function printRuns(list: Row[]): void {
  log(
    `${pad('system', 44)} ${pad('client', 12)} ${lpad('decisions/s', 12)} ${lpad('admitted', 9)} ${lpad('p50 µs', 8)} ${lpad('p99 µs', 8)} ${lpad('max µs', 8)} ${lpad('×RLF/s', 7)} ${lpad('×RLF p99', 9)} ${lpad('redis µs', 9)} ${lpad('cpu node/redis', 15)}  check`,
  );
  for (const r of list) {
    const bad = r.check === 'FAIL';
    log(
      `${pad(r.name, 44)} ${pad(r.client, 12)} ${lpad(bad ? 'FAIL' : fmtInt(r.perSecond), 12)} ${lpad(`${r.admittedPct.toFixed(1)}%`, 9)} ${lpad(fmtUs(r.p50us), 8)} ${lpad(fmtUs(r.p99us), 8)} ${lpad(fmtUs(r.maxUs), 8)} ${lpad(r.vsRlf ? r.vsRlf.perSecond.toFixed(2) : '', 7)} ${lpad(r.vsRlf ? r.vsRlf.p99.toFixed(2) : '', 9)} ${lpad(r.redisUsPerCall !== undefined ? r.redisUsPerCall.toFixed(1) : '', 9)} ${lpad(r.nodeCores !== undefined ? `${r.nodeCores.toFixed(2)}/${r.redisCores!.toFixed(2)}` : '', 15)}  ${bad ? `FAIL: ${r.checkDetail}` : 'ok'}`,
    );
  }
}

async function main(): Promise<void> {
  builtEntry(); // the measured library is dist/: stale, it would measure an older callgate
  const server = await startRedisServer();
  let failed = false;
  try {
    const admin = new Redis(server.url);
    const redisVersion = /redis_version:(\S+)/.exec(await admin.info('server'))![1]!;
    admin.disconnect();
    const m = machine(redisVersion);
    emit(m);
    log(`callgate bench: ${m.nproc} cores (${m.cpu}), Redis ${m.redis} on 127.0.0.1:${server.port}, Node ${m.node}`);
    log(
      `offered load: ${PEERS} peers (Zipf s=${ZIPF_S}, seed ${SEED}), ${CONCURRENCY} calls in flight, at most ${fmtInt(CALLS)} calls or ${SECONDS} s per run (after ${fmtInt(WARMUP)} warm-up calls); best of ${ROUNDS} interleaved rounds`,
    );
    log(
      `limits: 1 level = peer 40/1s sliding-log; 3 levels = global 15000/1s+100000/10s, account (${ACCOUNTS}) 1500/1s+10000/10s, peer 40/1s+250/10s, all sliding-log`,
    );
    log(
      `rate-limiter-flexible: points 40, duration 1 (its fixed window); reserve: 3 carriers of 4000 cps, maxWait 25 ms\n`,
    );
    seq = zipfSequence(CALLS, PEERS, ZIPF_S, SEED);

    if (['lone', 'openloop', 'batching', 'saturation', 'flood', 'cpu'].some(want)) {
      const work: Workload = {
        seq,
        peers: PEERS,
        accounts: ACCOUNTS,
        config: (levels) => (levels === 1 ? CONFIG_1 : levels === 3 ? CONFIG_3 : CONFIG_3CH),
        bucketsOf: (levels, p) => bucketsOf(levels, p),
        holdUs: HOLD_US,
        rlf: { points: PEER_1[0]!.limit, windowUs: PEER_1[0]!.windowUs },
      };
      const o = { url: server.url, work, seconds: OPEN_SECONDS, log, steady: STEADY };
      const open: OpenRow[] = [];
      if (want('lone')) {
        const { rows: list, perRound, p50Round } = await loneSection(o, HAND_ROLLED, LONE_CALLS, LONE_ROUNDS);
        open.push(...list);
        log(
          `lone decisions (each awaited before the next, ${fmtInt(LONE_CALLS)} calls, best of ${LONE_ROUNDS} interleaved rounds): Redis µs per decision = script time (INFO commandstats)`,
        );
        printOpenRows(list, log);
        const hand = perRound.get(list.find((r) => r.name.startsWith('hand-rolled'))!.name)!;
        for (const [label, levels, target] of [
          ['1 level', 1, '; target <= 1.5'],
          ['3 levels', 3, '; target <= 2'],
          ['3 levels + channels', '3ch', ''],
        ] as const) {
          const mine = perRound.get(LONE_NAMES[levels])!;
          const each = mine.map((x, k) => x / hand[k]!);
          log(
            `  ${label} / hand-rolled, Redis µs per decision: ${median(each).toFixed(2)} x (rounds ${each.map((x) => x.toFixed(2)).join(', ')})${target}`,
          );
        }
        const served = p50Round.get(LONE_SERVE_CLIENT)!;
        const plain = p50Round.get(LONE_NAMES[3])!;
        const each = served.map((x, k) => x / plain[k]!);
        log(
          `  3 levels, serve client / default client, p50 per decision: ${median(each).toFixed(2)} x (rounds ${each.map((x) => x.toFixed(2)).join(', ')})`,
        );
        log('');
      }
      const fmtRatios = (r: PairRatios) => {
        const above = r.aboveFloor.filter(Number.isFinite);
        return `${median(r.raw).toFixed(2)} (${rangeOf(r.raw)}); above the floor ${above.length ? `${median(above).toFixed(2)} (${rangeOf(above)}, ${above.length} rounds)` : 'n/a'}`;
      };
      const floorOf = (list: OpenRow[], rate: number) =>
        list.find((r) => r.name === OPEN_DRIVER && r.offered === rate)?.p99us ?? NaN;
      if (want('openloop')) {
        const t0 = performance.now();
        const { rows: list, ratios } = await openLoopSection(o, RATES, OPEN_ROUNDS, BATCHES, OPEN_ONLY);
        open.push(...list);
        log(
          `open loop: calls on a fixed schedule (a setImmediate pump, each call in an immediate of its own), latency from its scheduled time; ${OPEN_SECONDS} s per run${STEADY ? ', logs steady' : ''}; rates ${RATES.join(', ')}/s; ${OPEN_ROUNDS} interleaved rounds, each row its round with the median p99 (${((performance.now() - t0) / 1000).toFixed(0)} s)`,
        );
        printOpenRows(list, log);
        printBatchShares(list, log);
        log(
          '  p99 ratios: median of the paired rounds (range); "above the floor": (p99 - driver p99) / (rival p99 - driver p99), paired',
        );
        // who falls behind is what a loaded machine still shows when its p99s are all stalls
        for (const rate of RATES)
          log(
            `  fell behind (under 97% decided per second) at ${lpad(fmtInt(rate), 6)}/s, rounds: ${list
              .filter((r) => r.offered === rate && r.name !== OPEN_DRIVER)
              .map((r) => `${r.name} ${r.behindRounds}/${r.rounds}`)
              .join('; ')}`,
          );
        for (const pair of OPEN_PAIRS) {
          for (const rate of RATES) {
            const r = ratios.get(pair.name)?.get(rate);
            if (r === undefined) continue; // one of the pair not run (--open-only)
            log(
              `  ${pad(pair.name, 40)} at ${lpad(fmtInt(rate), 6)}/s: ${fmtRatios(r)}; target <= ${pair.target.toFixed(1)}; driver p99 ${fmtUs(floorOf(list, rate))} µs`,
            );
          }
        }
        log('');
      }
      if (want('batching')) {
        const t0 = performance.now();
        const { rows: list, ratios } = await batchingSection(o, BATCH_RATES, BOUNDS, BATCH_ROUNDS);
        open.push(...list);
        log(
          `batching: a lane's batches in flight and their size, ${BOUNDS.map(batchesName).join(' / ')}, 3 levels, shield off; rates ${BATCH_RATES.join(', ')}/s; ${BATCH_ROUNDS} interleaved rounds (${((performance.now() - t0) / 1000).toFixed(0)} s)`,
        );
        printOpenRows(list, log);
        printBatchShares(list, log);
        for (const [name, byRate] of ratios)
          for (const rate of BATCH_RATES)
            log(
              `  ${name} / ${batchesName(BOUNDS[0]!)} at ${lpad(fmtInt(rate), 6)}/s: p99 ${fmtRatios(byRate.get(rate)!)}; driver p99 ${fmtUs(floorOf(list, rate))} µs`,
            );
        log('');
      }
      if (want('saturation')) {
        const t0 = performance.now();
        const settings = SAT_BATCHES.map((maxBatch) => ({
          ...(MAX_IN_FLIGHT !== undefined && { maxInFlight: MAX_IN_FLIGHT }),
          ...(maxBatch !== undefined && { maxBatch }),
        }));
        const { rows: list, perRound } = await saturationSection(o, SAT_RATES, SAT_ROUNDS, settings, SAT_P99_MS);
        open.push(...list);
        log(
          `saturation: 3 levels (shield off) and RLF at ${SAT_RATES.join(', ')}/s, each stopped at its first rate not kept up with (>= 97% decided per second, p99 < ${SAT_P99_MS} ms); ${SAT_ROUNDS} rounds (${((performance.now() - t0) / 1000).toFixed(0)} s)`,
        );
        printOpenRows(list, log);
        const rate = (r: Map<string, number>, name: string) => `${fmtInt(r.get(name)!)}/s`;
        log(
          `  highest rate kept up with, per round: ${perRound.map((r) => [...r.keys()].map((name) => `${name} ${rate(r, name)}`).join(', ')).join('; ')}`,
        );
        for (const name of settings.map(batchesName)) {
          const each = perRound.filter((r) => r.get(OPEN_RLF)! > 0).map((r) => r.get(name)! / r.get(OPEN_RLF)!);
          log(`  ${name} / RLF: ${each.length ? `${median(each).toFixed(2)} (${rangeOf(each)})` : 'n/a'}; target >= 2`);
        }
        log('');
      }
      if (want('cpu')) {
        log(
          `CPU per decision: a 1 ms timer issues N calls per firing (the process sleeps in between), ${fmtInt(CPU_CALLS)} calls per run after half as many to warm up, ${CPU_ROUNDS} interleaved rounds, medians; Node = this process (every thread), µs per decision; Redis = redis-server's CPU, µs per decision; ratios to rate-limiter-flexible paired per round`,
        );
        const cpuConfigs = [
          { name: 'callgate 1 level', config: CONFIG_1, accounts: false, release: false },
          { name: 'callgate 3 levels', config: CONFIG_3, accounts: true, release: false },
          { name: 'callgate 3 levels + channels, 1/2 released', config: CONFIG_3CH, accounts: true, release: true },
          ...CPU_LONE.flatMap((loneUpTo) => [
            {
              name: `callgate 3 levels, loneUpTo ${loneUpTo}`,
              config: CONFIG_3,
              accounts: true,
              release: false,
              loneUpTo,
            },
            {
              name: `callgate 3 levels + ch, loneUpTo ${loneUpTo}`,
              config: CONFIG_3CH,
              accounts: true,
              release: true,
              loneUpTo,
            },
          ]),
        ];
        log(
          `${pad('system', 44)} ${lpad('N', 3)} ${lpad('calls/s', 8)} ${lpad('Node user', 10)} ${lpad('sys', 6)} ${lpad('Redis', 7)} ${lpad('Node ÷ RLF', 18)} ${lpad('Redis ÷ RLF', 18)}  check`,
        );
        for (const perTick of CPU_PER_TICK) {
          const list = await cpuSection(o, cpuConfigs, perTick, CPU_CALLS, CPU_ROUNDS);
          for (const r of list) {
            emit(r);
            if (r.check === 'FAIL') failed = true;
            const ratio = (xs: readonly number[]) =>
              r.name === CPU_RLF ? '' : `${median(xs).toFixed(2)} (${rangeOf(xs)})`;
            log(
              `${pad(r.name, 44)} ${lpad(String(perTick), 3)} ${lpad(fmtInt(r.perSecond), 8)} ${lpad(r.nodeUserUs.toFixed(1), 10)} ${lpad(r.nodeSysUs.toFixed(1), 6)} ${lpad(r.redisUs.toFixed(1), 7)} ${lpad(ratio(r.nodeRatios), 18)} ${lpad(ratio(r.redisRatios), 18)}  ${r.check === 'FAIL' ? `FAIL: ${r.checkDetail}` : 'ok'}`,
            );
          }
        }
        log('');
      }
      if (want('flood')) {
        const list = await floodSection(o, FLOOD_NORMAL, FLOOD_LIMIT);
        open.push(...list);
        log(
          `flood: normal traffic ${fmtInt(FLOOD_NORMAL)}/s (Zipf peers) plus one dialer limited to ${fmtInt(FLOOD_LIMIT)}/s offering ${fmtInt(10 * FLOOD_LIMIT)}/s; decided/s and latency of the normal traffic`,
        );
        printOpenRows(list, log);
        const base = list.find((r) => r.name.endsWith('normal traffic alone') && r.name.startsWith('callgate'))!;
        const on = list.find((r) => r.name.endsWith('shield on'))!;
        const off = list.find((r) => r.name.endsWith('shield off'))!;
        log(
          `  normal traffic p99 with the flood / alone: shield on ${(on.p99us / base.p99us).toFixed(2)}, shield off ${(off.p99us / base.p99us).toFixed(2)}\n`,
        );
      }
      for (const r of open) emit(r);
      if (open.some((r) => r.check === 'FAIL'))
        rows.push({
          type: 'run',
          name: 'open loop',
          client: '',
          decisions: 0,
          seconds: 0,
          perSecond: 0,
          admittedPct: 0,
          p50us: 0,
          p99us: 0,
          maxUs: 0,
          check: 'FAIL',
          checkDetail: 'an open-loop run failed its check',
        });
    }

    for (const mode of PIPELINE === 'both' ? (['off', 'auto'] as const) : [PIPELINE]) {
      if (!want('redis')) break;
      const list = await redisSection(server, mode);
      for (const r of list) emit(r);
      rows.push(...list);
      printRuns(list);
      const three = list.find((r) => r.name === 'callgate admit, 3 levels x 2 windows');
      const attr = list.find((r) => r.name === 'callgate admit, 3 levels x 2 windows + 2 attribute levels');
      if (three && attr)
        log(
          `  2 attribute levels on top of 3 levels: ${(attr.perSecond / three.perSecond).toFixed(2)} x the decisions/s (${fmtInt(attr.perSecond)} / ${fmtInt(three.perSecond)})`,
        );
      log('');
    }

    if (want('memory')) {
      const list = await memorySection();
      for (const r of list) emit(r);
      rows.push(...list);
      log(
        `memory store: in process, virtual time at ${MEM_STEP_US} µs per call (20,000 calls/s offered), at most ${fmtInt(MEM_CALLS)} calls or ${MEM_SECONDS} s; sync decisions/s untimed, latency from a second timed pass`,
      );
      printRuns(list);
      log('');
    }

    if (want('sidecar')) {
      log(
        `sidecar: callgate serve on this Redis over keep-alive HTTP (${SIDECAR_CONNECTIONS} connections, POST /v1/admit), beside CallGate.admit in this process; 3 levels as above, the same peer sequence;\n` +
          `open loop at ${SIDECAR_RATES.join(', ')} calls/s, ${SIDECAR_SECONDS} s each (latency from each call's scheduled time); cores: bench process / sidecar / redis`,
      );
      log(
        `${pad('system', 20)} ${lpad('offered/s', 10)} ${lpad('decisions/s', 12)} ${lpad('admitted', 9)} ${lpad('p50 ms', 8)} ${lpad('p99 ms', 8)} ${lpad('max ms', 8)} ${lpad('cores', 16)}  check`,
      );
      const print = (r: SidecarRow) => {
        emit(r);
        const cores = `${r.cores.bench.toFixed(2)}/${r.cores.sidecar === undefined ? '-' : r.cores.sidecar.toFixed(2)}/${r.cores.redis.toFixed(2)}`;
        log(
          `${pad(r.system, 20)} ${lpad(fmtInt(r.rate), 10)} ${lpad(fmtInt(r.perSecond), 12)} ${lpad(`${r.admittedPct.toFixed(1)}%`, 9)} ${lpad(r.p50ms.toFixed(2), 8)} ${lpad(r.p99ms.toFixed(2), 8)} ${lpad(r.maxMs.toFixed(1), 8)} ${lpad(cores, 16)}  ${r.check === 'FAIL' ? `FAIL: ${r.checkDetail}` : r.unanswered > 0 ? `overloaded: ${fmtInt(r.unanswered)} calls unanswered 10 s after the end` : 'ok'}`,
        );
      };
      const list = await sidecarSection(
        {
          redisUrl: server.url,
          rates: SIDECAR_RATES,
          seconds: SIDECAR_SECONDS,
          config: CONFIG_3,
          connections: SIDECAR_CONNECTIONS,
          call: (i) => {
            const p = seq[i % seq.length]!;
            return { peer: peerName(p), account: accountName(p) };
          },
          bucketsOf: (i) => bucketsOf(3, seq[i % seq.length]!).buckets,
        },
        print,
      );
      if (list.some((r) => r.check === 'FAIL')) failed = true;
      else log(`every run checked: ${list[0]!.checkDetail}`);
      log('');
    }

    if (want('usage')) {
      const mem = await memoryUsageSection(server);
      for (const r of mem) emit(r);
      log(
        'Redis memory per peer at steady state (MEMORY USAGE of its keys after 2.5 s at the given rate, limit 2x the rate per 1 s)',
      );
      log(`${pad('algorithm', 24)} ${lpad('10 CPS', 16)} ${lpad('100 CPS', 16)} ${lpad('1000 CPS', 16)}`);
      for (const algorithm of ['sliding-log', 'fixed-window', 'sliding-window', 'rate-limiter-flexible'] as const) {
        const cells = [10, 100, 1000].map((cps) => {
          const r = mem.find((x) => x.algorithm === algorithm && x.cps === cps)!;
          if (r.check === 'FAIL') failed = true;
          return r.check === 'FAIL' ? 'FAIL' : `${fmtInt(r.bytes)} B${r.keys === 1 ? '' : ` (${r.keys} keys)`}`;
        });
        log(`${pad(algorithm, 24)} ${cells.map((c) => lpad(c, 16)).join(' ')}`);
      }
    }
  } finally {
    await server.stop();
  }
  if (rows.some((r) => r.check === 'FAIL')) failed = true;
  if (failed) {
    log('\nFAIL: at least one run broke a limit or disagreed with the reference; its numbers are not results');
    process.exitCode = 1;
  }
}

await main();
