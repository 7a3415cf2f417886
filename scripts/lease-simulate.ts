/**
 * A leased level on a simulated clock (src/lease/, not wired yet, see share.ts): N lanes, each
 * with its own sliding log and channels checked against its share, a coordinator ticking every
 * T with messages that take time to reach the lanes, and beside it the unleased reference (one
 * sliding log and one channel count over all lanes) deciding the same arrivals in the same
 * order. Used by test/lease-*.test.ts to check the invariant at every admission and by
 * bench/lease-sim.ts for false refusals and convergence. A tool of the tests and the bench, not
 * of the library: it lives beside the fixtures' generator, whose seeded PRNG it uses.
 *
 * Time is in µs. A lane admits a call when its count in (t - W, t] is below its calls share
 * and its channels in use are below its channel share; it then holds a channel until the call
 * ends. Messages to one lane arrive in the order sent (one connection per shard), each after a
 * random delay up to `latencyUs`.
 */
import { prng } from './make-fixtures.js';
import type { DemandParams } from '../src/lease/demand.js';
import { type Resource, reclaim, reclaimTimes } from '../src/lease/lost.js';
import { type Budget, ZERO, applyShrink } from '../src/lease/share.js';
import {
  type GrantOrder,
  type LaneObservation,
  type LeaseState,
  type ShrinkResult,
  checkLease,
  initialLease,
  planStep,
  settle,
} from '../src/lease/step.js';

export interface Arrival {
  readonly t: number;
  readonly lane: number;
  /** How long the call holds its channel, µs. */
  readonly holdUs: number;
}

/**
 * `correct`: shrink, wait for every lane's result, then grant from the pool.
 * The others are deliberately wrong, so that the tests can show the check failing:
 * `grant-before-shrink` sends the planned grants with the shrinks, counting on capacity the
 * lanes have not yet given up; `shrink-below-use` lets a lane's share fall under what its
 * window already holds; `reclaim-at-loss` puts a lost lane's share back in the pool as soon as
 * the lane is lost, not once its lease and its calls have run out (src/lease/lost.ts).
 */
export type Protocol = 'correct' | 'grant-before-shrink' | 'shrink-below-use' | 'reclaim-at-loss';

/** A lane cut off: messages to and from it sent in [fromUs, toUs) are lost, and it cannot be read. */
export interface Partition {
  readonly lane: number;
  readonly fromUs: number;
  readonly toUs: number;
}

export interface SimOptions {
  /** Lanes report the calls leaving their window before the next tick (default true). */
  readonly leaving?: boolean;
  readonly lanes: number;
  readonly limit: Budget;
  readonly windowUs: number;
  readonly tickUs: number;
  readonly latencyUs: number;
  readonly params: DemandParams;
  readonly protocol?: Protocol;
  readonly seed?: number;
  /** Shares after each tick are kept (for convergence) when true. */
  readonly trace?: boolean;
  /** Every admission is kept (for a check of the invariant outside this module) when true. */
  readonly record?: boolean;
  /**
   * Leases (src/lease/lost.ts): a lane admits only before the lease end last sent to it, and
   * the coordinator renews the live lanes at every tick. Default: none (shares never lapse).
   */
  readonly leaseUs?: number;
  /** How long the coordinator waits for shrink results before it calls the silent lanes lost (default: forever). */
  readonly replyTimeoutUs?: number;
  readonly partitions?: readonly Partition[];
  /** The longest a call holds its channel, in the lanes and the reference alike (maxCallDuration). Default: no bound. */
  readonly maxHoldUs?: number;
  /**
   * An overflow lane (RedisStore's lease.overflow), the last lane: a call its lane refused for
   * lack of calls share counts on it instead, when it has share, and then takes its channel on
   * its own lane; one it refused leaves it unasked until its window frees a call, 50 ms at most.
   * Decided at once (live, two more round trips). Default false.
   */
  readonly overflow?: boolean;
  /**
   * How long the overflow lane is left unasked after it refused, at most (RedisStore's
   * OVERFLOW_PAUSE_MS), µs. Default 50,000.
   */
  readonly overflowPauseUs?: number;
}

/** Why the leased level refused the calls the reference admitted (SimResult.falseByCause). */
export interface FalseRefusalCauses {
  /** Its lane lacked calls share (no overflow lane). */
  calls: number;
  /** Its lane lacked calls share, and the overflow lane was not asked: paused after a refusal. */
  overflowPaused: number;
  /** Its lane lacked calls share, and the overflow lane refused too. */
  overflowFull: number;
  /** Its lane lacked channels share (or the call reached it past its lease). */
  channels: number;
}

export interface SimResult {
  offered: number;
  admitted: number;
  refusedCalls: number;
  refusedChannels: number;
  referenceAdmitted: number;
  /** Refused by the leased level, admitted by the reference. */
  falseRefusals: number;
  /** The false refusals by cause. */
  falseByCause: FalseRefusalCauses;
  /** Admitted by the leased level, refused by the reference (never over the limit: see maxInWindow). */
  extraAdmissions: number;
  /** Refused by a lane while the leased level's own total had room (calls and channels). */
  roomRefusals: number;
  /** The most calls the lanes together had admitted in any (t - W, t], checked at every admission. */
  maxInWindow: number;
  /** The most channels the lanes together held at once. */
  maxChannels: number;
  /** Admissions after which the lanes together were over a limit. */
  violations: number;
  ticks: number;
  /** Calls counted on the overflow lane (admitted, or then refused by their lane's channels). */
  spilled: number;
  /** Ticks skipped because the previous one still waited for shrink results. */
  skippedTicks: number;
  /** When `trace`: tick times and the calls shares after each. */
  shareTrace: { t: number; shares: number[] }[];
  /** When `record`: the false refusals, each with its time and lane. */
  falseRefusalList: { t: number; lane: number }[];
  /** When `record`: the leased level's admissions, in order, with their channel's end. */
  admissions: { t: number; lane: number; end: number }[];
  /** Lanes the coordinator called lost: when, and the last lease end it had sent them. */
  lost: { lane: number; t: number; leaseEnd: number }[];
  /** A lost lane's share of one resource back in the pool. */
  reclaims: { lane: number; resource: Resource; t: number }[];
  /** Lost lanes taken back once reclaimed and reachable. */
  restored: { lane: number; t: number }[];
  state: LeaseState;
}

/** A sorted log of times with a moving head: counts in (t - W, t]. */
class Log {
  private times: number[] = [];
  private head = 0;
  add(t: number): void {
    this.times.push(t);
  }
  count(t: number, w: number): number {
    const times = this.times;
    while (this.head < times.length && times[this.head]! <= t - w) this.head++;
    if (this.head > 4096 && this.head * 2 > times.length) {
      this.times = times.slice(this.head);
      this.head = 0;
    }
    return this.times.length - this.head;
  }
  /** How long until fewer than `limit` times are in (t - w, t]: 0 if already, w if limit is 0. */
  wait(t: number, w: number, limit: number): number {
    const n = this.count(t, w);
    if (n < limit) return 0;
    return limit <= 0 ? w : this.times[this.head + n - limit]! + w - t;
  }
  /** Times after `t0`, without forgetting any. */
  after(t0: number): number {
    let lo = this.head;
    let hi = this.times.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (this.times[mid]! <= t0) lo = mid + 1;
      else hi = mid;
    }
    return this.times.length - lo;
  }
}

/** A binary min-heap under `less`: the simulator's event queue and channel end times. */
class MinHeap<T> {
  private readonly h: T[] = [];
  constructor(private readonly less: (a: T, b: T) => boolean) {}
  get size(): number {
    return this.h.length;
  }
  peek(): T | undefined {
    return this.h[0];
  }
  push(x: T): void {
    const h = this.h;
    h.push(x);
    let i = h.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!this.less(h[i]!, h[p]!)) break;
      [h[p], h[i]] = [h[i]!, h[p]!];
      i = p;
    }
  }
  pop(): T {
    const h = this.h;
    const top = h[0]!;
    const last = h.pop()!;
    if (h.length > 0) {
      h[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < h.length && this.less(h[l]!, h[m]!)) m = l;
        if (r < h.length && this.less(h[r]!, h[m]!)) m = r;
        if (m === i) break;
        [h[m], h[i]] = [h[i]!, h[m]!];
        i = m;
      }
    }
    return top;
  }
}

/** Channel end times: in use at t = ends after t. */
class Holds {
  private readonly ends = new MinHeap<number>((a, b) => a < b);
  add(end: number): void {
    this.ends.push(end);
  }
  inUse(t: number): number {
    while (this.ends.size > 0 && this.ends.peek()! <= t) this.ends.pop();
    return this.ends.size;
  }
}

interface Lane {
  share: Budget;
  log: Log;
  holds: Holds;
  refusedCalls: number;
  refusedChannels: number;
  admittedSinceTick: number;
  /** Channels in use at the last tick (releases since = that + admitted since - in use now). */
  lastInUse: number;
  /** When the last message to this lane arrives (FIFO per lane). */
  lastDelivery: number;
  /** The lane admits on the level only before this time (Infinity without leases). */
  leaseEnd: number;
  /** The newest epoch it has heard of: older messages are ignored, a newer one resets its share. */
  epoch: number;
}

interface Event {
  t: number;
  seq: number;
  run: () => void;
}

/** Events in time order; equal times in the order pushed. */
class Queue {
  private seq = 0;
  private readonly heap = new MinHeap<Event>((a, b) => a.t < b.t || (a.t === b.t && a.seq < b.seq));
  get size(): number {
    return this.heap.size;
  }
  peek(): Event | undefined {
    return this.heap.peek();
  }
  push(t: number, run: () => void): void {
    this.heap.push({ t, seq: this.seq++, run });
  }
  pop(): Event {
    return this.heap.pop();
  }
}

export function simulate(arrivals: readonly Arrival[], o: SimOptions): SimResult {
  const protocol = o.protocol ?? 'correct';
  const leaving = o.leaving ?? true;
  const rand = prng(o.seed ?? 1);
  const W = o.windowUs;
  // the overflow lane, when there is one: the last, after the lanes the arrivals name
  const overflow = o.overflow === true ? o.lanes : undefined;
  let overflowPausedUntil = Number.NEGATIVE_INFINITY;
  const overflowPauseUs = o.overflowPauseUs ?? 50_000;
  let state = initialLease(o.limit, o.lanes + (overflow === undefined ? 0 : 1), o.params);
  const lanes: Lane[] = state.shares.map((share) => ({
    share,
    log: new Log(),
    holds: new Holds(),
    refusedCalls: 0,
    refusedChannels: 0,
    admittedSinceTick: 0,
    lastInUse: 0,
    lastDelivery: 0,
    leaseEnd: Number.POSITIVE_INFINITY,
    epoch: 0,
  }));
  // the coordinator's side of each lane: lost or not, its epoch, the last lease end sent to it,
  // what of its share went back to the pool while it was lost
  const leased = o.leaseUs !== undefined;
  const maxHoldUs = o.maxHoldUs ?? Number.POSITIVE_INFINITY;
  const lost = lanes.map(() => false);
  const epochs = lanes.map(() => 0);
  const leaseEnds = lanes.map(() => Number.POSITIVE_INFINITY);
  const reclaimed = lanes.map(() => ({ calls: false, channels: false }));
  const cut = (lane: number, t: number): boolean =>
    o.partitions?.some((p) => p.lane === lane && t >= p.fromUs && t < p.toUs) ?? false;
  const all = new Log();
  const allHolds = new Holds();
  const ref = new Log();
  const refHolds = new Holds();
  const q = new Queue();
  const r: SimResult = {
    offered: 0,
    admitted: 0,
    refusedCalls: 0,
    refusedChannels: 0,
    referenceAdmitted: 0,
    falseRefusals: 0,
    falseByCause: { calls: 0, overflowPaused: 0, overflowFull: 0, channels: 0 },
    extraAdmissions: 0,
    roomRefusals: 0,
    maxInWindow: 0,
    maxChannels: 0,
    violations: 0,
    ticks: 0,
    spilled: 0,
    skippedTicks: 0,
    shareTrace: [],
    admissions: [],
    falseRefusalList: [],
    lost: [],
    reclaims: [],
    restored: [],
    state,
  };

  // Every message carries the lane's epoch and lease end as the coordinator had them when it
  // sent it; one sent while the lane is cut off is lost.
  const send = (now: number, lane: number, run: () => void): void => {
    if (cut(lane, now)) return;
    const l = lanes[lane]!;
    const epoch = epochs[lane]!;
    const leaseEnd = leaseEnds[lane]!;
    const at = Math.max(now + Math.floor(rand() * (o.latencyUs + 1)), l.lastDelivery);
    l.lastDelivery = at;
    q.push(at, () => {
      if (epoch < l.epoch) return; // sent before the lane was lost: its share was reclaimed
      if (epoch > l.epoch) {
        l.epoch = epoch;
        l.share = ZERO; // the first word of a new epoch: what it held went back to the pool
      }
      if (leased) l.leaseEnd = leaseEnd;
      run();
    });
  };
  const back = (now: number): number => now + Math.floor(rand() * (o.latencyUs + 1));

  const grant = (now: number, g: GrantOrder): void =>
    send(now, g.lane, () => {
      const l = lanes[g.lane]!;
      l.share = { calls: l.share.calls + g.amount.calls, channels: l.share.channels + g.amount.channels };
    });

  const giveBack = (lane: number, resource: Resource, at: number): void => {
    state = reclaim(state, lane, resource);
    checkLease(state);
    reclaimed[lane]![resource] = true;
    r.reclaims.push({ lane, resource, t: at });
  };
  const loseLane = (lane: number, now: number): void => {
    lost[lane] = true;
    epochs[lane]!++;
    r.lost.push({ lane, t: now, leaseEnd: leaseEnds[lane]! });
    const times = reclaimTimes(leaseEnds[lane]!, W, maxHoldUs);
    for (const resource of ['calls', 'channels'] as const) {
      const at = o.protocol === 'reclaim-at-loss' ? now : times[resource];
      if (at === now) giveBack(lane, resource, now);
      else if (Number.isFinite(at)) q.push(at, () => giveBack(lane, resource, at));
    }
  };
  // Per tick, before anything else: lanes that cannot be read are lost, lost lanes reclaimed
  // and reachable again are taken back, and the live lanes' leases renewed.
  const leases = (now: number): void => {
    lanes.forEach((_, i) => {
      if (!lost[i] && cut(i, now)) loseLane(i, now);
      else if (lost[i] && reclaimed[i]!.calls && reclaimed[i]!.channels && !cut(i, now)) {
        lost[i] = false;
        reclaimed[i] = { calls: false, channels: false };
        r.restored.push({ lane: i, t: now });
      }
    });
    lanes.forEach((_, i) => {
      if (lost[i]) return;
      leaseEnds[i] = now + o.leaseUs!;
      send(now, i, () => undefined);
    });
  };

  let busy = false;
  let tickId = 0;
  const tick = (now: number): void => {
    if (leased) leases(now);
    if (busy) {
      // the previous tick still waits for shrink results (latency near T): skip this one
      r.skippedTicks++;
      return;
    }
    r.ticks++;
    const id = ++tickId;
    const obs: LaneObservation[] = lanes.map((l, i) => {
      if (lost[i])
        return { admittedInWindow: 0, channelsInUse: 0, refusedCalls: 0, refusedChannels: 0, admittedSinceTick: 0 };
      const inUse = l.holds.inUse(now);
      const ob = {
        admittedInWindow: l.log.count(now, W),
        leavingBeforeNextTick: leaving ? l.log.count(now, W) - l.log.after(now - W + o.tickUs) : undefined,
        channelsInUse: inUse,
        refusedCalls: l.refusedCalls,
        refusedChannels: l.refusedChannels,
        admittedSinceTick: l.admittedSinceTick,
        releasedSinceTick: l.lastInUse + l.admittedSinceTick - inUse,
        channelless: i === overflow,
      };
      l.lastInUse = inUse;
      l.refusedCalls = 0;
      l.refusedChannels = 0;
      l.admittedSinceTick = 0;
      return ob;
    });
    const plan = planStep(state, obs, o.params, lost);
    state = plan.state;
    const finish = (at: number, results: ShrinkResult[]): void => {
      // lanes lost since the plan get nothing
      const s = settle(
        state,
        results,
        plan.grants.filter((g) => !lost[g.lane]),
      );
      state = s.state;
      checkLease(state);
      for (const g of s.grants) grant(at, g);
      if (o.trace) r.shareTrace.push({ t: at, shares: state.shares.map((b) => b.calls) });
      busy = false;
    };
    if (protocol === 'grant-before-shrink') {
      // wrong: the coordinator counts on the predicted shrinks and grants at once
      const predicted: ShrinkResult[] = plan.shrinks.map((s) => {
        const sh = state.shares[s.lane]!;
        const o2 = obs[s.lane]!;
        const c = applyShrink(sh.calls, s.target.calls, o2.admittedInWindow);
        const h = applyShrink(sh.channels, s.target.channels, o2.channelsInUse);
        return {
          lane: s.lane,
          share: { calls: c.share, channels: h.share },
          freed: { calls: c.freed, channels: h.freed },
        };
      });
      const s = settle(state, predicted, plan.grants);
      state = s.state;
      for (const g of s.grants) grant(now, g);
      if (o.trace) r.shareTrace.push({ t: now, shares: state.shares.map((b) => b.calls) });
    }
    busy = true;
    const results: ShrinkResult[] = [];
    let pending = plan.shrinks.length;
    let last = now;
    if (pending === 0) {
      if (protocol === 'grant-before-shrink') busy = false;
      else finish(now, results);
      return;
    }
    const replied = new Set<number>();
    if (o.replyTimeoutUs !== undefined)
      q.push(now + o.replyTimeoutUs, () => {
        if (id !== tickId || pending === 0) return;
        // the silent lanes are lost; the others' results settle now
        for (const sh of plan.shrinks) if (!replied.has(sh.lane) && !lost[sh.lane]) loseLane(sh.lane, current);
        pending = 0;
        finish(current, results);
      });
    for (const s of plan.shrinks) {
      send(now, s.lane, () => {
        const at = current;
        const l = lanes[s.lane]!;
        const used = { calls: l.log.count(at, W), channels: l.holds.inUse(at) };
        const below = protocol === 'shrink-below-use';
        const c = applyShrink(l.share.calls, s.target.calls, below ? 0 : used.calls);
        const h = applyShrink(l.share.channels, s.target.channels, below ? 0 : used.channels);
        const res = {
          lane: s.lane,
          share: { calls: c.share, channels: h.share },
          freed: { calls: c.freed, channels: h.freed },
        };
        l.share = res.share;
        const arrive = back(at);
        if (cut(s.lane, at)) return; // the result is lost on the way
        q.push(arrive, () => {
          if (id !== tickId || pending === 0) return; // too late: the tick settled without it
          // a lane lost meanwhile keeps, for the coordinator, the share it had (at least its own)
          if (!lost[s.lane]) {
            replied.add(s.lane);
            results.push(res);
          }
          last = Math.max(last, arrive);
          if (--pending === 0) {
            if (protocol === 'grant-before-shrink') busy = false;
            else finish(last, results);
          }
        });
      });
    }
  };

  let current = 0;
  const t0 = arrivals.length > 0 ? arrivals[0]!.t : 0;
  const end = arrivals.length > 0 ? arrivals[arrivals.length - 1]!.t : 0;
  for (let t = t0 + o.tickUs; t <= end; t += o.tickUs) {
    const at = t;
    q.push(at, () => tick(at));
  }

  const limit = o.limit;
  for (const a of arrivals) {
    while (q.size > 0 && q.peek()!.t <= a.t) {
      const e = q.pop();
      current = e.t;
      e.run();
    }
    current = a.t;
    r.offered++;
    const hold = Math.min(a.holdUs, maxHoldUs);
    // the unleased reference
    const refOk = ref.count(a.t, W) < limit.calls && refHolds.inUse(a.t) < limit.channels;
    if (refOk) {
      ref.add(a.t);
      refHolds.add(a.t + hold);
      r.referenceAdmitted++;
    }
    // the leased level: the lane alone decides
    const l = lanes[a.lane]!;
    const inWindow = l.log.count(a.t, W);
    const inUse = l.holds.inUse(a.t);
    let ok = true;
    let spilled = false;
    let cause: keyof FalseRefusalCauses = 'calls';
    if (inWindow >= l.share.calls || a.t >= l.leaseEnd) {
      l.refusedCalls++;
      // refused by the level (for lack of share, or past its lease: its share is then 0): the
      // level on the overflow lane, unless it refused just now
      if (overflow !== undefined && a.t >= overflowPausedUntil) {
        const f = lanes[overflow]!;
        if (f.log.count(a.t, W) < f.share.calls && a.t < f.leaseEnd) {
          f.log.add(a.t);
          f.admittedSinceTick++;
          spilled = true;
          r.spilled++;
        } else {
          f.refusedCalls++;
          cause = 'overflowFull';
          overflowPausedUntil =
            a.t + Math.min(overflowPauseUs, a.t < f.leaseEnd ? f.log.wait(a.t, W, f.share.calls) : W);
        }
      } else if (overflow !== undefined) cause = 'overflowPaused';
      if (!spilled) {
        ok = false;
        r.refusedCalls++;
      }
    }
    // its channel on its lane: none past the lane's lease (a spilled call's third step)
    if (ok && (inUse >= l.share.channels || a.t >= l.leaseEnd)) {
      ok = false;
      cause = 'channels';
      l.refusedChannels++;
      r.refusedChannels++;
    }
    const total = all.count(a.t, W);
    const totalInUse = allHolds.inUse(a.t);
    if (ok) {
      if (!spilled) {
        l.log.add(a.t);
        l.admittedSinceTick++;
      }
      l.holds.add(a.t + hold);
      all.add(a.t);
      allHolds.add(a.t + hold);
      r.admitted++;
      if (o.record) r.admissions.push({ t: a.t, lane: a.lane, end: a.t + hold });
      // exact: the lanes' total in (t - W, t] only grows at an admission
      if (total + 1 > r.maxInWindow) r.maxInWindow = total + 1;
      if (totalInUse + 1 > r.maxChannels) r.maxChannels = totalInUse + 1;
      if (total + 1 > limit.calls || totalInUse + 1 > limit.channels) r.violations++;
      if (!refOk) r.extraAdmissions++;
    } else {
      if (refOk) {
        r.falseRefusals++;
        r.falseByCause[cause]++;
        if (o.record) r.falseRefusalList.push({ t: a.t, lane: a.lane });
      }
      if (total < limit.calls && totalInUse < limit.channels) r.roomRefusals++;
    }
  }
  r.state = state;
  return r;
}
