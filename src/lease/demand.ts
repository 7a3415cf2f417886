/**
 * A lane's demand estimate and its want (issue 28; not wired yet, see share.ts).
 *
 * Demand is what the lane was offered, not what it admitted: calls admitted plus calls refused
 * for lack of share since the last tick (channels: in use plus refused for lack of channel
 * share). Counting refusals is what lets a starved lane's estimate rise above its share;
 * counting admissions alone, a lane could never ask for more than it already has.
 *
 * The average is an EWMA per tick that rises faster than it falls: a lane whose demand jumps
 * (the hot lanes move) refuses calls until its share follows, which is the costly direction;
 * a lane whose demand fell holds only unused share, which the next tick can shrink anyway
 * (shrinking takes only what is unused), so a slow fall costs nothing but a little fairness.
 *
 * The want turns demand into a share: calls per tick times the ticks per window is the window
 * count the lane will reach; on top, headroom k·sqrt(x) because a Poisson count over a window
 * strays by about sqrt of its mean (a headroom proportional to demand would starve small lanes
 * and waste on big ones); and a floor, so that an idle lane can admit its first call without
 * waiting one tick for a grant (each of those would be a false refusal).
 */
import type { Budget } from './share.js';

export interface DemandParams {
  /** Window length over tick interval, W / T (10 for W = 1 s, T = 100 ms). */
  readonly windowTicks: number;
  /** EWMA weight of a new sample above the average (0..1]. */
  readonly up: number;
  /** EWMA weight of a new sample below the average (0..1]. */
  readonly down: number;
  /** Headroom in standard deviations: want = x + headroom·sqrt(x). */
  readonly headroom: number;
  /** The least want of any lane. */
  readonly floor: Budget;
}

export interface DemandSample {
  /** Calls admitted plus calls refused for lack of share since the last tick. */
  readonly offeredCalls: number;
  /** Channels in use plus calls refused for lack of channel share since the last tick. */
  readonly wantedChannels: number;
}

function ewma(prev: number, sample: number, up: number, down: number): number {
  return prev + (sample > prev ? up : down) * (sample - prev);
}

/** The new estimate: calls offered per tick, channels wanted. */
export function updateDemand(prev: Budget, sample: DemandSample, p: DemandParams): Budget {
  return {
    calls: ewma(prev.calls, sample.offeredCalls, p.up, p.down),
    channels: ewma(prev.channels, sample.wantedChannels, p.up, p.down),
  };
}

function withHeadroom(x: number, k: number, floor: number): number {
  return Math.max(floor, Math.ceil(x + k * Math.sqrt(x) - 1e-9));
}

/** What the lane should hold: its window count to come, plus headroom; at least the floor. */
export function want(demand: Budget, p: DemandParams): Budget {
  return {
    calls: withHeadroom(demand.calls * p.windowTicks, p.headroom, p.floor.calls),
    channels: withHeadroom(demand.channels, p.headroom, p.floor.channels),
  };
}
