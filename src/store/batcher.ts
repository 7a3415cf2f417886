/**
 * Batcher: calls issued in one tick leave together. Each call joins the lane of its key group
 * (one Cluster slot); a lane is sent at the end of the tick, or at once when `maxBatch` calls
 * wait in it. Nothing waits for a batch to fill: a lone call leaves at the end of its tick.
 *
 * A call whose signal is aborted when its batch leaves is rejected and never sent (the caller
 * decided it already). While the connection is not ready, each call waits for it on its own
 * deadline, then joins a later batch.
 */
import { StoreUnavailableError } from '../errors/index.js';
import type { StopSignal } from './types.js';

/** What the batcher needs of a queued call (it only ever rejects one; send() settles them). */
export interface Queued {
  readonly signal: StopSignal | undefined;
  readonly reject: (err: unknown) => void;
}

/** A call waiting for its batch. */
export interface Pending<R> extends Queued {
  readonly resolve: (r: R) => void;
}

export interface BatcherOptions<I> {
  readonly maxBatch: number;
  /** Whether a batch can be written now. */
  ready(): boolean;
  /** Resolves once a batch can be written, or rejects when the call can wait no longer. */
  whenReady(signal: StopSignal | undefined): Promise<void>;
  /** Write one batch (connection ready), settling each of its items. */
  send(items: I[]): void;
  /** The error for a call that never left (store-specific wrapping). */
  unavailable(err: unknown): unknown;
}

interface Lane<I> {
  readonly key: string;
  items: I[];
  scheduled: boolean;
}

export class Batcher<I extends Queued> {
  private readonly lanes = new Map<string, Lane<I>>();
  private scheduled = 0;

  constructor(private readonly opts: BatcherOptions<I>) {}

  /** Calls queued and not yet sent. */
  get pending(): boolean {
    return this.scheduled > 0;
  }

  /** Queue a call on its lane. */
  add(key: string, item: I): void {
    let lane = this.lanes.get(key);
    if (lane === undefined) {
      lane = { key, items: [], scheduled: false };
      this.lanes.set(key, lane);
    }
    lane.items.push(item);
    if (lane.items.length >= this.opts.maxBatch) this.flush(lane);
    else if (!lane.scheduled) {
      lane.scheduled = true;
      this.scheduled++;
      const l = lane;
      process.nextTick(() => this.flush(l));
    }
  }

  /** Send every queued call now (before another command, to keep the order calls were issued in). */
  flushAll(): void {
    for (const lane of this.lanes.values()) if (lane.scheduled) this.flush(lane);
  }

  private flush(lane: Lane<I>): void {
    if (lane.scheduled) {
      lane.scheduled = false;
      this.scheduled--;
    }
    const items = lane.items;
    if (items.length === 0) return;
    lane.items = [];
    // a lane lives while it holds calls: one per tag would otherwise pile up on a Cluster
    if (this.lanes.get(lane.key) === lane) this.lanes.delete(lane.key);
    if (!this.opts.ready()) {
      for (const item of items) {
        this.opts.whenReady(item.signal).then(
          () => this.addAgain(lane.key, item),
          (err: unknown) => item.reject(this.opts.unavailable(err)),
        );
      }
      return;
    }
    let batch: I[] = [];
    for (const item of items) {
      if (item.signal?.aborted) {
        item.reject(notSent());
        continue;
      }
      batch.push(item);
      if (batch.length === this.opts.maxBatch) {
        this.opts.send(batch);
        batch = [];
      }
    }
    if (batch.length > 0) this.opts.send(batch);
  }

  private addAgain(key: string, item: I): void {
    if (item.signal?.aborted) item.reject(notSent());
    else this.add(key, item);
  }
}

function notSent(): StoreUnavailableError {
  return new StoreUnavailableError('decision timed out before its command was sent');
}
