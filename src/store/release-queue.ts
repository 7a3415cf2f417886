/**
 * Releases that could not reach the store (a hang-up seen during an outage), retried in the
 * background until they land: a BYE must not leave its channels held until maxCallDuration just
 * because Redis was away for a few seconds. Bounded: past `max` the oldest is given up (its
 * hold still lapses by itself), and an entry is given up once its hold would have lapsed anyway.
 * Retries run one at a time, in the order the calls ended, and stop at the first failure.
 */
import { StoreUnavailableError } from '../errors/index.js';

export interface ReleaseQueueOptions {
  /** Release a call in the store (whether it held something, and when); rejects while the store is away. */
  readonly release: (callId: string) => Promise<{ released: boolean; at: number }>;
  readonly max: number;
  /** How long a kept release stays worth trying, ms (the longest a hold can last). */
  readonly lifetimeMs: () => number;
  readonly onLanded: (callId: string, result: { released: boolean; at: number }) => void;
  readonly onError: (err: Error) => void;
  /** Pause between rounds of retries, ms (default 1000). */
  readonly retryMs?: number;
}

export class ReleaseQueue {
  /** Call id -> when to give up (ms since the epoch), in the order the calls ended. */
  private readonly pending = new Map<string, number>();
  private timer?: NodeJS.Timeout;
  private retrying?: Promise<void>;
  private closed = false;

  constructor(private readonly opts: ReleaseQueueOptions) {}

  get size(): number {
    return this.pending.size;
  }

  /**
   * Keep a release that failed with `err`, to try again. Not reported on 'error': the caller is
   * told (`deferred`, and the gate's 'released' event), and a lost connection behind it is
   * reported once, by the store. After close() nothing is kept: it throws (the caller tells
   * whoever asked for the release), so a release is never said kept and then dropped.
   */
  add(callId: string, err: Error): void {
    if (this.closed)
      throw new StoreUnavailableError(
        `release of call ${JSON.stringify(callId)} failed and is not kept: the engine is closed`,
        err,
      );
    this.pending.delete(callId);
    if (this.pending.size >= this.opts.max) {
      const oldest = this.pending.keys().next().value!;
      this.pending.delete(oldest);
      this.opts.onError(
        new StoreUnavailableError(
          `too many releases waiting for the store (${this.opts.max}): call ${JSON.stringify(oldest)} given up, its hold lapses by itself`,
        ),
      );
    }
    this.pending.set(callId, Date.now() + this.opts.lifetimeMs());
    this.schedule();
  }

  private schedule(): void {
    if (this.timer !== undefined || this.closed || this.pending.size === 0) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.retrying = this.retry().finally(() => {
        this.retrying = undefined;
        this.schedule();
      });
    }, this.opts.retryMs ?? 1000);
    this.timer.unref();
  }

  /** One round: each kept release in order, until one fails (the store is still away). */
  private async retry(): Promise<void> {
    for (const [callId, until] of [...this.pending]) {
      if (!this.pending.has(callId)) continue;
      if (Date.now() >= until) {
        this.pending.delete(callId);
        continue;
      }
      let result: { released: boolean; at: number };
      try {
        result = await this.opts.release(callId);
      } catch {
        return;
      }
      this.pending.delete(callId);
      this.opts.onLanded(callId, result);
    }
  }

  /** Stop retrying after one last round; what still cannot land is reported and dropped. */
  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    await this.retrying;
    if (this.pending.size > 0) await this.retry();
    if (this.pending.size > 0) {
      this.opts.onError(
        new StoreUnavailableError(
          `${this.pending.size} releases could not reach the store before close: their holds lapse by themselves`,
        ),
      );
      this.pending.clear();
    }
  }
}
