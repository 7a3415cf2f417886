/**
 * Redis' clock as the process sees it: a lower bound of how far Redis TIME is ahead of the
 * process clock, learnt from replies, which turns a call's deadline into Redis time, so that a
 * script skips a call its caller has given up on.
 */
import { StoreUnavailableError } from '../../errors/index.js';
import type { StopSignal } from '../types.js';
import { num } from './bucket-args.js';

/**
 * A lower bound of (Redis TIME - process clock), µs, from replies: a Redis time read before a
 * reply left, minus the reply's arrival time on the process clock, can only be below the true
 * offset. The best (largest) bound of the last 10 to 20 s is kept, so a clock step is followed
 * within 20 s. (On a Cluster one bound serves every node: their clocks are assumed in step, as
 * NTP keeps them.)
 */
export class ClockOffset {
  private current?: number;
  private previous?: number;
  private windowEnds = 0;

  sample(redisUs: number, receivedUs: number): void {
    if (receivedUs >= this.windowEnds) {
      this.previous = this.current;
      this.current = undefined;
      this.windowEnds = receivedUs + 10_000_000;
    }
    const lo = redisUs - receivedUs;
    if (this.current === undefined || lo > this.current) this.current = lo;
  }

  get lowerBound(): number | undefined {
    if (this.current === undefined) return this.previous;
    return this.previous === undefined ? this.current : Math.max(this.current, this.previous);
  }

  /** A batch's clock argument: '1' asks its script for Redis TIME (no bound known yet), else ''. */
  askClock(): string {
    return this.lowerBound === undefined ? '1' : '';
  }

  /**
   * A call's deadline in Redis time ('' = none): the script skips the call if it runs at or after
   * it, since the caller has then decided it by its store-trouble policy. The process deadline is
   * shifted by the lower bound, so a call that runs after its caller gave up is always skipped;
   * one that runs up to a round trip before may be skipped too (its caller then decides it by
   * policy as well). While no reply told Redis' clock yet (the first batch, or none for 20 s): no
   * deadline, and the next batch asks its script for Redis TIME.
   */
  deadline(signal: StopSignal | undefined): string {
    const d = (signal as { deadlineUs?: number } | undefined)?.deadlineUs;
    const lo = this.lowerBound;
    return d === undefined || lo === undefined ? '' : num(Math.floor(d + lo));
  }
}

/** A call the script skipped: its deadline had passed when Redis ran it (nothing was counted). */
export function skipped(): StoreUnavailableError {
  return new StoreUnavailableError('Redis ran the call after its deadline: skipped, nothing counted');
}
