/**
 * A leased deployment on a replay's virtual clock (docs/leasing.md, "What leasing would have
 * refused"): a MemoryStore whose global level is split into lanes as a RedisStore with
 * `lease: { lanes }` splits it, each lane deciding against its share, and the coordinator's rule
 * (step.ts, the live LeaseCoordinator's) run every tick of the calls' own time. Only a replay
 * asked for it uses this store; the MemoryStore itself stays exact per the unleased contract.
 *
 * What it models and what it does not: every bucket of a call on its lane (a peer whose calls
 * name different accounts counts on each of their lanes apart, as live); ticks every `tickMs` of
 * the trace's time from the first call on the global level (the first before that call), run
 * before any operation at or after their time, each lane observed and ordered at the tick's
 * instant (no message delay: the live coordinator's orders take a round trip), every lane
 * always answering (no lost lanes, no leader change). A call decided at a tick's time comes
 * after the tick. So the refusals it adds are those the rule itself makes, with a coordinator
 * that is never late. A call id repeated while its first call holds is a repeat here on any
 * lane; live, its record is on its lane, so one repeated with another account is decided again.
 */
import { InvalidArgumentError } from '../errors/index.js';
import { GLOBAL_BUCKET } from '../store/keys.js';
import { MemoryStore } from '../store/memory-store.js';
import { checkNow } from '../store/validate.js';
import type { AdmitRequest, AdmitResult, Bucket, RecordRequest, RecordResult } from '../store/types.js';
import { type DemandParams, demandParams } from './demand.js';
import { type LanePins, type LanePlan, laneOf, lanePlan, onOwnBuckets, spillParts, type SpillParts } from './lanes.js';
import { add, applyShrink, type Budget } from './share.js';
import {
  checkLease,
  initialLease,
  type LaneObservation,
  type LeaseState,
  planStep,
  type ShrinkResult,
  settle,
} from './step.js';

export interface LeasedMemoryStoreOptions {
  /** Lanes of the global level, as RedisStore's `lease.lanes`. */
  readonly lanes: number;
  /** Owners placed on lanes, as RedisStore's `lease.pin`. */
  readonly pin?: LanePins;
  /** An overflow lane, as RedisStore's `lease.overflow` (its pause after a refusal included). */
  readonly overflow?: boolean;
  /** The leased level: calls per window, its window (µs), its channel limit (0: none). */
  readonly limit: { readonly calls: number; readonly windowUs: number; readonly channels: number };
  /** The coordinator's tick, default 50 ms (LeaseCoordinatorOptions.tickMs). */
  readonly tickMs?: number;
  readonly params?: Partial<DemandParams>;
  /**
   * Skip the ticks of an idle stretch once a tick changed nothing (default true): each would
   * change nothing either, so the decisions are the same, without ticking through hours of a
   * trace's idle time (false: every tick runs, for the tests that prove it).
   */
  readonly skipIdle?: boolean;
  /** The MemoryStore's sweep (MemoryStoreOptions.sweep), default true. */
  readonly sweep?: boolean;
}

/** What one lane counts between ticks (the live lane's share hash: rc, rh, and its log since `o`). */
interface LaneCounts {
  admitted: number;
  refusedCalls: number;
  refusedChannels: number;
  lastInUse: number;
}

/**
 * Per bucket list: its lane, and the list with the global bucket renamed to the lane's part;
 * with an overflow lane, the list's parts there and on its lane after a spill
 * (RedisStore.overflowParts).
 */
interface OnLane {
  readonly lane: number;
  readonly buckets: readonly Bucket[];
  readonly spill?: SpillParts;
}

/** How long the overflow lane is not asked after it refused, at most (RedisStore's OVERFLOW_PAUSE_MS), µs. */
const OVERFLOW_PAUSE_US = 50_000;

/**
 * Only for replays: its buckets carry lane names (`lane:<k>:<name>`), so operations that read a
 * bucket by its configured name (count, holds, inspect, reset) do not find them here.
 */
export class LeasedMemoryStore extends MemoryStore {
  readonly lanes: number;
  /** Where owners go (lanes, pins). */
  readonly plan: LanePlan;
  /** The overflow lane's index (the last), when there is one. */
  private readonly overflowLane: number | undefined;
  /** The trace time until which the overflow lane is not asked. */
  private overflowPausedUntil = Number.NEGATIVE_INFINITY;
  /** Calls admitted on the overflow lane after their lane refused them. */
  spilled = 0;
  private readonly windowUs: number;
  private readonly tickUs: number;
  private readonly params: DemandParams;
  private state: LeaseState;
  /** Each lane's share as the lane holds it (the coordinator's state agrees after every tick). */
  private readonly shares: Budget[];
  private readonly counts: LaneCounts[];
  private readonly onLane = new WeakMap<readonly Bucket[], OnLane>();
  /** The next tick's time (µs); undefined before the first call. */
  private nextTick: number | undefined;
  /** Calls the lanes refused for lack of share (the level as a whole may still have had room). */
  readonly refusedForShare = { calls: 0, channels: 0 };
  /** Ticks so far, run or skipped. */
  ticks = 0;
  private readonly skipIdle: boolean;
  /** The last tick changed nothing and no call came since: the next ones would change nothing. */
  private still = false;

  constructor(opts: LeasedMemoryStoreOptions) {
    super({ sweep: opts.sweep ?? true });
    this.plan = lanePlan(opts.lanes, opts.pin);
    this.lanes = this.plan.lanes;
    const { calls, windowUs, channels } = opts.limit;
    if (!(Number.isSafeInteger(calls) && calls > 0 && Number.isSafeInteger(windowUs) && windowUs > 0))
      throw new InvalidArgumentError('a leased level needs a positive integer limit and window');
    const tickMs = opts.tickMs ?? 50;
    if (!(Number.isFinite(tickMs) && tickMs > 0))
      throw new InvalidArgumentError(`tickMs must be a positive number, got ${String(tickMs)}`);
    this.skipIdle = opts.skipIdle ?? true;
    this.windowUs = windowUs;
    this.tickUs = Math.round(tickMs * 1000);
    this.params = demandParams(windowUs, tickMs, opts.params);
    this.overflowLane = opts.overflow === true ? this.lanes : undefined;
    this.state = initialLease({ calls, channels }, this.lanes + (opts.overflow === true ? 1 : 0), this.params);
    this.shares = this.state.shares.map((s) => ({ ...s }));
    this.counts = this.shares.map(() => ({ admitted: 0, refusedCalls: 0, refusedChannels: 0, lastInUse: 0 }));
  }

  /** Empty the store, and start the lease afresh (evenly split, no tick yet). */
  override async clear(): Promise<void> {
    await super.clear();
    this.state = initialLease(this.state.limit, this.shares.length, this.params);
    this.state.shares.forEach((s, k) => {
      this.shares[k] = { ...s };
      this.counts[k] = { admitted: 0, refusedCalls: 0, refusedChannels: 0, lastInUse: 0 };
    });
    this.nextTick = undefined;
    this.still = false;
    this.refusedForShare.calls = this.refusedForShare.channels = 0;
    this.ticks = 0;
    this.spilled = 0;
    this.overflowPausedUntil = Number.NEGATIVE_INFINITY;
  }

  /**
   * Bucket `name` on lane `k` (default: the global level's part there). Every bucket of a call is
   * on its lane, as every key of a leased call is on its lane's tag: a peer whose calls name
   * different accounts has a log on each of their lanes, each counting alone, as live.
   */
  static laneBucket(k: number, name: string = GLOBAL_BUCKET): string {
    return `lane:${k}:${name}`;
  }

  /** What the replay's report says of the lease (JSON field `lease`). */
  get summary(): {
    lanes: number;
    tick_ms: number;
    ticks: number;
    refused_for_share: { calls: number; channels: number };
    overflow?: { spilled: number };
  } {
    return {
      lanes: this.lanes,
      tick_ms: this.tickUs / 1000,
      ticks: this.ticks,
      refused_for_share: { ...this.refusedForShare },
      ...(this.overflowLane !== undefined && { overflow: { spilled: this.spilled } }),
    };
  }

  /** The shares the lanes hold now (calls, channels), for reports and tests. */
  get laneShares(): readonly Budget[] {
    return this.shares.map((s) => ({ ...s }));
  }

  /** Every operation with a time first runs the ticks up to it (once the first call started them). */
  protected override time(now: number | undefined): number {
    if (now !== undefined && this.nextTick !== undefined) this.ticksUntil(now);
    return super.time(now);
  }

  override admitSync(req: AdmitRequest): AdmitResult {
    const on = this.laneOf(req.buckets);
    if (on === undefined) return super.admitSync(req);
    const t = this.ticksUntil(req.now);
    const r = this.onShare(on.lane, { ...req, buckets: on.buckets, now: t });
    this.still = false;
    if (r.alone !== true || on.spill === undefined) return this.counted(r);
    // the lane lacked calls share: the global level on the overflow lane, then the call on its lane without it
    if (t < this.overflowPausedUntil) return this.counted(r);
    const spilled = this.onShare(this.overflowLane!, { tag: req.tag, buckets: on.spill.overflow, now: t });
    if (!spilled.admitted) {
      this.overflowPausedUntil = t + Math.min(OVERFLOW_PAUSE_US, spilled.retryAfterUs);
      return this.counted(r);
    }
    this.spilled++;
    if (on.spill.lane.length === 0) return { ...this.counted(spilled), spilledAt: t };
    const global = on.spill.lane[0]!.name === on.buckets[0]!.name;
    const again = this.counted(this.onShare(on.lane, { ...req, buckets: on.spill.lane, now: t }, global));
    if (again.admitted) return again.duplicate ? again : { ...again, spilledAt: t };
    return onOwnBuckets(on.spill, on.buckets, again);
  }

  /**
   * A decision on lane `k` against its share (the first bucket, when `leased`: the level's part
   * there), counted on the lane as its share hash counts it live (admitted, refused for share).
   */
  private onShare(
    k: number,
    req: AdmitRequest,
    leased = true,
  ): AdmitResult & { share?: 'calls' | 'channels'; alone?: boolean } {
    const share: { calls: number; channels: number; refused?: 'calls' | 'channels'; alone?: boolean } = {
      ...this.shares[k]!,
    };
    const r = this.admitCapped(req, leased ? share : undefined);
    if (r.duplicate) return r;
    const c = this.counts[k]!;
    if (r.admitted) {
      if (leased && req.buckets[0]!.limits.length > 0) c.admitted++;
    } else if (share.refused === 'calls') c.refusedCalls++;
    else if (share.refused === 'channels') c.refusedChannels++;
    return share.refused === undefined ? r : { ...r, share: share.refused, ...(share.alone && { alone: true }) };
  }

  /** The call's final decision, counted in the summary when its lane's share refused it. */
  private counted(r: AdmitResult & { share?: 'calls' | 'channels'; alone?: boolean }): AdmitResult {
    if (r.share === undefined) return r;
    this.refusedForShare[r.share]++;
    const { share: _, alone: __, ...rest } = r;
    return rest;
  }

  override recordSync(req: RecordRequest): RecordResult {
    const on = this.laneOf(req.buckets);
    if (on === undefined) return super.recordSync(req);
    const t = this.ticksUntil(req.now);
    const r = super.recordSync({ ...req, buckets: on.buckets, now: t });
    this.still = false;
    if (!r.duplicate) this.counts[on.lane]!.admitted++;
    return r;
  }

  /** The lane of a list naming the global level (undefined: the list does not name it). */
  private laneOf(buckets: readonly Bucket[]): OnLane | undefined {
    if (buckets[0]?.name !== GLOBAL_BUCKET) return undefined;
    let on = this.onLane.get(buckets);
    if (on === undefined) {
      const lane = laneOf(buckets, this.plan);
      const named = buckets.map((b) => ({ ...b, name: LeasedMemoryStore.laneBucket(lane, b.name) }));
      const k = this.overflowLane;
      on = {
        lane,
        buckets: named,
        ...(k !== undefined && { spill: spillParts(named, LeasedMemoryStore.laneBucket(k)) }),
      };
      this.onLane.set(buckets, on);
    }
    return on;
  }

  /** Run every tick up to time `now` (a replay's call time; required: the ticks follow it). */
  private ticksUntil(now: number | undefined): number {
    if (now === undefined)
      throw new InvalidArgumentError('a leased replay decides on the calls’ own time: now is required');
    checkNow(now); // before it moves the ticks
    this.nextTick ??= now;
    while (this.nextTick <= now) {
      if (this.still && this.skipIdle) {
        // every tick up to now would find what the last one found and leave it as it was
        const skipped = Math.floor((now - this.nextTick) / this.tickUs) + 1;
        this.ticks += skipped;
        this.nextTick += skipped * this.tickUs;
        break;
      }
      this.tick(this.nextTick);
      this.nextTick += this.tickUs;
    }
    return now;
  }

  /** One tick of the coordinator at `at`: observe every lane, shrink, then grant what was freed. */
  private tick(at: number): void {
    this.ticks++;
    const W = this.windowUs;
    const T = this.tickUs;
    const obs: LaneObservation[] = this.counts.map((c, k) => {
      // read as the lane's keys stand at `at`: no time moves and no sweep runs in a tick
      const bucket = LeasedMemoryStore.laneBucket(k);
      const { inWindow, inUse } = this.rawCounts(bucket, at, W);
      // the window's calls in (at - W, at - W + T] leave it before the next tick
      const staying = W > T ? this.rawCounts(bucket, at, W - T).inWindow : 0;
      const o: LaneObservation = {
        admittedInWindow: inWindow,
        leavingBeforeNextTick: inWindow - staying,
        channelsInUse: inUse,
        admittedSinceTick: c.admitted,
        refusedCalls: c.refusedCalls,
        refusedChannels: c.refusedChannels,
        releasedSinceTick: Math.max(0, c.lastInUse + c.admitted - inUse),
        channelless: k === this.overflowLane,
      };
      c.admitted = c.refusedCalls = c.refusedChannels = 0;
      c.lastInUse = inUse;
      return o;
    });
    const lost = obs.map(() => false);
    const plan = planStep(this.state, obs, this.params, lost);
    // each lane shrinks at once, never below what its calls use (lua/lease-shrink.lua)
    const results: ShrinkResult[] = plan.shrinks.map((s) => {
      const had = this.shares[s.lane]!;
      const o = obs[s.lane]!;
      const c = applyShrink(had.calls, s.target.calls, o.admittedInWindow);
      const h = applyShrink(had.channels, s.target.channels, o.channelsInUse);
      const share = { calls: c.share, channels: h.share };
      this.shares[s.lane] = share;
      return { lane: s.lane, share, freed: { calls: c.freed, channels: h.freed } };
    });
    const settled = settle(plan.state, results, plan.grants);
    checkLease(settled.state);
    const before = this.state;
    this.state = settled.state;
    for (const g of settled.grants) this.shares[g.lane] = add(this.shares[g.lane]!, g.amount);
    // nothing observed, nothing ordered, the demand estimates where they were: a fixed point
    this.still =
      results.length === 0 &&
      settled.grants.length === 0 &&
      obs.every(
        (o) =>
          o.admittedInWindow === 0 &&
          o.channelsInUse === 0 &&
          o.admittedSinceTick === 0 &&
          o.refusedCalls === 0 &&
          o.refusedChannels === 0 &&
          o.releasedSinceTick === 0,
      ) &&
      before.demand.every(
        (d, k) => d.calls === this.state.demand[k]!.calls && d.channels === this.state.demand[k]!.channels,
      );
  }
}
