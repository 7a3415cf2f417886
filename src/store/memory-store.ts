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
import { GLOBAL_TAG, isOutboundTag } from './keys.js';
import { checkReassert, reassertMemory, type MemoryHolds } from './reassert.js';
import type {
  ReassertRequest,
  ReassertResult,
  AdmitRequest,
  AdmitResult,
  Bucket,
  CountRequest,
  CountResult,
  Hold,
  HoldsRequest,
  HoldsResult,
  RecordRequest,
  RecordResult,
  RefreshRequest,
  RefreshResult,
  ReleaseRequest,
  ReleaseResult,
  ReserveRequest,
  ReserveResult,
  Store,
  WaitRequest,
  WaitResult,
} from './types.js';
import {
  checkAdmit,
  checkCount,
  checkHolds,
  checkRefresh,
  checkRelease,
  checkReserve,
  checkWait,
  hasChannels,
  logRetention,
} from './validate.js';
import { checkInspect, inspectMemory } from './inspect-memory.js';
import { carrierRate, lastSlot, nextSlot, nextSlotPassed, type SlotState, slotHoldEnd } from './slots.js';
import type { BansRequest, BansResult, InspectRequest, InspectResult, UnbanRequest, UnbanResult } from './types.js';
import { firstAbove, firstAtLeast, windowCounts, windowIndex, windowLimit } from './window.js';
import {
  checkListHolds,
  checkReset,
  counterWindows,
  type ListedHold,
  type ListHoldsRequest,
  type ListHoldsResult,
  type OperableStore,
  type ResetRequest,
  type ResetResult,
} from './operations.js';

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
    return firstAbove(this.times, this.head, x);
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

/**
 * The holds of one bucket or carrier (the Lua scripts' `:ch` sorted set: member = call id,
 * score = end): ends sorted ascending, ends[head..] live, with the call id of each.
 */
class HoldSet {
  ends: number[] = [];
  ids: string[] = [];
  head = 0;
  /** End of each call id held here. */
  readonly byId = new Map<string, number>();

  /** Index of the first live hold with end > x. */
  private upper(x: number): number {
    return firstAbove(this.ends, this.head, x);
  }

  /** Holds with an end after t (ZCOUNT (t +inf). */
  count(t: number): number {
    return this.ends.length - this.upper(t);
  }

  /** Drop the holds that ended at or before t (ZREMRANGEBYSCORE -inf t). */
  trim(t: number): void {
    const ends = this.ends;
    let h = this.head;
    while (h < ends.length && ends[h]! <= t) this.byId.delete(this.ids[h++]!);
    this.head = h;
    if (h > 64 && h * 2 > ends.length) {
      this.ends = ends.slice(h);
      this.ids = this.ids.slice(h);
      this.head = 0;
    }
  }

  /** Hold `id` until `end` (ZADD: an id held already gets the new end). */
  add(id: string, end: number): void {
    this.remove(id);
    const i = this.upper(end);
    if (i === this.ends.length) {
      this.ends.push(end);
      this.ids.push(id);
    } else {
      this.ends.splice(i, 0, end);
      this.ids.splice(i, 0, id);
    }
    this.byId.set(id, end);
  }

  /** Drop the hold of `id` (ZREM). */
  remove(id: string): boolean {
    const end = this.byId.get(id);
    if (end === undefined) return false;
    this.byId.delete(id);
    // the first live index with this end (a lower bound: `end - 1` is `end` itself past 2^53, where
    // upper(end - 1) skipped every equal end and the scan below never met `id`), then the one of
    // this id among equal ends, never past them
    let i = firstAtLeast(this.ends, this.head, end);
    while (i < this.ends.length && this.ids[i] !== id) i++;
    if (i === this.ends.length) return true; // unreachable while byId and ends agree
    this.ends.splice(i, 1);
    this.ids.splice(i, 1);
    return true;
  }

  get size(): number {
    return this.ends.length - this.head;
  }

  /** The holds with an end after t, earliest end first, at most `max` (ZRANGEBYSCORE (t +inf LIMIT). */
  listAfter(t: number, max: number): ListedHold[] {
    const out: ListedHold[] = [];
    for (let i = this.upper(t); i < this.ends.length && out.length < max; i++)
      out.push({ id: this.ids[i]!, endUs: this.ends[i]! });
    return out;
  }
}

/** A call's record (one per id and direction): its end and the hold sets it holds a channel in. */
interface CallRecord {
  end: number;
  readonly sets: HoldSet[];
}

/** Counts of the two latest fixed windows: w (latest), c (its count), p (count of w - 1). */
interface WindowCounts {
  w: number;
  c: number;
  p: number;
  windowUs: number;
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

export class MemoryStore implements Store, OperableStore {
  readonly kind = 'memory';
  /** Hash tags do not exist here (operations.ts). */
  readonly tagged = false;
  private readonly clock: () => number;
  private logs = new Map<string, Log>();
  private windows = new Map<string, WindowCounts>();
  private slots = new Map<string, SlotState>();
  /** Holds per bucket name and per carrier name (two maps: a bucket may share a carrier's name). */
  private bucketHolds = new Map<string, HoldSet>();
  private carrierHolds = new Map<string, HoldSet>();
  /** Call records by call id: inbound and outbound. */
  private inCalls = new Map<string, CallRecord>();
  private outCalls = new Map<string, CallRecord>();
  /** Generation markers per tag (reassert). */
  private readonly markers = new Map<string, { token: string; graceUntil: number; procs?: Map<string, number> }>();
  private latest = 0;
  private opsToSweep = 1024;
  /** Bans (BanRule): per bucket name the ban's end, µs; and the strikes of its latest span. */
  private banEnds = new Map<string, number>();
  private strikes = new Map<string, { k: number; c: number; spanUs: number }>();

  constructor(opts: MemoryStoreOptions = {}) {
    this.clock = opts.clock ?? systemClockUs;
    if (opts.sweep === false) this.opsToSweep = Infinity;
  }

  /** Structures alive now (for tests of boundedness and for the benchmark). */
  get size(): { logs: number; events: number; windows: number; carriers: number; holds: number; calls: number } {
    let events = 0;
    for (const log of this.logs.values()) events += log.size;
    let holds = 0;
    for (const set of this.bucketHolds.values()) holds += set.size;
    for (const set of this.carrierHolds.values()) holds += set.size;
    const calls = this.inCalls.size + this.outCalls.size;
    return { logs: this.logs.size, events, windows: this.windows.size, carriers: this.slots.size, holds, calls };
  }

  /** The time of an operation (its `now`, or the clock's): the latest seen moves, a sweep may run. */
  protected time(now: number | undefined): number {
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
    // exactly as the next call would see it: a slot as one number of µs near today's dates
    // steps in quarter-µs, and a next slot 0.11 µs after t read as passed, so a call at t went
    // at once where it had to wait (a wait over maxWait 0: another carrier)
    for (const [key, slot] of this.slots) if (nextSlotPassed(slot, t)) this.slots.delete(key);
    for (const sets of [this.bucketHolds, this.carrierHolds]) {
      for (const [key, set] of sets) {
        set.trim(t);
        if (set.size === 0) sets.delete(key);
      }
    }
    for (const calls of [this.inCalls, this.outCalls])
      for (const [id, rec] of calls) if (rec.end <= t) calls.delete(id);
    for (const [name, end] of this.banEnds) if (end <= t) this.banEnds.delete(name);
    for (const [name, st] of this.strikes) if ((st.k + 1) * st.spanUs <= t) this.strikes.delete(name);
    this.opsToSweep = Math.max(
      1024,
      this.logs.size +
        this.windows.size +
        this.slots.size +
        this.bucketHolds.size +
        this.carrierHolds.size +
        this.inCalls.size +
        this.outCalls.size +
        this.banEnds.size +
        this.strikes.size,
    );
  }

  private holdSet(sets: Map<string, HoldSet>, name: string): HoldSet {
    let set = sets.get(name);
    if (!set) {
      set = new HoldSet();
      sets.set(name, set);
    }
    return set;
  }

  /** Drop a call record and its holds (a hang-up, or a new outbound hold of the same id). */
  private drop(calls: Map<string, CallRecord>, id: string, rec: CallRecord): void {
    for (const set of rec.sets) set.remove(id);
    calls.delete(id);
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
    return this.admitCapped(req, undefined);
  }

  /**
   * admitSync, with the first bucket's limits capped by `share` when given: a leased global
   * level's part on one lane (src/lease/replay-lanes.ts), as admit.lua's 'S' pseudo-limit does
   * (a share of 0 refuses, its retry-after the window). `share.refused` is set to the resource
   * the share alone lacked room for (the level's own limit had room on the lane), and
   * `share.alone` when that was calls and every other limit of the call had room (flag 16 of
   * the admit scripts: an overflow lane may take it).
   */
  protected admitCapped(
    req: AdmitRequest,
    share: { calls: number; channels: number; refused?: 'calls' | 'channels'; alone?: boolean } | undefined,
  ): AdmitResult {
    checkAdmit(req);
    const t = this.time(req.now);
    const { buckets } = req;
    // a hold only matters where a bucket has a channel limit
    const hold = this.holdOf(req);
    if (this.holding(hold, t)) return { admitted: true, limitedBy: -1, retryAfterUs: 0, now: t, duplicate: true };
    const banned = this.bannedIn(buckets, t);
    if (banned !== undefined) return banned;
    const plan = listPlan(buckets);
    const logs = this.logsOf(buckets, plan);
    let limitedBy = -1;
    let reason: 'rate' | 'channels' | undefined;
    let retry = 0;
    // past a refusal by the calls share alone: another limit lacked room too
    let later = false;
    for (let b = 0; b < buckets.length; b++) {
      const limits = buckets[b]!.limits;
      let short = false;
      for (let j = 0; j < limits.length; j++) {
        const { limit: full, windowUs: W, algorithm } = limits[j]!;
        const L = b === 0 && share !== undefined && share.calls < full ? share.calls : full;
        let wait = 0;
        if (algorithm === 'sliding-log') {
          const log = logs[b]!;
          const first = log.upper(t - W);
          const n = log.end(t) - first;
          // the (n - L + 1)-th oldest event in the window leaves it at s + W (none: a share of 0)
          if (n >= L) {
            wait = L > 0 ? log.times[first + n - L]! + W - t : W;
            if (L < full && n < full && limitedBy < 0) share!.refused = 'calls';
          }
        } else {
          const k = windowIndex(t, W);
          const [c, p] = windowCounts(this.windows.get(plan.windowKey[b]![j]!), k);
          wait = windowLimit(algorithm, L, W, t, k, c, p).wait;
        }
        if (wait > 0) {
          if (limitedBy < 0) {
            limitedBy = b;
            reason = 'rate';
          } else if (b > 0 && share?.refused === 'calls') later = true;
          if (wait > retry) retry = wait;
          short = true;
        }
      }
      if (short && buckets[b]!.ban !== undefined) this.strike(buckets[b]!, t);
      // then the bucket's channels; past the first bucket without room they change nothing
      const full = buckets[b]!.channels;
      if (full !== undefined && limitedBy < 0) {
        const channels = b === 0 && share !== undefined && share.channels < full ? share.channels : full;
        const held = this.bucketHolds.get(buckets[b]!.name)?.count(t) ?? 0;
        if (held >= channels) {
          limitedBy = b;
          reason = 'channels';
          if (channels < full && held < full) share!.refused = 'channels';
        }
      } else if (full !== undefined && share?.refused === 'calls' && !later) {
        const channels = b === 0 && share.channels < full ? share.channels : full;
        if ((this.bucketHolds.get(buckets[b]!.name)?.count(t) ?? 0) >= channels) later = true;
      }
    }
    if (share?.refused === 'calls' && limitedBy === 0 && !later) share.alone = true;
    if (limitedBy >= 0) return { admitted: false, limitedBy, reason, retryAfterUs: retry, now: t };
    this.recordAll(buckets, plan, logs, t);
    if (hold !== undefined) this.holdIn(hold, buckets, t);
    return { admitted: true, limitedBy: -1, retryAfterUs: 0, now: t };
  }

  /** The refusal of a call naming a banned bucket (the first), else undefined. */
  private bannedIn(buckets: readonly Bucket[], t: number): AdmitResult | undefined {
    if (this.banEnds.size === 0) return undefined;
    for (let b = 0; b < buckets.length; b++) {
      if (buckets[b]!.ban === undefined) continue;
      const end = this.banEnds.get(buckets[b]!.name);
      if (end !== undefined && end > t)
        return { admitted: false, limitedBy: b, reason: 'banned', retryAfterUs: end - t, now: t };
    }
    return undefined;
  }

  /** A call the bucket's rate limits lacked room for: one strike in its span; the threshold bans it. */
  private strike(bucket: Bucket, t: number): void {
    const ban = bucket.ban!;
    const k = windowIndex(t, ban.spanUs);
    let st = this.strikes.get(bucket.name);
    if (st === undefined || st.k !== k || st.spanUs !== ban.spanUs) {
      st = { k, c: 0, spanUs: ban.spanUs };
      this.strikes.set(bucket.name, st);
    }
    if (++st.c >= ban.threshold) {
      // once the ban ends the value starts afresh: its strikes from 0 (docs/attributes.md)
      this.banEnds.set(bucket.name, t + ban.forUs);
      st.c = 0;
    }
  }

  /** Lift a bucket's ban (and forget its strikes): whether it was banned at t. */
  unbanSync(req: UnbanRequest): UnbanResult {
    const t = this.time(req.now);
    const end = this.banEnds.get(req.bucket);
    this.banEnds.delete(req.bucket);
    this.strikes.delete(req.bucket);
    return { lifted: end !== undefined && end > t, now: t };
  }

  unban(req: UnbanRequest): Promise<UnbanResult> {
    try {
      return Promise.resolve(this.unbanSync(req));
    } catch (err) {
      return Promise.reject(err);
    }
  }

  bans(req: BansRequest = {}): Promise<BansResult> {
    const t = req.now ?? this.clock();
    const bans: { tag: string; bucket: string; end: number }[] = [];
    // the memory store has no tags: every ban is listed under the inbound one
    for (const [bucket, end] of this.banEnds) if (end > t) bans.push({ tag: GLOBAL_TAG, bucket, end });
    return Promise.resolve({ bans, now: t });
  }

  /** The hold of a call in a bucket list, when one of its buckets has a channel limit. */
  private holdOf(req: AdmitRequest | RecordRequest): Hold | undefined {
    return req.hold !== undefined && hasChannels(req.buckets) ? req.hold : undefined;
  }

  /** Whether `hold`'s id has an inbound record still holding at t (a repeated admit). */
  private holding(hold: Hold | undefined, t: number): boolean {
    if (hold === undefined) return false;
    const rec = this.inCalls.get(hold.id);
    return rec !== undefined && rec.end > t;
  }

  /** An admitted call holds a channel in every bucket with a channel limit, until t + forUs. */
  private holdIn(hold: Hold, buckets: readonly Bucket[], t: number): void {
    if (hold.forUs === 0) return;
    const end = t + hold.forUs;
    const sets: HoldSet[] = [];
    for (const bucket of buckets) {
      if (bucket.channels === undefined) continue;
      const set = this.holdSet(this.bucketHolds, bucket.name);
      set.trim(t);
      set.add(hold.id, end);
      sets.push(set);
    }
    this.inCalls.set(hold.id, { end, sets });
  }

  recordSync(req: RecordRequest): RecordResult {
    checkAdmit(req);
    const t = this.time(req.now);
    const hold = this.holdOf(req);
    if (this.holding(hold, t)) return { now: t, duplicate: true };
    const plan = listPlan(req.buckets);
    this.recordAll(req.buckets, plan, this.logsOf(req.buckets, plan), t);
    if (hold !== undefined) this.holdIn(hold, req.buckets, t);
    return { now: t };
  }

  /**
   * Events of bucket `name`'s log in (t - w, t] and its holds with an end after t, read as they
   * stand: no time moves, no sweep runs (a leased replay's ticks read with these).
   */
  protected rawCounts(name: string, t: number, w: number): { inWindow: number; inUse: number } {
    const log = this.logs.get(name);
    return {
      inWindow: log ? log.range(t, w)[1] : 0,
      inUse: this.bucketHolds.get(name)?.count(t) ?? 0,
    };
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
    const full: boolean[] = [];
    for (let i = 0; i < req.route.length; i++) {
      const c = req.route[i]!;
      const { name, maxWaitUs, channels } = c;
      // slot = max(t, last + I), as a base and k intervals (slots.ts), and its exact wait
      const { wait, ...next } = nextSlot(this.slots.get(name), carrierRate(c), t);
      const slot = lastSlot(next);
      const fits = wait <= maxWaitUs;
      // channels are counted only where the wait fits: `full` says why a carrier was passed over
      const isFull = fits && channels !== undefined && (this.carrierHolds.get(name)?.count(t) ?? 0) >= channels;
      waits.push(wait);
      full.push(isFull);
      if (fits && !isFull) {
        this.slots.set(name, next);
        if (req.hold !== undefined)
          this.holdOut(req.hold.id, channels === undefined ? 0 : slotHoldEnd(next, req.hold.forUs), name, t);
        return { index: i, waitUs: wait, slotUs: slot, waits, full, now: t };
      }
    }
    return { index: -1, waitUs: 0, slotUs: 0, waits, full, now: t };
  }

  /** A reserved call's outbound record: the id's previous one goes; a hold until `end` if after t. */
  private holdOut(id: string, end: number, carrier: string, t: number): void {
    const old = this.outCalls.get(id);
    if (old !== undefined) this.drop(this.outCalls, id, old);
    if (end <= t) return;
    const set = this.holdSet(this.carrierHolds, carrier);
    set.trim(t);
    set.add(id, end);
    this.outCalls.set(id, { end, sets: [set] });
  }

  releaseSync(req: ReleaseRequest): ReleaseResult {
    checkRelease(req);
    const t = this.time(req.now);
    let released = 0;
    for (const calls of this.recordsOf(req.direction)) {
      const rec = calls.get(req.id);
      if (rec === undefined) continue;
      if (rec.end > t) released++;
      this.drop(calls, req.id, rec);
    }
    return { released, now: t };
  }

  refreshSync(req: RefreshRequest): RefreshResult {
    checkRefresh(req);
    const t = this.time(req.now);
    let refreshed = 0;
    for (const calls of this.recordsOf(undefined)) {
      const rec = calls.get(req.id);
      if (rec === undefined || rec.end <= t) continue;
      refreshed++;
      rec.end = t + req.forUs;
      for (const set of rec.sets) set.add(req.id, rec.end);
    }
    return { refreshed, now: t };
  }

  holdsSync(req: HoldsRequest): HoldsResult {
    checkHolds(req);
    const t = this.time(req.now);
    const sets = isOutboundTag(req.tag) ? this.carrierHolds : this.bucketHolds;
    return { holds: sets.get(req.name)?.count(t) ?? 0, now: t };
  }

  private recordsOf(direction: 'in' | 'out' | undefined): Map<string, CallRecord>[] {
    return direction === 'in' ? [this.inCalls] : direction === 'out' ? [this.outCalls] : [this.inCalls, this.outCalls];
  }

  waitSync(req: WaitRequest): WaitResult {
    checkWait(req);
    const t = this.time(req.now);
    return { waitUs: nextSlot(this.slots.get(req.carrier.name), carrierRate(req.carrier), t).wait, now: t };
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
  release(req: ReleaseRequest): Promise<ReleaseResult> {
    return settle(() => this.releaseSync(req));
  }
  refresh(req: RefreshRequest): Promise<RefreshResult> {
    return settle(() => this.refreshSync(req));
  }
  holds(req: HoldsRequest): Promise<HoldsResult> {
    return settle(() => this.holdsSync(req));
  }

  inspectSync(req: InspectRequest): InspectResult {
    checkInspect(req);
    const state = {
      log: (name: string) => this.logs.get(name),
      window: (key: string) => this.windows.get(key),
      slot: (name: string) => this.slots.get(name),
      holds: (name: string, t: number) => this.bucketHolds.get(name)?.count(t) ?? 0,
      carrierHolds: (name: string, t: number) => this.carrierHolds.get(name)?.count(t) ?? 0,
    };
    return inspectMemory(state, req, this.time(req.now));
  }
  inspect(req: InspectRequest): Promise<InspectResult> {
    return settle(() => this.inspectSync(req));
  }

  // Operator operations (src/store/operations.ts), as lua/hold-list.lua and lua/reset.lua.

  listHoldsSync(req: ListHoldsRequest): ListHoldsResult {
    const max = checkListHolds(req);
    const t = this.time(req.now);
    const set = (isOutboundTag(req.tag) ? this.carrierHolds : this.bucketHolds).get(req.name);
    return { holds: set?.listAfter(t, max) ?? [], total: set?.count(t) ?? 0, now: t };
  }
  listHolds(req: ListHoldsRequest): Promise<ListHoldsResult> {
    return settle(() => this.listHoldsSync(req));
  }

  resetSync(req: ResetRequest): ResetResult {
    checkReset(req);
    const t = this.time(req.now);
    const { name } = req.bucket;
    const events = this.logs.get(name)?.size ?? 0;
    this.logs.delete(name);
    let windows = 0;
    for (const w of counterWindows(req.bucket)) if (this.windows.delete(`${name}\u0000${w}`)) windows++;
    const set = this.bucketHolds.get(name);
    let holds: ListedHold[] = [];
    if (set !== undefined) {
      holds = set.listAfter(t, Infinity);
      // the calls' records stop naming the set (a refresh must not bring the hold back)
      for (const id of set.byId.keys()) {
        const rec = this.inCalls.get(id);
        if (rec !== undefined) this.inCalls.set(id, { end: rec.end, sets: rec.sets.filter((s) => s !== set) });
      }
      this.bucketHolds.delete(name);
    }
    return { events, windows, holds, now: t };
  }
  reset(req: ResetRequest): Promise<ResetResult> {
    return settle(() => this.resetSync(req));
  }

  reassertSync(req: ReassertRequest): ReassertResult {
    checkReassert(req);
    const t = this.time(req.now);
    const holds: MemoryHolds = {
      record: (d, id) => (d === 'in' ? this.inCalls : this.outCalls).get(id),
      setRecord: (d, id, end, sets) =>
        (d === 'in' ? this.inCalls : this.outCalls).set(id, { end, sets: sets as HoldSet[] }),
      set: (d, name) => this.holdSet(d === 'in' ? this.bucketHolds : this.carrierHolds, name),
    };
    return reassertMemory(holds, this.markers, req, t);
  }
  reassert(req: ReassertRequest): Promise<ReassertResult> {
    return settle(() => this.reassertSync(req));
  }

  /**
   * Every hold, and the records of calls that held one, dropped; the logs kept: policy
   * `local`'s stand-in starts each outage from the ledger (src/admission/admission.ts,
   * seedLocal), not from calls that ended elsewhere since, while the calls it let in stay
   * counted in their windows.
   */
  dropHolds(): void {
    this.bucketHolds.clear();
    this.carrierHolds.clear();
    // a record that holds nothing stays: it still tells a repeated admission of its call
    for (const calls of [this.inCalls, this.outCalls])
      for (const [id, record] of calls) if (record.sets.length > 0) calls.delete(id);
  }

  async clear(): Promise<void> {
    this.markers.clear();
    this.logs.clear();
    this.windows.clear();
    this.slots.clear();
    this.bucketHolds.clear();
    this.carrierHolds.clear();
    this.inCalls.clear();
    this.outCalls.clear();
    this.banEnds.clear();
    this.strikes.clear();
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
