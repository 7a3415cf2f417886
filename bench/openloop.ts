/**
 * Open-loop measurement (issue 11): calls arrive on a fixed schedule, each in an I/O callback of
 * its own (one setImmediate per call, as INVITEs come off sockets one by one), and latency is
 * counted from each call's SCHEDULED time, so a system that falls behind pays for every call it
 * delayed (no coordinated omission). Sections, run by bench.ts:
 *   - lone:     decisions one at a time (sequential awaits): Redis µs per decision;
 *   - openloop: at each offered rate, like with like: callgate 3 levels with the flood shield off
 *               against plain rate-limiter-flexible, shield on against RLF with
 *               inMemoryBlockOnConsumed, 3 levels with channels (every other call released)
 *               against plain RLF, and the driver alone (the floor); p50 / p99 / p99.9, Redis µs
 *               per decision, RedisStore batch sizes, checked; paired ratios per round;
 *   - batching: group commit against pipelined batches (RedisStore maxInFlight);
 *   - saturation: the highest rate each system keeps up with;
 *   - flood:    a 10x flood of one peer beside normal traffic: the normal traffic's decisions/s
 *               and p99, the shield on and off, beside rate-limiter-flexible with and without
 *               inMemoryBlockOnConsumed.
 * Every callgate run is checked: no window of any bucket over its limit, and every decision as a
 * MemoryStore replay in execution order gives it (a refusal by the flood shield may name another
 * level than the replay: see src/admission/shield.ts); rate-limiter-flexible's runs are
 * checked against its own contract (at most 2L in any span of W).
 */
import { performance } from 'node:perf_hooks';
import { Redis } from 'ioredis';
import { RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';
import type { AdmissionDecision } from '../src/admission/admission.js';
import type { CallGateConfigInput } from '../src/config/types.js';
// callgate as users run it: compiled (dist/, see shipped.ts)
import { CallGate, MemoryStore, RECOMMENDED_REDIS_OPTIONS, RedisStore } from 'callgate';
import { accountBucket, GLOBAL_BUCKET } from '../src/store/keys.js';
import type { Bucket } from '../src/store/types.js';
import { AdmittedLog, slidingLogViolations, type LimitSpec } from './verify.js';
import { W1, W10 } from './limits.js';
import { callIdOf, openLoop, type OpenLoopResult } from './driver.js';
import { histogram, wallUs, type Histogram } from './workload.js';

// ---------------------------------------------------------------------------------------------
// What the sections share

export interface Workload {
  /** Peer index of call i (seeded Zipf, as the closed loop). */
  readonly seq: Uint16Array;
  readonly peers: number;
  readonly accounts: number;
  /** Config of 1 and 3 levels (with channels: '3ch'), and the buckets of a call as the stores name them (checks). */
  readonly config: (levels: Levels) => CallGateConfigInput;
  readonly bucketsOf: (levels: Levels, p: number) => { buckets: Bucket[]; labels: string[] };
  /** How long an admitted call holds its channels ('3ch': maxCallDuration), µs. */
  readonly holdUs: number;
  /** rate-limiter-flexible's per-peer limit (the 1-level limit). */
  readonly rlf: { points: number; windowUs: number };
}

export interface OpenRow {
  type: 'openloop' | 'flood' | 'lone';
  name: string;
  offered: number;
  perSecond: number;
  admittedPct: number;
  p50us: number;
  p99us: number;
  p999us: number;
  redisUsPerCall: number;
  /** RedisStore admit batches: mean size and share of batches of one call. */
  batchMean?: number;
  batchOnes?: number;
  batchMax?: number;
  /** Share of the calls that left in a batch of each size class (BATCH_CLASSES). */
  batchCallShares?: number[];
  shielded?: number;
  /** Over several rounds: the lowest and highest p99 (µs). */
  p99RangeUs?: [number, number];
  /** Over several rounds: in how many the system fell behind (under 97% of the offered rate decided per second). */
  behindRounds?: number;
  rounds?: number;
  /** The driving process' GC pauses: ms per second of run, and the longest (open-loop runs). */
  gcMsPerS?: number;
  gcMaxMs?: number;
  check: 'ok' | 'FAIL';
  checkDetail: string;
}

async function scriptUsec(admin: Redis): Promise<number> {
  const info = await admin.info('commandstats');
  let usec = 0;
  for (const m of info.matchAll(/^cmdstat_(evalsha|eval):calls=\d+,usec=(\d+)/gm)) usec += Number(m[2]);
  return usec;
}

const pctl = (h: Histogram, p: number) => h.getValueAtPercentile(p) / 1000;

/** A run's GC pauses per second of run, and its longest. */
const gcOf = (run: OpenLoopResult) => ({
  gcMsPerS: run.seconds > 0 ? run.gcMs / run.seconds : 0,
  gcMaxMs: run.gcMaxMs,
});

/** Batch-size classes of the distribution: 1, 2-3, 4-7, 8-15, 16-31, 32-63, 64 and more. */
export const BATCH_CLASSES = ['1', '2-3', '4-7', '8-15', '16-31', '32-63', '64+'];

function batchSummary(sizes: number[]): {
  batchMean: number;
  batchOnes: number;
  batchMax: number;
  batchCallShares: number[];
} {
  let batches = 0;
  let calls = 0;
  let max = 0;
  const byClass = BATCH_CLASSES.map(() => 0);
  sizes.forEach((n, size) => {
    batches += n;
    calls += n * size;
    if (n > 0) max = size;
    if (size > 0) byClass[Math.min(BATCH_CLASSES.length - 1, Math.floor(Math.log2(size)))]! += n * size;
  });
  return {
    batchMean: batches ? calls / batches : 0,
    batchOnes: batches ? (sizes[1] ?? 0) / batches : 0,
    batchMax: max,
    batchCallShares: byClass.map((k) => (calls ? k / calls : 0)),
  };
}

/** What a callgate run keeps of each call, for its checks. */
class GateRecord {
  readonly admitted: Uint8Array;
  readonly at: Float64Array;
  readonly order: Uint32Array;
  readonly limitedBy: (string | undefined)[];
  readonly shielded: Uint8Array;
  readonly decided: Uint8Array;
  errors = 0;
  private k = 0;
  constructor(n: number) {
    this.admitted = new Uint8Array(n);
    this.at = new Float64Array(n);
    this.order = new Uint32Array(n);
    this.limitedBy = new Array(n);
    this.shielded = new Uint8Array(n);
    this.decided = new Uint8Array(n);
  }
  /** Releases (channels): the call, the store's time and the completion order of each. */
  readonly released: { i: number; at: number; order: number }[] = [];
  keepRelease(i: number, at: number): void {
    this.released.push({ i, at, order: this.k++ });
  }
  keep(i: number, d: AdmissionDecision): void {
    this.decided[i] = 1;
    this.order[i] = this.k++;
    this.at[i] = d.at;
    if (d.admitted) this.admitted[i] = 1;
    else this.limitedBy[i] = d.limitedBy;
    if (d.shielded) this.shielded[i] = 1;
    if (d.degraded) this.errors++;
  }
  count(a: Uint8Array): number {
    let n = 0;
    for (const x of a) n += x;
    return n;
  }
  /**
   * No window over its limit; the MemoryStore replay in execution order gives every decision
   * (a shielded refusal: refused too; its level may differ, see src/admission/shield.ts).
   */
  check(
    n: number,
    bucketsOf: (i: number) => { buckets: Bucket[]; labels: string[] },
    holdOf: (i: number) => { id: string; forUs: number } | undefined = () => undefined,
    replay = true,
  ): string {
    let undecided = 0;
    for (let i = 0; i < n; i++) if (!this.decided[i]) undecided++;
    if (undecided > 0) return `${undecided} calls never decided`;
    if (this.errors > 0) return `${this.errors} decisions degraded (store unavailable or timed out)`;
    const log = new AdmittedLog();
    const limits = new Map<string, readonly LimitSpec[]>();
    for (let i = 0; i < n; i++) {
      if (!this.admitted[i]) continue;
      for (const b of bucketsOf(i).buckets) {
        log.add(b.name, this.at[i]!);
        limits.set(b.name, b.limits);
      }
    }
    const scan = log.check((b) => limits.get(b)!);
    if (scan.violations > 0) return `${scan.violations} windows over their limit`;
    if (!replay) return '';
    // admits (index i) and releases (-1 - their index in `released`) in execution order
    const at = (e: number) => (e >= 0 ? this.at[e]! : this.released[-1 - e]!.at);
    const order = (e: number) => (e >= 0 ? this.order[e]! : this.released[-1 - e]!.order);
    const events = [...Array.from({ length: n }, (_, i) => i), ...this.released.map((_, k) => -1 - k)].sort(
      (a, b) => at(a) - at(b) || order(a) - order(b),
    );
    const ref = new MemoryStore();
    let diff = 0;
    let first = '';
    for (const i of events) {
      if (i < 0) {
        const r = this.released[-1 - i]!;
        ref.releaseSync({ id: holdOf(r.i)!.id, now: r.at });
        continue;
      }
      const { buckets, labels } = bucketsOf(i);
      const r = ref.admitSync({ tag: 't', buckets, now: this.at[i]!, hold: holdOf(i) });
      const mine = this.limitedBy[i];
      const same = r.admitted
        ? this.admitted[i] === 1
        : this.admitted[i] === 0 && (labels[r.limitedBy] === mine || this.shielded[i] === 1);
      if (!same && diff++ === 0)
        first = `call ${i} at ${this.at[i]}: redis ${this.admitted[i] ? 'admitted' : mine}${this.shielded[i] ? ' (shield)' : ''}, reference ${r.admitted ? 'admitted' : labels[r.limitedBy]}`;
    }
    return diff > 0 ? `${diff} decisions differ from the reference (first: ${first})` : '';
  }
}

/** rate-limiter-flexible's contract: per peer at most 2L admitted in any span of W (its fixed windows anchored at a first hit). */
function rlfCheck(
  n: number,
  peerOf: (i: number) => number,
  admitted: Uint8Array,
  at: Float64Array,
  L: number,
  W: number,
  maxLatencyUs: number,
): string {
  const byPeer = new Map<number, number[]>();
  for (let i = 0; i < n; i++) {
    if (!admitted[i]) continue;
    let a = byPeer.get(peerOf(i));
    if (!a) byPeer.set(peerOf(i), (a = []));
    a.push(at[i]!);
  }
  let bad = 0;
  for (const list of byPeer.values())
    bad += slidingLogViolations(Float64Array.from(list).sort(), 2 * L, W - maxLatencyUs - 2000);
  return bad > 0 ? `${bad} windows over the limit` : '';
}

// ---------------------------------------------------------------------------------------------
// Sections

export interface SectionOptions {
  readonly url: string;
  readonly work: Workload;
  readonly seconds: number;
  readonly log: (line: string) => void;
  /** Start each three-level run with the global and account logs as full as a steady platform's (steadyLogs). */
  readonly steady?: boolean;
}

/** Events put in the global log by steadyLogs (60 % of its 10 s limit: no decision reaches it), spread over 9 s. */
const STEADY_GLOBAL = 60_000;

/**
 * A run's logs as a platform's that has run for a while (--steady): a run of a few seconds after
 * a flush starts with empty logs, which hold nothing for their trims to remove, and never trims a
 * 10 s log at all. The global log gets STEADY_GLOBAL events and each account's log its share,
 * spread over (now - 10 s + 50 ms, now - 1 s]: older than every 1 s window, within the 10 s
 * ones, and too few to bring any 10 s count to its limit (the peers' logs, whose limits the calls
 * reach, stay empty), so every decision is the one the check's in-memory replay makes; they
 * leave the window during the run, and the logs' trims remove them as they would a steady
 * platform's calls.
 */
async function steadyLogs(admin: Redis, work: Workload): Promise<void> {
  const [s, us] = (await admin.time()) as unknown as [string, string];
  const now = Number(s) * 1e6 + Number(us);
  const from = now - W10 + 50_000;
  const span = now - W1 - from;
  // the bucket's log as the gate's RedisStore names it (prefix 'bench:', no hash tags)
  const fill = async (bucket: string, n: number) => {
    for (let i = 0; i < n; i += 5_000) {
      const args: (string | number)[] = [];
      for (let j = i; j < Math.min(n, i + 5_000); j++) args.push(Math.floor(from + (span * j) / n), `pre:${j}`);
      await admin.zadd(`bench:${bucket}:log`, ...args);
    }
  };
  await fill(GLOBAL_BUCKET, STEADY_GLOBAL);
  for (let a = 0; a < work.accounts; a++) await fill(accountBucket(`acct${a}`), STEADY_GLOBAL / work.accounts);
}

async function connected(url: string): Promise<Redis> {
  const c = new Redis(url, { maxRetriesPerRequest: 1 });
  await c.ping();
  return c;
}

/** Warm-up rate and length: a second of live traffic, at the run's rate up to 30,000/s. */
const warmRate = (rate: number) => Math.min(rate, 30_000);
const WARM_SECONDS = 1;

/** 1 level, 3 levels, or 3 levels each with a channel limit too. */
export type Levels = 1 | 3 | '3ch';

/**
 * Bring a gate to the state of a process that has run for a while, before its counts are
 * flushed: every measured peer's plan and keys cached (each peer once, at given times, which the
 * shield ignores), then a second of live traffic on other peers of the same accounts (JIT, the
 * shield, the young generation's steady state: without it the first second of a run promoted
 * ten times the bytes per collection of the following ones, measured with --trace-gc-nvp).
 * rate-limiter-flexible gets the same (warmRlf).
 */
async function warmGate(gate: CallGate, work: Workload, levels: Levels, rate: number): Promise<void> {
  const account = (p: number) => (levels !== 1 ? `acct${p % work.accounts}` : undefined);
  const start = wallUs();
  for (let p = 0; p < work.peers; p++)
    await gate.admit({ callId: callIdOf('wp', p), peer: `peer${p}`, account: account(p), at: start + p });
  await openLoop(warmRate(rate), WARM_SECONDS, (i) => {
    const p = work.seq[i % work.seq.length]!;
    return gate.admit({ callId: callIdOf('w', i), peer: `wpeer${p}`, account: account(p) }).then(() => undefined);
  });
}

/** The same warm-up for a rate-limiter-flexible limiter: every measured peer once, then a second of other peers. */
async function warmRlf(limiter: RateLimiterRedis, work: Workload, rate: number): Promise<void> {
  const ignore = () => undefined;
  for (let p = 0; p < work.peers; p++) await limiter.consume(`peer${p}`).then(ignore, ignore);
  await openLoop(warmRate(rate), WARM_SECONDS, (i) =>
    limiter.consume(`wpeer${work.seq[i % work.seq.length]!}`).then(ignore, ignore),
  );
}

/** The decision deadline of the open-loop gates, ms. */
const GATE_TIMEOUT_MS = 5000;

/** How a callgate open-loop run is set up. */
export interface GateSetup {
  readonly levels: Levels;
  readonly shield: boolean;
  /** The RedisStore's maxInFlight (undefined: its default). */
  readonly maxInFlight?: number;
  /** The RedisStore's maxBatch (undefined: its default). */
  readonly maxBatch?: number;
  /** The RedisStore's loneUpTo (undefined: its default). */
  readonly loneUpTo?: number;
}

/** The hold of call i of a run with channels (its Call-ID, maxCallDuration). */
const holdOfCall = (hold: number) => (i: number) => ({ id: callIdOf('c', i), forUs: hold });

/**
 * One callgate open-loop run at `rate`. With channels ('3ch'), every other admitted call is
 * released as soon as it is decided (its latency is the admission's; the release is load).
 */
async function gateRun(
  o: SectionOptions,
  admin: Redis,
  setup: GateSetup,
  rate: number,
  name: string,
): Promise<OpenRow> {
  const { work } = o;
  const { levels } = setup;
  const c = await connected(o.url);
  const store = new RedisStore({
    redis: c,
    prefix: 'bench:',
    ...(setup.maxInFlight !== undefined && { maxInFlight: setup.maxInFlight }),
    ...(setup.maxBatch !== undefined && { maxBatch: setup.maxBatch }),
    ...(setup.loneUpTo !== undefined && { loneUpTo: setup.loneUpTo }),
  });
  const gate = await CallGate.create({
    config: work.config(levels),
    store,
    timeoutMs: GATE_TIMEOUT_MS,
    shield: setup.shield,
  });
  await warmGate(gate, work, levels, rate);
  const warmBatches = store.batchSizes().admit;
  await admin.flushdb();
  if (o.steady && levels !== 1) await steadyLogs(admin, work);
  await admin.config('RESETSTAT');
  const n = Math.max(1, Math.floor(rate * o.seconds));
  const rec = new GateRecord(n);
  const peerOf = (i: number) => work.seq[i % work.seq.length]!;
  const releases: Promise<void>[] = [];
  const releasedAt = new Map<string, number>();
  let releaseErrors = 0;
  const channels = levels === '3ch';
  if (channels) gate.on('released', (e) => void (e.at !== undefined && releasedAt.set(e.callId, e.at)));
  const run = await openLoop(rate, o.seconds, (i) => {
    const callId = callIdOf('c', i);
    return gate
      .admit({
        callId,
        peer: `peer${peerOf(i)}`,
        account: levels !== 1 ? `acct${peerOf(i) % work.accounts}` : undefined,
      })
      .then((d) => {
        rec.keep(i, d);
        if (channels && d.admitted && (i & 1) === 1)
          releases.push(
            gate.release(callId).then((outcome) => {
              if (outcome === 'released') rec.keepRelease(i, releasedAt.get(callId)!);
              else releaseErrors++;
            }),
          );
      });
  });
  await Promise.all(releases);
  const usec = await scriptUsec(admin);
  // a release that timed out (deferred) or found its hold lapsed: the run fell seconds behind;
  // its releases cannot be placed in the replay, so only the windows are checked
  // decisions degraded past their deadline in a run seconds behind: an overload, and one that
  // no check can judge (a late batch may still have been counted in Redis); degraded in a run
  // that kept its deadline is a failure
  const overloaded = rec.errors > 0 && run.hist.maxValue >= 0.9 * GATE_TIMEOUT_MS * 1e6;
  const failure = overloaded
    ? ''
    : rec.check(
        n,
        (i) => work.bucketsOf(levels, peerOf(i)),
        channels ? holdOfCall(work.holdUs) : undefined,
        releaseErrors === 0,
      );
  const sizes = store.batchSizes().admit.map((k, size) => k - (warmBatches[size] ?? 0));
  await gate.close();
  c.disconnect();
  await admin.flushdb();
  return {
    type: 'openloop',
    name,
    offered: rate,
    perSecond: run.done / run.seconds,
    admittedPct: (100 * rec.count(rec.admitted)) / n,
    p50us: pctl(run.hist, 50),
    p99us: pctl(run.hist, 99),
    p999us: pctl(run.hist, 99.9),
    ...gcOf(run),
    redisUsPerCall: usec / n,
    ...batchSummary(sizes),
    shielded: rec.count(rec.shielded),
    check: failure ? 'FAIL' : 'ok',
    checkDetail:
      failure ||
      (overloaded
        ? `overloaded: ${rec.errors} decisions past their ${GATE_TIMEOUT_MS / 1000} s deadline, degraded: not checked`
        : releaseErrors > 0
          ? `no window over its limit; overloaded: ${releaseErrors} releases timed out or found the hold lapsed, no replay`
          : `no window over its limit; identical to the reference replay${channels ? ` (${rec.released.length} releases)` : ''}`),
  };
}

/**
 * One rate-limiter-flexible open-loop run at `rate` (consume on the 1-level per-peer limit);
 * `block`: inMemoryBlockOnConsumed at the limit (a peer over it is refused in process until its
 * window ends, as callgate's flood shield does).
 */
async function rlfRun(o: SectionOptions, admin: Redis, rate: number, block: boolean, name: string): Promise<OpenRow> {
  const { work } = o;
  const c = await connected(o.url);
  const L = work.rlf.points;
  const W = work.rlf.windowUs;
  const peerOf = (i: number) => work.seq[i % work.seq.length]!;
  const limiter = new RateLimiterRedis({
    storeClient: c,
    points: L,
    duration: W / 1e6,
    keyPrefix: 'bench',
    ...(block && { inMemoryBlockOnConsumed: L }),
  });
  await warmRlf(limiter, work, rate);
  await admin.flushdb();
  await admin.config('RESETSTAT');
  const n = Math.max(1, Math.floor(rate * o.seconds));
  const admitted = new Uint8Array(n);
  const at = new Float64Array(n);
  let errors = 0;
  let maxLatencyUs = 0;
  const run = await openLoop(rate, o.seconds, async (i) => {
    const t0 = wallUs();
    try {
      await limiter.consume(`peer${peerOf(i)}`);
      admitted[i] = 1;
    } catch (e) {
      if (!(e instanceof RateLimiterRes)) errors++;
    }
    const t1 = wallUs();
    at[i] = t1;
    if (t1 - t0 > maxLatencyUs) maxLatencyUs = t1 - t0;
  });
  const usec = await scriptUsec(admin);
  const failure = errors > 0 ? `${errors} calls failed` : rlfCheck(n, peerOf, admitted, at, L, W, maxLatencyUs);
  c.disconnect();
  await admin.flushdb();
  let ok = 0;
  for (const x of admitted) ok += x;
  return {
    type: 'openloop',
    name,
    offered: rate,
    perSecond: run.done / run.seconds,
    admittedPct: (100 * ok) / n,
    p50us: pctl(run.hist, 50),
    p99us: pctl(run.hist, 99),
    p999us: pctl(run.hist, 99.9),
    ...gcOf(run),
    redisUsPerCall: usec / n,
    check: failure ? 'FAIL' : 'ok',
    checkDetail: failure || 'at most 2L in any span of W per peer',
  };
}

/**
 * The driver alone: each call decided at once (a resolved promise), so its latency is the
 * schedule's own lateness (the event loop, the machine). No system driven this way can show a
 * p99 below this row's.
 */
async function driverRun(o: SectionOptions, rate: number): Promise<OpenRow> {
  await openLoop(warmRate(rate), WARM_SECONDS, () => Promise.resolve());
  const run = await openLoop(rate, o.seconds, () => Promise.resolve());
  return {
    type: 'openloop',
    name: OPEN_DRIVER,
    offered: rate,
    perSecond: run.done / run.seconds,
    admittedPct: NaN,
    p50us: pctl(run.hist, 50),
    p99us: pctl(run.hist, 99),
    p999us: pctl(run.hist, 99.9),
    ...gcOf(run),
    redisUsPerCall: 0,
    check: run.lost > 0 ? 'FAIL' : 'ok',
    checkDetail: run.lost > 0 ? `${run.lost} calls never completed` : 'no decision: the schedule alone',
  };
}

/** Whether a run kept up: >= 97% of the offered rate decided per second, p99 under `p99Ms` (default 50 ms). */
const keptUp = (r: OpenRow, p99Ms = 50) =>
  r.check === 'ok' && r.perSecond >= 0.97 * r.offered && r.p99us < 1000 * p99Ms;

/** The systems of the open-loop section, as their rows name them. */
export const OPEN_G3 = 'callgate 3 levels, shield off';
export const OPEN_RLF = 'rate-limiter-flexible';
export const OPEN_G3S = 'callgate 3 levels, shield on';
export const OPEN_RLFB = 'rate-limiter-flexible, inMemoryBlock';
export const OPEN_G3CH = 'callgate 3 levels + channels, 1/2 released';
export const OPEN_DRIVER = 'driver alone (no decision)';

/** The pairs the targets are judged on: callgate's row, its rival's, and the target. */
/** The open-loop section's systems, as `--open-only` names them. */
export const OPEN_SYSTEMS = ['g3', 'rlf', 'g3s', 'rlfb', 'g3ch', 'driver'] as const;

export const OPEN_PAIRS: readonly { name: string; gate: string; rival: string; target: number }[] = [
  { name: '3 levels, shield off / RLF', gate: OPEN_G3, rival: OPEN_RLF, target: 1.0 },
  { name: '3 levels, shield on / RLF inMemoryBlock', gate: OPEN_G3S, rival: OPEN_RLFB, target: 1.0 },
  { name: '3 levels + channels / RLF', gate: OPEN_G3CH, rival: OPEN_RLF, target: 1.2 },
];

/**
 * Per pair and rate, per round: the p99 ratio, and the ratio of what each adds above the driver's
 * p99 (NaN in a round where the rival's p99 was not above the driver's).
 */
export interface PairRatios {
  readonly raw: number[];
  readonly aboveFloor: number[];
}

/**
 * Run `systems` at each rate in `rounds` rounds (each round every rate, the systems in turn,
 * their order rotated from round to round). A system's row at a rate is its round with the
 * median p99, with the range of its p99s over the rounds; `byRound` holds every round's rows
 * (same round: side by side, the basis of the paired ratios). Every run of every round is checked.
 */
async function interleaved(
  systems: readonly ((rate: number) => Promise<OpenRow>)[],
  rates: readonly number[],
  rounds: number,
): Promise<{ rows: OpenRow[]; byRound: Map<number, Map<string, OpenRow>[]> }> {
  const runs = new Map<string, OpenRow[]>();
  const byRound = new Map<number, Map<string, OpenRow>[]>();
  const names: string[] = [];
  for (let round = 0; round < rounds; round++) {
    for (const rate of rates) {
      const got = new Map<string, OpenRow>();
      for (let k = 0; k < systems.length; k++) {
        const row = await systems[(k + round) % systems.length]!(rate);
        got.set(row.name, row);
        const key = `${row.name}@${rate}`;
        if (!names.includes(row.name)) names.push(row.name);
        runs.set(key, [...(runs.get(key) ?? []), row]);
      }
      byRound.set(rate, [...(byRound.get(rate) ?? []), got]);
    }
  }
  const rows: OpenRow[] = [];
  for (const rate of rates) {
    for (const name of names) {
      const list = runs.get(`${name}@${rate}`);
      if (!list) continue;
      const sorted = [...list].sort((a, b) => a.p99us - b.p99us);
      const failed = list.find((r) => r.check === 'FAIL');
      const mid = sorted[Math.floor((sorted.length - 1) / 2)]!;
      rows.push({
        ...(failed ?? mid),
        p99RangeUs: [sorted[0]!.p99us, sorted[sorted.length - 1]!.p99us],
        behindRounds: list.filter((r) => r.perSecond < 0.97 * r.offered).length,
        rounds: list.length,
      });
    }
  }
  return { rows, byRound };
}

/** Per round, `a`'s p99 / `b`'s, and what each adds above the driver's p99 of that round, a / b. */
function pairRatios(rounds: Map<string, OpenRow>[], a: string, b: string): PairRatios {
  const raw: number[] = [];
  const aboveFloor: number[] = [];
  for (const got of rounds) {
    const x = got.get(a)!.p99us;
    const y = got.get(b)!.p99us;
    const floor = got.get(OPEN_DRIVER)?.p99us ?? 0;
    raw.push(x / y);
    // undefined (NaN) when the rival's p99 was at or below the driver's: that round's floor says nothing
    aboveFloor.push(y > floor ? Math.max(0, x - floor) / (y - floor) : Number.NaN);
  }
  return { raw, aboveFloor };
}

/**
 * Like with like at each rate: callgate three levels with the flood shield off against plain
 * rate-limiter-flexible, the shield on against RLF with inMemoryBlockOnConsumed, three levels
 * with a channel limit at every level (every other call released) against plain RLF, and the
 * driver alone (the floor), all warmed alike; `ratios` per pair (OPEN_PAIRS' name) and rate.
 * `only`: the systems to run, by their OPEN_SYSTEMS key (undefined: all); a pair's ratios only
 * when both its systems ran.
 */
export async function openLoopSection(
  o: SectionOptions,
  rates: number[],
  rounds = 3,
  batches: StoreBatches = {},
  only?: readonly string[],
): Promise<{ rows: OpenRow[]; ratios: Map<string, Map<number, PairRatios>> }> {
  const admin = await connected(o.url);
  const g = (levels: Levels, shield: boolean) => ({ levels, shield, ...batches });
  const all: [key: string, name: string, run: (rate: number) => Promise<OpenRow>][] = [
    ['g3', OPEN_G3, (rate) => gateRun(o, admin, g(3, false), rate, OPEN_G3)],
    ['rlf', OPEN_RLF, (rate) => rlfRun(o, admin, rate, false, OPEN_RLF)],
    ['g3s', OPEN_G3S, (rate) => gateRun(o, admin, g(3, true), rate, OPEN_G3S)],
    ['rlfb', OPEN_RLFB, (rate) => rlfRun(o, admin, rate, true, OPEN_RLFB)],
    ['g3ch', OPEN_G3CH, (rate) => gateRun(o, admin, g('3ch', false), rate, OPEN_G3CH)],
    ['driver', OPEN_DRIVER, (rate) => driverRun(o, rate)],
  ];
  const chosen = all.filter(([key]) => only === undefined || only.includes(key));
  const ran = new Set(chosen.map(([, name]) => name));
  const { rows, byRound } = await interleaved(
    chosen.map(([, , run]) => run),
    rates,
    rounds,
  );
  admin.disconnect();
  const ratios = new Map<string, Map<number, PairRatios>>();
  for (const pair of OPEN_PAIRS) {
    if (!ran.has(pair.gate) || !ran.has(pair.rival)) continue;
    const m = new Map<number, PairRatios>();
    for (const rate of rates) m.set(rate, pairRatios(byRound.get(rate)!, pair.gate, pair.rival));
    ratios.set(pair.name, m);
  }
  return { rows, ratios };
}

/** A RedisStore's batch settings (undefined: the store's defaults). */
export interface StoreBatches {
  readonly maxInFlight?: number;
  readonly maxBatch?: number;
  readonly loneUpTo?: number;
}

/** How the batching and saturation sections name a gate run with `b` (the defaults: OPEN_G3). */
export function batchesName(b: StoreBatches): string {
  const parts = [
    ...(b.maxInFlight === undefined
      ? []
      : [b.maxInFlight === 1 ? 'group commit' : `${b.maxInFlight} batches in flight`]),
    ...(b.maxBatch === undefined ? [] : [`batches of ${b.maxBatch}`]),
    ...(b.loneUpTo === undefined ? [] : [`lone up to ${b.loneUpTo}`]),
  ];
  return parts.length === 0 ? OPEN_G3 : `callgate 3 levels, ${parts.join(', ')}`;
}

/**
 * Batch settings side by side: callgate three levels (shield off) with each setting of a lane's
 * batches (RedisStore maxInFlight, maxBatch, loneUpTo), and the driver alone, in interleaved rounds;
 * `ratios` per setting after the first and per rate: its p99 / the first's, paired.
 */
export async function batchingSection(
  o: SectionOptions,
  rates: number[],
  settings: StoreBatches[],
  rounds = 3,
): Promise<{ rows: OpenRow[]; ratios: Map<string, Map<number, PairRatios>> }> {
  const admin = await connected(o.url);
  const systems = [
    ...settings.map(
      (b) => (rate: number) => gateRun(o, admin, { levels: 3, shield: false, ...b }, rate, batchesName(b)),
    ),
    (rate: number) => driverRun(o, rate),
  ];
  const { rows, byRound } = await interleaved(systems, rates, rounds);
  admin.disconnect();
  const ratios = new Map<string, Map<number, PairRatios>>();
  for (const b of settings.slice(1)) {
    const m = new Map<number, PairRatios>();
    for (const rate of rates) m.set(rate, pairRatios(byRound.get(rate)!, batchesName(b), batchesName(settings[0]!)));
    ratios.set(batchesName(b), m);
  }
  return { rows, ratios };
}

/**
 * Saturation, like with like: callgate three levels (shield off), with each of `settings` (its
 * store's batches), and plain rate-limiter-flexible at rising rates, each system stopped at its
 * first rate not kept up with (>= 97% decided per second, p99 under `p99Ms`: a machine whose
 * scheduler stalls the process for tens of ms needs a looser bound, the decided share alone
 * still shows a growing backlog); `rounds` rounds, the systems' order turned each round.
 * Returns every run and, per round, each system's highest rate kept up with (by name:
 * batchesName of each setting, and OPEN_RLF).
 */
export async function saturationSection(
  o: SectionOptions,
  rates: number[],
  rounds: number,
  settings: StoreBatches[] = [{}],
  p99Ms = 50,
): Promise<{ rows: OpenRow[]; perRound: Map<string, number>[] }> {
  const admin = await connected(o.url);
  const rows: OpenRow[] = [];
  const perRound: Map<string, number>[] = [];
  const systems: [name: string, run: (rate: number) => Promise<OpenRow>][] = [
    ...settings.map((b): [string, (rate: number) => Promise<OpenRow>] => [
      batchesName(b),
      (rate) => gateRun(o, admin, { levels: 3, shield: false, ...b }, rate, batchesName(b)),
    ]),
    [OPEN_RLF, (rate) => rlfRun(o, admin, rate, false, OPEN_RLF)],
  ];
  for (let round = 0; round < rounds; round++) {
    const best = new Map(systems.map(([name]) => [name, 0]));
    const going = new Set(systems.map(([name]) => name));
    const order = round % 2 === 0 ? systems : [...systems].reverse();
    for (const rate of rates) {
      for (const [name, run] of order) {
        if (!going.has(name)) continue;
        const row = await run(rate);
        rows.push(row);
        if (keptUp(row, p99Ms)) best.set(name, rate);
        else going.delete(name);
      }
      if (going.size === 0) break;
    }
    perRound.push(best);
  }
  admin.disconnect();
  return { rows, perRound };
}

/** The median of a list of numbers (the lower middle one for an even count). */
export function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor((s.length - 1) / 2)]!;
}

/**
 * Decisions one at a time (each awaited before the next): Redis µs per decision (INFO
 * commandstats, script time) of callgate 1 level x 1 window, 3 levels x 2 windows, and the
 * hand-rolled one-key sliding-log script; the best of `rounds` interleaved rounds, and every
 * round's figure (for paired ratios).
 */
/** The lone section's callgate rows, per level count. */
export const LONE_NAMES = {
  1: 'callgate admit, 1 level x 1 window',
  3: 'callgate admit, 3 levels x 2 windows',
  '3ch': 'callgate admit, 3 levels x 2 windows + channels',
} as const;
/**
 * The 3-level lone row again on a client made as `callgate serve` makes it
 * (RECOMMENDED_REDIS_OPTIONS: no re-send after a break, so the store tracks each command in
 * flight to fail it at a close, src/store/redis/connection.ts): what that tracking costs a call.
 */
export const LONE_SERVE_CLIENT = 'callgate admit, 3 levels x 2 windows, serve client';

export async function loneSection(
  o: SectionOptions,
  handRolled: string,
  calls: number,
  rounds = 3,
): Promise<{ rows: OpenRow[]; perRound: Map<string, number[]>; p50Round: Map<string, number[]> }> {
  const { work } = o;
  const admin = await connected(o.url);
  const rows: OpenRow[] = [];
  /** Redis µs per decision of each system, per round (paired: the same round, side by side). */
  const perRound = new Map<string, number[]>();
  /** The client's p50 per decision, per round (the serve client's row is judged by it). */
  const p50Round = new Map<string, number[]>();
  const measure = async (name: string, op: (i: number) => Promise<unknown>): Promise<void> => {
    for (let i = 0; i < 500; i++) await op(calls + i); // warm-up (script load, JIT)
    await admin.flushdb();
    await admin.config('RESETSTAT');
    const hist = histogram();
    const t0 = performance.now();
    for (let i = 0; i < calls; i++) {
      const s = performance.now();
      await op(i);
      hist.recordValue(Math.max(1, Math.round((performance.now() - s) * 1e6)));
    }
    const seconds = (performance.now() - t0) / 1000;
    const usec = await scriptUsec(admin);
    const row: OpenRow = {
      type: 'lone',
      name,
      offered: 0,
      perSecond: calls / seconds,
      admittedPct: NaN,
      p50us: pctl(hist, 50),
      p99us: pctl(hist, 99),
      p999us: pctl(hist, 99.9),
      redisUsPerCall: usec / calls,
      check: 'ok',
      checkDetail: 'timing only (the same scripts are checked in the other sections)',
    };
    // rounds interleave the systems (a busy machine hits them alike); each keeps its best round
    perRound.set(name, [...(perRound.get(name) ?? []), row.redisUsPerCall]);
    p50Round.set(name, [...(p50Round.get(name) ?? []), row.p50us]);
    const prev = rows.findIndex((r) => r.name === name);
    if (prev < 0) rows.push(row);
    else if (row.redisUsPerCall < rows[prev]!.redisUsPerCall) rows[prev] = row;
    await admin.flushdb();
  };
  const c = await connected(o.url);
  const served = new Redis(o.url, { ...RECOMMENDED_REDIS_OPTIONS, lazyConnect: true });
  await served.connect();
  if (!('loneSlidingLog' in c)) c.defineCommand('loneSlidingLog', { numberOfKeys: 1, lua: handRolled });
  const call = (c as unknown as { loneSlidingLog(key: string, w: number, l: number, m: string): Promise<unknown> })
    .loneSlidingLog;
  const peer = (i: number) => work.seq[i % work.seq.length]!;
  for (let round = 0; round < rounds; round++) {
    // the three lone rows on the default client, then three levels on serve's
    const lone = [
      [LONE_NAMES[1], 1, c, 'lone1:', 'l'],
      [LONE_NAMES[3], 3, c, 'lone3:', 'l'],
      [LONE_NAMES['3ch'], '3ch', c, 'lone3ch:', 'l'],
      [LONE_SERVE_CLIENT, 3, served, 'lone3s:', 's'],
    ] as const;
    for (const [name, levels, redis, prefix, id] of lone) {
      const gate = await CallGate.create({
        config: work.config(levels),
        store: new RedisStore({ redis, prefix }),
        timeoutMs: 5000,
        shield: false,
      });
      // with channels: the admission alone (each admitted call holds its channels, none released)
      await measure(name, (i) =>
        gate.admit({ callId: `${id}${round}:${i}`, peer: `peer${peer(i)}`, account: `acct${peer(i) % work.accounts}` }),
      );
      await gate.close();
    }
    await measure('hand-rolled sliding-log EVALSHA', (i) =>
      call.call(c, `hand:peer${peer(i)}`, work.rlf.windowUs, work.rlf.points, `m${round}:${i}`),
    );
  }
  c.disconnect();
  served.disconnect();
  admin.disconnect();
  return { rows, perRound, p50Round };
}

/**
 * A 10x flood of one peer beside normal traffic (3 levels): the dialer has its own limit
 * (floodLimit per s) and offers ten times it; the normal traffic is the Zipf workload at
 * `normalRate`. Normal traffic alone, then with the flood, the shield off and on; and
 * rate-limiter-flexible (1 level) alone, with the flood, and with the flood and
 * inMemoryBlockOnConsumed on the dialer's limiter.
 */
export async function floodSection(o: SectionOptions, normalRate: number, floodLimit: number): Promise<OpenRow[]> {
  const { work } = o;
  const admin = await connected(o.url);
  const rows: OpenRow[] = [];
  const floodRate = 10 * floodLimit;
  const total = normalRate + floodRate;
  // interleave: call i of the combined schedule is a flood call when it falls on the flood's share
  const isFlood = (i: number, withFlood: boolean) =>
    withFlood && Math.floor(((i + 1) * floodRate) / total) > Math.floor((i * floodRate) / total);
  const config3 = work.config(3) as { inbound: Record<string, unknown> };
  const dialerLimits = [
    { limit: floodLimit, window: '1s' },
    { limit: 8 * floodLimit, window: '10s' },
  ];
  const configFlood: CallGateConfigInput = {
    ...config3,
    inbound: { ...config3.inbound, peers: { dialer: dialerLimits } },
  };
  const dialerBuckets = (): { buckets: Bucket[]; labels: string[] } => {
    const g = work.bucketsOf(3, 0);
    return {
      buckets: [
        g.buckets[0]!,
        {
          name: 'peer:dialer',
          limits: dialerLimits.map((l, k) => ({
            limit: l.limit,
            windowUs: k === 0 ? 1_000_000 : 10_000_000,
            algorithm: 'sliding-log' as const,
          })),
        },
      ],
      labels: ['global', 'peer:dialer'],
    };
  };

  for (const [label, withFlood, shield] of [
    ['normal traffic alone', false, true],
    ['with the flood, shield off', true, false],
    ['with the flood, shield on', true, true],
  ] as const) {
    const c = await connected(o.url);
    const store = new RedisStore({ redis: c, prefix: 'flood:' });
    const gate = await CallGate.create({ config: configFlood, store, timeoutMs: 5000, shield });
    await warmGate(gate, work, 3, normalRate);
    const warmBatches = store.batchSizes().admit;
    await admin.flushdb();
    await admin.config('RESETSTAT');
    const rate = withFlood ? total : normalRate;
    const n = Math.max(1, Math.floor(rate * o.seconds));
    const rec = new GateRecord(n);
    const normalOf = new Int32Array(n); // peer of a normal call, -1 for a flood call
    let k = 0;
    for (let i = 0; i < n; i++) normalOf[i] = isFlood(i, withFlood) ? -1 : work.seq[k++ % work.seq.length]!;
    const run = await openLoop(
      rate,
      o.seconds,
      (i) => {
        const p = normalOf[i]!;
        const call =
          p < 0
            ? { callId: callIdOf('f', i), peer: 'dialer' }
            : { callId: callIdOf('c', i), peer: `peer${p}`, account: `acct${p % work.accounts}` };
        return gate.admit(call).then((d) => rec.keep(i, d));
      },
      (i) => normalOf[i]! >= 0,
    );
    const usec = await scriptUsec(admin);
    const failure = rec.check(n, (i) => (normalOf[i]! < 0 ? dialerBuckets() : work.bucketsOf(3, normalOf[i]!)));
    let normal = 0;
    for (const p of normalOf) if (p >= 0) normal++;
    await gate.close();
    c.disconnect();
    rows.push({
      type: 'flood',
      name: `callgate 3 levels, ${label}`,
      offered: rate,
      perSecond: (normal / n) * (run.done / run.seconds),
      admittedPct: (100 * rec.count(rec.admitted)) / n,
      p50us: pctl(run.hist, 50),
      p99us: pctl(run.hist, 99),
      p999us: pctl(run.hist, 99.9),
      ...gcOf(run),
      redisUsPerCall: usec / n,
      ...batchSummary(store.batchSizes().admit.map((k, size) => k - (warmBatches[size] ?? 0))),
      shielded: rec.count(rec.shielded),
      check: failure ? 'FAIL' : 'ok',
      checkDetail: failure || 'no window over its limit; identical to the reference replay',
    });
  }

  for (const [label, withFlood, block] of [
    ['normal traffic alone', false, false],
    ['with the flood', true, false],
    ['with the flood, inMemoryBlockOnConsumed', true, true],
  ] as const) {
    const c = await connected(o.url);
    const L = work.rlf.points;
    const W = work.rlf.windowUs;
    const warm = new RateLimiterRedis({ storeClient: c, points: L, duration: W / 1e6, keyPrefix: 'warm' });
    await openLoop(warmRate(normalRate), WARM_SECONDS, (i) =>
      warm.consume(`peer${work.seq[i % work.seq.length]!}`).then(
        () => undefined,
        () => undefined,
      ),
    );
    await admin.flushdb();
    await admin.config('RESETSTAT');
    const normalLimiter = new RateLimiterRedis({ storeClient: c, points: L, duration: W / 1e6, keyPrefix: 'fn' });
    const dialer = new RateLimiterRedis({
      storeClient: c,
      points: floodLimit,
      duration: 1,
      keyPrefix: 'fd',
      ...(block && { inMemoryBlockOnConsumed: floodLimit }),
    });
    const rate = withFlood ? total : normalRate;
    const n = Math.max(1, Math.floor(rate * o.seconds));
    const normalOf = new Int32Array(n);
    let k = 0;
    for (let i = 0; i < n; i++) normalOf[i] = isFlood(i, withFlood) ? -1 : work.seq[k++ % work.seq.length]!;
    const admitted = new Uint8Array(n);
    const at = new Float64Array(n);
    let errors = 0;
    let maxLatencyUs = 0;
    const run = await openLoop(
      rate,
      o.seconds,
      async (i) => {
        const p = normalOf[i]!;
        const t0 = wallUs();
        try {
          await (p < 0 ? dialer.consume('dialer') : normalLimiter.consume(`peer${p}`));
          admitted[i] = 1;
        } catch (e) {
          if (!(e instanceof RateLimiterRes)) errors++;
        }
        const t1 = wallUs();
        at[i] = t1;
        if (t1 - t0 > maxLatencyUs) maxLatencyUs = t1 - t0;
      },
      (i) => normalOf[i]! >= 0,
    );
    const usec = await scriptUsec(admin);
    let failure =
      errors > 0
        ? `${errors} calls failed`
        : rlfCheck(
            n,
            (i) => normalOf[i]!,
            Uint8Array.from(admitted, (a, i) => (normalOf[i]! >= 0 ? a : 0)),
            at,
            L,
            W,
            maxLatencyUs,
          );
    failure ||= rlfCheck(
      n,
      () => -1,
      Uint8Array.from(admitted, (a, i) => (normalOf[i]! < 0 ? a : 0)),
      at,
      floodLimit,
      1_000_000,
      maxLatencyUs,
    );
    let normal = 0;
    let ok = 0;
    for (let i = 0; i < n; i++) {
      if (normalOf[i]! >= 0) normal++;
      ok += admitted[i]!;
    }
    c.disconnect();
    rows.push({
      type: 'flood',
      name: `rate-limiter-flexible, ${label}`,
      offered: rate,
      perSecond: (normal / n) * (run.done / run.seconds),
      admittedPct: (100 * ok) / n,
      p50us: pctl(run.hist, 50),
      p99us: pctl(run.hist, 99),
      p999us: pctl(run.hist, 99.9),
      ...gcOf(run),
      redisUsPerCall: usec / n,
      check: failure ? 'FAIL' : 'ok',
      checkDetail: failure || 'at most 2L in any span of W per peer',
    });
  }
  await admin.flushdb();
  admin.disconnect();
  return rows;
}

// ---------------------------------------------------------------------------------------------
// Report

const fmtInt = (x: number) => Math.round(x).toLocaleString('en-US');
const fmtUs = (x: number) => (x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2));
const pad = (s: string, n: number) => (s.length >= n ? s : s + ' '.repeat(n - s.length));
const lpad = (s: string, n: number) => (s.length >= n ? s : ' '.repeat(n - s.length) + s);

/** The batch-size distribution of each callgate row: the share of its calls that left in batches of each size. */
export function printBatchShares(rows: OpenRow[], log: (line: string) => void): void {
  log(`  batch sizes: share of the calls that left in a batch of ${BATCH_CLASSES.join(' | ')} calls`);
  for (const r of rows) {
    if (r.batchCallShares === undefined) continue;
    log(
      `    ${pad(r.name, 48)} ${lpad(`${fmtInt(r.offered)}/s`, 10)}  ${r.batchCallShares.map((x) => lpad(`${(100 * x).toFixed(0)}%`, 4)).join(' | ')}`,
    );
  }
}

export function printOpenRows(rows: OpenRow[], log: (line: string) => void): void {
  log(
    `${pad('system', 52)} ${lpad('offered/s', 10)} ${lpad('decided/s', 10)} ${lpad('admitted', 9)} ${lpad('p50 µs', 8)} ${lpad('p99 µs', 8)} ${lpad('p99.9 µs', 9)} ${lpad('p99 range µs', 14)} ${lpad('redis µs', 9)} ${lpad('batch mean/max, 1s', 19)} ${lpad('shielded', 9)} ${lpad('gc ms/s, max', 13)}  check`,
  );
  for (const r of rows) {
    const batch =
      r.batchMean !== undefined ? `${r.batchMean.toFixed(2)}/${r.batchMax}, ${(100 * r.batchOnes!).toFixed(0)}%` : '';
    log(
      `${pad(r.name, 52)} ${lpad(r.offered ? fmtInt(r.offered) : '', 10)} ${lpad(r.check === 'FAIL' ? 'FAIL' : fmtInt(r.perSecond), 10)} ${lpad(Number.isNaN(r.admittedPct) ? '' : `${r.admittedPct.toFixed(1)}%`, 9)} ${lpad(fmtUs(r.p50us), 8)} ${lpad(fmtUs(r.p99us), 8)} ${lpad(fmtUs(r.p999us), 9)} ${lpad(r.p99RangeUs ? `${fmtUs(r.p99RangeUs[0])}-${fmtUs(r.p99RangeUs[1])}` : '', 14)} ${lpad(r.redisUsPerCall.toFixed(1), 9)} ${lpad(batch, 19)} ${lpad(r.shielded !== undefined ? fmtInt(r.shielded) : '', 9)} ${lpad(r.gcMsPerS !== undefined ? `${r.gcMsPerS.toFixed(1)}, ${r.gcMaxMs!.toFixed(1)}` : '', 13)}  ${r.check === 'FAIL' ? `FAIL: ${r.checkDetail}` : 'ok'}`,
    );
  }
}
