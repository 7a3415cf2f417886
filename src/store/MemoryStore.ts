/**
 * MemoryStore: the Store in process, the embedded default and replay's engine. Same semantics
 * as the Lua scripts (src/store/types.ts), step for step, so both give identical decisions.
 *
 * Bounded: a sliding log keeps only events a limit can still see, and every structure is
 * dropped once the latest time seen makes it irrelevant (swept in amortized O(1) per call).
 * Cost per decision: O(log n) in the events inside the window, never in the calls ever seen.
 * Hash tags do not exist here: a bucket is its name, whatever the call's tag.
 */
import { systemClockUs } from '../clock.js';
import type {
  AdmitRequest,
  AdmitResult,
  Bucket,
  CountRequest,
  CountResult,
  RecordRequest,
  RecordResult,
  ReserveRequest,
  ReserveResult,
  Store,
  WaitRequest,
  WaitResult,
} from './types.js';
import { checkAdmit, checkCount, checkReserve, checkWait, logRetention } from './validate.js';
import { checkInspect, inspectMemory } from './inspectMemory.js';
import type { InspectRequest, InspectResult } from './types.js';
import { windowIndex } from './window.js';

/** A sorted log of event times; times[head..] are live, older ones await compaction. */
class Log {
  times: number[] = [];
  head = 0;
  retention = 0;

  /** Drop events with s <= t - retention (the Lua script's ZREMRANGEBYSCORE). */
  trim(t: number): void {
    const cut = t - this.retention;
    const times = this.times;
    let h = this.head;
    while (h < times.length && times[h]! <= cut) h++;
    this.head = h;
    if (h > 64 && h * 2 > times.length) {
      this.times = times.slice(h);
      this.head = 0;
    }
  }

  /** Index of the first live event with s > x. */
  upper(x: number): number {
    const times = this.times;
    let lo = this.head;
    let hi = times.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (times[mid]! <= x) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /** Events with t - w < s <= t, and the index of the first of them. */
  range(t: number, w: number): [first: number, count: number] {
    const first = this.upper(t - w);
    return [first, this.end(t) - first];
  }

  /** Index past the last live event with s <= t. */
  end(t: number): number {
    const n = this.times.length;
    return n > 0 && this.times[n - 1]! <= t ? n : this.upper(t);
  }

  add(t: number): void {
    const times = this.times;
    if (times.length === this.head || times[times.length - 1]! <= t) times.push(t);
    else times.splice(this.upper(t), 0, t);
  }

  get size(): number {
    return this.times.length - this.head;
  }
}

/** Counts of the two latest fixed windows: w (latest), c (its count), p (count of w - 1). */
interface WindowCounts {
  w: number;
  c: number;
  p: number;
  windowUs: number;
}

interface Slot {
  last: number;
  intervalUs: number;
}

/** What a bucket list needs per call, derived once per list (lists are readonly, see validate.ts). */
interface ListPlan {
  /** Per bucket: its log retention (0: no sliding-log limit). */
  readonly retention: number[];
  /** Per bucket, per limit: the key of its window counts ('' for sliding-log limits). */
  readonly windowKey: string[][];
  /** Per bucket: the window keys to record (each distinct window once) and their windows. */
  readonly recordKeys: string[][];
  readonly recordWindows: number[][];
}

const listPlans = new WeakMap<readonly Bucket[], ListPlan>();

function listPlan(buckets: readonly Bucket[]): ListPlan {
  let plan = listPlans.get(buckets);
  if (plan === undefined) {
    plan = { retention: [], windowKey: [], recordKeys: [], recordWindows: [] };
    for (const bucket of buckets) {
      plan.retention.push(logRetention(bucket));
      const keys: string[] = [];
      const recordKeys: string[] = [];
      const recordWindows: number[] = [];
      for (const lim of bucket.limits) {
        if (lim.algorithm === 'sliding-log') {
          keys.push('');
          continue;
        }
        const key = `${bucket.name}\u0000${lim.windowUs}`;
        keys.push(key);
        if (!recordKeys.includes(key)) {
          recordKeys.push(key);
          recordWindows.push(lim.windowUs);
        }
      }
      plan.windowKey.push(keys);
      plan.recordKeys.push(recordKeys);
      plan.recordWindows.push(recordWindows);
    }
    listPlans.set(buckets, plan);
  }
  return plan;
}

export interface MemoryStoreOptions {
  /** Clock used when a request has no `now`, µs since the epoch (default: the process clock). */
  readonly clock?: () => number;
  /**
   * Drop what the latest time seen makes irrelevant (default true), as Redis expiry does. While
   * time never goes backwards this changes no decision. A call whose `now` lies further behind
   * the latest time seen than a bucket's windows may find that bucket's old events forgotten
   * here but not on Redis (which trims a log only when it records in it); `false` keeps every
   * structure until a record trims it: the exact semantics of types.ts for any order of times,
   * with memory growing with the buckets ever named.
   */
  readonly sweep?: boolean;
}

export class MemoryStore implements Store {
  readonly kind = 'memory';
  private readonly clock: () => number;
  private logs = new Map<string, Log>();
  private windows = new Map<string, WindowCounts>();
  private slots = new Map<string, Slot>();
  private latest = 0;
  private opsToSweep = 1024;

  constructor(opts: MemoryStoreOptions = {}) {
    this.clock = opts.clock ?? systemClockUs;
    if (opts.sweep === false) this.opsToSweep = Infinity;
  }

  /** Structures alive now (for tests of boundedness and for the benchmark). */
  get size(): { logs: number; events: number; windows: number; carriers: number } {
    let events = 0;
    for (const log of this.logs.values()) events += log.size;
    return { logs: this.logs.size, events, windows: this.windows.size, carriers: this.slots.size };
  }

  private time(now: number | undefined): number {
    const t = now ?? this.clock();
    if (t > this.latest) this.latest = t;
    if (--this.opsToSweep <= 0) this.sweep();
    return t;
  }

  /** Drop what the latest time makes irrelevant; runs every max(1024, size) operations. */
  private sweep(): void {
    const t = this.latest;
    for (const [key, log] of this.logs) {
      log.trim(t);
      if (log.size === 0) this.logs.delete(key);
    }
    for (const [key, win] of this.windows) if ((win.w + 2) * win.windowUs <= t) this.windows.delete(key);
    for (const [key, slot] of this.slots) if (slot.last + slot.intervalUs <= t) this.slots.delete(key);
    this.opsToSweep = Math.max(1024, this.logs.size + this.windows.size + this.slots.size);
  }

  private log(bucket: Bucket, retention: number): Log {
    let log = this.logs.get(bucket.name);
    if (!log) {
      log = new Log();
      this.logs.set(bucket.name, log);
    }
    log.retention = retention;
    return log;
  }

  private recordWindow(key: string, t: number, W: number): void {
    const k = windowIndex(t, W);
    const s = this.windows.get(key);
    if (!s || k > s.w + 1) this.windows.set(key, { w: k, c: 1, p: 0, windowUs: W });
    else if (k === s.w + 1) {
      s.p = s.c;
      s.c = 1;
      s.w = k;
    } else if (k === s.w) s.c++;
    else if (k === s.w - 1) s.p++;
  }

  /** Record an event at t in every bucket; each log first drops what no limit can see any more. */
  private recordAll(buckets: readonly Bucket[], plan: ListPlan, logs: (Log | undefined)[], t: number): void {
    for (let b = 0; b < buckets.length; b++) {
      const log = logs[b];
      if (log !== undefined) {
        log.trim(t);
        log.add(t);
      }
      const keys = plan.recordKeys[b]!;
      for (let j = 0; j < keys.length; j++) this.recordWindow(keys[j]!, t, plan.recordWindows[b]![j]!);
    }
  }

  /** The log of each bucket with sliding-log limits (undefined for the others). */
  private logsOf(buckets: readonly Bucket[], plan: ListPlan): (Log | undefined)[] {
    const logs: (Log | undefined)[] = new Array(buckets.length);
    for (let b = 0; b < buckets.length; b++) {
      const retention = plan.retention[b]!;
      if (retention !== 0) logs[b] = this.log(buckets[b]!, retention);
    }
    return logs;
  }

  admitSync(req: AdmitRequest): AdmitResult {
    checkAdmit(req);
    const t = this.time(req.now);
    const { buckets } = req;
    const plan = listPlan(buckets);
    const logs = this.logsOf(buckets, plan);
    let limitedBy = -1;
    let retry = 0;
    for (let b = 0; b < buckets.length; b++) {
      const limits = buckets[b]!.limits;
      for (let j = 0; j < limits.length; j++) {
        const { limit: L, windowUs: W, algorithm } = limits[j]!;
        let wait = 0;
        if (algorithm === 'sliding-log') {
          const log = logs[b]!;
          const first = log.upper(t - W);
          const n = log.end(t) - first;
          // the (n - L + 1)-th oldest event in the window leaves it at s + W
          if (n >= L) wait = log.times[first + n - L]! + W - t;
        } else {
          const k = windowIndex(t, W);
          const s = this.windows.get(plan.windowKey[b]![j]!);
          // counts of t's window k and of k - 1 (as lua/includes/buckets.lua windowCounts)
          let c = 0;
          let p = 0;
          if (s !== undefined) {
            if (k === s.w) {
              c = s.c;
              p = s.p;
            } else if (k === s.w + 1) p = s.c;
            else if (k === s.w - 1) c = s.p;
          }
          if (algorithm === 'fixed-window') {
            if (c >= L) wait = (k + 1) * W - t;
          } else {
            const f = (t - k * W) / W;
            if (c + p * (1 - f) >= L) {
              wait = c >= L ? (k + 1) * W + Math.floor(W * (1 - L / c)) + 1 - t : k * W + Math.floor(W * (1 - (L - c) / p)) + 1 - t;
              if (wait < 1) wait = 1;
            }
          }
        }
        if (wait > 0) {
          if (limitedBy < 0) limitedBy = b;
          if (wait > retry) retry = wait;
        }
      }
    }
    if (limitedBy < 0) this.recordAll(buckets, plan, logs, t);
    return { admitted: limitedBy < 0, limitedBy, retryAfterUs: retry, now: t };
  }

  recordSync(req: RecordRequest): RecordResult {
    checkAdmit(req);
    const t = this.time(req.now);
    const plan = listPlan(req.buckets);
    this.recordAll(req.buckets, plan, this.logsOf(req.buckets, plan), t);
    return { now: t };
  }

  countSync(req: CountRequest): CountResult {
    checkCount(req);
    const t = this.time(req.now);
    const log = this.logs.get(req.bucket);
    return { count: log ? log.range(t, req.windowUs)[1] : 0, now: t };
  }

  reserveSync(req: ReserveRequest): ReserveResult {
    checkReserve(req);
    const t = this.time(req.now);
    const waits: number[] = [];
    for (let i = 0; i < req.route.length; i++) {
      const { name, intervalUs, maxWaitUs } = req.route[i]!;
      const state = this.slots.get(name);
      let slot = t;
      if (state) {
        const nextFree = state.last + intervalUs;
        if (nextFree > t) slot = nextFree;
      }
      const wait = slot - t;
      waits.push(wait);
      if (wait <= maxWaitUs) {
        if (state) {
          state.last = slot;
          state.intervalUs = intervalUs;
        } else this.slots.set(name, { last: slot, intervalUs });
        return { index: i, waitUs: wait, slotUs: slot, waits, now: t };
      }
    }
    return { index: -1, waitUs: 0, slotUs: 0, waits, now: t };
  }

  waitSync(req: WaitRequest): WaitResult {
    checkWait(req);
    const t = this.time(req.now);
    const state = this.slots.get(req.carrier.name);
    const wait = state ? state.last + req.carrier.intervalUs - t : 0;
    return { waitUs: wait > 0 ? wait : 0, now: t };
  }

  // The Store interface: the same, as promises (a validation error rejects the promise).
  admit(req: AdmitRequest): Promise<AdmitResult> {
    try {
      return Promise.resolve(this.admitSync(req));
    } catch (err) {
      return Promise.reject(err);
    }
  }
  record(req: RecordRequest): Promise<RecordResult> {
    return settle(() => this.recordSync(req));
  }
  count(req: CountRequest): Promise<CountResult> {
    return settle(() => this.countSync(req));
  }
  reserve(req: ReserveRequest): Promise<ReserveResult> {
    try {
      return Promise.resolve(this.reserveSync(req));
    } catch (err) {
      return Promise.reject(err);
    }
  }
  wait(req: WaitRequest): Promise<WaitResult> {
    return settle(() => this.waitSync(req));
  }

  inspectSync(req: InspectRequest): InspectResult {
    checkInspect(req);
    const state = {
      log: (name: string) => this.logs.get(name),
      window: (key: string) => this.windows.get(key),
      slot: (name: string) => this.slots.get(name)?.last,
    };
    return inspectMemory(state, req, this.time(req.now));
  }
  inspect(req: InspectRequest): Promise<InspectResult> {
    return settle(() => this.inspectSync(req));
  }

  async clear(): Promise<void> {
    this.logs.clear();
    this.windows.clear();
    this.slots.clear();
  }

  async close(): Promise<void> {}
}

function settle<T>(fn: () => T): Promise<T> {
  try {
    return Promise.resolve(fn());
  } catch (err) {
    return Promise.reject(err);
  }
}
