/**
 * RedisStore: the Store on Redis or Redis Cluster, one Lua script per operation (lua/), run
 * through ioredis defineCommand (EVALSHA, falling back to EVAL, so NOSCRIPT after a Redis
 * restart heals by itself).
 *
 * Keys: `<prefix>{<tag>}:<bucket>:log` (sliding log), `<prefix>{<tag>}:<bucket>:win:<W>` (fixed
 * and sliding-window counts of windows of W µs) and `<prefix>{out}:carrier:<id>` (leaky bucket).
 * Hash tags only matter on a Cluster; on a single Redis (hashTags false, the default there) keys
 * carry no tag, so a peer's bucket is one key whatever account its calls name.
 */
import { randomBytes } from 'node:crypto';
import { Cluster, Redis, ReplyError } from 'ioredis';
import { InvalidArgumentError, StoreUnavailableError } from '../errors/index.js';
import { OUTBOUND_TAG } from '../keys.js';
import { SCRIPTS, type ScriptName } from './scripts.js';
import type {
  AdmitRequest,
  AdmitResult,
  Bucket,
  Carrier,
  CountRequest,
  CountResult,
  RecordRequest,
  RecordResult,
  ReserveRequest,
  ReserveResult,
  Store,
  WaitRequest,
  WaitResult,
} from './types.js';
import { checkAdmit, checkCount, checkReserve, checkWait, logRetention } from './validate.js';

export interface RedisStoreOptions {
  /** An ioredis client or Cluster. The store does not close it unless it created it. */
  readonly redis: Redis | Cluster;
  /** Prefix of every key (default `callgate:`); no braces. */
  readonly prefix?: string;
  /** Put hash tags in keys: default true on a Cluster, false on a single Redis. */
  readonly hashTags?: boolean;
  /**
   * Least expiry (ms) of a key written with a caller-given `now` (a virtual clock): real-time
   * expiry cannot follow a clock that runs faster or slower than real time. Default 24 h.
   */
  readonly virtualTimeTtlMs?: number;
  /** How long a call without a signal waits for a (re)connecting Redis, ms (default 5000). */
  readonly readyTimeoutMs?: number;
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

type Reply = (string | number)[];
const ALGO_CODE = { 'sliding-log': 'l', 'fixed-window': 'f', 'sliding-window': 's' } as const;
const DAY_MS = 86_400_000;

export class RedisStore implements Store {
  readonly kind = 'redis';
  readonly prefix: string;
  private readonly redis: Redis | Cluster;
  private readonly hashTags: boolean;
  private readonly virtualTtlMs: number;
  private readonly readyTimeoutMs: number;
  private readonly instance = randomBytes(6).toString('base64url');
  private seq = 0;
  private corked = false;
  private ownsConnection = false;

  constructor(opts: RedisStoreOptions) {
    this.redis = opts.redis;
    this.prefix = opts.prefix ?? 'callgate:';
    if (/[{}]/.test(this.prefix)) throw new InvalidArgumentError(`prefix must not contain '{' or '}', got ${JSON.stringify(this.prefix)}`);
    this.hashTags = opts.hashTags ?? opts.redis instanceof Cluster;
    this.virtualTtlMs = opts.virtualTimeTtlMs ?? DAY_MS;
    this.readyTimeoutMs = opts.readyTimeoutMs ?? 5_000;
    for (const { command, lua } of Object.values(SCRIPTS)) {
      if (!(command in this.redis)) this.redis.defineCommand(command, { lua });
    }
  }

  /** A store on its own connection to `url` (closed by close()). */
  static connect(url: string, opts: Omit<RedisStoreOptions, 'redis'> = {}): RedisStore {
    const store = new RedisStore({ ...opts, redis: new Redis(url, RECOMMENDED_REDIS_OPTIONS) });
    store.ownsConnection = true;
    return store;
  }

  private base(tag: string, name: string): string {
    return this.hashTags ? `${this.prefix}{${tag}}:${name}` : `${this.prefix}${name}`;
  }

  /**
   * Resolves once the connection is ready; rejects when the signal aborts first, when the client
   * gives up ('end'), or after `readyTimeoutMs` for a call that brought no signal.
   */
  private ready(given: AbortSignal | undefined): Promise<void> {
    const signal = given ?? AbortSignal.timeout(this.readyTimeoutMs);
    return new Promise((resolve, reject) => {
      const done = (err?: Error) => {
        this.redis.off('ready', onReady);
        this.redis.off('end', onEnd);
        signal.removeEventListener('abort', onAbort);
        if (err) reject(err);
        else resolve();
      };
      const onReady = () => done();
      const onEnd = () => done(new StoreUnavailableError('Redis connection closed'));
      const onAbort = () => done(new StoreUnavailableError('Redis not ready in time'));
      if (signal.aborted) return onAbort();
      this.redis.once('ready', onReady);
      this.redis.once('end', onEnd);
      signal.addEventListener('abort', onAbort, { once: true });
    });
  }

  private async run(name: ScriptName, keys: string[], args: (string | number)[], signal?: AbortSignal): Promise<unknown> {
    const fn = (this.redis as unknown as Record<string, (...a: (string | number)[]) => Promise<unknown>>)[SCRIPTS[name].command]!;
    if (process.env.CG_CORK && !this.corked && !(this.redis instanceof Cluster)) {
      const stream = (this.redis as Redis).stream;
      if (stream && (this.redis as Redis).status === 'ready') {
        this.corked = true;
        stream.cork();
        process.nextTick(() => {
          this.corked = false;
          stream.uncork();
        });
      }
    }
    try {
      if (this.redis.status !== 'ready') {
        if (this.redis.status === 'end') throw new StoreUnavailableError('Redis connection closed');
        if (this.redis.status === 'wait') this.redis.connect().catch(() => undefined); // lazyConnect
        await this.ready(signal);
      }
      if (signal?.aborted) throw new StoreUnavailableError('decision timed out before its command was sent');
      return await fn.call(this.redis, keys.length, ...keys, ...args);
    } catch (err) {
      // A Redis reply error is a bug to surface as is; anything else means Redis is out of reach.
      if (err instanceof ReplyError || err instanceof StoreUnavailableError) throw err;
      throw new StoreUnavailableError(`Redis unavailable: ${(err as Error).message}`, err);
    }
  }

  /** KEYS and the bucket descriptors of admit/add (lua/includes/buckets.lua). */
  private bucketArgs(tag: string, buckets: readonly Bucket[]): { keys: string[]; args: (string | number)[] } {
    const keys: string[] = [];
    const index = new Map<string, number>();
    const keyIndex = (key: string): number => {
      let i = index.get(key);
      if (i === undefined) {
        i = keys.push(key);
        index.set(key, i);
      }
      return i;
    };
    const args: (string | number)[] = [buckets.length];
    for (const bucket of buckets) {
      const base = this.base(tag, bucket.name);
      const retention = logRetention(bucket);
      const logKey = retention > 0 ? keyIndex(`${base}:log`) : 0;
      args.push(logKey, retention, bucket.limits.length);
      for (const lim of bucket.limits) {
        const key = lim.algorithm === 'sliding-log' ? logKey : keyIndex(`${base}:win:${lim.windowUs}`);
        args.push(ALGO_CODE[lim.algorithm], lim.limit, lim.windowUs, key);
      }
    }
    return { keys, args };
  }

  private member(): string {
    return `${this.instance}${(this.seq++).toString(36)}`;
  }

  private ttlFloor(now: number | undefined): number {
    return now === undefined ? 0 : this.virtualTtlMs;
  }

  async admit(req: AdmitRequest): Promise<AdmitResult> {
    checkAdmit(req);
    const { keys, args } = this.bucketArgs(req.tag, req.buckets);
    const r = (await this.run('admit', keys, [req.now ?? '', this.member(), this.ttlFloor(req.now), ...args], req.signal)) as Reply;
    return { admitted: r[0] === 1, limitedBy: Number(r[1]) - 1, retryAfterUs: Number(r[2]), now: Number(r[3]) };
  }

  async record(req: RecordRequest): Promise<RecordResult> {
    checkAdmit(req);
    const { keys, args } = this.bucketArgs(req.tag, req.buckets);
    const r = await this.run('add', keys, [req.now ?? '', this.member(), this.ttlFloor(req.now), ...args], req.signal);
    return { now: Number(r) };
  }

  async count(req: CountRequest): Promise<CountResult> {
    checkCount(req);
    const r = (await this.run('get', [`${this.base(req.tag, req.bucket)}:log`], [req.now ?? '', req.windowUs], req.signal)) as Reply;
    return { count: Number(r[0]), now: Number(r[1]) };
  }

  private carrierKey(c: Carrier): string {
    return this.base(OUTBOUND_TAG, c.name);
  }

  async reserve(req: ReserveRequest): Promise<ReserveResult> {
    checkReserve(req);
    const args: (string | number)[] = [req.now ?? '', this.ttlFloor(req.now)];
    for (const c of req.route) args.push(c.intervalUs, c.maxWaitUs);
    const r = (await this.run('reserve', req.route.map((c) => this.carrierKey(c)), args, req.signal)) as Reply;
    return {
      index: Number(r[0]) - 1,
      waitUs: Number(r[1]),
      slotUs: Number(r[2]),
      now: Number(r[3]),
      waits: r.slice(4).map(Number),
    };
  }

  async wait(req: WaitRequest): Promise<WaitResult> {
    checkWait(req);
    const r = (await this.run('wait', [this.carrierKey(req.carrier)], [req.now ?? '', req.carrier.intervalUs], req.signal)) as Reply;
    return { waitUs: Number(r[0]), now: Number(r[1]) };
  }

  /** Delete every key under this store's prefix, on every master of a Cluster. */
  async clear(): Promise<void> {
    const match = this.prefix.replace(/[*?[\]\\]/g, '\\$&') + '*';
    const nodes = this.redis instanceof Cluster ? this.redis.nodes('master') : [this.redis];
    for (const node of nodes) {
      let cursor = '0';
      do {
        const [next, keys] = await node.scan(cursor, 'MATCH', match, 'COUNT', 1000);
        cursor = next;
        // one key per command: keys of one node may still sit in different Cluster slots
        if (keys.length > 0) await Promise.all(keys.map((k) => node.unlink(k)));
      } while (cursor !== '0');
    }
  }

  async close(): Promise<void> {
    if (this.ownsConnection) await this.redis.quit().catch(() => this.redis.disconnect());
  }
}
