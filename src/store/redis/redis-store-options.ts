/**
 * The options of a RedisStore (RedisStoreOptions, RedisConnectOptions) and the ioredis options
 * it recommends for a client that serves decisions; exported by redis-store.ts.
 */
import type { Cluster, Redis, RedisOptions } from 'ioredis';
import type { LanePins } from '../../lease/lanes.js';

/** maxBatch and loneUpTo, at most: a batch's calls are limited by Lua's stack too (unpack of one ZADD per log). */
export const MAX_BATCH_LIMIT = 1000;
/** maxInFlight, at most. */
export const MAX_IN_FLIGHT_LIMIT = 64;

export interface RedisStoreOptions {
  /** An ioredis client or Cluster. The store does not close it unless it created it. */
  readonly redis: Redis | Cluster;
  /** Prefix of every key (default `callgate:`); no braces. */
  readonly prefix?: string;
  /** Put hash tags in keys: default true on a Cluster, false on a single Redis. */
  readonly hashTags?: boolean;
  /**
   * Lease the global level (docs/leasing.md): its limit is split into shares over `lanes` hash
   * tags, moved by a LeaseCoordinator, so that inbound admission spreads over a Cluster's shards.
   * Needs hash tags; the global level must be one sliding-log limit (and a channel limit or not).
   * `overflow`: the deployment has an overflow lane (its coordinator too: LeaseLanes.overflow),
   * where a call its lane refused for lack of calls share is tried (two more script calls, for
   * such calls only); fewer false refusals near the limit (docs/leasing.md).
   * `pin`: accounts (and peers that name no account) placed on a lane of your choice, the others
   * where their hash puts them (docs/leasing.md, "Placing accounts"). Every process of a
   * deployment must have the same lanes and pins: they say where the keys are.
   */
  readonly lease?: { readonly lanes: number; readonly overflow?: boolean; readonly pin?: LanePins };
  /**
   * Carriers leased across regions (docs/leasing.md, "Carriers across regions"), by id: each
   * paces within the share of its CPS and channels that a LeaseCoordinator for that carrier
   * (`carrier`) grants this deployment, and refuses (the call moves to the route's next carrier)
   * where the share lacks room. Decided on Redis TIME only. Every process of a deployment must
   * name the same carriers.
   */
  readonly leasedCarriers?: readonly string[];
  /**
   * Least expiry (ms) of a key written with a caller-given `now` (a virtual clock): real-time
   * expiry cannot follow a clock that runs faster or slower than real time. Default 24 h.
   */
  readonly virtualTimeTtlMs?: number;
  /**
   * Commands written to the socket at once, at most (default 16; 0 or 1: one write per
   * command). On a single Redis, commands issued in one tick are corked and written in chunks
   * of this size (the last one at the end of the tick), which saves most of the per-command
   * system calls. Cluster clients write as usual. Prefer this to ioredis' enableAutoPipelining,
   * which keeps one batch in flight at a time (see README, Performance).
   */
  readonly writeChunk?: number;
  /** How long a call without a signal waits for a (re)connecting Redis, ms (default 5000). */
  readonly readyTimeoutMs?: number;
  /**
   * Admissions (or reservations) decided in one script call, at most (default 64; 1: one call
   * each). Those issued in one tick go to Redis together at the end of the tick; while
   * `maxInFlight` batches are in flight, those arriving meanwhile wait and leave together, and a
   * full batch leaves at once: a bucket or carrier many calls name is then read and written once
   * per batch instead of once per call. Decisions are the same as one by one, in the order
   * issued; nothing waits for a batch to fill, and an idle store sends a call at once.
   */
  readonly maxBatch?: number;
  /**
   * A batch of at most this many admissions that lone scripts can each decide (sliding-log
   * limits only, or none, with or without channel limits: admit-lone.lua, admit-lone-held.lua)
   * goes as one admit-lone-run.lua call instead of one admit.lua call (default 4; 1: only a
   * batch of one, which goes to its lone script). The run decides them in the order issued,
   * each as its own lone script call would, the calls on Redis TIME at one time (as a batch's);
   * admit.lua's setup costs Redis more than it shares among a few calls.
   */
  readonly loneUpTo?: number;
  /**
   * Batches of one lane (all admissions on a single Redis; one Cluster slot's) in flight at
   * once, at most (default 2; 1 to 64). 1 is pure group commit: calls arriving while a batch is
   * in flight wait for it. Above 1, a batch leaves while others are still in flight
   * (pipelined), so Node builds the next batch while Redis runs the last; Redis runs them in
   * the order sent, so decisions are the same.
   */
  readonly maxInFlight?: number;
  /** How the store keeps the holds of this process's calls through a Redis loss (docs/redis.md). */
  readonly holds?: HoldsOptions;
}

/** The holds keeper's settings (src/store/redis/holds-keeper.ts). */
export interface HoldsOptions {
  /** Check the ledger against Redis every this many ms (default 5000; 0: never, nor on connecting). */
  readonly syncMs?: number;
  /** After Redis came back empty, decisions wait this long for every process to write its holds, ms (default 2000). */
  readonly graceMs?: number;
  /** Releases sent again after a loss: those of the last this many ms (default 30000). */
  readonly recentMs?: number;
  /** How long the tombstone of a re-sent release lasts, ms (default 60000). */
  readonly tombstoneMs?: number;
}

/** RedisStore.connect(): the store's options, and the connection's. */
export interface RedisConnectOptions extends Omit<RedisStoreOptions, 'redis'> {
  /**
   * ioredis options of the connection, over RECOMMENDED_REDIS_OPTIONS: TLS (`tls: { ca, cert,
   * key }`; a `rediss://` URL alone trusts only the system's CAs), an ACL `username` and
   * `password` (those in the URL win), timeouts. See README, "Redis: TLS and ACL".
   */
  readonly redisOptions?: RedisOptions;
}

/**
 * ioredis options for a client that serves decisions. The store itself waits for a ready
 * connection (bounded by the decision's deadline) before it sends a command; these settings
 * close the remaining gaps, where ioredis would queue a command while Redis is away or re-send
 * one that was in flight when the connection broke, and run it later: that would count a call
 * the store-trouble policy already decided. Not forced on a client you pass in, since it may
 * serve other code too.
 */
export const RECOMMENDED_REDIS_OPTIONS = {
  maxRetriesPerRequest: 1,
  enableOfflineQueue: false,
  autoResendUnfulfilledCommands: false,
} as const;
