/**
 * RedisStore: the Store on Redis or Redis Cluster, one Lua script per operation (lua/), run
 * through ioredis defineCommand (EVALSHA, falling back to EVAL, so NOSCRIPT after a Redis
 * restart heals by itself).
 *
 * Admissions and reservations are batched (batcher.ts, group commit): those issued in one tick go
 * out together as one script call (admissions per tag on a Cluster), and while a batch is in
 * flight the calls arriving meanwhile wait for it and leave together, so batches grow with the
 * load; the script decides them one after the other in the order issued, and buckets and
 * carriers many calls share are read and written once per batch instead of once per call.
 *
 * Keys: `<prefix>{<tag>}:<bucket>:log` (sliding log), `<prefix>{<tag>}:<bucket>:win:<W>` (fixed
 * and sliding-window counts of windows of W µs), `<prefix>{<tag>}:<bucket>:ch` (the bucket's
 * calls in progress), `<prefix>{out}:carrier:<id>` (leaky bucket) and `…{out}:carrier:<id>:ch`,
 * and the call records `<prefix>{<tag>}:call:in:<call id>` and `<prefix>{out}:call:out:<call id>`.
 * Hash tags only matter on a Cluster; on a single Redis (hashTags false, the default there) keys
 * carry no tag, so a peer's bucket is one key whatever account its calls name. With tags, a call
 * id's inbound record is found on release through `<prefix>{c:<call id>}:loc`, which names it.
 */
import { randomBytes } from 'node:crypto';
import { systemClockUs } from '../../clock.js';
import { Redis, type Cluster, type RedisOptions } from 'ioredis';
import { InvalidArgumentError, StoreUnavailableError } from '../../errors/index.js';
import { SafeEmitter } from '../../events.js';
import { OUTBOUND_TAG, encodeId } from '../keys.js';
import { Batcher, type Pending, type Queued } from './batcher.js';
import { ArgsBuilder, bucketArgsOf, num, trimBound, type BucketArgs } from './bucket-args.js';
import { scripts, type ScriptName } from './scripts.js';
import type {
  AdmitRequest,
  AdmitResult,
  Bucket,
  Carrier,
  CountRequest,
  CountResult,
  HoldsRequest,
  HoldsResult,
  RecordRequest,
  RecordResult,
  RefreshRequest,
  RefreshResult,
  ReleaseRequest,
  ReleaseResult,
  ReserveRequest,
  ReserveResult,
  StopSignal,
  Store,
  StoreEvents,
  WaitRequest,
  WaitResult,
} from '../types.js';
import {
  checkAdmit,
  checkCount,
  checkHolds,
  checkRefresh,
  checkRelease,
  checkReserve,
  checkWait,
  hasChannels,
} from '../validate.js';
import { checkInspect } from '../inspect-memory.js';
import type { InspectRequest, InspectResult } from '../types.js';

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
  /**
   * Admissions (or reservations) decided in one script call, at most (default 64; 1: one call
   * each). Those issued in one tick go to Redis together at the end of the tick; while a batch
   * is in flight, those arriving meanwhile wait for it and leave together (group commit), and a
   * full batch leaves at once: a bucket or carrier many calls name is then read and written once
   * per batch instead of once per call. Decisions are the same as one by one, in the order
   * issued; nothing waits for a batch to fill, and an idle store sends a call at once.
   */
  readonly maxBatch?: number;
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

type Reply = (string | number)[];

/** A reservation waiting for its batch. */
interface PendingReserve extends Pending<ReserveResult> {
  readonly route: readonly Carrier[];
  readonly now: string;
  /** The call's encoded id ('' without a hold) and hold time (µs). */
  readonly id: string;
  readonly forUs: string;
}

/** An admission waiting for its batch. */
interface PendingAdmit extends Pending<AdmitResult> {
  readonly buckets: readonly BucketArgs[];
  readonly now: string;
  /** With a channel limit in its buckets: the call's encoded id and hold time (µs); else undefined. */
  readonly id: string | undefined;
  readonly forUs: number;
}

const DAY_MS = 86_400_000;
/** A batch's calls are limited by Lua's stack too (unpack of one ZADD per log). */
const MAX_BATCH_LIMIT = 1000;

export class RedisStore implements Store {
  readonly kind = 'redis';
  readonly prefix: string;
  /**
   * The loss of the connection, once per outage (the first error or close after it was last
   * ready) as a StoreUnavailableError. The store listens to the client's 'error' event, so
   * ioredis does not print "Unhandled error event" on the console while Redis is away; and to
   * 'close', since a server that comes back at once may be reconnected to without any error.
   */
  readonly events = new SafeEmitter<StoreEvents>();
  /** The connection was lost since it was last ready (reported). */
  private lost = false;
  /** A connection error since it was last ready: Redis is known to be out of reach. */
  private down = false;
  private closing = false;
  private report(reason: string, err?: Error): void {
    if (this.lost) return;
    this.lost = true;
    this.events.safeEmit('error', new StoreUnavailableError(`Redis connection lost: ${reason}`, err));
  }
  private readonly onClientError = (err: Error) => {
    this.down = true;
    this.forgetLogs();
    this.report(err.message, err);
  };
  private readonly onClientClose = () => {
    this.forgetLogs();
    if (!this.closing) this.report('connection closed');
  };
  /**
   * What this process knows of its logs (logsKnown) holds for the server it saw write them; a
   * connection lost may mean a failover to a replica that missed the latest trims, or a restart
   * from an older copy: the next write of each log trims it and sets its expiry again.
   */
  private readonly forgetLogs = () => {
    this.logsKnown = new WeakMap();
  };
  private readonly onClientReady = () => {
    this.lost = this.down = false;
  };
  private readonly redis: Redis | Cluster;
  private readonly hashTags: boolean;
  private readonly virtualTtlMs: number;
  private readonly readyTimeoutMs: number;
  private readyWait?: Promise<void>;
  private readonly instance = randomBytes(6).toString('base64url');
  private seq = 0;
  private readonly writeChunk: number;
  /** Commands written into the current cork (see corked()), and the socket corked. */
  private inChunk = 0;
  private chunkStream: Redis['stream'] | undefined;
  private ownsConnection = false;
  /** Script arguments per bucket list (see bucketArgs()); weak, so dropped plans cost nothing. */
  private readonly argsOf = new WeakMap<readonly Bucket[], readonly BucketArgs[]>();
  /**
   * Buckets (with their limits) whose log an admit of this process on Redis TIME has written:
   * the bound at which the log was then trimmed (or found trimmed), which also says its expiry
   * was set for these limits. See loneArgv.
   */
  private logsKnown = new WeakMap<BucketArgs, number>();
  /** Admissions not sent yet, per tag (one lane for all when keys carry no tag). */
  private readonly admissions: Batcher<PendingAdmit>;
  /** Reservations not sent yet (one lane: every carrier is on one tag). */
  private readonly reservations: Batcher<PendingReserve>;
  /** With hash tags: call ids whose inbound locator is being written (see locate()). */
  private readonly locating = new Map<string, Promise<void>>();
  /** How far Redis TIME is ahead of the process clock, at least (see deadline()). */
  private readonly offset = new ClockOffset();

  constructor(opts: RedisStoreOptions) {
    this.redis = opts.redis;
    this.prefix = opts.prefix ?? 'callgate:';
    if (/[{}]/.test(this.prefix))
      throw new InvalidArgumentError(`prefix must not contain '{' or '}', got ${JSON.stringify(this.prefix)}`);
    this.hashTags = opts.hashTags ?? isCluster(opts.redis);
    this.virtualTtlMs = opts.virtualTimeTtlMs ?? DAY_MS;
    this.writeChunk = opts.writeChunk ?? 16;
    this.readyTimeoutMs = opts.readyTimeoutMs ?? 5_000;
    const maxBatch = opts.maxBatch ?? 64;
    if (!(Number.isSafeInteger(maxBatch) && maxBatch >= 1 && maxBatch <= MAX_BATCH_LIMIT)) {
      throw new InvalidArgumentError(
        `maxBatch must be an integer from 1 to ${MAX_BATCH_LIMIT}, got ${String(opts.maxBatch)}`,
      );
    }
    const batching = {
      maxBatch,
      ready: () => this.redis.status === 'ready',
      whenReady: (signal: StopSignal | undefined) => this.notReady(signal) ?? Promise.resolve(),
      unavailable,
    };
    this.admissions = new Batcher<PendingAdmit>({ ...batching, send: (items) => this.sendAdmissions(items) });
    this.reservations = new Batcher<PendingReserve>({ ...batching, send: (items) => this.sendReservations(items) });
    for (const { command, lua } of Object.values(scripts())) {
      if (!(command in this.redis)) this.redis.defineCommand(command, { lua });
    }
    this.redis.on('error', this.onClientError);
    this.redis.on('close', this.onClientClose);
    this.redis.on('ready', this.onClientReady);
    // on a Cluster, one node's connection lost (its failover) is a 'node error' or '-node'
    this.redis.on('node error', this.forgetLogs);
    this.redis.on('-node', this.forgetLogs);
  }

  /** A store on its own connection to `url` (`redis://` or `rediss://`; closed by close()). */
  static connect(url: string, opts: RedisConnectOptions = {}): RedisStore {
    const { redisOptions, ...storeOpts } = opts;
    const store = new RedisStore({
      ...storeOpts,
      redis: new Redis(url, { ...RECOMMENDED_REDIS_OPTIONS, ...redisOptions }),
    });
    store.ownsConnection = true;
    return store;
  }

  private base(tag: string, name: string): string {
    return this.hashTags ? `${this.prefix}{${tag}}:${name}` : `${this.prefix}${name}`;
  }

  /**
   * Resolves once the connection is ready; rejects when the signal aborts first, when the client
   * gives up ('end'), or after `readyTimeoutMs` for a call that brought no AbortSignal (a plain
   * flag is read once ready: its call then does not go out).
   */
  private ready(given: StopSignal | undefined): Promise<void> {
    const signal = given instanceof AbortSignal ? given : undefined;
    if (signal?.aborted) return Promise.reject(new StoreUnavailableError('Redis not ready in time'));
    return new Promise((resolve, reject) => {
      // a timer of our own, cleared when settled (AbortSignal.timeout would outlive the call)
      let timer: NodeJS.Timeout | undefined;
      const settle = (err?: Error) => {
        clearTimeout(timer);
        signal?.removeEventListener('abort', onAbort);
        if (err) reject(err);
        else resolve();
      };
      const onAbort = () => settle(new StoreUnavailableError('Redis not ready in time'));
      if (signal) signal.addEventListener('abort', onAbort, { once: true });
      else (timer = setTimeout(onAbort, this.readyTimeoutMs)).unref();
      this.connected().then(() => settle(), settle);
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

  private run(name: ScriptName, keys: string[], args: (string | number)[], signal?: StopSignal): Promise<unknown> {
    return this.send(name, [keys.length, ...keys, ...args], signal);
  }

  /**
   * Send a command with the socket corked, so that the commands of one tick leave in writes of
   * up to `writeChunk` commands instead of one system call each. The cork is released when the
   * chunk is full or at the end of the tick, whichever comes first: Redis gets work as soon as a
   * chunk is ready and keeps working while the next one is written (a cork per tick, like
   * ioredis' enableAutoPipelining, would make Node and Redis take turns).
   */
  private corked(
    redis: Redis,
    fn: (...a: (string | number)[]) => Promise<unknown>,
    argv: (string | number)[],
  ): Promise<unknown> {
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

  /**
   * Undefined when Redis is ready now; else a promise that settles when it is (or rejects when
   * the signal aborts first, or the client is closed for good).
   */
  private notReady(signal: StopSignal | undefined): Promise<void> | undefined {
    const status = this.redis.status;
    if (status === 'ready') return undefined;
    if (status === 'end') return Promise.reject(new StoreUnavailableError('Redis connection closed'));
    // known to be down (an error since it was last ready): the policy decides at once, rather
    // than every call waiting its whole timeout; the first 'ready' ends this
    if (this.down) return Promise.reject(new StoreUnavailableError('Redis is unreachable (reconnecting)'));
    if (status === 'wait') this.redis.connect().catch(() => undefined); // lazyConnect
    return this.ready(signal);
  }

  /** Run a script with `argv` = [numkeys, ...KEYS, ...ARGV], once Redis is ready. */
  private async send(name: ScriptName, argv: (string | number)[], signal?: StopSignal): Promise<unknown> {
    // what was issued before goes first: admissions still waiting for their batch
    if (this.admissions.pending) this.admissions.flushAll();
    if (this.reservations.pending) this.reservations.flushAll();
    try {
      const wait = this.notReady(signal);
      if (wait) await wait;
      if (signal?.aborted) throw new StoreUnavailableError('decision timed out before its command was sent');
    } catch (err) {
      throw unavailable(err);
    }
    return this.write(name, argv);
  }

  /**
   * Write a script call now (Redis ready). A batch (admit, reserve) leaves at once, uncorked:
   * Redis starts on it while this process still handles the replies that made the next one.
   */
  private async write(name: ScriptName, argv: (string | number)[]): Promise<unknown> {
    const fn = (this.redis as unknown as Record<string, (...a: (string | number)[]) => Promise<unknown>>)[
      scripts()[name].command
    ]!;
    try {
      if (
        name !== 'admit' &&
        name !== 'admit-lone' &&
        name !== 'reserve' &&
        this.writeChunk > 1 &&
        !isCluster(this.redis)
      )
        return await this.corked(this.redis, fn, argv);
      return await fn.apply(this.redis, argv);
    } catch (err) {
      throw unavailable(err);
    }
  }

  /** Write a batch; `settle` resolves its calls from the reply, or every call rejects; settles once it is back. */
  private writeBatch(
    name: ScriptName,
    argv: string[],
    items: readonly Queued[],
    settle: (reply: unknown) => void,
  ): Promise<void> {
    return this.write(name, argv)
      .then(settle)
      .catch((err: unknown) => {
        for (const item of items) item.reject(err); // a call settled already stays settled
      });
  }

  /**
   * The keys and profile of each bucket of a list (lua/includes/buckets.lua), built once per
   * list and tag: plans hand the same (readonly) list to every call of a peer.
   */
  private bucketArgs(tag: string, buckets: readonly Bucket[]): readonly BucketArgs[] {
    const cached = this.argsOf.get(buckets);
    if (cached !== undefined && cached[0]!.tag === tag) return cached;
    const list = buckets.map((bucket) => bucketArgsOf(tag, this.base(tag, bucket.name), bucket));
    this.argsOf.set(buckets, list);
    return list;
  }

  /**
   * A call's deadline in Redis time ('' = none): the script skips the call if it runs at or after
   * it, since the caller has then decided it by its store-trouble policy. The process deadline is
   * shifted by a lower bound of (Redis TIME - process clock), so a call that runs after its caller
   * gave up is always skipped; one that runs up to a round trip before may be skipped too (its
   * caller then decides it by policy as well). While no reply told Redis' clock yet (the first
   * batch, or none for 20 s): no deadline, and the next batch asks its script for Redis TIME.
   */
  private deadline(signal: StopSignal | undefined): string {
    const d = (signal as { deadlineUs?: number } | undefined)?.deadlineUs;
    const lo = this.offset.lowerBound;
    return d === undefined || lo === undefined ? '' : num(Math.floor(d + lo));
  }

  private member(): string {
    return `${this.instance}${(this.seq++).toString(36)}`;
  }

  /** The ttl floor (ms) of a script call: none on Redis TIME, the virtual-time floor otherwise. */
  private ttlFloor(now: number | undefined): number {
    return now === undefined ? 0 : this.virtualTtlMs;
  }

  admit(req: AdmitRequest): Promise<AdmitResult> {
    try {
      checkAdmit(req);
    } catch (err) {
      return Promise.reject(err);
    }
    const buckets = this.bucketArgs(req.tag, req.buckets);
    const now = req.now === undefined ? '' : num(req.now);
    // a hold only matters (and travels) where a bucket has a channel limit
    const held = req.hold !== undefined && hasChannels(req.buckets);
    const id = held ? encodeId(req.hold.id) : undefined;
    const forUs = held ? req.hold.forUs : 0;
    const decided = new Promise<AdmitResult>((resolve, reject) => {
      this.admissions.add(this.hashTags ? req.tag : '', {
        buckets,
        now,
        id,
        forUs,
        signal: req.signal,
        resolve,
        reject,
      });
    });
    if (this.hashTags && id !== undefined && forUs > 0) {
      this.track(
        id,
        decided.then((r) => (r.admitted && !r.duplicate ? this.locate(req.tag, id, forUs, now !== '') : undefined)),
      );
    }
    return decided;
  }

  /**
   * One admit script call for a batch (lua/admit.lua): each limit profile, bucket and bucket
   * list once, then the calls in runs that share a time. A bucket named again with other
   * limits (a reload between two calls) starts a new batch, so every call is checked against
   * its own.
   */
  private sendAdmissions(items: PendingAdmit[]): Promise<void> {
    const clock = this.offset.lowerBound === undefined ? '1' : '';
    if (items.length === 1) {
      const lone = this.loneArgv(items[0]!, clock);
      if (lone !== undefined) return this.writeBatch('admit-lone', lone, items, this.settleAdmissions(items, clock));
    }
    const b = new ArgsBuilder();
    const plans: number[] = new Array(items.length);
    let n = 0;
    for (; n < items.length; n++) {
      const p = b.plan(items[n]!.buckets);
      if (p === 0) break;
      plans[n] = p;
    }
    if (n === 0) {
      // two buckets of this one call share a key: no script call can decide it
      items[0]!.reject(new InvalidArgumentError('the buckets of one call must not share a Redis key'));
      return items.length > 1 ? this.sendAdmissions(items.slice(1)) : Promise.resolve();
    }
    if (n < items.length) {
      // call n names a bucket again with other limits: those before it go now, the rest after
      const before = this.sendAdmissions(items.slice(0, n));
      return Promise.all([before, this.sendAdmissions(items.slice(n))]).then(() => undefined);
    }
    const { calls, virtual } = runsOf(items, (i, out) => {
      const item = items[i]!;
      out.push(num(plans[i]!), this.deadline(item.signal));
      if (item.id !== undefined) out.push(item.id, num(item.forUs));
    });
    const tag = items[0]!.buckets[0]!.tag;
    // per bucket, what this process knows of its log (see loneArgv), then the calls
    const tail: string[] = [];
    for (const args of b.bucketList) tail.push(this.knownBound(args));
    for (const v of calls) tail.push(v);
    const argv = b.argv(
      [String(virtual ? this.virtualTtlMs : 0), `${this.member()}:`, this.base(tag, 'call:in:'), clock],
      tail,
      true,
    );
    return this.writeBatch('admit', argv, items, this.settleAdmissions(items, clock));
  }

  /** The bound of the latest trim of the bucket's log this process knows of, '' when none (see loneArgv). */
  private knownBound(args: BucketArgs): string {
    const bound = this.logsKnown.get(args);
    return bound === undefined ? '' : num(bound);
  }

  /** The calls of an admit script call, from its reply. */
  private settleAdmissions(items: readonly PendingAdmit[], clock: string): (reply: unknown) => void {
    return (reply) => {
      // per call: limitedBy (0: admitted, else 1-based), retryAfterUs, now, flags (1: channels, 2: duplicate, 4: skipped); then Redis TIME if asked
      const r = reply as number[];
      const received = systemClockUs();
      if (clock) this.offset.sample(r[r.length - 1]!, received);
      for (let i = 0; i < items.length; i++) {
        const item = items[i]!;
        const limitedBy = r[4 * i]!;
        const flags = r[4 * i + 3]!;
        const now = r[4 * i + 2]!;
        if (item.now === '') this.offset.sample(now, received);
        if (flags === 4) item.reject(skipped());
        else if (limitedBy !== 0) {
          item.resolve({
            admitted: false,
            limitedBy: limitedBy - 1,
            reason: flags === 1 ? 'channels' : 'rate',
            retryAfterUs: r[4 * i + 1]!,
            now,
          });
        } else if (flags === 2) item.resolve({ admitted: true, limitedBy: -1, retryAfterUs: 0, now, duplicate: true });
        else {
          // on Redis TIME, an admitted call's logs have their expiry and were trimmed at the bound of its time
          if (item.now === '')
            for (const args of item.buckets)
              if (args.retention > 0) this.logsKnown.set(args, trimBound(now, args.retention));
          item.resolve({ admitted: true, limitedBy: -1, retryAfterUs: 0, now });
        }
      }
    };
  }

  /**
   * A lone call in admit-lone.lua's layout, when every bucket of it has sliding-log limits only
   * (one key each, all distinct); else undefined (the general layout). Per bucket it sends what
   * this process knows of the log (logsKnown): the bound of its latest trim, so that the script
   * skips a trim that would remove nothing; and until a reply confirms a write with these
   * buckets' limits, its third argument asks the script to set every log's expiry, since the
   * script otherwise skips the PEXPIRE while the log's expiry, set for the limits of that time,
   * is known to be enough (a reload may have widened a window).
   */
  private loneArgv(item: PendingAdmit, clock: string): string[] | undefined {
    const list = item.buckets;
    const argv: string[] = [num(list.length)];
    let refresh = false;
    for (const args of list) {
      if (args.lone === undefined) return undefined;
      const key = args.keys[0]!;
      for (let k = 1; k < argv.length; k++) if (argv[k] === key) return undefined;
      argv.push(key);
    }
    const at = argv.length;
    argv.push(
      item.now === '' ? '0' : String(this.virtualTtlMs),
      `${this.member()}:1`,
      '',
      clock,
      item.now,
      this.deadline(item.signal),
    );
    for (const args of list) {
      const bound = this.knownBound(args);
      if (bound === '') refresh = true;
      argv.push(bound);
    }
    if (refresh) argv[at + 2] = '1';
    for (const args of list) for (const v of args.lone!) argv.push(v);
    return argv;
  }

  /**
   * With hash tags, a call's inbound record lives on its tag, which a release knowing only the
   * call id cannot compute: a locator under the call id's own tag names the record. Written
   * after the decision (another slot); a hold whose locator is lost still lapses by itself.
   * Another process releasing the call within the round trip of that write misses the record.
   */
  private locate(tag: string, id: string, forUs: number, virtual: boolean): Promise<void> {
    const ms = Math.max(Math.ceil(forUs / 1000) + 1, virtual ? this.virtualTtlMs : 0);
    return this.redis.set(this.locatorKey(id), this.base(tag, `call:in:${id}`), 'PX', ms).then(
      () => undefined,
      () => undefined,
    );
  }

  /** A locator being written for `id`: a release or refresh of `id` issued later waits for it. */
  private track(id: string, writing: Promise<void>): void {
    const done: Promise<void> = writing
      .catch(() => undefined)
      .finally(() => {
        if (this.locating.get(id) === done) this.locating.delete(id);
      });
    this.locating.set(id, done);
  }

  private locatorKey(id: string): string {
    return this.base(`c:${id}`, 'loc');
  }

  async record(req: RecordRequest): Promise<RecordResult> {
    checkAdmit(req);
    const b = new ArgsBuilder();
    for (const args of this.bucketArgs(req.tag, req.buckets)) {
      if (b.bucket(args) === 0) throw new InvalidArgumentError('the buckets of one call must not share a Redis key');
    }
    const held = req.hold !== undefined && hasChannels(req.buckets);
    const id = held ? encodeId(req.hold.id) : '';
    const forUs = held ? req.hold.forUs : 0;
    const head = [
      req.now === undefined ? '' : num(req.now),
      this.member(),
      String(this.ttlFloor(req.now)),
      held ? this.base(req.tag, `call:in:${id}`) : '',
      id,
      num(forUs),
      this.deadline(req.signal),
    ];
    const sent = this.send('record', b.argv(head, [], false), req.signal) as Promise<number[]>;
    if (this.hashTags && held && forUs > 0)
      this.track(
        id,
        sent.then((r) => (r[1] === 0 ? this.locate(req.tag, id, forUs, req.now !== undefined) : undefined)),
      );
    const r = await sent;
    if (r[1] === 2) throw skipped();
    return r[1] === 1 ? { now: r[0]!, duplicate: true } : { now: r[0]! };
  }

  async count(req: CountRequest): Promise<CountResult> {
    checkCount(req);
    const r = (await this.run(
      'count',
      [`${this.base(req.tag, req.bucket)}:log`],
      [req.now ?? '', req.windowUs],
      req.signal,
    )) as Reply;
    return { count: Number(r[0]), now: Number(r[1]) };
  }

  private carrierKey(c: Carrier): string {
    return this.base(OUTBOUND_TAG, c.name);
  }

  reserve(req: ReserveRequest): Promise<ReserveResult> {
    try {
      checkReserve(req);
    } catch (err) {
      return Promise.reject(err);
    }
    const now = req.now === undefined ? '' : num(req.now);
    const id = req.hold === undefined ? '' : encodeId(req.hold.id);
    const forUs = req.hold === undefined ? '0' : num(req.hold.forUs);
    return new Promise<ReserveResult>((resolve, reject) => {
      this.reservations.add(OUTBOUND_TAG, { route: req.route, now, id, forUs, signal: req.signal, resolve, reject });
    });
  }

  /**
   * One reserve script call for a batch (lua/reserve.lua): each carrier's key once, each route
   * (carriers with their interval and maxWait) once, then the calls in runs sharing a time.
   */
  private sendReservations(items: PendingReserve[]): Promise<void> {
    const keys: string[] = [];
    const keyIndex = new Map<string, string>();
    const routes: string[] = [];
    const routeIndex = new Map<string, string>();
    const keyOf = (key: string): string => {
      let k = keyIndex.get(key);
      if (k === undefined) {
        k = num(keys.push(key));
        keyIndex.set(key, k);
      }
      return k;
    };
    const routeOf = (route: readonly Carrier[]): string => {
      const entry = [num(route.length)];
      for (const c of route) {
        const key = this.carrierKey(c);
        const channels = c.channels ?? 0;
        entry.push(
          keyOf(key),
          String(c.intervalUs),
          String(c.maxWaitUs),
          String(channels),
          channels > 0 ? keyOf(`${key}:ch`) : '0',
        );
      }
      const id = entry.join(' ');
      let r = routeIndex.get(id);
      if (r === undefined) {
        r = num(routeIndex.size + 1);
        routeIndex.set(id, r);
        for (const v of entry) routes.push(v);
      }
      return r;
    };
    const { calls, virtual } = runsOf(items, (i, out) => {
      const item = items[i]!;
      out.push(routeOf(item.route), this.deadline(item.signal), item.id, item.forUs);
    });
    const argv: string[] = [num(keys.length)];
    for (const k of keys) argv.push(k);
    const clock = this.offset.lowerBound === undefined ? '1' : '';
    argv.push(
      String(virtual ? this.virtualTtlMs : 0),
      this.base(OUTBOUND_TAG, 'call:out:'),
      clock,
      num(routeIndex.size),
    );
    for (const v of routes) argv.push(v);
    for (const v of calls) argv.push(v);
    return this.writeBatch('reserve', argv, items, (reply) => {
      // per call: m (-1: skipped), index (1-based, 0: none), waitUs, slotUs, now, then per carrier tried its wait and full flag
      const r = reply as Reply;
      const received = systemClockUs();
      if (clock) this.offset.sample(Number(r[r.length - 1]), received);
      let at = 0;
      for (const item of items) {
        const m = Number(r[at]);
        if (item.now === '') this.offset.sample(Number(r[at + 4]), received);
        if (m < 0) {
          item.reject(skipped());
          at += 5;
          continue;
        }
        const waits: number[] = new Array(m);
        const full: boolean[] = new Array(m);
        for (let i = 0; i < m; i++) {
          waits[i] = Number(r[at + 5 + 2 * i]);
          full[i] = Number(r[at + 6 + 2 * i]) === 1;
        }
        item.resolve({
          index: Number(r[at + 1]) - 1,
          waitUs: Number(r[at + 2]),
          slotUs: Number(r[at + 3]),
          now: Number(r[at + 4]),
          waits,
          full,
        });
        at += 5 + 2 * m;
      }
    });
  }

  async wait(req: WaitRequest): Promise<WaitResult> {
    checkWait(req);
    const r = (await this.run(
      'wait',
      [this.carrierKey(req.carrier)],
      [req.now ?? '', req.carrier.intervalUs],
      req.signal,
    )) as Reply;
    return { waitUs: Number(r[0]), now: Number(r[1]) };
  }

  /**
   * The call records of an id, grouped by the script call that can take them together (one
   * Cluster slot each). Without tags both are named at once and go in one script call, issued
   * at once (in issue order with the store's other operations). With tags, the outbound record
   * is on the carriers' tag and the inbound one wherever its locator says (none without one):
   * the locator is read first, so such a call is ordered after every operation issued before it
   * but may be overtaken by one issued after it in the same tick.
   */
  private recordGroups(
    id: string,
    direction: 'in' | 'out' | undefined,
    signal: StopSignal | undefined,
  ): string[][] | Promise<string[][]> {
    const wantIn = direction !== 'out';
    const out = direction !== 'in' ? [this.base(OUTBOUND_TAG, `call:out:${id}`)] : [];
    if (!this.hashTags) return [[...(wantIn ? [this.base('', `call:in:${id}`)] : []), ...out]];
    if (this.admissions.pending) this.admissions.flushAll();
    if (this.reservations.pending) this.reservations.flushAll();
    if (!wantIn) return [out];
    const locating = this.locating.get(id);
    return (async () => {
      await locating; // an admit of this id issued before: its locator first
      let key: string | null;
      try {
        const wait = this.notReady(signal);
        if (wait) await wait;
        key = await this.redis.get(this.locatorKey(id));
      } catch (err) {
        throw unavailable(err);
      }
      const groups = out.length > 0 ? [out] : [];
      if (key !== null) groups.push([key]);
      return groups;
    })();
  }

  /** Run `name` on every group of call records of `id`; the sum of the first reply fields, and the time. */
  private onRecords(
    name: 'release' | 'refresh',
    id: string,
    direction: 'in' | 'out' | undefined,
    args: (string | number)[],
    now: number | undefined,
    signal: StopSignal | undefined,
  ): Promise<[number, number]> {
    const run = (groups: string[][]): Promise<[number, number]> =>
      Promise.all(groups.map((keys) => this.run(name, keys, args, signal) as Promise<number[]>)).then((replies) => [
        replies.reduce((sum, r) => sum + r[0]!, 0),
        replies.length > 0 ? replies[replies.length - 1]![1]! : (now ?? 0),
      ]);
    const groups = this.recordGroups(id, direction, signal);
    return Array.isArray(groups) ? run(groups) : groups.then(run);
  }

  release(req: ReleaseRequest): Promise<ReleaseResult> {
    try {
      checkRelease(req);
    } catch (err) {
      return Promise.reject(err);
    }
    const id = encodeId(req.id);
    return this.onRecords('release', id, req.direction, [req.now ?? '', id], req.now, req.signal).then(
      async ([released, now]) => {
        if (this.hashTags && req.direction !== 'out') await this.redis.del(this.locatorKey(id)).catch(() => undefined);
        return { released, now };
      },
    );
  }

  refresh(req: RefreshRequest): Promise<RefreshResult> {
    try {
      checkRefresh(req);
    } catch (err) {
      return Promise.reject(err);
    }
    const id = encodeId(req.id);
    const args = [req.now ?? '', id, req.forUs, String(this.ttlFloor(req.now))];
    return this.onRecords('refresh', id, undefined, args, req.now, req.signal).then(async ([refreshed, now]) => {
      if (this.hashTags && refreshed > 0) {
        const ms = Math.max(Math.ceil(req.forUs / 1000) + 1, this.ttlFloor(req.now));
        await this.redis.pexpire(this.locatorKey(id), ms).catch(() => undefined);
      }
      return { refreshed, now };
    });
  }

  async holds(req: HoldsRequest): Promise<HoldsResult> {
    checkHolds(req);
    const r = (await this.run(
      'holds',
      [`${this.base(req.tag, req.name)}:ch`],
      [req.now ?? ''],
      req.signal,
    )) as number[];
    return { holds: r[0]!, now: r[1]! };
  }

  /** Batches sent so far, by size (index: calls in the batch), of admissions and of reservations (diagnostics). */
  batchSizes(): { admit: number[]; reserve: number[] } {
    return { admit: this.admissions.batchSizes(), reserve: this.reservations.batchSizes() };
  }

  /** Delete every key under this store's prefix, on every master of a Cluster. */
  async clear(): Promise<void> {
    const match = `${this.prefix.replace(/[*?[\]\\]/g, '\\$&')}*`;
    const nodes = isCluster(this.redis) ? this.redis.nodes('master') : [this.redis];
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

  /**
   * Read-only (lua/inspect.lua): one script call per tag (all buckets in one on a single Redis,
   * at most 256 buckets per call) and one for the carriers; the first call's time is the `now`
   * of the others, so every number is of one instant.
   */
  async inspect(req: InspectRequest): Promise<InspectResult> {
    checkInspect(req);
    const chunks: number[][] = [];
    const open = new Map<string, number[]>();
    req.buckets.forEach((b, i) => {
      const tag = this.hashTags ? b.tag : '';
      let chunk = open.get(tag);
      if (chunk === undefined || chunk.length >= 256) {
        open.set(tag, (chunk = []));
        chunks.push(chunk);
      }
      chunk.push(i);
    });
    const calls = chunks.map((indices) => {
      const b = new ArgsBuilder();
      const at = indices.map((i) => {
        const { tag, bucket } = req.buckets[i]!;
        const index = b.bucket(bucketArgsOf(tag, this.base(tag, bucket.name), bucket));
        if (index === 0)
          throw new InvalidArgumentError(
            `buckets[${i}]: bucket ${JSON.stringify(bucket.name)} is named twice with different limits`,
          );
        return { i, index, limits: bucket.limits };
      });
      return { at, argv: (now: string) => b.argv([now], ['0'], false) };
    });
    const carrierArgv = (now: string): string[] => {
      // KEYS: each carrier's last slot, then the holds of those with a channel limit, each once
      const keys: string[] = [];
      const keyOf = (k: string): string => {
        let i = keys.indexOf(k);
        if (i < 0) i = keys.push(k) - 1;
        return String(i + 1);
      };
      const entries: string[] = [];
      for (const c of req.carriers) entries.push(keyOf(this.carrierKey(c)), String(c.intervalUs), '');
      req.carriers.forEach((c, i) => {
        entries[3 * i + 2] = (c.channels ?? 0) > 0 ? keyOf(`${this.carrierKey(c)}:ch`) : '0';
      });
      return [String(keys.length), ...keys, now, '0', '0', String(req.carriers.length), ...entries];
    };
    let now = req.now === undefined ? '' : num(req.now);
    const run = async (argv: string[]) => ((await this.send('inspect', argv, req.signal)) as string[]).map(Number);
    const first = calls.length > 0 ? await run(calls[0]!.argv(now)) : await run(carrierArgv(now));
    now = num(first[0] as number);
    const rest = await Promise.all([
      ...calls.slice(1).map((c) => run(c.argv(now))),
      calls.length > 0 ? run(carrierArgv(now)) : Promise.resolve(first),
    ]);
    const replies = [first, ...rest.slice(0, -1)];
    const buckets: { counts: number[]; retryAfterUs: number[]; channels?: number }[] = new Array(req.buckets.length);
    calls.forEach((call, c) => {
      const reply = replies[c]!;
      // per builder bucket, its limits in profile order (sliding-log widest window first), then
      // its calls in progress (-1: no channel limit)
      const offsets: number[] = [];
      let off = 1;
      for (const { index, limits } of call.at) {
        if (offsets[index] === undefined) {
          offsets[index] = off;
          off += 2 * limits.length + 1;
        }
      }
      for (const { i, index, limits } of call.at) {
        const order = limits.map((_, j) => j).sort((x, y) => logWindowOf(limits[y]!) - logWindowOf(limits[x]!));
        const counts: number[] = new Array(limits.length);
        const retryAfterUs: number[] = new Array(limits.length);
        order.forEach((j, q) => {
          counts[j] = reply[offsets[index]! + 2 * q]!;
          retryAfterUs[j] = reply[offsets[index]! + 2 * q + 1]!;
        });
        const channels = reply[offsets[index]! + 2 * limits.length]!;
        buckets[i] = channels < 0 ? { counts, retryAfterUs } : { counts, retryAfterUs, channels };
      }
    });
    const carrierReply = rest[rest.length - 1]!;
    const carriers = req.carriers.map((_, k) => {
      const waitUs = carrierReply[1 + 2 * k]!;
      const channels = carrierReply[2 + 2 * k]!;
      return channels < 0 ? { waitUs } : { waitUs, channels };
    });
    return { buckets, carriers, now: Number(now) };
  }

  async close(): Promise<void> {
    this.closing = true;
    if (this.ownsConnection) await this.redis.quit().catch(() => this.redis.disconnect());
    this.redis.off('error', this.onClientError);
    this.redis.off('close', this.onClientClose);
    this.redis.off('ready', this.onClientReady);
    this.redis.off('node error', this.forgetLogs);
    this.redis.off('-node', this.forgetLogs);
  }
}

/**
 * The calls of a batch in runs that share a time (lua/includes/runs.lua): now, count, then the
 * arguments of each call (`args(i, out)` pushes call i's). `virtual`: some call gave its own now.
 */
function runsOf(
  items: readonly { readonly now: string }[],
  args: (i: number, out: string[]) => void,
): { calls: string[]; virtual: boolean } {
  const calls: string[] = [];
  let virtual = false;
  for (let i = 0; i < items.length; ) {
    const now = items[i]!.now;
    let j = i + 1;
    while (j < items.length && items[j]!.now === now) j++;
    calls.push(now, num(j - i));
    for (let k = i; k < j; k++) args(k, calls);
    if (now !== '') virtual = true;
    i = j;
  }
  return { calls, virtual };
}

/**
 * A Cluster client, as ioredis marks it (Cluster sets isCluster true, Redis false). Not
 * instanceof: the application's ioredis may be another copy than the one callgate resolves.
 */
function isCluster(redis: Redis | Cluster): redis is Cluster {
  return (redis as { isCluster?: unknown }).isCluster === true;
}

/** A call the script skipped: its deadline had passed when Redis ran it (nothing was counted). */
function skipped(): StoreUnavailableError {
  return new StoreUnavailableError('Redis ran the call after its deadline: skipped, nothing counted');
}

/**
 * A lower bound of (Redis TIME - process clock), µs, from replies: a Redis time read before a
 * reply left, minus the reply's arrival time on the process clock, can only be below the true
 * offset. The best (largest) bound of the last 10 to 20 s is kept, so a clock step is followed
 * within 20 s. (On a Cluster one bound serves every node: their clocks are assumed in step, as
 * NTP keeps them.)
 */
class ClockOffset {
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
}

/**
 * A Redis reply error (redis-errors' ReplyError, named after its class) is a bug to surface as
 * is; anything else means Redis is out of reach. By name, for the same reason as isCluster().
 */
function unavailable(err: unknown): Error {
  if ((err as Error | undefined)?.name === 'ReplyError' || err instanceof StoreUnavailableError) return err as Error;
  return new StoreUnavailableError(`Redis unavailable: ${(err as Error).message}`, err);
}

/** The order bucketArgsOf gives a bucket's limits: sliding-log ones widest window first. */
const logWindowOf = (lim: Bucket['limits'][number]): number => (lim.algorithm === 'sliding-log' ? lim.windowUs : 0);
