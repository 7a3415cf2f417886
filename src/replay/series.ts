/**
 * Time series of a replay, for the HTML report: per-second bins fed from the decisions (as
 * stats.ts is), for all inbound and outbound traffic, per level (global, account, peer) and per
 * carrier. Memory is bounded by the seconds a series saw traffic in (one bin of a few numbers per
 * series and second, typed arrays), never by the number of calls.
 *
 * `seriesJson` turns the bins into what the report embeds: buckets of `step` seconds (a whole
 * trace in at most MAX_POINTS buckets), each bucket showing the busiest second it holds, so the
 * peaks stay exact however coarse the view; only buckets with traffic are listed.
 */
import type { Reservation } from '../dispatch/dispatcher.js';
import { carriersPassed } from './stats.js';

/** How a column merges the values of one second: added up, the largest kept, or the latest. */
type Agg = 'sum' | 'max' | 'last';

/** Sparse per-second bins of a few numeric columns; seconds come mostly in increasing order. */
export class Bins {
  secs = new Float64Array(16);
  cols: Float64Array[];
  length = 0;

  constructor(readonly aggs: readonly Agg[]) {
    this.cols = aggs.map(() => new Float64Array(16));
  }

  /** Index of the bin of second `sec`, created when missing. */
  private bin(sec: number): number {
    const n = this.length;
    if (n > 0 && this.secs[n - 1] === sec) return n - 1;
    let at = n;
    if (n > 0 && this.secs[n - 1]! > sec) {
      // out of order (slots of a carrier given back in time order but binned apart): search
      let lo = 0;
      let hi = n - 1;
      while (lo < hi) {
        const mid = (lo + hi) >> 1;
        if (this.secs[mid]! < sec) lo = mid + 1;
        else hi = mid;
      }
      if (this.secs[lo] === sec) return lo;
      at = lo;
    }
    if (n === this.secs.length) this.grow();
    if (at < n) {
      this.secs.copyWithin(at + 1, at, n);
      for (const c of this.cols) c.copyWithin(at + 1, at, n);
    }
    this.secs[at] = sec;
    this.aggs.forEach((a, i) => {
      this.cols[i]![at] = a === 'sum' ? 0 : Number.NaN;
    });
    this.length++;
    return at;
  }

  private grow(): void {
    const size = this.secs.length * 2;
    const more = (a: Float64Array) => {
      const b = new Float64Array(size);
      b.set(a);
      return b;
    };
    this.secs = more(this.secs);
    this.cols = this.cols.map(more);
  }

  /** Add `values[i]` to column i of second `sec` (undefined: nothing for that column). */
  add(sec: number, values: readonly (number | undefined)[]): void {
    const i = this.bin(sec);
    for (let c = 0; c < values.length; c++) {
      const v = values[c];
      if (v === undefined) continue;
      const col = this.cols[c]!;
      const agg = this.aggs[c];
      if (agg === 'sum') col[i]! += v;
      else if (agg === 'last' || !(col[i]! >= v)) col[i] = v; // max: NaN (nothing yet) or smaller
    }
  }
}

const secondOf = (us: number): number => Math.floor(us / 1_000_000);

/** Columns of a level: offered, admitted, rejected, then one window count per limit. */
const LEVEL = { offered: 0, admitted: 1, rejected: 2, windows: 3 } as const;
/** Columns of a carrier's decisions (binned by decision time). */
const CARRIER = { dispatched: 0, reroutedAway: 1, rejected: 2, delaySumMs: 3, delayMaxMs: 4 } as const;

export interface CarrierBins {
  /** By decision time: dispatched, rerouted away, rejected, delay sum and max (ms). */
  decisions: Bins;
  /** By slot time: calls sent (the pacing the carrier sees). */
  slots: Bins;
}

export class ReplaySeries {
  /** All inbound calls: offered, admitted, rejected. */
  readonly inbound = new Bins(['sum', 'sum', 'sum']);
  /** All outbound calls: offered, dispatched, rejected, rerouted. */
  readonly outbound = new Bins(['sum', 'sum', 'sum', 'sum']);
  readonly levels = new Map<string, Bins>();
  readonly carriers = new Map<string, CarrierBins>();
  /** Calls in progress (max and latest per second) where a channel limit is configured. */
  readonly levelChannels = new Map<string, Bins>();
  readonly carrierChannels = new Map<string, Bins>();

  inboundCall(atUs: number, admitted: boolean): void {
    this.inbound.add(secondOf(atUs), [1, admitted ? 1 : 0, admitted ? 0 : 1]);
  }

  /**
   * One call checked at a level. `windowCounts`: for an admitted call, the count (or estimate)
   * of each of the level's limits with it (WindowPeak.add's values), in the limits' order.
   */
  levelCall(
    key: string,
    limits: number,
    atUs: number,
    outcome: 'admitted' | 'rejected',
    windowCounts?: readonly number[],
  ): void {
    let bins = this.levels.get(key);
    if (!bins) this.levels.set(key, (bins = new Bins(['sum', 'sum', 'sum', ...Array<Agg>(limits).fill('max')])));
    const row: (number | undefined)[] = [1, outcome === 'admitted' ? 1 : 0, outcome === 'rejected' ? 1 : 0];
    for (let i = 0; i < limits; i++) row.push(windowCounts?.[i]);
    bins.add(secondOf(atUs), row);
  }

  /** The calls in progress at a level changed at `atUs` (ChannelPeak's onCount). */
  levelChannel(key: string, atUs: number, inUse: number): void {
    channelBins(this.levelChannels, key).add(secondOf(atUs), [inUse, inUse]);
  }

  carrierChannel(id: string, atUs: number, inUse: number): void {
    channelBins(this.carrierChannels, id).add(secondOf(atUs), [inUse, inUse]);
  }

  carrier(id: string): CarrierBins {
    let c = this.carriers.get(id);
    if (!c)
      this.carriers.set(
        id,
        (c = { decisions: new Bins(['sum', 'sum', 'sum', 'sum', 'max']), slots: new Bins(['sum']) }),
      );
    return c;
  }

  outboundCall(atUs: number, r: Reservation): void {
    const sec = secondOf(atUs);
    const dispatched = r.outcome === 'dispatched';
    this.outbound.add(sec, [1, dispatched ? 1 : 0, dispatched ? 0 : 1, r.reroutedFrom.length > 0 ? 1 : 0]);
    for (const id of carriersPassed(r.reroutedFrom)) {
      const row = [0, 1, dispatched ? 0 : 1];
      this.carrier(id).decisions.add(sec, row);
    }
    if (dispatched) {
      const c = this.carrier(r.carrier!);
      const delay = r.delayMs ?? 0;
      c.decisions.add(sec, [1, 0, 0, delay, delay]);
      c.slots.add(secondOf(r.slotAt!), [1]);
    }
  }
}

function channelBins(m: Map<string, Bins>, key: string): Bins {
  let b = m.get(key);
  if (!b) m.set(key, (b = new Bins(['max', 'last'])));
  return b;
}

// ---------------------------------------------------------------------------------------------
// What the report embeds

/** Most buckets on one chart's time axis. */
export const MAX_POINTS = 4_000;
/** Most buckets listed over the series of all levels but the busiest (rates and channels): beyond, they get coarser. */
export const LEVEL_BUDGET = 200_000;
const NICE_STEPS = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 10800, 21600, 43200, 86400];

/** The smallest nice step (s) that shows `span` seconds in at most `points` buckets. */
export function stepFor(span: number, points = MAX_POINTS): number {
  for (const s of NICE_STEPS) if (Math.ceil(span / s) <= points) return s;
  let s = 86400;
  while (Math.ceil(span / s) > points) s *= 2;
  return s;
}

/**
 * One series as embedded: `idx` lists the buckets with traffic (bucket i covers seconds
 * [origin + i·step, origin + (i+1)·step)), and each column has one value per listed bucket
 * (null: no value in that bucket).
 */
export interface SeriesJson {
  step: number;
  idx: number[];
  cols: Record<string, (number | null)[]>;
}

/** How one output column is made from the bins of a bucket. */
type Out =
  | { name: string; max: number } // the largest per-second value of a column (peak kept exact)
  | { name: string; ratio: [number, number] }; // sum of one column over sum of another (a mean)

const round3 = (x: number): number => Math.round(x * 1000) / 1000;

function bucketize(bins: Bins, origin: number, step: number, outs: readonly Out[]): SeriesJson {
  const idx: number[] = [];
  const cols: (number | null)[][] = outs.map(() => []);
  const acc = new Float64Array(outs.length); // the max, or a ratio's numerator
  const den = new Float64Array(outs.length); // a ratio's denominator
  let cur = Number.NaN;
  const flush = () => {
    if (Number.isNaN(cur)) return;
    idx.push(cur);
    outs.forEach((o, i) => {
      const v = 'max' in o ? acc[i]! : den[i]! > 0 ? acc[i]! / den[i]! : Number.NaN;
      cols[i]!.push(Number.isNaN(v) ? null : round3(v));
    });
  };
  for (let j = 0; j < bins.length; j++) {
    const b = Math.floor((bins.secs[j]! - origin) / step);
    if (b !== cur) {
      flush();
      cur = b;
      outs.forEach((o, i) => {
        acc[i] = 'max' in o ? Number.NaN : 0;
        den[i] = 0;
      });
    }
    outs.forEach((o, i) => {
      if ('max' in o) {
        const v = bins.cols[o.max]![j]!;
        if (!Number.isNaN(v) && !(acc[i]! >= v)) acc[i] = v;
      } else {
        acc[i]! += bins.cols[o.ratio[0]]![j]!;
        den[i]! += bins.cols[o.ratio[1]]![j]!;
      }
    });
  }
  flush();
  return { step, idx, cols: Object.fromEntries(outs.map((o, i) => [o.name, cols[i]!])) };
}

/**
 * Calls in progress as buckets: `used` the most at any moment of the bucket (counting the calls
 * already in progress when it began), `after` how many when it ended. A bucket not listed has
 * the `after` of the one before all along (the count changes only at a decision or an end).
 * Ends past the last second of traffic are left out: nothing is decided there.
 */
function channelBuckets(bins: Bins, origin: number, step: number, lastSec: number): SeriesJson {
  const idx: number[] = [];
  const used: number[] = [];
  const after: number[] = [];
  let cur = Number.NaN;
  let carry = 0;
  let most = 0;
  let latest = 0;
  const flush = () => {
    if (Number.isNaN(cur)) return;
    idx.push(cur);
    used.push(most);
    after.push(latest);
    carry = latest;
  };
  for (let j = 0; j < bins.length && bins.secs[j]! <= lastSec; j++) {
    const b = Math.floor((bins.secs[j]! - origin) / step);
    if (b !== cur) {
      flush();
      cur = b;
      most = carry;
    }
    most = Math.max(most, bins.cols[0]![j]!);
    latest = bins.cols[1]![j]!;
  }
  flush();
  return { step, idx, cols: { used, after } };
}

/** Buckets of `step` seconds holding traffic in these bins. */
function bucketCount(bins: Bins, origin: number, step: number): number {
  let n = 0;
  let cur = Number.NaN;
  for (let j = 0; j < bins.length; j++) {
    const b = Math.floor((bins.secs[j]! - origin) / step);
    if (b !== cur) {
      n++;
      cur = b;
    }
  }
  return n;
}

export interface ReplaySeriesJson {
  /** Epoch second of bucket 0. */
  origin: number;
  /** Step (s) of the main charts, and how many buckets they span. */
  step: number;
  buckets: number;
  /** Columns: offered, admitted, rejected (calls/s: the busiest second of each bucket). */
  inbound: SeriesJson;
  /** Columns: offered, dispatched, rejected, rerouted (calls/s). */
  outbound: SeriesJson;
  /** Columns: offered, admitted, rejected (calls/s), w0, w1… (count in the window of each limit). */
  levels: Record<string, SeriesJson>;
  /**
   * decisions (by decision time): dispatched, rerouted (away), rejected (calls/s), wait_max,
   * wait_mean (ms); sent (by slot time): sent (calls/s).
   */
  carriers: Record<string, { decisions: SeriesJson; sent: SeriesJson }>;
  /** Calls in progress where a channel limit is configured (see channelBuckets: used, after). */
  levelChannels: Record<string, SeriesJson>;
  carrierChannels: Record<string, SeriesJson>;
}

function levelOuts(limits: number): Out[] {
  const outs: Out[] = [
    { name: 'offered', max: LEVEL.offered },
    { name: 'admitted', max: LEVEL.admitted },
    { name: 'rejected', max: LEVEL.rejected },
  ];
  for (let i = 0; i < limits; i++) outs.push({ name: `w${i}`, max: LEVEL.windows + i });
  return outs;
}

const lastSec = (b: Bins): number => (b.length > 0 ? b.secs[b.length - 1]! : Number.NEGATIVE_INFINITY);

/**
 * The series as the report embeds them, from the trace's first call time. `keep` names the
 * levels shown at the main step whatever the budget (the busiest ones); the others share
 * LEVEL_BUDGET buckets and get a coarser step when they would need more.
 */
export function seriesJson(s: ReplaySeries, firstUs: number, keep: ReadonlySet<string>): ReplaySeriesJson {
  const origin = secondOf(firstUs);
  // slots may come after the last call
  const last = Math.max(
    lastSec(s.inbound),
    lastSec(s.outbound),
    ...[...s.carriers.values()].map((c) => lastSec(c.slots)),
    origin,
  );
  const span = last - origin + 1;
  const step = stepFor(span);
  // the channel series of those levels count in the budget too (one per level with a channel limit)
  const minor = [...s.levels.entries(), ...s.levelChannels.entries()].filter(([k]) => !keep.has(k));
  let minorStep = step;
  while (minorStep < span && minor.reduce((n, [, b]) => n + bucketCount(b, origin, minorStep), 0) > LEVEL_BUDGET) {
    minorStep = NICE_STEPS.find((x) => x > minorStep) ?? minorStep * 2;
  }
  const levels: Record<string, SeriesJson> = {};
  for (const [key, bins] of s.levels) {
    levels[key] = bucketize(
      bins,
      origin,
      keep.has(key) ? step : minorStep,
      levelOuts(bins.aggs.length - LEVEL.windows),
    );
  }
  const carriers: ReplaySeriesJson['carriers'] = {};
  for (const [id, c] of s.carriers) {
    carriers[id] = {
      decisions: bucketize(c.decisions, origin, step, [
        { name: 'dispatched', max: CARRIER.dispatched },
        { name: 'rerouted', max: CARRIER.reroutedAway },
        { name: 'rejected', max: CARRIER.rejected },
        { name: 'wait_max', max: CARRIER.delayMaxMs },
        { name: 'wait_mean', ratio: [CARRIER.delaySumMs, CARRIER.dispatched] },
      ]),
      sent: bucketize(c.slots, origin, step, [{ name: 'sent', max: 0 }]),
    };
  }
  const channels = (m: Map<string, Bins>, stepOf: (key: string) => number) =>
    Object.fromEntries([...m].map(([k, b]) => [k, channelBuckets(b, origin, stepOf(k), last)]));
  return {
    origin,
    step,
    buckets: Math.ceil(span / step),
    ...totalsJson(s, origin, step),
    levels,
    carriers,
    levelChannels: channels(s.levelChannels, (k) => (keep.has(k) ? step : minorStep)),
    carrierChannels: channels(s.carrierChannels, () => step),
  };
}

/** All inbound and all outbound traffic on a given grid (the what-if's old run on the new run's). */
export function totalsJson(
  s: ReplaySeries,
  origin: number,
  step: number,
): Pick<ReplaySeriesJson, 'inbound' | 'outbound'> {
  return {
    inbound: bucketize(s.inbound, origin, step, [
      { name: 'offered', max: 0 },
      { name: 'admitted', max: 1 },
      { name: 'rejected', max: 2 },
    ]),
    outbound: bucketize(s.outbound, origin, step, [
      { name: 'offered', max: 0 },
      { name: 'dispatched', max: 1 },
      { name: 'rejected', max: 2 },
      { name: 'rerouted', max: 3 },
    ]),
  };
}
