/**
 * Clocks, in integer microseconds since the epoch.
 *
 * - systemClockUs: the process clock (the memory store's live default);
 * - Redis TIME: read inside the scripts when no time is given (one clock for all processes);
 * - VirtualClock: replay and tests: time moves only when told, and timers fire as it passes them.
 */
import { performance } from 'node:perf_hooks';

export function systemClockUs(): number {
  return Math.round((performance.timeOrigin + performance.now()) * 1000);
}

/** What the engine needs of a clock: the time, and timers on that time. */
export interface Clock {
  /** Now in µs; undefined means "let the store decide" (Redis TIME). */
  now(): number | undefined;
  /** Run fn once the clock reaches `atUs` (at once if it already has); returns a canceller. */
  setTimer(atUs: number, fn: () => void): () => void;
  /**
   * Keep the process alive until the returned function is called: a clock whose timers do not
   * (SystemClock) has it, for a draining close() to be waited for. A clock that moves only when
   * told (VirtualClock) has none: holding the process would not move it.
   */
  keepAlive?(): () => void;
}

/**
 * How long before its time a SystemClock timer stops sleeping and checks the clock on every turn
 * of the event loop instead. Node timers have millisecond resolution and fire up to ~1 ms early
 * or late; held calls paced back to back would add that lateness up, call after call.
 */
const POLL_US = 1_500;

/**
 * The real clock: timers are real timers, unref'd so held calls never keep a process alive (but
 * for their last `pollUs`, and while keepAlive() is held: a draining close()). A timer fires on
 * the first turn of the event loop at or after its
 * time (never before it): it sleeps until `pollUs` before, then polls with setImmediate (the
 * loop keeps serving I/O meanwhile, but spins: with many carriers at high cps that is CPU
 * spent). `pollUs` 0 sleeps all the way (a send then leaves up to ~1 ms late, which pacing at
 * full rate adds up: the next call waits 1/cps after the late one).
 */
export class SystemClock implements Clock {
  /**
   * With `storeTime`, now() is undefined so the store uses its own clock (Redis TIME).
   * `pollUs`: how long before its time a timer polls instead of sleeping (default 1500 µs).
   */
  constructor(
    private readonly storeTime = false,
    private readonly pollUs = POLL_US,
  ) {}
  now(): number | undefined {
    return this.storeTime ? undefined : systemClockUs();
  }
  setTimer(atUs: number, fn: () => void): () => void {
    let timer: NodeJS.Timeout | undefined;
    let immediate: NodeJS.Immediate | undefined;
    const step = () => {
      timer = immediate = undefined;
      const left = atUs - systemClockUs();
      if (left <= 0) fn();
      else schedule(left);
    };
    const schedule = (left: number) => {
      if (left > this.pollUs) (timer = setTimeout(step, Math.max(1, (left - this.pollUs) / 1000))).unref();
      else immediate = setImmediate(step); // not unref'd: an unref'd immediate waits for other I/O to wake the loop
    };
    schedule(Math.max(1, atUs - systemClockUs())); // never synchronously
    return () => {
      clearTimeout(timer);
      clearImmediate(immediate);
      timer = immediate = undefined;
    };
  }
  keepAlive(): () => void {
    const alive = setInterval(() => undefined, 1 << 30);
    return () => clearInterval(alive);
  }
}

interface Timer {
  at: number;
  seq: number;
  fn: () => void;
}

/** A clock that only moves when told to; timers due are run in time order as it advances. */
export class VirtualClock implements Clock {
  private t: number;
  private timers: Timer[] = [];
  private seq = 0;

  constructor(startUs = 0) {
    this.t = startUs;
  }

  now(): number {
    return this.t;
  }

  setTimer(atUs: number, fn: () => void): () => void {
    const timer: Timer = { at: atUs, seq: this.seq++, fn };
    // keep timers sorted by (at, seq): most are appended at the end
    let i = this.timers.length;
    while (i > 0 && this.timers[i - 1]!.at > atUs) i--;
    this.timers.splice(i, 0, timer);
    if (atUs <= this.t) queueMicrotask(() => this.runDue());
    return () => {
      const j = this.timers.indexOf(timer);
      if (j >= 0) this.timers.splice(j, 1);
    };
  }

  /**
   * Move to `toUs` (never backwards). Timers due on the way run in time order, each with the
   * clock set to its own time, as if time had passed through it.
   */
  advance(toUs: number): void {
    while (this.timers.length > 0 && this.timers[0]!.at <= toUs) {
      const timer = this.timers.shift()!;
      if (timer.at > this.t) this.t = timer.at;
      timer.fn();
    }
    if (toUs > this.t) this.t = toUs;
  }

  /** Timers still waiting. */
  get pending(): number {
    return this.timers.length;
  }

  /** The time of the next timer, if any. */
  get nextTimer(): number | undefined {
    return this.timers[0]?.at;
  }

  private runDue(): void {
    while (this.timers.length > 0 && this.timers[0]!.at <= this.t) this.timers.shift()!.fn();
  }
}
