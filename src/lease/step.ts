/**
 * The coordinator's tick for one leased level, as pure functions (share.ts; run on Redis by
 * coordinator.ts). Shrink first, then grant, and grant only from the pool:
 *
 * 1. `planStep` (pure): from the lanes' observations, update each lane's demand, turn the
 *    wants into targets that sum to the limit, and order every lane holding more than its
 *    target to shrink to it. It also plans the grants that the shrinks would allow if they
 *    freed what the observations predict.
 * 2. Each lane applies its shrink (`applyShrink`, share.ts): max(target, used now), which may
 *    free less than predicted (its calls kept coming between the read and the shrink).
 * 3. `settle` (pure): what the shrinks really freed pays any debt of a decreased limit, then
 *    goes to the pool; the planned grants are cut to fit the pool, and only then applied.
 *
 * Why this keeps "at no instant does the sum over lanes of calls admitted in any window
 * (t - W, t] exceed the limit": a lane admits only while its count in (t - W, t] is below its
 * share, time passing only lowers that count, a shrink never goes below it, and a grant only
 * raises a share; so count_L(t) <= share_L(t) at every instant. Σ shares + pool = limit (+ the
 * debt, which only falls) and the pool is never negative, so Σ count_L(t) <= limit. Capacity
 * reaches the pool only once a lane has confirmed the shrink, so a grant never overlaps the
 * share it came from. Channels: the same argument with "in use" for the window count.
 *
 * Targets split the whole limit (no capacity idles in the pool between ticks; unused share is
 * taken back at the next tick anyway): each lane's expected count first, then its headroom,
 * then the surplus, evenly (targetsFor). Under overload the bases are split in proportion to demand,
 * which is how one log over all lanes would share the limit among arrivals.
 */
import { type DemandParams, type Want, updateDemand, want } from './demand.js';
import { type Budget, ZERO, add, applyShrink, splitProportional, sub, sum } from './share.js';

/** What a lane reports at a tick (read atomically on the lane, on its clock). */
export interface LaneObservation {
  /**
   * Calls the lane admitted in its current window (t - W, t]; where entries lie ahead of t (a
   * leased carrier's slots), the most in any window ending at or after t (lua/includes/lease.lua).
   */
  readonly admittedInWindow: number;
  /** Channels its calls hold now. */
  readonly channelsInUse: number;
  /** Calls refused for lack of calls share since the last tick. */
  readonly refusedCalls: number;
  /** Calls refused for lack of channel share since the last tick. */
  readonly refusedChannels: number;
  /** Calls admitted since the last tick. */
  readonly admittedSinceTick: number;
  /** Channels released since the last tick (0 if the lane does not count them: a larger want). */
  readonly releasedSinceTick?: number;
  /**
   * Calls of the window that leave it before the next tick: the log in (t - W, t - W + T], T
   * the lane's horizon (the coordinator's time to its next order there; with entries ahead of t:
   * lua/lease-observe.lua). Without it, the coordinator assumes an even spread: admittedInWindow / (W / T).
   */
  readonly leavingBeforeNextTick?: number;
  /**
   * The lane holds no channels (an overflow lane: its calls hold their channels on their own
   * lanes): its channels target is 0, and the channel limit is split over the other lanes.
   */
  readonly channelless?: boolean;
  /**
   * The lane takes no share at all (an overflow lane its deployment does not use): its targets
   * are 0, so it shrinks to what its calls still use and is granted nothing.
   */
  readonly retired?: boolean;
}

/** The coordinator's state for one leased level. Σ shares + pool = limit + debt. */
export interface LeaseState {
  readonly limit: Budget;
  /** Each lane's share as last confirmed (shrink) or granted. */
  readonly shares: readonly Budget[];
  /** Capacity held by no lane. */
  readonly pool: Budget;
  /** After a decreased limit: capacity still held by lanes beyond the new limit (reload.ts). */
  readonly debt: Budget;
  /** Per lane: calls offered per tick, channels wanted (demand.ts). */
  readonly demand: readonly Budget[];
}

export interface ShrinkOrder {
  readonly lane: number;
  /** The share the lane should come down to, as far as its use allows. */
  readonly target: Budget;
}

export interface GrantOrder {
  readonly lane: number;
  /** Added to the lane's share. */
  readonly amount: Budget;
}

export interface StepPlan {
  /** The state with the new demand estimates (shares and pool unchanged until settle). */
  readonly state: LeaseState;
  readonly targets: readonly Budget[];
  readonly shrinks: readonly ShrinkOrder[];
  /** Planned from the predicted shrinks; `settle` cuts them to what was really freed. */
  readonly grants: readonly GrantOrder[];
}

/** What a lane's shrink did (applyShrink on the lane): its new share, what it freed. */
export interface ShrinkResult {
  readonly lane: number;
  readonly share: Budget;
  readonly freed: Budget;
}

/** A level that starts evenly split. */
export function initialLease(limit: Budget, lanes: number, p: DemandParams): LeaseState {
  const calls = splitProportional(limit.calls, new Array<number>(lanes).fill(1));
  const channels = splitProportional(limit.channels, new Array<number>(lanes).fill(1));
  const shares = calls.map((c, i) => ({ calls: c, channels: channels[i]! }));
  // a first guess the first ticks correct: half the even share's calls per tick, no releases
  // (so the channel want starts at in use plus the calls to come, the larger side)
  const demand = shares.map((s) => ({ calls: s.calls / p.windowTicks / 2, channels: 0 }));
  return { limit, shares, pool: ZERO, debt: ZERO, demand };
}

/**
 * Split one resource's limit into targets from the lanes' wants (see the header): the bases
 * first (in proportion when even they do not fit), then the headroom (in proportion when it
 * does not all fit), then any surplus evenly. Even, not in proportion to the wants: a cold
 * lane that turns hot (the hot lanes move) then has a buffer for its first tick, while the hot
 * lanes already hold their headroom (measured: 1.79 against 2.00 % false refusals at 90 %
 * load, 16 lanes, bench/lease-sim.ts's shape). Headroom comes second
 * because scaling base and headroom together would cut a hot lane below the count it is
 * about to reach, to pay for small lanes' headroom.
 */
export function targetsFor(limit: number, wants: readonly Want[]): number[] {
  const base = wants.map((w) => w.base);
  const head = wants.map((w) => w.headroom);
  const sb = base.reduce((a, b) => a + b, 0);
  const sh = head.reduce((a, b) => a + b, 0);
  let real: number[];
  if (sb >= limit) real = base.map((b) => (limit * b) / sb);
  else if (sb + sh >= limit) real = base.map((b, i) => b + (sh > 0 ? ((limit - sb) * head[i]!) / sh : 0));
  else real = base.map((b, i) => b + head[i]! + (limit - sb - sh) / base.length);
  // equal remainders go to the lane that wants more: a limit below lanes × floor splits into
  // equal parts under 1, and by index alone the same low lanes got every unit at every tick;
  // a busy lane of a higher index (its want under the floor, so no larger) never got one
  return splitProportional(
    limit,
    real,
    wants.map((w) => w.base + w.headroom),
  );
}

/** Cut one resource's planned grants to what the pool holds (in proportion, never above a plan). */
function cutToPool(pool: number, planned: readonly number[]): number[] {
  const total = planned.reduce((a, b) => a + b, 0);
  if (total <= pool) return [...planned];
  return splitProportional(Math.max(0, pool), planned);
}

/** Grants for lanes below their targets, from `pool` (shares as after the shrinks). */
function grantsFrom(pool: Budget, shares: readonly Budget[], targets: readonly Budget[]): GrantOrder[] {
  const calls = cutToPool(
    pool.calls,
    shares.map((s, i) => Math.max(0, targets[i]!.calls - s.calls)),
  );
  const channels = cutToPool(
    pool.channels,
    shares.map((s, i) => Math.max(0, targets[i]!.channels - s.channels)),
  );
  const out: GrantOrder[] = [];
  for (let i = 0; i < shares.length; i++) {
    if (calls[i]! > 0 || channels[i]! > 0) out.push({ lane: i, amount: { calls: calls[i]!, channels: channels[i]! } });
  }
  return out;
}

/** Freed capacity pays the debt first; what is left goes to the pool. */
function payDebt(debt: number, freed: number): [debt: number, toPool: number] {
  const paid = Math.min(debt, freed);
  return [debt - paid, freed - paid];
}

/**
 * `lost` (lost.ts): lanes the coordinator cannot reach. Their shares are frozen until reclaimed
 * (their observations are ignored, they get no order), and the live lanes' targets split what
 * is left of the limit.
 */
export function planStep(
  state: LeaseState,
  obs: readonly LaneObservation[],
  p: DemandParams,
  lost?: readonly boolean[],
): StepPlan {
  if (obs.length !== state.shares.length) throw new RangeError('one observation per lane');
  const isLost = (i: number) => lost?.[i] === true;
  const demand = state.demand.map((d, i) =>
    isLost(i)
      ? d
      : updateDemand(
          d,
          {
            offeredCalls: obs[i]!.admittedSinceTick + obs[i]!.refusedCalls + obs[i]!.refusedChannels,
            releasedChannels: obs[i]!.releasedSinceTick ?? 0,
          },
          p,
        ),
  );
  // a retired lane is not lost (it is read and shrunk) but splits nothing: its targets are 0,
  // and what it holds until then is left out of what the live lanes split, as a lost lane's
  const retired = (i: number) => !isLost(i) && obs[i]!.retired === true;
  const live = state.shares.map((_, i) => i).filter((i) => !isLost(i) && !retired(i));
  const wants = live.map((i) => {
    const o = obs[i]!;
    const leaving = o.leavingBeforeNextTick ?? o.admittedInWindow / p.windowTicks;
    return want(demand[i]!, { inWindow: o.admittedInWindow, leaving, inUse: o.channelsInUse }, p);
  });
  // a lost lane keeps its share as its target; the live lanes split the rest of the limit
  const frozen = sum(state.shares.filter((_, i) => isLost(i) || retired(i)));
  const tc = targetsFor(
    Math.max(0, state.limit.calls - frozen.calls),
    wants.map((w) => w.calls),
  );
  const holding = live.flatMap((i, k) => (obs[i]!.channelless === true ? [] : [k]));
  const th = targetsFor(
    Math.max(0, state.limit.channels - frozen.channels),
    holding.map((k) => wants[k]!.channels),
  );
  const targets: Budget[] = state.shares.map((s, i) => (retired(i) ? ZERO : s));
  live.forEach((i, k) => {
    targets[i] = { calls: tc[k]!, channels: 0 };
  });
  holding.forEach((k, j) => {
    targets[live[k]!] = { calls: tc[k]!, channels: th[j]! };
  });

  const shrinks: ShrinkOrder[] = [];
  const predicted: ShrinkResult[] = [];
  state.shares.forEach((s, i) => {
    const t = targets[i]!;
    if (s.calls <= t.calls && s.channels <= t.channels) return;
    shrinks.push({ lane: i, target: t });
    predicted.push(shrinkLane(i, s, t, { calls: obs[i]!.admittedInWindow, channels: obs[i]!.channelsInUse }));
  });
  const next: LeaseState = { ...state, demand };
  const after = applyShrinks(next, predicted);
  return { state: next, targets, shrinks, grants: grantsFrom(after.pool, after.shares, targets) };
}

/** applyShrink on both resources of one lane (what the lane script does). */
export function shrinkLane(lane: number, share: Budget, target: Budget, used: Budget): ShrinkResult {
  const c = applyShrink(share.calls, target.calls, used.calls);
  const h = applyShrink(share.channels, target.channels, used.channels);
  return { lane, share: { calls: c.share, channels: h.share }, freed: { calls: c.freed, channels: h.freed } };
}

/** The state once the lanes' shrinks are confirmed: freed pays the debt, then fills the pool. */
export function applyShrinks(state: LeaseState, results: readonly ShrinkResult[]): LeaseState {
  const shares = [...state.shares];
  let debt = state.debt;
  let pool = state.pool;
  for (const r of results) {
    const expect = sub(shares[r.lane]!, r.freed);
    if (
      expect.calls !== r.share.calls ||
      expect.channels !== r.share.channels ||
      r.freed.calls < 0 ||
      r.freed.channels < 0
    )
      throw new RangeError(`lane ${r.lane}: a shrink result that does not match its share`);
    shares[r.lane] = r.share;
    const [dc, pc] = payDebt(debt.calls, r.freed.calls);
    const [dh, ph] = payDebt(debt.channels, r.freed.channels);
    debt = { calls: dc, channels: dh };
    pool = add(pool, { calls: pc, channels: ph });
  }
  return { ...state, shares, pool, debt };
}

/**
 * After the shrinks are confirmed: the planned grants cut to what the pool holds, and the state
 * with them applied (the grants are then sent to the lanes; a lane may use a grant only once
 * it has it, and the coordinator has already counted it out of the pool).
 */
export function settle(
  state: LeaseState,
  results: readonly ShrinkResult[],
  planned: readonly GrantOrder[],
): { state: LeaseState; grants: GrantOrder[] } {
  const after = applyShrinks(state, results);
  const lanes = after.shares.length;
  const want = (pick: (b: Budget) => number) => {
    const v = new Array<number>(lanes).fill(0);
    for (const g of planned) v[g.lane]! += pick(g.amount);
    return v;
  };
  const calls = cutToPool(
    after.pool.calls,
    want((b) => b.calls),
  );
  const channels = cutToPool(
    after.pool.channels,
    want((b) => b.channels),
  );
  const grants: GrantOrder[] = [];
  const shares = [...after.shares];
  for (let i = 0; i < lanes; i++) {
    if (calls[i]! === 0 && channels[i]! === 0) continue;
    const amount = { calls: calls[i]!, channels: channels[i]! };
    grants.push({ lane: i, amount });
    shares[i] = add(shares[i]!, amount);
  }
  const pool = sub(after.pool, sum(grants.map((g) => g.amount)));
  return { state: { ...after, shares, pool }, grants };
}

/** Σ shares + pool = limit + debt, nothing negative; throws otherwise. */
export function checkLease(state: LeaseState): void {
  const total = add(sum(state.shares), state.pool);
  const bound = add(state.limit, state.debt);
  if (total.calls !== bound.calls || total.channels !== bound.channels)
    throw new RangeError(
      `Σ shares + pool = ${total.calls}/${total.channels}, limit + debt = ${bound.calls}/${bound.channels}`,
    );
  for (const b of [...state.shares, state.pool, state.debt])
    if (b.calls < 0 || b.channels < 0 || !Number.isInteger(b.calls) || !Number.isInteger(b.channels))
      throw new RangeError('a share, the pool or the debt is negative or not an integer');
}
