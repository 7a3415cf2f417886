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
  Limit,
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

/** The static part of admit/add calls for one bucket list: [live, virtual-time] variants. */
interface PlanArgs {
  readonly tag: string;
  /** [numkeys, ...KEYS] */
  readonly keys: readonly string[];
  readonly admit: readonly [readonly string[], readonly string[]];
  readonly record: readonly [readonly string[], readonly string[]];
}

/** The window of a sliding-log limit, 0 for the other algorithms (for ordering). */
const logWindow = (lim: Limit): number => (lim.algorithm === 'sliding-log' ? lim.windowUs : 0);

/** As lua/includes/common.lua ttlMs: ms a key must live `us` from now, never below the floor. */
function ttlMs(us: number, floorMs: number): number {
  const ms = Math.ceil(us / 1000) + 1;
  return ms < floorMs ? floorMs : ms;
}
const ALGO_CODE = { 'sliding-log': 'l', 'fixed-window': 'f', 'sliding-window': 's' } as const;
const DAY_MS = 86_400_000;

export class RedisStore implements Store {
  readonly kind = 'redis';
  readonly prefix: string;
  private readonly redis: Redis | Cluster;
  private readonly hashTags: boolean;
  private readonly virtualTtlMs: number;
  private readonly readyTimeoutMs: number;
  private readyWait?: Promise<void>;
  private readonly instance = randomBytes(6).toString('base64url');
  private readonly virtualTtlText: string;
  private seq = 0;
  private readonly writeChunk: number;
  /** Commands written into the current cork (see corked()), and the socket corked. */
  private inChunk = 0;
  private chunkStream: Redis['stream'] | undefined;
  private ownsConnection = false;
  /** Script arguments per bucket list (see plan()); weak, so dropped plans cost nothing. */
  private readonly plans = new WeakMap<readonly Bucket[], PlanArgs>();

  constructor(opts: RedisStoreOptions) {
    this.redis = opts.redis;
    this.prefix = opts.prefix ?? 'callgate:';
    if (/[{}]/.test(this.prefix)) throw new InvalidArgumentError(`prefix must not contain '{' or '}', got ${JSON.stringify(this.prefix)}`);
    this.hashTags = opts.hashTags ?? opts.redis instanceof Cluster;
    this.virtualTtlMs = opts.virtualTimeTtlMs ?? DAY_MS;
    this.virtualTtlText = String(this.virtualTtlMs);
    this.writeChunk = opts.writeChunk ?? 16;
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
    if (signal.aborted) return Promise.reject(new StoreUnavailableError('Redis not ready in time'));
    return new Promise((resolve, reject) => {
      const onAbort = () => reject(new StoreUnavailableError('Redis not ready in time'));
      signal.addEventListener('abort', onAbort, { once: true });
      this.connected().then(
        () => {
          signal.removeEventListener('abort', onAbort);
          resolve();
        },
        (err: Error) => {
          signal.removeEventListener('abort', onAbort);
          reject(err);
        },
      );
    });
  }

  /** One wait for 'ready' shared by every call made while Redis is away (one listener, not one per call). */
  private connected(): Promise<void> {
    return (this.readyWait ??= new Promise<void>((resolve, reject) => {
      const done = (err?: Error) => {
        this.redis.off('ready', onReady);
        this.redis.off('end', onEnd);
        this.readyWait = undefined;
        if (err) reject(err);
        else resolve();
      };
      const onReady = () => done();
      const onEnd = () => done(new StoreUnavailableError('Redis connection closed'));
      this.redis.once('ready', onReady);
      this.redis.once('end', onEnd);
    }));
  }

  private run(name: ScriptName, keys: string[], args: (string | number)[], signal?: AbortSignal): Promise<unknown> {
    return this.send(name, [keys.length, ...keys, ...args], signal);
  }

  /**
   * Send a command with the socket corked, so that the commands of one tick leave in writes of
   * up to `writeChunk` commands instead of one system call each. The cork is released when the
   * chunk is full or at the end of the tick, whichever comes first: Redis gets work as soon as a
   * chunk is ready and keeps working while the next one is written (a cork per tick, like
   * ioredis' enableAutoPipelining, would make Node and Redis take turns).
   */
  private corked(redis: Redis, fn: (...a: (string | number)[]) => Promise<unknown>, argv: (string | number)[]): Promise<unknown> {
    const stream = redis.stream;
    if (!stream) return fn.apply(redis, argv);
    if (this.inChunk++ === 0) {
      stream.cork();
      this.chunkStream = stream;
      process.nextTick(() => this.flushChunk());
    }
    try {
      return fn.apply(redis, argv);
    } finally {
      if (this.inChunk >= this.writeChunk) this.flushChunk();
    }
  }

  private flushChunk(): void {
    if (this.inChunk === 0) return;
    this.inChunk = 0;
    this.chunkStream!.uncork();
    this.chunkStream = undefined;
  }

  /** Run a script with `argv` = [numkeys, ...KEYS, ...ARGV]. */
  private async send(name: ScriptName, argv: (string | number)[], signal?: AbortSignal): Promise<unknown> {
    const fn = (this.redis as unknown as Record<string, (...a: (string | number)[]) => Promise<unknown>>)[SCRIPTS[name].command]!;
    try {
      if (this.redis.status !== 'ready') {
        if (this.redis.status === 'end') throw new StoreUnavailableError('Redis connection closed');
        if (this.redis.status === 'wait') this.redis.connect().catch(() => undefined); // lazyConnect
        await this.ready(signal);
      }
      if (signal?.aborted) throw new StoreUnavailableError('decision timed out before its command was sent');
      if (this.writeChunk > 1 && !(this.redis instanceof Cluster)) return await this.corked(this.redis, fn, argv);
      return await fn.apply(this.redis, argv);
    } catch (err) {
      // A Redis reply error is a bug to surface as is; anything else means Redis is out of reach.
      if (err instanceof ReplyError || err instanceof StoreUnavailableError) throw err;
      throw new StoreUnavailableError(`Redis unavailable: ${(err as Error).message}`, err);
    }
  }

  /**
   * KEYS and the structure and limit arguments of admit/add (lua/includes/buckets.lua) for a
   * bucket list, built once per list and tag: plans hand the same (readonly) list to every call
   * of a peer, so a decision only adds its time and member. Every argument is already a string.
   */
  private plan(tag: string, buckets: readonly Bucket[]): PlanArgs {
    const cached = this.plans.get(buckets);
    if (cached !== undefined && cached.tag === tag) return cached;
    const logKeys: string[] = [];
    const retentions: number[] = [];
    const winKeys: string[] = [];
    const winWindows: string[] = [];
    const limits: string[] = [];
    buckets.forEach((bucket, b) => {
      const base = this.base(tag, bucket.name);
      const retention = logRetention(bucket);
      const log = retention > 0 ? logKeys.push(`${base}:log`) : 0;
      if (retention > 0) retentions.push(retention);
      const windows = new Map<number, number>();
      // sliding-log limits widest window first (admit.lua skips a count a wider one decides)
      const ordered = [...bucket.limits].sort((x, y) => logWindow(y) - logWindow(x));
      for (const lim of ordered) {
        let s = log;
        if (lim.algorithm !== 'sliding-log') {
          s = windows.get(lim.windowUs) ?? 0;
          if (s === 0) {
            s = winKeys.push(`${base}:win:${lim.windowUs}`);
            winWindows.push(String(lim.windowUs));
            windows.set(lim.windowUs, s);
          }
        }
        limits.push(String(b + 1), ALGO_CODE[lim.algorithm], String(lim.limit), String(lim.windowUs), String(s));
      }
    });
    const structures = (floorMs: number): string[] => {
      const out = [String(logKeys.length), String(winKeys.length)];
      for (const r of retentions) out.push(String(r), String(ttlMs(r, floorMs)));
      return out.concat(winWindows);
    };
    const live = structures(0);
    const virtual = structures(this.virtualTtlMs);
    const entry: PlanArgs = {
      tag,
      keys: [String(logKeys.length + winKeys.length), ...logKeys, ...winKeys],
      admit: [live.concat(limits), virtual.concat(limits)],
      record: [live, virtual],
    };
    this.plans.set(buckets, entry);
    return entry;
  }

  /** [numkeys, ...KEYS, now, member, ttl floor, ...rest]: the arguments of one script call. */
  private argv(keys: readonly string[], now: number | undefined, rest: readonly string[]): string[] {
    const a = keys.slice();
    a.push(now === undefined ? '' : String(now), this.member(), now === undefined ? '0' : this.virtualTtlText);
    for (let i = 0; i < rest.length; i++) a.push(rest[i]!);
    return a;
  }

  private member(): string {
    return `${this.instance}${(this.seq++).toString(36)}`;
  }

  private ttlFloor(now: number | undefined): number {
    return now === undefined ? 0 : this.virtualTtlMs;
  }

  async admit(req: AdmitRequest): Promise<AdmitResult> {
    checkAdmit(req);
    const plan = this.plan(req.tag, req.buckets);
    // admitted: now; refused: [limitedBy (1-based), retryAfterUs, now] (lua/admit.lua)
    const r = (await this.send('admit', this.argv(plan.keys, req.now, plan.admit[req.now === undefined ? 0 : 1]), req.signal)) as number | number[];
    if (typeof r === 'number') return { admitted: true, limitedBy: -1, retryAfterUs: 0, now: r };
    return { admitted: false, limitedBy: r[0]! - 1, retryAfterUs: r[1]!, now: r[2]! };
  }

  async record(req: RecordRequest): Promise<RecordResult> {
    checkAdmit(req);
    const plan = this.plan(req.tag, req.buckets);
    const r = await this.send('add', this.argv(plan.keys, req.now, plan.record[req.now === undefined ? 0 : 1]), req.signal);
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
