/**
 * The open-loop driver (issue 11): calls offered on a fixed schedule, each in an I/O callback of
 * its own, latency counted from each call's scheduled time (no coordinated omission), with the
 * process' garbage-collection pauses. It measures nothing itself: openloop.ts, alloc.ts and
 * cluster-scaling.ts drive their systems with it.
 */
import { performance, PerformanceObserver } from 'node:perf_hooks';
import { histogram, type Histogram } from './workload.js';

export interface OpenLoopResult {
  offered: number;
  done: number;
  /** From the first scheduled call to the last completion. */
  seconds: number;
  /** Latency from the scheduled time, ns. */
  hist: Histogram;
  /** Calls still unanswered when the run gave up waiting (counted as failures by the checks). */
  lost: number;
  /** The process' garbage-collection pauses during the run: total and longest, ms. */
  gcMs: number;
  gcMaxMs: number;
}

/**
 * Offer `rate` calls/s for `seconds` (call i scheduled at start + i / rate), each issued in its
 * own setImmediate from a pump that checks the schedule in every turn of the event loop; `op(i)` resolves when call i is decided. `record(i)` says whether call i's
 * latency goes into the histogram (default all). Waits for every call, at most `graceMs` past
 * the schedule.
 */
export function openLoop(
  rate: number,
  seconds: number,
  op: (i: number) => Promise<void>,
  record: (i: number) => boolean = () => true,
  graceMs = 30_000,
): Promise<OpenLoopResult> {
  const n = Math.max(1, Math.floor(rate * seconds));
  const hist = histogram();
  const start = performance.now() + 2;
  const stepMs = 1000 / rate;
  let issued = 0;
  let done = 0;
  let last = start;
  // every pause stops the event loop, and the calls due meanwhile leave late together: the tail
  let gcMs = 0;
  let gcMaxMs = 0;
  const gc = new PerformanceObserver((list) => {
    for (const e of list.getEntries()) {
      gcMs += e.duration;
      if (e.duration > gcMaxMs) gcMaxMs = e.duration;
    }
  });
  gc.observe({ entryTypes: ['gc'] });
  return new Promise((resolve) => {
    let finished = false;
    const finish = () => {
      if (finished) return;
      finished = true;
      clearTimeout(giveUp);
      gc.disconnect();
      resolve({ offered: n, done, seconds: (last - start) / 1000, hist, lost: n - done, gcMs, gcMaxMs });
    };
    const giveUp = setTimeout(finish, seconds * 1000 + graceMs);
    const issue = (i: number) => {
      const scheduled = start + i * stepMs;
      op(i).then(
        () => {
          const t = performance.now();
          if (record(i)) hist.recordValue(Math.max(1, Math.round((t - scheduled) * 1e6)));
          last = t;
          if (++done === n) finish();
        },
        () => {
          if (++done === n) finish();
        },
      );
    };
    // The pump runs in every turn of the event loop (setImmediate, never a timer: a 1 ms timer
    // released each millisecond's calls together, 1 ms late at worst, and that was the floor of
    // every p99); each call due is issued in an immediate of its own, as INVITEs come off sockets.
    const pump = () => {
      const due = Math.min(n, Math.floor((performance.now() - start) / stepMs) + 1);
      while (issued < due) {
        const i = issued++;
        setImmediate(issue, i);
      }
      if (issued < n) setImmediate(pump);
    };
    setImmediate(pump);
  });
}

/**
 * Call i's Call-ID. A SIP stack parses it off the wire: a fresh string, never a number converted
 * to decimal, which V8 would keep in its number-to-string cache (an old-generation table that
 * made each such string outlive young collections and be promoted, a cost of the driver, not of
 * the system measured, and one only the systems that take a call id would pay).
 */
export const callIdOf = (prefix: string, i: number): string => prefix + i.toString(36);
