/**
 * Call locators: with hash tags, a call's inbound record lives on its tag, and its outbound
 * record on the tag of the carrier that took it, which a release knowing only the call id cannot
 * compute: a locator under the call id's own tag names each record (`{c:<id>}:loc` inbound,
 * `{c:<id>}:loc:out` outbound, one slot).
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

/** One locator write under way (CallLocators.begin). */
interface LocatorWrite {
  /** No later write of the same locator was issued since. */
  readonly current: () => boolean;
  readonly end: () => void;
}

export class CallLocators {
  private closed = false;
  /** Call ids whose locator is being written. */
  private readonly writing = new Map<string, Promise<void>>();
  /**
   * Per locator key with a write under way (first attempt or retries), the latest write issued:
   * a newer one (a reservation that moved to another carrier, the id decided again) supersedes
   * it, and an older write's retry landing after it would name a record the call no longer has,
   * whose hold no release could then find.
   */
  private readonly latest = new Map<string, symbol>();

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
    const until = Date.now() + this.ttlMs(forUs, virtual);
    const key = this.keys.locator(id);
    const value = this.keys.inboundRecord(tag, id);
    const write = this.begin(key);
    const attempt = (): Promise<'written' | 'exists' | 'failed'> => {
      const px = Math.max(1, until - Date.now());
      const sent = nx ? this.conn.redis.set(key, value, 'PX', px, 'NX') : this.conn.redis.set(key, value, 'PX', px);
      return sent.then(
        (r) => (r === null ? 'exists' : 'written'),
        () => 'failed',
      );
    };
    return this.firstAttempt(attempt).then((first) => {
      if (first === 'failed') this.retry(id, until, attempt, write);
      else write.end();
      return first;
    });
  }

  /**
   * `attempt` once the connection is ready: sent before (a store just made, a reconnection),
   * without an offline queue it failed at once, and the call answered with its locator
   * written only by a retry 200 ms later. At once when Redis is known to be down.
   */
  private firstAttempt<T>(attempt: () => Promise<T>): Promise<T> {
    const wait = this.conn.notReady(undefined);
    return wait === undefined ? attempt() : wait.then(attempt, attempt);
  }

  /** A locator write of `key` begins: whether it is still the latest issued, and its end. */
  private begin(key: string): LocatorWrite {
    const mine = Symbol(key);
    this.latest.set(key, mine);
    return {
      current: () => this.latest.get(key) === mine,
      end: () => {
        if (this.latest.get(key) === mine) this.latest.delete(key);
      },
    };
  }

  /**
   * A locator write of `id` whose first attempt failed: `attempt` again every LOCATOR_RETRY_MS
   * in the background until it lands or `until` (ms, Date.now) passes; tracked, so that a
   * release of `id` from this process waits for it. Nothing once the store is closing.
   */
  private retry(id: string, until: number, attempt: () => Promise<unknown>, write: LocatorWrite): void {
    if (this.closed) {
      write.end();
      return;
    }
    const retried = (async () => {
      try {
        while (!this.closed && Date.now() < until) {
          await new Promise((resolve) => setTimeout(resolve, LOCATOR_RETRY_MS).unref());
          // superseded by a later write of the same locator: that one names the record
          if (!write.current()) return;
          if ((await attempt()) !== 'failed') return;
        }
      } finally {
        write.end();
      }
    })();
    this.track(id, retried);
  }

  /** A locator's life (ms) for a hold that may end `us` from now (virtual: at least the virtual-time floor). */
  ttlMs(us: number, virtual: boolean): number {
    return Math.max(Math.ceil(us / 1000) + 1, virtual ? this.virtualTtlMs : 0);
  }

  /**
   * Write the outbound locator of call `id`: it names `record` for `ms`. With `get`, resolves with
   * the value it replaced (null: none); undefined when not asked or when the first attempt failed,
   * in which case the write is retried in the background as locate() does (tracked).
   */
  locateOut(id: string, record: string, ms: number, get: boolean): Promise<string | null | undefined> {
    const until = Date.now() + ms;
    const key = this.keys.outboundLocator(id);
    const write = this.begin(key);
    const attempt = (): Promise<string | null | undefined | 'failed'> => {
      const px = Math.max(1, until - Date.now());
      const sent = get ? this.conn.redis.set(key, record, 'PX', px, 'GET') : this.conn.redis.set(key, record, 'PX', px);
      return sent.then(
        (r) => (get ? r : undefined),
        () => 'failed' as const,
      );
    };
    return this.firstAttempt(attempt).then((first) => {
      if (first !== 'failed') {
        write.end();
        return first;
      }
      this.retry(id, until, attempt, write);
      return undefined;
    });
  }

  /**
   * No carrier took a re-reservation of `id`: its outbound locator names `before` again (the
   * earlier record, for as long as that record lives), or goes when there was none (best effort).
   */
  async restoreOut(id: string, before: string | null): Promise<void> {
    const key = this.keys.outboundLocator(id);
    const write = this.begin(key); // the re-reservation's own write, if retrying, gives up
    try {
      const ms = before === null ? -1 : await this.conn.redis.pttl(before);
      if (ms > 0) await this.conn.redis.set(key, before!, 'PX', ms);
      else this.conn.redis.del(key).catch(() => undefined);
    } catch {
      // best effort: a stale locator names a record that is gone, which a release finds empty
    } finally {
      write.end();
    }
  }

  /** Stop retrying locator writes. */
  close(): void {
    this.closed = true;
  }

  /** A locator being written for `id`: a release or refresh of `id` issued later waits for it. */
  track(id: string, writing: Promise<void>): void {
    const before = this.writing.get(id);
    const both = before === undefined ? writing : Promise.all([before, writing]);
    const done: Promise<void> = both
      .then(() => undefined)
      .catch(() => undefined)
      .finally(() => {
        if (this.writing.get(id) === done) this.writing.delete(id);
      });
    this.writing.set(id, done);
  }

  /**
   * The call records of an id, grouped by the script call that can take them together (one
   * Cluster slot each). Without tags both are named at once and go in one script call, issued
   * at once (in issue order with the store's other operations). With tags, each record is
   * wherever its locator says (none without one): the locators are read first (side by side,
   * one round trip), so such a call is ordered after every operation issued before it but may
   * be overtaken by one issued after it in the same tick.
   */
  recordGroups(
    id: string,
    direction: 'in' | 'out' | undefined,
    signal: StopSignal | undefined,
  ): string[][] | Promise<string[][]> {
    const wantIn = direction !== 'out';
    const wantOut = direction !== 'in';
    if (!this.keys.hashTags)
      return [
        [...(wantIn ? [this.keys.inboundRecord('', id)] : []), ...(wantOut ? [this.keys.outboundRecord('', id)] : [])],
      ];
    this.flushPending();
    const writing = this.writing.get(id);
    return (async () => {
      await writing; // an admit or reserve of this id issued before: its locator first
      let found: (string | null)[];
      try {
        const wait = this.conn.notReady(signal);
        if (wait) await wait;
        const keys = [...(wantOut ? [this.keys.outboundLocator(id)] : []), ...(wantIn ? [this.keys.locator(id)] : [])];
        // GETs side by side (pipelined: one round trip), not MGET: the minimal ACL user has GET only
        found = await Promise.all(keys.map((key) => this.conn.redis.get(key)));
      } catch (err) {
        throw unavailable(err);
      }
      return found.filter((key): key is string => key !== null).map((key) => [key]);
    })();
  }

  /** A call refused: the locator written (NX) with its decision goes (best effort). */
  forget(id: string): void {
    this.conn.redis.del(this.keys.locator(id)).catch(() => undefined);
  }

  /** Call `id` was released (one direction or both): its locators go too (best effort; one key per DEL). */
  drop(id: string, direction: 'in' | 'out' | undefined): Promise<void> {
    return this.onEach(id, direction, (key) => this.conn.redis.del(key));
  }

  /** Call `id`'s holds were refreshed: its locators live `ms` more (best effort). */
  extend(id: string, ms: number): Promise<void> {
    return this.onEach(id, undefined, (key) => this.conn.redis.pexpire(key, ms));
  }

  /** `op` on each locator key of `id` in `direction` (both when undefined), side by side, errors ignored. */
  private onEach(
    id: string,
    direction: 'in' | 'out' | undefined,
    op: (key: string) => Promise<unknown>,
  ): Promise<void> {
    const keys = [
      ...(direction !== 'out' ? [this.keys.locator(id)] : []),
      ...(direction !== 'in' ? [this.keys.outboundLocator(id)] : []),
    ];
    return Promise.all(keys.map((key) => op(key).catch(() => undefined))).then(() => undefined);
  }
}
