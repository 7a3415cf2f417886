/**
 * Batcher: group commit, with up to `maxInFlight` batches in flight per lane. Each call joins the
 * lane of its key group (one Cluster slot). On a lane with room (fewer than `maxInFlight` batches
 * in flight) a call leaves at the end of its tick, with the calls issued in that same tick:
 * nothing waits for a batch to fill. While the lane is full, calls that arrive meanwhile wait and
 * leave together once a batch is back, so batches grow with the load (and a batch shares its
 * buckets' reads and writes) without ever delaying a call on an idle system. A lane whose waiting
 * calls reach `maxBatch` sends them at once, in flight or not. A lane's batches go out in the
 * order of its calls on one connection, and Redis runs a connection's scripts in the order they
 * arrive, so batches in flight together are decided in that order too.
 *
 * A call whose signal is aborted when its batch leaves is rejected and never sent (the caller
 * decided it already). While the connection is not ready, each call waits for it on its own
 * deadline, then joins a later batch.
 */
import { StoreUnavailableError } from '../../errors/index.js';
import type { StopSignal } from '../types.js';

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
  /** Batches of one lane in flight at once, at most (1: pure group commit). */
  readonly maxInFlight: number;
  /** Whether a batch can be written now. */
  ready(): boolean;
  /** Resolves once a batch can be written, or rejects when the call can wait no longer. */
  whenReady(signal: StopSignal | undefined): Promise<void>;
  /**
   * What a call must wait for before it leaves, even on a ready connection (undefined: nothing,
   * the common case): checked as its batch is made, not only when it was issued.
   */
  waitFor?(key: string, item: I): Promise<void> | undefined;
  /** Write one batch (connection ready), settling each of its items; settles once the batch is back. */
  send(items: I[]): Promise<void>;
  /** The error for a call that never left (store-specific wrapping). */
  unavailable(err: unknown): unknown;
}

interface Lane<I> {
  readonly key: string;
  items: I[];
  /** A flush at the end of the tick is scheduled. */
  scheduled: boolean;
  /** Batches of this lane sent and not back yet. */
  inFlight: number;
}

/** Lanes kept when idle (see release). */
const IDLE_LANES = 64;

export class Batcher<I extends Queued> {
  private readonly lanes = new Map<string, Lane<I>>();
  /** Calls queued on every lane, not sent yet. */
  private queued = 0;
  /** Batches sent, by size (index: calls in the batch). */
  private readonly sizes: number[] = [];

  constructor(private readonly opts: BatcherOptions<I>) {}

  /** Calls queued and not yet sent. */
  get pending(): boolean {
    return this.queued > 0;
  }

  /** How many batches of each size were sent (index: calls in the batch); a copy. */
  batchSizes(): number[] {
    return Array.from(this.sizes, (n) => n ?? 0);
  }

  /** Queue a call on its lane. */
  add(key: string, item: I): void {
    let lane = this.lanes.get(key);
    if (lane === undefined) {
      lane = { key, items: [], scheduled: false, inFlight: 0 };
      this.lanes.set(key, lane);
    }
    lane.items.push(item);
    this.queued++;
    if (lane.items.length >= this.opts.maxBatch) this.flush(lane);
    else if (lane.inFlight < this.opts.maxInFlight) this.schedule(lane);
    // else: it leaves with the others waiting when a batch in flight is back
  }

  /** Send every queued call now (before another command, to keep the order calls were issued in). */
  flushAll(): void {
    for (const lane of this.lanes.values()) if (lane.items.length > 0) this.flush(lane);
  }

  private schedule(lane: Lane<I>): void {
    if (lane.scheduled) return;
    lane.scheduled = true;
    process.nextTick(() => {
      lane.scheduled = false;
      if (lane.inFlight < this.opts.maxInFlight) this.flush(lane);
      this.release(lane);
    });
  }

  private flush(lane: Lane<I>): void {
    const items = lane.items;
    if (items.length === 0) return;
    lane.items = [];
    this.queued -= items.length;
    if (!this.opts.ready()) {
      this.release(lane);
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
      const wait = this.opts.waitFor?.(lane.key, item);
      if (wait !== undefined) {
        wait.then(
          () => this.addAgain(lane.key, item),
          (err: unknown) => item.reject(this.opts.unavailable(err)),
        );
        continue;
      }
      batch.push(item);
      if (batch.length === this.opts.maxBatch) {
        this.send(lane, batch);
        batch = [];
      }
    }
    if (batch.length > 0) this.send(lane, batch);
    else this.release(lane);
  }

  private send(lane: Lane<I>, batch: I[]): void {
    this.sizes[batch.length] = (this.sizes[batch.length] ?? 0) + 1;
    lane.inFlight++;
    const back = () => {
      lane.inFlight--;
      // the calls that waited leave at the end of this tick, with those its replies set off
      if (lane.items.length > 0) this.schedule(lane);
      else if (lane.inFlight === 0) this.release(lane);
    };
    this.opts.send(batch).then(back, back);
  }

  /**
   * Idle lanes are kept while there are at most IDLE_LANES lanes, so that a lane used by every
   * batch is not taken out of the Map and put back each time (a Map changed on every batch made
   * young collections copy its replaced tables); past that, an idle lane is dropped as it goes
   * idle, so lanes for many tags (a Cluster) do not pile up.
   */
  private release(lane: Lane<I>): void {
    if (this.lanes.size <= IDLE_LANES) return;
    if (lane.items.length === 0 && lane.inFlight === 0 && !lane.scheduled && this.lanes.get(lane.key) === lane)
      this.lanes.delete(lane.key);
  }

  private addAgain(key: string, item: I): void {
    if (item.signal?.aborted) item.reject(notSent());
    else this.add(key, item);
  }
}

function notSent(): StoreUnavailableError {
  return new StoreUnavailableError('decision timed out before its command was sent');
}
