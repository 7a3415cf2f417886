/**
 * Call locators: with hash tags, a call's inbound record lives on its tag, which a release knowing
 * only the call id cannot compute: a locator under the call id's own tag names the record.
 * Written at the same time as the decision (another slot), and the admit answers once the
 * locator landed too, so a release from any process issued after the answer finds it. A write
 * that fails (its shard away) is retried until it lands or the call's hold would have lapsed;
 * a release from this process waits for it. A locator lost with its shard is written again by
 * the holds keeper after the loss (holds-keeper.ts).
 */
import type { StopSignal } from '../types.js';
import { unavailable, type RedisConnection } from './connection.js';
import type { RedisKeys } from './redis-keys.js';

/** Pause between attempts of a locator write that failed, ms. */
const LOCATOR_RETRY_MS = 200;

export class CallLocators {
  private closed = false;
  /** Call ids whose locator is being written. */
  private readonly writing = new Map<string, Promise<void>>();

  constructor(
    private readonly conn: RedisConnection,
    private readonly keys: RedisKeys,
    private readonly virtualTtlMs: number,
    /** Sends the admissions and reservations still waiting for their batch. */
    private readonly flushPending: () => void,
  ) {}

  /**
   * Write the locator of call `id`, held on `tag` for `forUs` (virtual: written with a
   * caller-given now). Resolves after the first attempt: 'written', 'exists' (with `nx`, a
   * locator of the id was there: left as it is) or 'failed', in which case the write is retried
   * in the background until it lands (tracked: a release of `id` from this process waits for it).
   */
  locate(
    tag: string,
    id: string,
    forUs: number,
    virtual: boolean,
    nx = false,
  ): Promise<'written' | 'exists' | 'failed'> {
    const ms = Math.max(Math.ceil(forUs / 1000) + 1, virtual ? this.virtualTtlMs : 0);
    const until = Date.now() + ms;
    const key = this.keys.locator(id);
    const value = this.keys.inboundRecord(tag, id);
    const attempt = (): Promise<'written' | 'exists' | 'failed'> => {
      const px = Math.max(1, until - Date.now());
      const sent = nx ? this.conn.redis.set(key, value, 'PX', px, 'NX') : this.conn.redis.set(key, value, 'PX', px);
      return sent.then(
        (r) => (r === null ? 'exists' : 'written'),
        () => 'failed',
      );
    };
    return attempt().then((first) => {
      if (first !== 'failed' || this.closed) return first;
      const retried = (async () => {
        while (!this.closed && Date.now() < until) {
          await new Promise((resolve) => setTimeout(resolve, LOCATOR_RETRY_MS).unref());
          if ((await attempt()) !== 'failed') return;
        }
      })();
      this.track(id, retried);
      return first;
    });
  }

  /** Stop retrying locator writes. */
  close(): void {
    this.closed = true;
  }

  /** A locator being written for `id`: a release or refresh of `id` issued later waits for it. */
  track(id: string, writing: Promise<void>): void {
    const done: Promise<void> = writing
      .catch(() => undefined)
      .finally(() => {
        if (this.writing.get(id) === done) this.writing.delete(id);
      });
    this.writing.set(id, done);
  }

  /**
   * The call records of an id, grouped by the script call that can take them together (one
   * Cluster slot each). Without tags both are named at once and go in one script call, issued
   * at once (in issue order with the store's other operations). With tags, the outbound record
   * is on the carriers' tag and the inbound one wherever its locator says (none without one):
   * the locator is read first, so such a call is ordered after every operation issued before it
   * but may be overtaken by one issued after it in the same tick.
   */
  recordGroups(
    id: string,
    direction: 'in' | 'out' | undefined,
    signal: StopSignal | undefined,
  ): string[][] | Promise<string[][]> {
    const wantIn = direction !== 'out';
    const out = direction !== 'in' ? [this.keys.outboundRecord(id)] : [];
    if (!this.keys.hashTags) return [[...(wantIn ? [this.keys.inboundRecord('', id)] : []), ...out]];
    this.flushPending();
    if (!wantIn) return [out];
    const writing = this.writing.get(id);
    return (async () => {
      await writing; // an admit of this id issued before: its locator first
      let key: string | null;
      try {
        const wait = this.conn.notReady(signal);
        if (wait) await wait;
        key = await this.conn.redis.get(this.keys.locator(id));
      } catch (err) {
        throw unavailable(err);
      }
      const groups = out.length > 0 ? [out] : [];
      if (key !== null) groups.push([key]);
      return groups;
    })();
  }

  /** A call refused: the locator written (NX) with its decision goes (best effort). */
  forget(id: string): void {
    this.conn.redis.del(this.keys.locator(id)).catch(() => undefined);
  }

  /** Call `id` was released: its locator goes too (best effort). */
  drop(id: string): Promise<void> {
    return this.conn.redis.del(this.keys.locator(id)).then(
      () => undefined,
      () => undefined,
    );
  }

  /** Call `id`'s holds were refreshed: its locator lives `ms` more (best effort). */
  extend(id: string, ms: number): Promise<void> {
    return this.conn.redis.pexpire(this.keys.locator(id), ms).then(
      () => undefined,
      () => undefined,
    );
  }
}
