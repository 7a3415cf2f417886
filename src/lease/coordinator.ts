/**
 * The coordinator of a leased global level (docs/leasing.md): every `tickMs` it reads each
 * lane's use (lua/lease-observe.lua), plans targets (step.ts), shrinks the lanes above theirs
 * (lua/lease-shrink.lua), and only with what those shrinks really freed, grants
 * (lua/lease-grant.lua). Every order renews the lane's lease; a lane it cannot reach is lost
 * (lost.ts): its share stays counted until it answers again after its lease ended (it then keeps
 * what its calls use), or, out of reach, until its calls have left the window and its holds
 * lapsed.
 *
 * Any number of processes may run one: the one holding `{lease:global}:leader` leads
 * (lua/lease-leader.lua), saves its state there before it sends a grant, and each new leader
 * has a higher term, which the lanes record, so a former leader's late orders are refused.
 * Decisions never wait for the coordinator: a lane admits on its share, in the admit script.
 */
import { randomBytes } from 'node:crypto';
import type { Cluster, Redis } from 'ioredis';
import { InvalidArgumentError } from '../errors/index.js';
import type { CallGate } from '../gate.js';
import { isCluster } from '../store/redis/connection.js';
import { slotOf } from '../store/redis/slot.js';
import { scripts, type ScriptName } from '../store/redis/scripts.js';
import { type DemandParams, demandParams } from './demand.js';
import { encodeId, carrierName } from '../store/keys.js';
import { RedisKeys, holdsKey, logKey, prefixProblem } from '../store/redis/redis-keys.js';
import { CARRIER_LEASE_WINDOW_US, leasedCarrier } from './carriers.js';
import { laneTag, checkLanes, leasedLevel, OVERFLOW_TAG } from './lanes.js';
import { reclaim, restore } from './lost.js';
import { reload } from './reload.js';
import { add, type Budget } from './share.js';
import {
  checkLease,
  initialLease,
  planStep,
  settle,
  type LaneObservation,
  type LeaseState,
  type ShrinkResult,
} from './step.js';

/** One Redis deployment's lanes (a Cluster, or one region's Redis), as its stores use them. */
export interface LeaseLanes {
  readonly redis: Redis | Cluster;
  /** The stores' `lease.lanes` there; none for a leased carrier (one lane per deployment). */
  readonly lanes?: number;
  /** The stores' key prefix there (default `callgate:`). */
  readonly prefix?: string;
  /** The stores' `hashTags` there, for a leased carrier's keys (default: as the stores', true on a Cluster). */
  readonly hashTags?: boolean;
  /**
   * Replicas that must have a shrink before what it freed is granted elsewhere (WAIT), default
   * 0. With replicas, set it (1): a master that fails over before replicating a shrink would
   * come back with the larger share, while the capacity it freed is in use elsewhere. WAIT
   * blocks its connection: `redis` must then be the coordinator's own client, not a store's.
   * A master with fewer replicas connected (after its failover) waits for those it has.
   */
  readonly waitReplicas?: number;
  /**
   * The deployment has an overflow lane (its stores' `lease.overflow`): one more lane, after
   * its `lanes`, on the tag OVERFLOW_TAG, whose share the calls its lanes refused for lack of
   * share draw on. The coordinator moves its share by its demand, as any lane's. Without it, the
   * coordinator still reads that lane (a predecessor may have granted it) and drains it.
   */
  readonly overflow?: boolean;
}

export interface LeaseCoordinatorOptions {
  /** Every deployment sharing the level; its state and leadership live on the first. */
  readonly deployments: readonly LeaseLanes[];
  /**
   * Lease this carrier (its id) across the deployments (docs/leasing.md, "Carriers across
   * regions"), each one lane: the stores' `leasedCarriers` there name it. Absent: the global level.
   */
  readonly carrier?: string;
  /**
   * The level's limit: for the global level its one sliding-log limit, for a carrier its CPS per
   * 1 s window (leasedCarrier()); and the channel limit (0 or absent: none).
   */
  readonly limit: { readonly calls: number; readonly windowUs: number; readonly channels?: number };
  /**
   * Default 50 ms. Shares follow demand one tick late: on a Cluster test at 90 % load over 8
   * lanes, 100 ms ticks refused 3.0–3.6 % of calls for lack of share, 50 ms ticks 2.2 %.
   */
  readonly tickMs?: number;
  /**
   * How long an order lets a lane admit on its share: default the leadership's lifetime plus
   * three reply timeouts (1.75 s), so that the lanes keep admitting through a slow tick and
   * while a successor takes over from a leader that died. A lost lane's calls share returns a
   * window after its lease end, its channels share when it answers again.
   */
  readonly leaseMs?: number;
  /**
   * How long the coordinator waits for a lane, default 250 ms. A lane that does not answer an
   * observation keeps its share for the tick, and is lost once its lease has run out; one that
   * does not answer an order (it may have applied it) is lost at once. 50 ms lost lanes of a
   * busy master on this machine, and each loss costs the lane its lease and a window.
   */
  readonly replyTimeoutMs?: number;
  /** Bound on how far a lane's clock may run ahead of the coordinator's estimate of it, default 50 ms. */
  readonly skewMs?: number;
  /** How long a leadership lasts without renewal, default 1 s. */
  readonly leaderTtlMs?: number;
  /**
   * After a lane's Redis lost its share (restarted empty), how long its channels share stays
   * held whatever the lane counts, while the routing processes write their holds back: at least
   * the stores' `holds.graceMs` (default 2 s) and their reconnect time. Default 5 s.
   */
  readonly holdsGraceMs?: number;
  readonly params?: Partial<DemandParams>;
  /**
   * This candidate's id (default: random). A random part is added to it: two candidates given
   * one id (a hostname) both took the leadership as their own, and both granted.
   */
  readonly id?: string;
}

/** What one tick did, for metrics and tests. */
export interface LeaseTickReport {
  readonly leader: boolean;
  readonly term: number;
  readonly state?: LeaseState;
  readonly lost: readonly number[];
}

interface Lane {
  readonly redis: Redis | Cluster;
  /** share hash, log, holds */
  readonly keys: readonly [string, string, string];
  readonly waitReplicas: number;
  /** The deployment's overflow lane: it holds no channels. */
  readonly overflow: boolean;
  /** An overflow lane its deployment does not use (LeaseLanes.overflow false): drained, never granted. */
  readonly retired: boolean;
  /** Its name in reports and metrics: its index among the coordinator's lanes, or `overflow` (`overflow:<d>` past the first deployment). */
  readonly name: string;
}

/** Per lane, what the leader knows beyond the shares. */
interface LaneView {
  epoch: number;
  /** The latest lease end sent (µs, the lane's clock). */
  leaseEnd: number;
  lost: boolean;
  /** Its calls share went back to the pool while it was out of reach (its channels never do). */
  callsReclaimed: boolean;
  /** The lane's clock at its last observation, and performance.now() when the reply came. */
  lastNow?: number;
  lastLocal?: number;
  /**
   * While its clock is unknown (not observed since this leader took over): performance.now()
   * by which its lease has surely ended. Every lease end it holds was sent after its clock read
   * at most `leaseUs` ahead, by a reading made before the takeover.
   */
  overBy?: number;
  lastInUse: number;
  /** performance.now() until which its channels share is held whatever a shrink says (emptied). */
  channelsHeldUntil?: number;
  /** Its share hash was seen emptied, and no order has landed since. */
  emptiedSeen?: boolean;
  /**
   * How long a share must last (µs), smoothed: from an observation to the landing of the next
   * tick's order, which brings the next share. performance.now() at the observation before the
   * last (prevLocal) and at the last order that landed (orderedLocal) measure it a tick late.
   */
  horizonUs?: number;
  prevLocal?: number;
  orderedLocal?: number;
  /**
   * From the last reading received: its mark (the calls admitted are counted after it) and the
   * lane's refusal counters (rc, rh), so that a reading whose reply was lost loses no count.
   */
  mark?: string;
  rc?: number;
  rh?: number;
}

interface Saved {
  readonly state: LeaseState;
  readonly epochs: readonly number[];
  readonly leaseEnds: readonly number[];
}

type Observed = LaneObservation & { now: number; share: Budget; leaseEnd: number; epoch: number; lostState: boolean };

/**
 * Weight of a new sample in a lane's smoothed horizon. A share granted at a tick is in force
 * until the next tick's order lands on the lane: one tick after it was planned when the lanes
 * answer at once, much more across regions (a region 80 ms away makes a 50 ms tick take one
 * round trip for its readings and one more when it shrinks a lane there, and a lane here waits
 * that long for its order).
 */
const HORIZON_WEIGHT = 0.3;

/** A lane saw a newer term than this leader's: it must stop, and a successor count past `seen`. */
class Stale extends Error {
  constructor(readonly seen: number) {
    super(`a lane saw term ${seen}`);
  }
}

export class LeaseCoordinator {
  private readonly lanes: Lane[] = [];
  private readonly home: Redis | Cluster;
  private readonly homeKeys: [string, string, string];
  private readonly id: string;
  /** The carrier leased (its id), or undefined: the global level. */
  private readonly carrier: string | undefined;
  private readonly tickMs: number;
  private readonly leaseUs: number;
  private readonly replyMs: number;
  private readonly skewUs: number;
  private readonly leaderTtlMs: number;
  private readonly holdsGraceMs: number;
  private windowUs: number;
  private params: DemandParams;
  private limit: Budget;
  private term = 0;
  private leading = false;
  private state: LeaseState | undefined;
  private views: LaneView[] = [];
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | undefined;
  /**
   * The last tick's grants, while in flight: a ticking coordinator does not wait for them (the
   * next tick's readings go behind them on each lane's connection, and are answered after
   * them), so that a tick across a far region takes its readings' and shrinks' round trips, not
   * a third for the grants. Awaited by the next step, tick() and stop().
   */
  private granting: Promise<void> | undefined;
  private stopped = false;
  private lastReport: LeaseTickReport = { leader: false, term: 0, lost: [] };
  /** Per lane, the refusals for lack of share read while this process led (refusals). */
  private readonly refusedTotal: Budget[] = [];
  /** The highest term a lane answered with (a newer leader's, or one from before a lost counter). */
  private minTerm = 0;
  /** When each Cluster client's slot map was last asked for (refreshSlots). */
  private readonly refreshed = new Map<Redis | Cluster, number>();

  constructor(opts: LeaseCoordinatorOptions) {
    if (opts.deployments.length === 0) throw new InvalidArgumentError('a lease needs at least one deployment of lanes');
    const { calls, windowUs, channels = 0 } = opts.limit;
    const carrier = opts.carrier;
    if (carrier !== undefined && (typeof carrier !== 'string' || carrier === ''))
      throw new InvalidArgumentError(`carrier must be a carrier id, got ${JSON.stringify(carrier)}`);
    checkLimit(calls, channels, windowUs, carrier);
    this.carrier = carrier;
    this.limit = { calls, channels };
    this.windowUs = windowUs;
    this.tickMs = timing('tickMs', opts.tickMs ?? 50);
    this.replyMs = timing('replyTimeoutMs', opts.replyTimeoutMs ?? 250);
    // sent to SET PX / PEXPIRE: a whole number of ms (1000.5 made every lead() fail, silently)
    this.leaderTtlMs = Math.ceil(timing('leaderTtlMs', opts.leaderTtlMs ?? 1_000));
    this.holdsGraceMs = positive('holdsGraceMs', opts.holdsGraceMs ?? 5_000);
    // a slow tick (three round trips at the reply timeout) or a successor's takeover: the
    // lanes keep admitting meanwhile
    this.leaseUs = timing('leaseMs', opts.leaseMs ?? this.leaderTtlMs + 3 * this.replyMs) * 1000;
    // a negative skew makes a silent lane's lease look ended early: its share was granted
    // elsewhere while it still admitted (30 calls in a window of a 20 limit)
    const skewMs = opts.skewMs ?? 50;
    if (!(typeof skewMs === 'number' && Number.isFinite(skewMs) && skewMs >= 0))
      throw new InvalidArgumentError(`skewMs must be a non-negative number, got ${JSON.stringify(skewMs)}`);
    this.skewUs = skewMs * 1000;
    this.params = demandParams(windowUs, this.tickMs, checkParams(opts.params));
    // the leader key holds the id and a nonce of this instance: two candidates given the same id
    // (a hostname) both took {1, term} as their own leadership and both granted (limit exceeded)
    if (opts.id !== undefined && (typeof opts.id !== 'string' || opts.id === ''))
      throw new InvalidArgumentError(`id must be a non-empty string, got ${JSON.stringify(opts.id)}`);
    this.id = `${opts.id ?? 'c'}:${randomBytes(8).toString('hex')}`;
    const seen = new Map<Redis | Cluster, Set<string>>();
    for (const [n, d] of opts.deployments.entries()) {
      const prefix = d.prefix ?? 'callgate:';
      const problem = prefixProblem(`deployments[${n}].prefix`, prefix);
      if (problem !== undefined) throw new InvalidArgumentError(problem);
      // the same keys twice: each alias counted its own share of one hash (the level halved)
      const prefixes = seen.get(d.redis) ?? new Set<string>();
      if (prefixes.has(prefix))
        throw new InvalidArgumentError(`deployments[${n}] repeats an earlier deployment (the same client and prefix)`);
      seen.set(d.redis, prefixes.add(prefix));
      const w = d.waitReplicas ?? 0;
      if (!(Number.isSafeInteger(w) && w >= 0 && w <= 16))
        throw new InvalidArgumentError(
          `deployments[${n}].waitReplicas must be an integer from 0 to 16, got ${String(w)}`,
        );
      if (d.overflow !== undefined && typeof d.overflow !== 'boolean')
        throw new InvalidArgumentError(`deployments[${n}].overflow must be a boolean`);
      if (carrier !== undefined) {
        // one lane per deployment: the carrier's share, slot log and holds there
        if (d.lanes !== undefined || d.overflow !== undefined)
          throw new InvalidArgumentError('a leased carrier has one lane per deployment: no lanes or overflow');
        const keys = new RedisKeys(prefix, d.hashTags ?? isCluster(d.redis));
        this.lanes.push({
          redis: d.redis,
          keys: keys.carrierLease({ name: carrierName(carrier) }),
          waitReplicas: d.waitReplicas ?? 0,
          overflow: false,
          retired: false,
          name: String(n),
        });
        defineScripts(d.redis);
        continue;
      }
      const lanes = checkLanes(d.lanes);
      // the overflow lane is read whether the deployment uses it or not: a coordinator whose
      // predecessor granted it must count what it holds, and drains it when it is not used
      const tags = [...Array.from({ length: lanes }, (_, k) => laneTag(k, lanes)), OVERFLOW_TAG];
      for (const tag of tags) {
        const base = `${prefix}{${tag}}:global`;
        this.lanes.push({
          redis: d.redis,
          keys: [`${base}:share`, logKey(base), holdsKey(base)],
          waitReplicas: d.waitReplicas ?? 0,
          overflow: tag === OVERFLOW_TAG,
          retired: tag === OVERFLOW_TAG && d.overflow !== true,
          name: tag !== OVERFLOW_TAG ? String(this.lanes.length) : n === 0 ? 'overflow' : `overflow:${n}`,
        });
      }
      defineScripts(d.redis);
    }
    const first = opts.deployments[0]!;
    const home = carrier === undefined ? 'global' : `carrier:${encodeId(carrier)}`;
    const base = `${first.prefix ?? 'callgate:'}{lease:${home}}`;
    this.home = first.redis;
    this.homeKeys = [`${base}:leader`, `${base}:term`, `${base}:state`];
  }

  /** Starts ticking (the first tick at once). */
  start(): this {
    this.stopped = false;
    this.schedule(0);
    return this;
  }

  /** Stops ticking after a tick in progress, and gives up the leadership (another candidate takes it at its next tick). */
  async stop(): Promise<void> {
    this.stopped = true;
    this.unfollow();
    if (this.timer) clearTimeout(this.timer);
    await this.running;
    await this.granting?.catch(() => undefined);
    if (this.leading) {
      this.leading = false;
      this.state = undefined;
      await this.script(this.home, 'lease-leader', this.homeKeys, [this.id, '0', '']).catch(() => undefined);
    }
  }

  /**
   * The level's limit changed (a reload): applied at once by the leader (reload.ts), by a later
   * one on taking over. A new window applies from the next tick (shares stay counts of calls).
   */
  setLimit(limit: { readonly calls: number; readonly channels?: number; readonly windowUs?: number }): void {
    // checked before anything changes (a bad limit was stored, then every tick threw)
    checkLimit(limit.calls, limit.channels ?? 0, limit.windowUs ?? this.windowUs, this.carrier);
    this.limit = { calls: limit.calls, channels: limit.channels ?? 0 };
    if (limit.windowUs !== undefined && limit.windowUs !== this.windowUs) {
      this.windowUs = limit.windowUs;
      this.params = { ...this.params, windowTicks: limit.windowUs / 1000 / this.tickMs };
    }
    if (this.state) this.state = reload(this.state, this.limit);
  }

  /**
   * A coordinator for `gate`'s global level, with the level's limit, window and channels from
   * the gate's configuration, set again at each reload of
   * the gate (a reload that leaves the level unleasable is reported on the gate's 'error'
   * event, and the coordinator keeps the last limit it had).
   */
  static forGate(gate: CallGate, opts: Omit<LeaseCoordinatorOptions, 'limit' | 'carrier'>): LeaseCoordinator {
    const c = new LeaseCoordinator({ ...opts, limit: leasedLevel(gate.config) });
    const follow = () => {
      try {
        c.setLimit(leasedLevel(gate.config));
      } catch (err) {
        gate.safeEmit('error', err as Error);
      }
    };
    gate.on('reloaded', follow);
    c.unfollow = () => gate.off('reloaded', follow);
    return c;
  }

  /**
   * A coordinator for carrier `carrier` leased across regions, with its CPS and channels from
   * `gate`'s configuration, set again at each reload of the gate (a reload that leaves it
   * unleasable is reported on the gate's 'error' event; the coordinator keeps its last limit).
   */
  static forCarrier(
    gate: CallGate,
    carrier: string,
    opts: Omit<LeaseCoordinatorOptions, 'limit' | 'carrier'>,
  ): LeaseCoordinator {
    const c = new LeaseCoordinator({ ...opts, carrier, limit: leasedCarrier(gate.config, carrier) });
    const follow = () => {
      try {
        c.setLimit(leasedCarrier(gate.config, carrier));
      } catch (err) {
        gate.safeEmit('error', err as Error);
      }
    };
    gate.on('reloaded', follow);
    c.unfollow = () => gate.off('reloaded', follow);
    return c;
  }

  /** Stops following a gate's reloads (forGate). */
  private unfollow: () => void = () => {};

  /**
   * Per lane (laneNames' order), the calls it refused for lack of its calls share and of its
   * channels share, as this process read them while it led (false refusals against the unleased
   * contract, but for calls it would have refused anyway: docs/leasing.md).
   */
  get refusals(): readonly Budget[] {
    return this.lanes.map((_, i) => this.refusedTotal[i] ?? { calls: 0, channels: 0 });
  }

  /** The level it leases, as metrics label it: `global`, or `carrier:<id>`. */
  get level(): string {
    return this.carrier === undefined ? 'global' : `carrier:${this.carrier}`;
  }

  get report(): LeaseTickReport {
    return this.lastReport;
  }

  /** Each lane's name, in the order of the report's shares: its index, or `overflow` (LeaseLanes.overflow). */
  get laneNames(): readonly string[] {
    return this.lanes.map((l) => l.name);
  }

  private schedule(ms: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      const began = performance.now();
      this.running = this.tickOnce()
        .then(() => undefined)
        .catch(() => {
          // a failed tick (the home Redis away) leads nothing: the lanes keep their leases until they end
          this.leading = false;
        })
        .finally(() => this.schedule(Math.max(0, this.tickMs - (performance.now() - began))));
    }, ms);
  }

  /**
   * One tick, its grants landed (or failed) before it returns (public for tests that step the
   * coordinator themselves, and read the lanes' shares after it).
   */
  async tick(): Promise<LeaseTickReport> {
    await this.tickOnce();
    await this.guard(this.landed());
    return this.reported();
  }

  /** One tick; its grants may still be in flight when it returns (the timer's tick). */
  private async tickOnce(): Promise<LeaseTickReport> {
    if (!(await this.lead())) return (this.lastReport = { leader: false, term: this.term, lost: [] });
    await this.guard(this.step());
    return this.reported();
  }

  /** `work` (a step, or its grants), a newer leader or a term that went back giving the leadership up. */
  private async guard(work: Promise<void>): Promise<void> {
    try {
      await work;
    } catch (err) {
      if (!(err instanceof Stale)) throw err;
      // a newer leader, or a term counter that went back (its Redis restarted empty): give the
      // leadership up, and whoever takes it next counts past what the lanes saw
      this.minTerm = Math.max(this.minTerm, err.seen);
      this.leading = false;
      this.state = undefined;
      await this.script(this.home, 'lease-leader', this.homeKeys, [this.id, '0', '', String(this.minTerm)]).catch(
        () => undefined,
      );
    }
  }

  private reported(): LeaseTickReport {
    return (this.lastReport = {
      leader: this.leading,
      term: this.term,
      ...(this.state && { state: this.state }),
      lost: this.views.flatMap((v, i) => (v.lost ? [i] : [])),
    });
  }

  /** The last tick's grants, once they have landed or failed (a Stale one rethrown). */
  private async landed(): Promise<void> {
    const g = this.granting;
    this.granting = undefined;
    await g;
  }

  /** Renew ('kept', the state saved) or take ('new') the leadership; false: another leads. */
  private async lead(save?: Saved): Promise<'kept' | 'new' | false> {
    const r = (await this.script(this.home, 'lease-leader', this.homeKeys, [
      this.id,
      String(this.leaderTtlMs),
      save ? JSON.stringify(save) : '',
      String(this.minTerm),
    ])) as [number, number?, string?];
    if (r[0] === 0) {
      this.leading = false;
      this.state = undefined;
      return false;
    }
    this.term = r[1]!;
    if (r[0] === 1 && this.leading) return 'kept';
    this.leading = true;
    this.state = undefined;
    this.takeOver(r[2]);
    return 'new';
  }

  /** A new leader: its predecessor's state, if saved, else a start from what the lanes hold (first observation). */
  private takeOver(saved: string | undefined): void {
    // no lane's clock is known yet: each lease it holds has surely ended a lease from now
    const overBy = performance.now() + (this.leaseUs + this.skewUs) / 1000;
    this.views = this.lanes.map(() => ({
      epoch: 0,
      leaseEnd: 0,
      lost: false,
      callsReclaimed: false,
      lastInUse: 0,
      overBy,
    }));
    if (!saved) return;
    const s = JSON.parse(saved) as Saved;
    if (s.state.shares.length !== this.lanes.length) return; // lanes changed: start afresh
    this.state = s.state;
    this.views.forEach((v, i) => {
      v.epoch = s.epochs[i] ?? 0;
      v.leaseEnd = s.leaseEnds[i] ?? 0;
    });
    this.state = this.atLimit(this.state);
  }

  /** `state` under the limit in force (a reload since it was made: reload.ts), else itself. */
  private atLimit(state: LeaseState): LeaseState {
    const same = state.limit.calls === this.limit.calls && state.limit.channels === this.limit.channels;
    return same ? state : reload(state, this.limit);
  }

  /**
   * A start without saved state (the coordinator's Redis came back empty, or the lanes changed):
   * every lane is taken as lost, keeping what it holds until its lease has ended. A lane that
   * did not answer holds an unknown share: each such lane is counted as holding all the rest of
   * the limit, the excess as debt, until it answers or its lease has surely ended a window ago.
   */
  private fresh(observed: readonly (Observed | undefined)[]): LeaseState {
    const known = observed.filter((o): o is Observed => o !== undefined);
    const unknown = observed.length - known.length;
    const held = known.reduce((a, o) => add(a, o.share), { calls: 0, channels: 0 });
    const rest = {
      calls: Math.max(0, this.limit.calls - held.calls),
      channels: Math.max(0, this.limit.channels - held.channels),
    };
    const shares = observed.map((o) => (o === undefined ? rest : o.share));
    const total = add(held, { calls: unknown * rest.calls, channels: unknown * rest.channels });
    observed.forEach((o, i) => {
      const v = this.views[i]!;
      v.lost = true;
      if (o !== undefined) {
        v.epoch = o.epoch + 1;
        v.leaseEnd = o.leaseEnd;
      }
    });
    return {
      ...initialLease(this.limit, this.lanes.length, this.params),
      shares,
      pool: {
        calls: Math.max(0, this.limit.calls - total.calls),
        channels: Math.max(0, this.limit.channels - total.channels),
      },
      debt: {
        calls: Math.max(0, total.calls - this.limit.calls),
        channels: Math.max(0, total.channels - this.limit.channels),
      },
    };
  }

  private async step(): Promise<void> {
    const observed = await Promise.all(this.lanes.map((_, i) => this.observe(i)));
    // the last tick's grants went before these readings on each lane's connection: answered by now
    await this.landed();
    // a lane may hold a later lease end than this coordinator saved (a predecessor's order that
    // landed after its last save): what the lane says is taken, so nothing is reclaimed early
    observed.forEach((o, i) => {
      if (o !== undefined) this.views[i]!.leaseEnd = Math.max(this.views[i]!.leaseEnd, o.leaseEnd);
      // a lane whose Redis lost its share (and its log of what it admitted): lost, as one out of reach
      if (o?.lostState) this.emptied(i);
    });
    this.state ??= this.fresh(observed);
    let state = this.state;
    const now = performance.now();
    // how long ago the lane's lease ended (µs; negative: it still runs), as far as the
    // coordinator can tell (never later than it did, by the skew bound); undefined: unknown
    const overFor = (o: Observed | undefined, v: LaneView): number | undefined => {
      if (o !== undefined) return o.now - Math.max(v.leaseEnd, o.leaseEnd);
      if (v.lastNow !== undefined) return v.lastNow + (now - v.lastLocal!) * 1000 - this.skewUs - v.leaseEnd;
      return v.overBy === undefined ? undefined : (now - v.overBy) * 1000;
    };
    // A lane that did not answer the observation (slow, or gone) is left as it is this tick: no
    // order was sent, so its share is known; once its lease has run out it is lost.
    const silent = observed.map((o, i) => o === undefined && !this.views[i]!.lost);
    observed.forEach((o, i) => {
      const v = this.views[i]!;
      if (o !== undefined && v.lost) v.epoch = Math.max(v.epoch, o.epoch + 1); // past any it saw
      if (silent[i]) {
        const over = overFor(o, v);
        if (over === undefined || over < 0) return;
        this.lose(i);
        silent[i] = false;
      }
      if (!v.lost) return;
      const over = overFor(o, v);
      if (over === undefined) return;
      // answering again a window after its lease ended: none of its calls is left in the window
      // (even one a failed-over replica missed), so its calls share is back; its channels share
      // stays until shrinks bring it down to its holds (written back by then after a failover)
      if (o !== undefined && over >= this.windowUs) {
        state = restore(state, i, { calls: 0, channels: state.shares[i]!.channels });
        v.lost = false;
        v.callsReclaimed = false;
        return;
      }
      // out of reach: its calls share back once its calls have left the window; its channels
      // only when it answers (a call there may keep refreshing its hold)
      if (!v.callsReclaimed && over >= this.windowUs) {
        state = reclaim(state, i, 'calls');
        v.callsReclaimed = true;
      }
    });
    const lostFlags = this.views.map((v, i) => v.lost || silent[i]!);
    const obs: LaneObservation[] = observed.map((o, i) => ({
      ...(o === undefined || lostFlags[i]
        ? { admittedInWindow: 0, channelsInUse: 0, refusedCalls: 0, refusedChannels: 0, admittedSinceTick: 0 }
        : o),
      channelless: this.lanes[i]!.overflow,
      retired: this.lanes[i]!.retired,
    }));
    const plan = planStep(state, obs, this.params, lostFlags);
    state = plan.state;
    const ends = observed.map((o) => (o === undefined ? 0 : o.now + this.leaseUs));
    const results = await Promise.all(
      plan.shrinks.map(async (s): Promise<ShrinkResult | undefined> => {
        const r = await this.order(s.lane, 'lease-shrink', [
          s.target.calls,
          s.target.channels,
          ends[s.lane]!,
          this.windowUs,
        ]);
        if (r === undefined) return undefined;
        const had = state.shares[s.lane]!;
        // channels of a lane whose Redis lost them stay held while its holds are written back
        const held = performance.now() < (this.views[s.lane]!.channelsHeldUntil ?? 0);
        const share = {
          calls: Math.min(r[0]!, had.calls),
          channels: held ? had.channels : Math.min(r[1]!, had.channels),
        };
        const freed = { calls: had.calls - share.calls, channels: had.channels - share.channels };
        // not on enough replicas yet: counted as still held (the lane holds less: safe); a later
        // shrink, once replicated, frees it
        if ((freed.calls > 0 || freed.channels > 0) && !(await this.replicated(s.lane)))
          return { lane: s.lane, share: had, freed: { calls: 0, channels: 0 } };
        return { lane: s.lane, share, freed };
      }),
    );
    const shrunk = new Set(plan.shrinks.map((s) => s.lane));
    const settled = settle(
      state,
      results.filter((r): r is ShrinkResult => r !== undefined),
      plan.grants.filter((g) => !lostFlags[g.lane] && !this.views[g.lane]!.lost),
    );
    checkLease(settled.state);
    // a reload (setLimit) during this tick's round trips changed the limit of the state this tick
    // started from, not of this one: applied here, or the old limit would stay until a new leader
    this.state = this.atLimit(settled.state);
    // saved before any grant leaves: a successor never counts less than the lanes hold
    // every lane about to be renewed: its new lease end is saved before it is sent
    this.views.forEach((v, i) => {
      if (!v.lost && !lostFlags[i]) v.leaseEnd = Math.max(v.leaseEnd, ends[i]!);
    });
    // (a leadership lost or taken afresh since the tick began: nothing saved, nothing granted)
    if ((await this.lead(this.saved())) !== 'kept') return;
    const grants = new Map(settled.grants.map((g) => [g.lane, g.amount]));
    const granting = Promise.all(
      this.views.map(async (v, i) => {
        if (v.lost || lostFlags[i]) return;
        const amount = grants.get(i);
        if (amount === undefined && shrunk.has(i)) return; // renewed by its shrink
        await this.order(i, 'lease-grant', [amount?.calls ?? 0, amount?.channels ?? 0, ends[i]!, this.windowUs]);
      }),
    ).then(() => undefined);
    granting.catch(() => undefined); // awaited later (landed); never an unhandled rejection meanwhile
    this.granting = granting;
  }

  private saved(): Saved {
    return {
      state: this.state!,
      epochs: this.views.map((v) => v.epoch),
      leaseEnds: this.views.map((v) => v.leaseEnd),
    };
  }

  /**
   * Lane i's Redis lost its share hash (restarted empty, failed over to a replica without it):
   * the calls it admitted are still in the window and in progress, but it can no longer say so.
   * It is lost (its share held until a window after its lease end), and its channels share is
   * held for holdsGraceMs more, while the routing processes write their holds back.
   */
  private emptied(i: number): void {
    const v = this.views[i]!;
    // from when it is first seen so: it reads so at every tick until an order lands (lost, it gets none)
    if (!v.emptiedSeen) v.channelsHeldUntil = performance.now() + this.holdsGraceMs;
    v.emptiedSeen = true;
    if (!v.lost) this.lose(i);
  }

  /** A lane that did not answer: lost, its epoch moves on (lost.ts). */
  private lose(i: number): void {
    const v = this.views[i]!;
    v.lost = true;
    v.epoch++;
    v.callsReclaimed = false;
  }

  /**
   * How far ahead lane i's want looks (µs): its horizon, at least one tick and at most half a
   * window (a stall says nothing of the next tick). Its demand is counted per horizon, and so
   * are the calls that leave its window before the next order (lease-observe).
   */
  private horizonUs(v: LaneView): number {
    const tick = this.tickMs * 1000;
    return Math.round(Math.max(tick, Math.min(v.horizonUs ?? tick, this.windowUs / 2)));
  }

  private async observe(i: number): Promise<Observed | undefined> {
    const lane = this.lanes[i]!;
    const v = this.views[i]!;
    const horizon = this.horizonUs(v);
    const r = (await this.timed(
      this.script(lane.redis, 'lease-observe', lane.keys, [this.term, this.windowUs, horizon, v.mark ?? '']),
    )) as number[] | undefined;
    if (r === undefined) {
      this.refreshSlots(lane.redis);
      return undefined;
    }
    if (r[0] === -1) throw new Stale(r[1] ?? 0);
    const [now, inWindow, leaving, inUse, ad, rcTotal, rhTotal, c, h, e, g, emptied] = r as [number, ...number[]];
    // the mark as the lane wrote it (a fractional slot: a number reply would be truncated)
    const mark = String(r[12]);
    // sent a lease before (by this leader, or by one whose state it took over), its share hash
    // without an epoch: its Redis lost it (step: emptied). Observed before and without a term
    // too. (An order that never landed reads so as well: a loss for nothing, and safe.)
    const lostState = emptied === 1 && (v.lastNow !== undefined || v.leaseEnd > 0);
    // the counts are since the lane's last observation, which may be several ticks ago (a slow
    // tick, a lane away): demand is per horizon, so they are scaled to one (a stall read as one
    // tick's demand made a lane want several times its calls, and starved a lane coming back)
    const perTick =
      v.lastNow === undefined || now <= v.lastNow ? 1 : horizon / Math.max(now - v.lastNow, this.tickMs * 1000);
    // the last tick's share lasted from the observation before it to the last order's landing
    // (both as their replies came back: the round trips cancel)
    if (v.prevLocal !== undefined && v.orderedLocal !== undefined && v.orderedLocal > v.lastLocal!) {
      // capped first: one stall (a pause, reply timeouts) would hold the horizon up for ticks
      const lasted = Math.min((v.orderedLocal - v.prevLocal) * 1000, this.windowUs / 2);
      v.horizonUs = v.horizonUs === undefined ? lasted : v.horizonUs + HORIZON_WEIGHT * (lasted - v.horizonUs);
    }
    v.prevLocal = v.lastLocal;
    const released = Math.max(0, v.lastInUse + ad! - inUse!);
    v.lastNow = now;
    v.lastLocal = performance.now();
    v.lastInUse = inUse!;
    // the lane's refusals for lack of share since the last reading received: its counters'
    // growth. A counter below the last reading counts from 0 only when the hash was lost (emptied: it
    // was made afresh); else (a replica a few writes behind) nothing is counted, never the
    // whole counter. A first reading counts nothing (a predecessor may have counted it).
    const since = (total: number, last: number | undefined) => {
      if (last === undefined) return 0;
      if (total >= last) return total - last;
      return emptied === 1 ? total : 0;
    };
    const rc = since(rcTotal!, v.rc);
    const rh = since(rhTotal!, v.rh);
    v.rc = rcTotal;
    v.rh = rhTotal;
    v.mark = mark;
    const total = this.refusedTotal[i] ?? { calls: 0, channels: 0 };
    this.refusedTotal[i] = { calls: total.calls + rc, channels: total.channels + rh };
    return {
      now,
      admittedInWindow: inWindow!,
      leavingBeforeNextTick: leaving!,
      channelsInUse: inUse!,
      admittedSinceTick: ad! * perTick,
      refusedCalls: rc * perTick,
      refusedChannels: rh * perTick,
      releasedSinceTick: released * perTick,
      share: { calls: c!, channels: h! },
      leaseEnd: e!,
      epoch: g!,
      lostState,
    };
  }

  /** A shrink or grant for lane i; undefined when it did not answer (then it is lost). */
  private async order(i: number, name: 'lease-shrink' | 'lease-grant', args: number[]): Promise<number[] | undefined> {
    const lane = this.lanes[i]!;
    const v = this.views[i]!;
    v.leaseEnd = Math.max(v.leaseEnd, args[2]!); // the lease end: sent, it may land even if its answer does not
    const r = (await this.timed(this.script(lane.redis, name, lane.keys, [this.term, v.epoch, ...args]))) as
      | number[]
      | undefined;
    if (r === undefined) {
      if (!v.lost) this.lose(i);
      this.refreshSlots(lane.redis);
      return undefined;
    }
    if (r[0] === -1) throw new Stale(r[1] ?? 0);
    if ((r[0] ?? -1) >= 0) {
      v.emptiedSeen = false; // an order landed: its hash has an epoch again
      v.orderedLocal = performance.now();
    }
    if (r[0] === -2) {
      // a new epoch refused while the lane's lease still runs (never, with restore's condition)
      if (!v.lost) this.lose(i);
      return undefined;
    }
    if (r[0] === -3) {
      // its Redis lost the share hash since this tick's observation
      this.emptied(i);
      return undefined;
    }
    return r;
  }

  /**
   * A lane did not answer: on a Cluster, ask for the slot map again (at most twice a second),
   * so that a lane whose master failed over is reached on its new master within a tick or two,
   * not at ioredis' next periodic refresh (5 s).
   */
  private refreshSlots(redis: Redis | Cluster): void {
    if (!isCluster(redis)) return;
    const now = performance.now();
    if (now - (this.refreshed.get(redis) ?? Number.NEGATIVE_INFINITY) < 500) return;
    this.refreshed.set(redis, now);
    redis.refreshSlotsCache();
  }

  /** Whether lane i's writes so far are on its `waitReplicas` replicas (WAIT on its master's connection). */
  private async replicated(i: number): Promise<boolean> {
    const lane = this.lanes[i]!;
    if (lane.waitReplicas === 0) return true;
    let node: Redis | undefined;
    if (isCluster(lane.redis)) {
      const addr = lane.redis.slots[slotOf(lane.keys[0])]?.[0];
      node = lane.redis.nodes('master').find((n) => `${n.options.host}:${n.options.port}` === addr);
    } else node = lane.redis;
    if (node === undefined) return false;
    // a master without replicas (its own failed over before) has none to fail over to: nothing
    // to wait for, and waiting would freeze what its lanes free until one follows it
    const role = (await this.timed(node.call('ROLE'))) as unknown[] | undefined;
    if (role === undefined) return false;
    const need = Math.min(lane.waitReplicas, Array.isArray(role[2]) ? role[2].length : 0);
    if (need === 0) return true;
    // WAIT blocks its connection: the coordinator's client must be its own (docs/leasing.md)
    const acked = await this.timed(node.call('WAIT', String(need), String(Math.ceil(this.replyMs / 2))));
    return typeof acked === 'number' && acked >= need;
  }

  private timed<T>(p: Promise<T>): Promise<T | undefined> {
    let timer: NodeJS.Timeout;
    return Promise.race([
      p.catch(() => undefined),
      new Promise<undefined>((resolve) => (timer = setTimeout(resolve, this.replyMs, undefined))),
    ]).finally(() => clearTimeout(timer));
  }

  private script(
    redis: Redis | Cluster,
    name: ScriptName,
    keys: readonly string[],
    args: readonly (string | number)[],
  ) {
    const command = scripts()[name].command;
    return (redis as unknown as Record<string, (...a: (string | number)[]) => Promise<unknown>>)[command]!(
      keys.length,
      ...keys,
      ...args.map((a) => (typeof a === 'number' ? String(Math.round(a)) : a)),
    );
  }
}

/**
 * A leased level's limit (the constructor's, and setLimit's): whole calls and channels from 0, a
 * window of 1 µs or more, and a leased carrier's window of 1 s.
 */
function checkLimit(calls: number, channels: number, windowUs: number, carrier: string | undefined): void {
  for (const [name, v, least] of [
    ['calls', calls, 0],
    ['channels', channels, 0],
    ['windowUs', windowUs, 1],
  ] as const)
    if (!(Number.isSafeInteger(v) && v >= least))
      throw new InvalidArgumentError(`limit.${name} must be an integer >= ${least}, got ${String(v)}`);
  if (carrier !== undefined && windowUs !== CARRIER_LEASE_WINDOW_US)
    throw new InvalidArgumentError(`a leased carrier's window is ${CARRIER_LEASE_WINDOW_US} µs (calls per second)`);
}

/** `v` if a positive finite number, else InvalidArgumentError naming `name`. */
function positive(name: string, v: number): number {
  if (!(typeof v === 'number' && Number.isFinite(v) && v > 0))
    throw new InvalidArgumentError(`${name} must be a positive number, got ${JSON.stringify(v)}`);
  return v;
}

/**
 * The demand rule's overrides (demand.ts), checked: a NaN weight froze the shares at an even
 * split. `up` and `down` in (0, 1], `headroom` and the floor's numbers finite and >= 0.
 */
function checkParams(p: Partial<DemandParams> | undefined): Partial<DemandParams> | undefined {
  if (p === undefined) return undefined;
  const fraction = (name: string, v: unknown) => {
    if (v !== undefined && !(typeof v === 'number' && v > 0 && v <= 1))
      throw new InvalidArgumentError(`params.${name} must be a number in (0, 1], got ${JSON.stringify(v)}`);
  };
  const atLeast0 = (name: string, v: unknown) => {
    if (v !== undefined && !(typeof v === 'number' && Number.isFinite(v) && v >= 0))
      throw new InvalidArgumentError(`params.${name} must be a finite number >= 0, got ${JSON.stringify(v)}`);
  };
  fraction('up', p.up);
  fraction('down', p.down);
  atLeast0('headroom', p.headroom);
  if (p.floor !== undefined) {
    atLeast0('floor.calls', p.floor.calls);
    atLeast0('floor.channels', p.floor.channels);
  }
  if (p.windowTicks !== undefined) positive('params.windowTicks', p.windowTicks);
  return p;
}

/** Longest delay setTimeout takes: above it Node fires after 1 ms (tickMs 1e12 ticked every ms). */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** A positive duration a timer can wait (ms). */
function timing(name: string, v: number): number {
  positive(name, v);
  if (v > MAX_TIMER_MS) throw new InvalidArgumentError(`${name} must be at most ${MAX_TIMER_MS} ms, got ${v}`);
  return v;
}

function defineScripts(redis: Redis | Cluster): void {
  for (const name of ['lease-observe', 'lease-shrink', 'lease-grant', 'lease-leader'] as const) {
    const { command, lua } = scripts()[name];
    if (!(command in redis)) redis.defineCommand(command, { lua });
  }
}
