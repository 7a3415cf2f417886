/**
 * Replay statistics, gathered from the decisions alone (not from the store), so the report is
 * an independent proof that every limit held: for each configured limit, the most calls
 * admitted in any window of that limit, measured the way the limit's algorithm counts.
 * Per limit only the calls inside one window are kept; per carrier, every delay it gave (8 to
 * 16 bytes a dispatched call: an array that doubles), so that its percentiles are delays some
 * call was given.
 */
import type { BucketConfig } from '../config/types.js';
import type { Algorithm, Limit } from '../store/types.js';
import { estimateBelow, windowIndex } from '../store/window.js';

/**
 * The most admitted calls in any window of one limit, measured as its algorithm counts (a sliding
 * window: the highest estimate c + p(1 - f) a call was admitted under, counted before it).
 */
export class WindowPeak {
  /** Rolling (sliding-log): times inside (t - W, t]. */
  private times: number[] = [];
  private head = 0;
  /** Fixed windows: index and count of the current and previous window. */
  private k = Number.NaN;
  private c = 0;
  private p = 0;
  peak = 0;
  /** Sliding window: a call admitted while its estimate was not below L (compared exactly). */
  private over = false;
  /** The call time at which the peak was first reached (NaN before any call). */
  peakAt = Number.NaN;

  constructor(readonly limit: Limit) {}

  /** Count an admitted call at `t` (times in order); returns its window's count with it (a sliding window: the estimate it was admitted under). */
  add(t: number): number {
    const value = this.valueWith(t);
    if (value > this.peak) {
      this.peak = value;
      this.peakAt = t;
    }
    return value;
  }

  private valueWith(t: number): number {
    const { windowUs: W, algorithm } = this.limit;
    if (algorithm === 'sliding-log') {
      this.times.push(t);
      while (this.times[this.head]! <= t - W) this.head++;
      if (this.head > 1024 && this.head * 2 > this.times.length) {
        this.times = this.times.slice(this.head);
        this.head = 0;
      }
      return this.times.length - this.head;
    }
    const k = windowIndex(t, W);
    if (k !== this.k) {
      this.p = k === this.k + 1 ? this.c : 0;
      this.c = 0;
      this.k = k;
    }
    // sliding-window: the estimate c + p(1 - f) this call was admitted under (must stay < L; the
    // value shown is a double, which may round to L where the estimate is below it: held is exact)
    if (algorithm === 'fixed-window') return ++this.c;
    if (!estimateBelow(this.limit.limit, W, this.c, this.p, t - k * W)) this.over = true;
    const value = this.c + this.p * (1 - (t - k * W) / W);
    this.c++;
    return value;
  }

  /**
   * The busiest window, µs [from, to]: (peakAt − W, peakAt] for the rolling log, the fixed window
   * [kW, (k+1)W) holding peakAt otherwise; undefined before any call.
   */
  get busiest(): { fromUs: number; toUs: number } | undefined {
    if (Number.isNaN(this.peakAt)) return undefined;
    const W = this.limit.windowUs;
    if (this.limit.algorithm === 'sliding-log') return { fromUs: this.peakAt - W, toUs: this.peakAt };
    const k = windowIndex(this.peakAt, W);
    return { fromUs: k * W, toUs: (k + 1) * W };
  }

  /** The limit held: never more than L calls in a window; for the estimate, always below L. */
  get held(): boolean {
    return this.limit.algorithm === 'sliding-window' ? !this.over : this.peak <= this.limit.limit;
  }
}

/**
 * The most calls in progress at once under a channel limit, from the decisions: each call holds
 * from its decision time until its end, and the holds at t are those ending after t. Decisions
 * come in time order, so the count only rises at a decision: the peak is the largest count seen
 * right after one. Memory: one end per call in progress (a binary min-heap).
 */
export class ChannelPeak {
  private ends: number[] = [];
  peak = 0;

  constructor(readonly channels: number) {}

  /**
   * A call decided at t holds until `end`. `onCount(at, inUse)`, when given, hears every change:
   * each call that ended since the last decision (at its end), then this one.
   */
  add(t: number, end: number, onCount?: (at: number, inUse: number) => void): void {
    const h = this.ends;
    this.endBy(t, onCount);
    if (end > t) this.push(end);
    if (h.length > this.peak) this.peak = h.length;
    onCount?.(t, h.length);
  }

  /** The calls that ended by t leave, each heard at its end. */
  private endBy(t: number, onCount?: (at: number, inUse: number) => void): void {
    const h = this.ends;
    while (h.length > 0 && h[0]! <= t) {
      const e = h[0]!;
      this.pop();
      onCount?.(e, h.length);
    }
  }

  /** After the last decision: every call still holding ends, in end order (for onCount). */
  drain(onCount: (at: number, inUse: number) => void): void {
    while (this.ends.length > 0) {
      const e = this.ends[0]!;
      this.pop();
      onCount(e, this.ends.length);
    }
  }

  get held(): boolean {
    return this.peak <= this.channels;
  }

  private push(x: number): void {
    this.siftUp(this.ends.push(x) - 1);
  }

  private pop(): void {
    const h = this.ends;
    const last = h.pop()!;
    if (h.length === 0) return;
    h[0] = last;
    this.siftDown(0);
  }

  /** The heap order restored above position i (its value may be smaller than its parent's). */
  private siftUp(i: number): void {
    const h = this.ends;
    const x = h[i]!;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (h[parent]! <= x) break;
      h[i] = h[parent]!;
      i = parent;
    }
    h[i] = x;
  }

  /** The heap order restored below position i (its value may be larger than its children's). */
  private siftDown(i: number): void {
    const h = this.ends;
    const x = h[i]!;
    for (;;) {
      const l = 2 * i + 1;
      if (l >= h.length) break;
      const c = l + 1 < h.length && h[l + 1]! < h[l]! ? l + 1 : l;
      if (h[c]! >= x) break;
      h[i] = h[c]!;
      i = c;
    }
    h[i] = x;
  }
}

export interface LevelStats {
  offered: number;
  admitted: number;
  rejected: number;
  peaks: WindowPeak[];
  channels?: ChannelPeak;
}

export function newLevel(bucket: BucketConfig = { limits: [] }): LevelStats {
  const s: LevelStats = {
    offered: 0,
    admitted: 0,
    rejected: 0,
    peaks: bucket.limits.map((l) => new WindowPeak(l)),
  };
  if (bucket.channels !== undefined) s.channels = new ChannelPeak(bucket.channels);
  return s;
}

/**
 * The delays given on a carrier, µs, every one kept: a percentile is the nearest rank, the
 * smallest delay with at least p % of the delays at or below it, so always a delay that some
 * call was given (a histogram's bucket top was up to 0.1 % above any).
 */
export class DelayList {
  private values = new Float64Array(64);
  private n = 0;
  private sorted = true;
  max = 0;

  add(us: number): void {
    if (this.n === this.values.length) {
      const grown = new Float64Array(this.n * 2);
      grown.set(this.values);
      this.values = grown;
    }
    if (this.n > 0 && us < this.values[this.n - 1]!) this.sorted = false;
    this.values[this.n++] = us;
    if (us > this.max) this.max = us;
  }

  /** The p-th percentile (p an integer from 1 to 100) by nearest rank; NaN when there is none. */
  percentile(p: number): number {
    if (this.n === 0) return Number.NaN;
    if (!this.sorted) {
      this.values.subarray(0, this.n).sort();
      this.sorted = true;
    }
    // p n is an integer: its quotient by 100 is exact when whole, so the rank never rounds up wrongly
    return this.values[Math.max(1, Math.ceil((p * this.n) / 100)) - 1]!;
  }
}

/**
 * The carriers a call passed over, each once: a route may name a carrier twice (`A|A|B`), and
 * `rerouted_from` then lists it at each try, but the call passed it over once. The list itself
 * when nothing repeats (the rule: routes are short, and this runs per outbound call).
 */
export function carriersPassed(rerouted: readonly string[]): readonly string[] {
  for (let i = 1; i < rerouted.length; i++)
    if (rerouted.lastIndexOf(rerouted[i]!, i - 1) >= 0) return [...new Set(rerouted)];
  return rerouted;
}

export interface CarrierStats {
  dispatched: number;
  reroutedAway: number;
  rejected: number;
  delays: DelayList;
  /** Smallest spacing between two consecutive slots given on the carrier, µs. */
  minSpacingUs: number;
  lastSlot: number;
  /** Smallest spacing between two consecutive sends on the (virtual) clock, µs. */
  minSentSpacingUs: number;
  lastSent: number;
  intervalUs: number;
  channels?: ChannelPeak;
}

export function newCarrier(intervalUs: number, channels?: number): CarrierStats {
  const s: CarrierStats = {
    dispatched: 0,
    reroutedAway: 0,
    rejected: 0,
    delays: new DelayList(),
    minSpacingUs: Number.POSITIVE_INFINITY,
    lastSlot: Number.NaN,
    minSentSpacingUs: Number.POSITIVE_INFINITY,
    lastSent: Number.NaN,
    intervalUs,
  };
  if (channels !== undefined) s.channels = new ChannelPeak(channels);
  return s;
}

export type { Algorithm };
