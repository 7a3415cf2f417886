/**
 * A lane's demand estimate and its want (share.ts).
 *
 * Demand is what the lane was offered, not what it admitted: calls admitted plus calls refused
 * for lack of share since the last tick (channels: in use plus refused for lack of channel
 * share). Counting refusals is what lets a starved lane's estimate rise above its share;
 * counting admissions alone, a lane could never ask for more than it already has. The
 * estimate is an EWMA per tick, allowed to rise faster than it falls (a lane whose demand
 * jumps refuses calls until its share follows, the costly direction).
 *
 * The want looks one tick ahead, not one window: a share only has to last until the next
 * tick, when it can be moved again. What the lane's window will hold then is known for the
 * most part: its count now, less the calls that leave the window before the next tick (the
 * lane can count those exactly: its log in (t - W, t - W + T]), plus the calls to come, the
 * estimate per tick. Only those calls to come are uncertain, so the headroom is
 * k·sqrt(calls per tick) (a Poisson count strays by about the square root of its mean), not a
 * window's worth of noise. A want over the whole window (rate × W plus k·sqrt of that) was
 * tried first and refused ~9 % of calls at 95 % load with 16 lanes: the sum of sixteen
 * windows' noise is several times the slack a 95 % load leaves, where a tick's is not.
 * A floor lets an idle lane admit its first call without waiting one tick for a grant.
 *
 * Channels the same way, one tick ahead: in use now, plus the calls to come (each takes one),
 * less the releases expected (their average per tick), headroom k·sqrt(calls + releases per
 * tick). A want of "average in use" was tried first: it lagged a lane whose calls jump by a
 * whole hold time, and channel refusals were ~45 % of the false refusals.
 */
import type { Budget } from './share.js';

export interface DemandParams {
  /** Window length over tick interval, W / T (10 for W = 1 s, T = 100 ms). */
  readonly windowTicks: number;
  /** EWMA weight of a new sample above the average (0..1]. */
  readonly up: number;
  /** EWMA weight of a new sample below the average (0..1]. */
  readonly down: number;
  /** Headroom in standard deviations of what is uncertain. */
  readonly headroom: number;
  /** The least want of any lane. */
  readonly floor: Budget;
}

/** The rule's defaults (docs/leasing.md; bench/lease-sim.ts measured them). */
export const DEFAULT_DEMAND = { up: 0.6, down: 0.2, headroom: 2, floor: { calls: 1, channels: 1 } } as const;

/** The demand parameters of a level with window `windowUs` ticked every `tickMs`. */
export function demandParams(windowUs: number, tickMs: number, override?: Partial<DemandParams>): DemandParams {
  return { windowTicks: windowUs / 1000 / tickMs, ...DEFAULT_DEMAND, ...override };
}

export interface DemandSample {
  /** Calls admitted plus calls refused for lack of either share since the last tick. */
  readonly offeredCalls: number;
  /** Channels released since the last tick. */
  readonly releasedChannels: number;
}

function ewma(prev: number, sample: number, up: number, down: number): number {
  return prev + (sample > prev ? up : down) * (sample - prev);
}

/** The new estimate: calls offered per tick, channels released per tick. */
export function updateDemand(prev: Budget, sample: DemandSample, p: DemandParams): Budget {
  return {
    calls: ewma(prev.calls, sample.offeredCalls, p.up, p.down),
    channels: ewma(prev.channels, sample.releasedChannels, p.up, p.down),
  };
}

/**
 * One resource's want: what the lane will hold at the next tick (at least the floor), and
 * headroom. Real numbers: the split rounds once, at the end (rounding each lane's want up
 * wasted ~1 call per lane, 16 of the 50 a 95 % load leaves free).
 */
export interface Want {
  readonly base: number;
  readonly headroom: number;
}

/** What the lane's window holds now and what of it leaves before the next tick; its channels in use. */
export interface WindowNow {
  readonly inWindow: number;
  readonly leaving: number;
  readonly inUse: number;
}

/** What the lane should hold until the next tick (see the header). */
export function want(demand: Budget, now: WindowNow, p: DemandParams): { calls: Want; channels: Want } {
  const k = p.headroom;
  const x = Math.max(0, now.inWindow - now.leaving) + demand.calls;
  return {
    calls: { base: Math.max(p.floor.calls, x), headroom: k * Math.sqrt(demand.calls) },
    channels: {
      base: Math.max(p.floor.channels, now.inUse + demand.calls - demand.channels),
      headroom: k * Math.sqrt(demand.calls + demand.channels),
    },
  };
}
