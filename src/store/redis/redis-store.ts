/**
 * RedisStore: the Store on Redis or Redis Cluster, one Lua script per operation (lua/), run
 * through ioredis defineCommand (EVALSHA, falling back to EVAL, so NOSCRIPT after a Redis
 * restart heals by itself). A facade over the modules beside it: the connection
 * (connection.ts), the key names (redis-keys.ts), the arguments and replies of each batched
 * script (admit-*, reserve-*, inspect-*, bucket-args.ts), the call locators (call-locators.ts)
 * and Redis' clock (clock-offset.ts).
 *
 * Admissions and reservations are batched (batcher.ts, group commit): those issued in one tick go
 * out together as one script call (admissions per tag on a Cluster), and while `maxInFlight`
 * batches (default 2) are in flight the calls arriving meanwhile wait and leave together, so
 * batches grow with the load; the script decides them one after the other in the order issued, and buckets and
 * carriers many calls share are read and written once per batch instead of once per call. A
 * batch of one call whose buckets have sliding-log limits only goes to admit-lone.lua (plain
 * logs) or admit-lone-held.lua (with channel limits), scripts that cost Redis less; a batch of
 * up to `loneUpTo` (default 4) such calls goes to admit-lone-run.lua, which runs their lone
 * decisions one after the other (loneRun).
 */
import { randomBytes } from 'node:crypto';
import { Redis, type Cluster } from 'ioredis';
import { InvalidArgumentError } from '../../errors/index.js';
import { SafeEmitter } from '../../events.js';
import { checkInspect } from '../inspect-memory.js';
import { withDeadline } from '../timeout.js';
import { systemClockUs } from '../../clock.js';
import {
  ACCOUNT_PREFIX,
  carrierTag,
  encodeId,
  GLOBAL_BUCKET,
  GLOBAL_TAG,
  isOutboundTag,
  OUTBOUND_TAG,
} from '../keys.js';
import {
  isLaneTag,
  type LanePlan,
  lanePlan,
  laneTagOf,
  onOwnBuckets,
  OVERFLOW_TAG,
  spillParts,
  type SpillParts,
} from '../../lease/lanes.js';
import { leasedCarrierNames } from '../../lease/carriers.js';
import type {
  AdmitRequest,
  AdmitResult,
  Bucket,
  Carrier,
  CountRequest,
  CountResult,
  HoldsRequest,
  HoldsResult,
  InspectRequest,
  BansRequest,
  BansResult,
  UnbanRequest,
  UnbanResult,
  InspectResult,
  RecordRequest,
  RecordResult,
  RefreshRequest,
  ReassertRequest,
  ReassertResult,
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
  logRetention,
} from '../validate.js';
import { rateText } from '../slots.js';
import { HoldLedger } from '../../holds/ledger.js';
import { checkReassert } from '../reassert.js';
import { HoldsKeeper, type ReleaseTicket } from './holds-keeper.js';
import { reassertArgv, reassertResult } from './reassert-args.js';
import {
  AdmitCall,
  admitArgv,
  loneArgv,
  loneRunArgv,
  type AdmitEnv,
  type NoteIn,
  type PendingAdmit,
} from './admit-args.js';
import { settleAdmissions } from './admit-reply.js';
import { Batcher, type Queued } from './batcher.js';
import { ArgsBuilder, bucketArgsOf, num, type BucketArgs } from './bucket-args.js';
import { CallLocators } from './call-locators.js';
import { CarrierLanes, type Step } from './carrier-lanes.js';
import { ClockOffset, skipped } from './clock-offset.js';
import { isCluster, RedisConnection, unavailable } from './connection.js';
import { bucketInspectCalls, carrierGroups } from './inspect-args.js';
import { inspectedBuckets, inspectedCarriers } from './inspect-reply.js';
import { KnownLogs } from './known-logs.js';
import { RedisKeys, holdsKey, logKey, prefixProblem, windowKey } from './redis-keys.js';
import { slotOf } from './slot.js';
import {
  MAX_BATCH_LIMIT,
  MAX_IN_FLIGHT_LIMIT,
  RECOMMENDED_REDIS_OPTIONS,
  type RedisConnectOptions,
  type RedisStoreOptions,
} from './redis-store-options.js';
import { reserveArgv, type PendingReserve, type ReserveEnv } from './reserve-args.js';
import { settleReservations } from './reserve-reply.js';
import { scripts, type ScriptName } from './scripts.js';
import {
  checkListHolds,
  checkReset,
  counterWindows,
  decodeId,
  type ListedHold,
  type ListHoldsRequest,
  type ListHoldsResult,
  type OperableStore,
  type ResetRequest,
  type ResetResult,
} from '../operations.js';

export {
  RECOMMENDED_REDIS_OPTIONS,
  type HoldsOptions,
  type RedisConnectOptions,
  type RedisStoreOptions,
} from './redis-store-options.js';

const DAY_MS = 86_400_000;
/**
 * Batches of one lane in flight at once (RedisStoreOptions.maxInFlight). 2: in the open-loop
 * bench (batching section, docs/performance.md) group commit fell behind at 30,000 calls/s where
 * 2 in flight kept up, and 2 was at or below group commit's p99 at 10,000 and 20,000/s; 4 was
 * no better than 2 anywhere.
 */
const DEFAULT_MAX_IN_FLIGHT = 2;
/**
 * RedisStoreOptions.loneUpTo's default. Measured by Redis instructions per decision (callgrind,
 * the whole server, three levels; `npm run bench:instructions -- --cases sizes`), batches of
 * 2 / 4 / 8 / 12 / 16 calls as one admit.lua call and as one admit-lone-run.lua call: see
 * docs/performance.md (2026-12-06, fifth). The run costs Redis less up to 8-12 calls; at 2 to 4
 * the process' CPU is the same or less (the CPU section, `--cpu-lone`), at 8 it was higher in two
 * of three runs by more than Redis saved: 4 takes the gain that both measures show.
 */
const DEFAULT_LONE_UP_TO = 4;
/** Call ids whose outbound records' carriers this process remembers, at most (carrier-lanes.ts). */
const MAX_OUT_TAGS = 100_000;
/**
 * How long an overflow lane that refused is not asked again (ms), at most: until a call leaves
 * its window (its retry-after) or its share may have moved, at the coordinator's next tick (50 ms
 * by default). Under overload it would otherwise refuse most calls that reach it, each for two
 * more script calls.
 */
const OVERFLOW_PAUSE_MS = 50;
/**
 * The overflow lane's step waits at most this long (ms), and at most a third of what is left of
 * the decision's deadline, so that a stalled overflow shard costs a call its lane's refusal, not
 * the store-trouble policy's answer; one that did not answer is not asked for OVERFLOW_AWAY_MS.
 */
const OVERFLOW_STEP_MS = 100;
const OVERFLOW_AWAY_MS = 1_000;

export class RedisStore implements Store, OperableStore {
  readonly kind = 'redis';
  readonly prefix: string;
  /**
   * The loss of the connection, once per outage (the first error or close after it was last
   * ready) as a StoreUnavailableError (connection.ts).
   */
  readonly events = new SafeEmitter<StoreEvents>();
  private readonly redis: Redis | Cluster;
  private readonly conn: RedisConnection;
  private readonly keys: RedisKeys;

  get hashTags(): boolean {
    return this.keys.hashTags;
  }
  /** Lanes of the leased global level and where owners go (src/lease/lanes.ts); undefined: not leased. */
  private readonly lanes: LanePlan | undefined;

  get leaseLanes(): number | undefined {
    return this.lanes?.lanes;
  }

  get leasePlan(): LanePlan | undefined {
    return this.lanes;
  }
  /** The leased level has an overflow lane (RedisStoreOptions.lease.overflow). */
  readonly leaseOverflow: boolean;
  /** The carriers it leases across regions, by id (RedisStoreOptions.leasedCarriers). */
  readonly leasedCarriers: readonly string[];
  /** performance.now() until which the overflow lane is not asked (it refused: OVERFLOW_PAUSE_MS). */
  private overflowPausedUntil = 0;
  /** Per bucket list of a leased call: its buckets on the overflow lane and on its lane (overflowParts). */
  private readonly overflowOf = new WeakMap<readonly Bucket[], SpillParts>();
  /** Each bucket list's lane tag, once computed (plans hand the same list to every call of a peer). */
  private readonly laneTags = new WeakMap<readonly Bucket[], string>();
  private readonly virtualTtlMs: number;
  private readonly instance = randomBytes(6).toString('base64url');
  /** Admission batches of at most this many calls that fit lone scripts go as one run (loneRun). */
  private readonly loneUpTo: number;
  private seq = 0;
  private ownsConnection = false;
  /** Script arguments per bucket list (see bucketArgs()); weak, so dropped plans cost nothing. */
  private readonly argsOf = new WeakMap<readonly Bucket[], readonly BucketArgs[]>();
  /**
   * The arguments of the buckets with a log that many plans name (the global level, accounts),
   * one per tag and bucket while its limits stay the same objects, so that what the process
   * knows of their logs (KnownLogs) is one bound per log, not one per plan: a shared log's trim
   * goes out once per step, not once per step and peer. Emptied at each reload
   * (configChanged): as many as the configuration has such buckets (per lane with a leased
   * global level), and a configuration loaded again starts from nothing known, as new plans do.
   */
  private readonly sharedArgs = new Map<string, { readonly bucket: Bucket; readonly args: BucketArgs }>();
  /** What this process knows of the logs its admits wrote; forgotten when the connection is lost. */
  private readonly known = new KnownLogs();
  /** Admissions not sent yet, per tag (one lane for all when keys carry no tag). */
  private readonly admissions: Batcher<PendingAdmit>;
  /** Reservations not sent yet (one lane without hash tags, else one per carrier tag). */
  private readonly reservations: Batcher<PendingReserve>;
  /** With hash tags: the steps of reservations and other operations on each carrier, in issue order. */
  private readonly carrierLanes = new CarrierLanes();
  /** With hash tags: the reservations in progress (a release or refresh waits for those issued before it). */
  private readonly outbound = new Set<Promise<ReserveResult>>();
  /** With hash tags: per call id (encoded), the carrier tags where this process's reservations may have left its record. */
  private readonly outTags = new Map<string, Set<string>>();
  /** With hash tags: where each call's inbound record lives. */
  private readonly locators: CallLocators;
  /** How far Redis TIME is ahead of the process clock, at least. */
  private readonly offset = new ClockOffset();
  private readonly admitEnv: AdmitEnv;
  private readonly reserveEnv: ReserveEnv;
  /** The calls this process admitted or dispatched and has not seen end (live time only). */
  readonly ledger = new HoldLedger();
  /** Writes the ledger's holds again when Redis may have lost them (holds-keeper.ts). */
  private readonly keeper: HoldsKeeper;
  /**
   * '1' on a single Redis, where no slot moves: release.lua and refresh.lua then leave out the
   * reads of every hold before their first write, a command per hold kept for a Cluster ('').
   */
  private readonly unmoved: '' | '1';

  constructor(opts: RedisStoreOptions) {
    this.redis = opts.redis;
    this.prefix = opts.prefix ?? 'callgate:';
    const problem = prefixProblem('prefix', this.prefix);
    if (problem !== undefined) throw new InvalidArgumentError(problem);
    this.keys = new RedisKeys(this.prefix, opts.hashTags ?? isCluster(opts.redis));
    this.unmoved = isCluster(opts.redis) ? '' : '1';
    this.leaseOverflow = opts.lease?.overflow === true;
    if (opts.lease !== undefined) {
      // a misspelt field would change where keys go without a word: refused
      for (const field of Object.keys(opts.lease))
        if (field !== 'lanes' && field !== 'overflow' && field !== 'pin')
          throw new InvalidArgumentError(`lease: unknown field ${JSON.stringify(field)} (lanes, overflow, pin)`);
      this.lanes = lanePlan(opts.lease.lanes, opts.lease.pin);
      if (!this.keys.hashTags)
        throw new InvalidArgumentError('lease needs hash tags (a Cluster, or hashTags: true): lanes are hash tags');
    }
    this.virtualTtlMs = opts.virtualTimeTtlMs ?? DAY_MS;
    const maxBatch = opts.maxBatch ?? 64;
    if (!(Number.isSafeInteger(maxBatch) && maxBatch >= 1 && maxBatch <= MAX_BATCH_LIMIT)) {
      throw new InvalidArgumentError(
        `maxBatch must be an integer from 1 to ${MAX_BATCH_LIMIT}, got ${String(opts.maxBatch)}`,
      );
    }
    this.loneUpTo = opts.loneUpTo ?? DEFAULT_LONE_UP_TO;
    if (!(Number.isSafeInteger(this.loneUpTo) && this.loneUpTo >= 1 && this.loneUpTo <= MAX_BATCH_LIMIT)) {
      throw new InvalidArgumentError(
        `loneUpTo must be an integer from 1 to ${MAX_BATCH_LIMIT}, got ${String(opts.loneUpTo)}`,
      );
    }
    const maxInFlight = opts.maxInFlight ?? DEFAULT_MAX_IN_FLIGHT;
    if (!(Number.isSafeInteger(maxInFlight) && maxInFlight >= 1 && maxInFlight <= MAX_IN_FLIGHT_LIMIT)) {
      throw new InvalidArgumentError(
        `maxInFlight must be an integer from 1 to ${MAX_IN_FLIGHT_LIMIT}, got ${String(opts.maxInFlight)}`,
      );
    }
    this.conn = new RedisConnection(this.redis, {
      writeChunk: opts.writeChunk ?? 16,
      readyTimeoutMs: opts.readyTimeoutMs ?? 5_000,
      events: this.events,
      lost: (node) => {
        // a Cluster node that serves no slot (a master that failed over, still retried by the
        // client): nothing of ours is there
        if (node !== undefined && isCluster(this.redis) && !this.redis.slots.some((s) => s?.[0] === node)) return;
        this.known.forget();
        // a Cluster node lost: only the tags it serves may have lost holds (the others decide on)
        this.keeper?.lost(node === undefined ? undefined : (tag) => this.servedBy(tag, node));
      },
      // everything may have lost writes, not only the tags it served: the locators of calls
      // decided elsewhere too (written on the locator's own slot); a re-assertion of every tag
      // writes them again, and the releases of the last moments are sent again
      deposed: () => {
        this.known.forget();
        this.keeper?.lost();
      },
      ready: () => this.keeper?.ready(),
    });
    const batching = {
      maxBatch,
      maxInFlight,
      ready: () => this.conn.ready,
      whenReady: (signal: StopSignal | undefined) => this.conn.notReady(signal) ?? Promise.resolve(),
      unavailable,
    };
    // A decision counting channels waits for its tag's re-assertion after a loss (gateOf): checked
    // when it is issued, and again as its batch is made, since one issued just before the loss was
    // seen (queued behind a batch in flight, or waiting for the connection) would otherwise leave
    // as soon as Redis answers, before the holds are back, and count against too few calls.
    this.admissions = new Batcher<PendingAdmit>({
      ...batching,
      send: (items) => this.sendAdmissions(items),
      waitFor: (lane, item) => (item.id !== undefined ? this.gateOf(lane) : undefined),
    });
    this.reservations = new Batcher<PendingReserve>({
      ...batching,
      send: (items) => this.sendReservations(items),
      waitFor: (lane, item) =>
        item.id !== '' && item.route.some((c) => c.channels !== undefined) ? this.gateOf(lane) : undefined,
    });
    this.locators = new CallLocators(this.conn, this.keys, this.virtualTtlMs, () => this.flushPending());
    const deadline = (signal: StopSignal | undefined) => this.offset.deadline(signal);
    this.admitEnv = {
      virtualTtlMs: this.virtualTtlMs,
      known: this.known,
      member: () => this.member(),
      deadline,
      recordPrefix: (tag) => this.keys.inboundRecord(tag, ''),
      declareRecords: this.keys.hashTags,
    };
    const leased = leasedCarrierNames(opts.leasedCarriers);
    this.leasedCarriers = [...(opts.leasedCarriers ?? [])];
    this.reserveEnv = {
      virtualTtlMs: this.virtualTtlMs,
      keys: this.keys,
      leased,
      deadline,
    };
    const holds = opts.holds ?? {};
    this.keeper = new HoldsKeeper({
      ledger: this.ledger,
      events: this.events,
      hashTags: this.keys.hashTags,
      now: () => Date.now() * 1000,
      reassert: (req) => this.reassert(req),
      resend: (id, groups) => this.resend(id, groups, holds.tombstoneMs ?? 60_000),
      tombstoneMs: holds.tombstoneMs ?? 60_000,
      ready: () => this.conn.ready,
      instance: () =>
        isCluster(this.redis)
          ? Promise.resolve('')
          : this.conn.serverInfo().then((info) => /run_id:(\w+)/.exec(info)?.[1] ?? ''),
      syncMs: holds.syncMs ?? 5_000,
      graceMs: holds.graceMs ?? 2_000,
      recentMs: holds.recentMs ?? 30_000,
    });
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

  /** Send the admissions and reservations still waiting for their batch: what was issued before goes first. */
  private flushPending(): void {
    if (this.admissions.pending) this.admissions.flushAll();
    if (this.reservations.pending) this.reservations.flushAll();
  }

  /** Run a script (not a batch) once Redis is ready, after what was issued before it. */
  private run(name: ScriptName, keys: string[], args: (string | number)[], signal?: StopSignal): Promise<unknown> {
    return this.send(name, [keys.length, ...keys, ...args], signal);
  }

  /** Run a script with `argv` = [numkeys, ...KEYS, ...ARGV], after what was issued before it. */
  private send(name: ScriptName, argv: (string | number)[], signal?: StopSignal): Promise<unknown> {
    this.flushPending();
    return this.conn.send(scripts()[name].command, argv, signal);
  }

  /** Write a batch; `settle` resolves its calls from the reply, or every call rejects; settles once it is back. */
  private writeBatch(
    name: ScriptName,
    argv: string[],
    items: readonly Queued[],
    settle: (reply: unknown) => void,
  ): Promise<void> {
    return this.conn
      .write(scripts()[name].command, argv, true)
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
    const leased = isLaneTag(tag);
    const list = buckets.map((bucket) => this.argsOfBucket(tag, bucket, leased));
    this.argsOf.set(buckets, list);
    return list;
  }

  /** One bucket's arguments; a shared log's (the global level, an account) once per tag while its limits stay the same objects (sharedArgs). */
  private argsOfBucket(tag: string, bucket: Bucket, leased: boolean): BucketArgs {
    // (only logs have a bound to share: an overflow lane's part of the global level has none)
    const shared =
      (bucket.name === GLOBAL_BUCKET || bucket.name.startsWith(ACCOUNT_PREFIX)) && logRetention(bucket) > 0;
    const id = `${tag}\n${bucket.name}`;
    const had = shared ? this.sharedArgs.get(id) : undefined;
    if (had !== undefined && sameLimits(had.bucket, bucket)) return had.args;
    const args = bucketArgsOf(tag, this.keys.base(tag, bucket.name), bucket, leased && bucket.name === GLOBAL_BUCKET);
    if (shared) this.sharedArgs.set(id, { bucket, args });
    return args;
  }

  /** Store.configChanged: the shared buckets' arguments, and what it knew of their logs, are built anew. */
  configChanged(): void {
    this.sharedArgs.clear();
  }

  /** Whether Cluster node `node` (`host:port`) serves `tag`'s slot, as the client last mapped it (unknown: yes). */
  private servedBy(tag: string, node: string): boolean {
    if (!isCluster(this.redis)) return true;
    const master = this.redis.slots[slotOf(`{${tag}}`)]?.[0];
    return master === undefined || master === node;
  }

  /** With a leased global level, an inbound call's tag is its lane's (src/lease/lanes.ts). */
  private onLane<T extends { readonly tag: string; readonly buckets: readonly Bucket[] }>(req: T): T {
    if (this.lanes === undefined || req.tag !== GLOBAL_TAG) return req;
    // a share's lease ends on Redis TIME: a caller's clock (a replay's) cannot be held to it
    if ((req as { readonly now?: number }).now !== undefined)
      throw new InvalidArgumentError('a leased global level decides on Redis TIME only: no `now` (or `at`)');
    let tag = this.laneTags.get(req.buckets);
    if (tag === undefined) {
      tag = laneTagOf(req.buckets, this.lanes);
      this.laneTags.set(req.buckets, tag);
    }
    return { ...req, tag };
  }

  private member(): string {
    return `${this.instance}${(this.seq++).toString(36)}`;
  }

  /** The ttl floor (ms) of a script call: none on Redis TIME, the virtual-time floor otherwise. */
  private ttlFloor(now: number | undefined): number {
    return now === undefined ? 0 : this.virtualTtlMs;
  }

  admit(request: AdmitRequest): Promise<AdmitResult> {
    let req: AdmitRequest;
    try {
      checkAdmit(request);
      req = this.onLane(request);
    } catch (err) {
      return Promise.reject(err);
    }
    const decided = this.admitChecked(req);
    return this.leaseOverflow && isLaneTag(req.tag) ? decided.then((r) => this.overflow(req, r)) : decided;
  }

  /**
   * A leased call its lane refused for lack of calls share alone (the global level had room, and
   * every other limit of the call: `spillable`, from the admit script; a call whose peer is full
   * too would only waste the overflow lane's share): its global level is decided on the
   * overflow lane, and once admitted there, the call again on
   * its lane without that level's sliding log (its channels stay on the lane). Each step is one
   * atomic script call; a call admitted on the overflow lane and then refused on its own (its
   * peer filled up meanwhile) leaves its event on the overflow lane's log, which only lowers
   * what the level admits. The refusal answered when the overflow lane refuses (or cannot be
   * reached) is the lane's; a failure of the third step is the decision's, as any store failure.
   */
  private async overflow(req: AdmitRequest, first: AdmitResult): Promise<AdmitResult> {
    if (first.spillable !== true) return first;
    const gone = () => req.signal?.aborted === true;
    if (performance.now() < this.overflowPausedUntil || gone()) return first;
    // a bound of its own, within the decision's: past it, the lane's refusal is the answer
    const deadline = (req.signal as { readonly deadlineUs?: number } | undefined)?.deadlineUs;
    const stepMs = Math.min(
      OVERFLOW_STEP_MS,
      deadline === undefined ? OVERFLOW_STEP_MS : (deadline - systemClockUs()) / 3000,
    );
    if (stepMs < 1) return first;
    const parts = this.overflowParts(req.buckets);
    let spilled: AdmitResult;
    try {
      spilled = await withDeadline(
        (signal) =>
          this.admitChecked({
            tag: OVERFLOW_TAG,
            buckets: parts.overflow,
            signal: gone() ? req.signal : signal,
          }),
        stepMs,
      );
    } catch {
      // the overflow lane out of reach: not asked for a while; the caller gone: its own matter
      if (!gone()) this.pauseOverflow(OVERFLOW_AWAY_MS);
      return first;
    }
    if (!spilled.admitted) {
      this.pauseOverflow(Math.min(OVERFLOW_PAUSE_MS, spilled.retryAfterUs / 1000));
      return first;
    }
    // the global level alone (a peer without limits): decided; in the ledger with its buckets,
    // so that a reload that turns a channel limit on counts it (holds/reload.ts)
    if (parts.lane.length === 0) {
      if (req.hold !== undefined && req.hold.forUs > 0)
        this.noteIn(req.tag, req.hold.id, req.buckets, spilled.now + req.hold.forUs);
      return { ...spilled, spilledAt: spilled.now };
    }
    const again = await this.admitChecked({ ...req, buckets: parts.lane }, req.buckets);
    if (again.admitted) return again.duplicate ? again : { ...again, spilledAt: spilled.now };
    return onOwnBuckets(parts, req.buckets, again);
  }

  /**
   * Leave the overflow lane alone for `ms` from now, unless a longer pause runs already: a
   * refusal's pause, answered to a call sent before another found the overflow lane out of
   * reach, must not cut that one's second short.
   */
  private pauseOverflow(ms: number): void {
    this.overflowPausedUntil = Math.max(this.overflowPausedUntil, performance.now() + ms);
  }

  /** A leased call's buckets on the overflow lane (the global level's limit) and on its lane (the rest). */
  private overflowParts(buckets: readonly Bucket[]): SpillParts {
    let parts = this.overflowOf.get(buckets);
    if (parts === undefined) {
      parts = spillParts(buckets, GLOBAL_BUCKET);
      this.overflowOf.set(buckets, parts);
    }
    return parts;
  }

  /** `noted`: the buckets the ledger notes an admitted call with (default its own; the overflow's third step: all the call's). */
  private admitChecked(req: AdmitRequest, noted: readonly Bucket[] = req.buckets): Promise<AdmitResult> {
    const buckets = this.bucketArgs(req.tag, req.buckets);
    const now = req.now === undefined ? '' : num(req.now);
    // a hold only matters (and travels) where a bucket has a channel limit
    const held = req.hold !== undefined && hasChannels(req.buckets);
    const id = held ? encodeId(req.hold.id) : undefined;
    const forUs = held ? req.hold.forUs : 0;
    // a call on live time that holds (or would, were a channel limit on) enters the ledger once admitted
    const note = now === '' && req.hold !== undefined && req.hold.forUs > 0;
    const call = new AdmitCall(
      buckets,
      now,
      id,
      forUs,
      req.signal,
      note ? this.noteIn : undefined,
      req.tag,
      req.hold,
      noted,
    );
    const lane = this.keys.hashTags ? req.tag : '';
    // after a loss, decisions counting channels on this tag wait until its holds are back (holds-keeper.ts)
    const gate = held ? this.gateOf(req.tag) : undefined;
    if (gate === undefined) this.enqueue(lane, call);
    else gate.then(() => this.enqueue(lane, call), call.reject);
    let decided = call.promise;
    if (this.keys.hashTags && id !== undefined && forUs > 0) {
      // the locator goes out with the decision, and the answer waits for both: a release issued
      // after the answer, from any process, finds the call (call-locators.ts)
      // NX: a locator of this id already there (the id held on another tag) is left alone until
      // this call is admitted, then overwritten, as a refusal must not lose it
      const virtual = now !== '';
      const claimed = this.locators.locate(req.tag, id, forUs, virtual, true);
      this.locators.track(
        id,
        claimed.then(() => undefined),
      );
      decided = Promise.all([decided, claimed]).then(async ([r, claim]) => {
        if (!r.admitted) {
          if (claim === 'written') this.locators.forget(id);
        } else if (claim === 'exists' && !r.duplicate) {
          const write = this.locators.locate(req.tag, id, forUs, virtual);
          this.locators.track(
            id,
            write.then(() => undefined),
          );
          await write;
        }
        return r;
      });
    }
    return decided;
  }

  /** Queue an admission on its lane: a rejection, never a throw (as from a promise's executor). */
  private enqueue(lane: string, call: AdmitCall): void {
    try {
      this.admissions.add(lane, call);
    } catch (err) {
      call.reject(err);
    }
  }

  /**
   * What a release or refresh waits for after a loss: this process's calls back on Redis (so
   * that it finds its call); none while Redis is known to be down, where it fails at once (a
   * release is then deferred, and retried) instead of waiting out its whole timeout.
   */
  private recovered(): Promise<void> | undefined {
    return this.conn.knownDown ? undefined : this.keeper.recovered();
  }

  /**
   * What a decision counting channels on `tag` waits for after a loss: the tag's re-assertion
   * (holds-keeper.ts); none while Redis is known to be down, where the policy decides at once.
   */
  private gateOf(tag: string): Promise<void> | undefined {
    const gate = this.keeper.gate(tag);
    return gate === undefined || this.conn.knownDown ? undefined : gate;
  }

  /**
   * An inbound call admitted (or recorded) on live time enters the ledger, with every bucket it
   * touched. A function made once, which each AdmitCall that may be noted keeps.
   */
  private readonly noteIn: NoteIn = (tag, id, buckets, end) => {
    this.ledger.add(id, 'in', { tag, buckets, end });
  };

  /**
   * One admit script call for a batch (admit-args.ts): admit-lone.lua for a lone call of plain
   * sliding logs, admit-lone-held.lua for one with channel limits, else admit.lua. A bucket named again with other limits (a reload between two
   * calls) starts a new batch, so every call is checked against its own.
   */
  private sendAdmissions(items: PendingAdmit[]): Promise<void> {
    const clock = this.offset.askClock();
    const settle = (reply: unknown) => settleAdmissions(items, reply, clock, this.offset, this.known);
    if (items.length === 1) {
      const lone = loneArgv(items[0]!, clock, this.admitEnv);
      if (lone !== undefined)
        return this.writeBatch(lone.kind === 'l' ? 'admit-lone' : 'admit-lone-held', lone.argv, items, settle);
    } else if (items.length <= this.loneUpTo) {
      const run = this.loneRun(items, clock, settle);
      if (run !== undefined) return run;
    }
    const argv = admitArgv(items, clock, this.admitEnv);
    if (typeof argv !== 'number') return this.writeBatch('admit', argv, items, settle);
    if (argv === 0) {
      // two buckets of this one call share a key: no script call can decide it
      items[0]!.reject(new InvalidArgumentError('the buckets of one call must not share a Redis key'));
      return items.length > 1 ? this.sendAdmissions(items.slice(1)) : Promise.resolve();
    }
    // call n names a bucket again with other limits: those before it go now, the rest after
    const before = this.sendAdmissions(items.slice(0, argv));
    return Promise.all([before, this.sendAdmissions(items.slice(argv))]).then(() => undefined);
  }

  /**
   * A small batch of calls that each fit a lone script (admit-lone.lua, admit-lone-held.lua),
   * sent as one admit-lone-run.lua call (undefined when one does not: the batch goes to
   * admit.lua). The run decides them in the order issued, each as its own lone script call
   * would, at one Redis time (as a batch): admit.lua's setup costs more than it shares in small
   * batches (DEFAULT_LONE_UP_TO), and one script call costs this process less than one per call.
   */
  private loneRun(items: PendingAdmit[], clock: string, settle: (reply: unknown) => void): Promise<void> | undefined {
    const run = loneRunArgv(items, clock, this.admitEnv);
    return run === undefined ? undefined : this.writeBatch('admit-lone-run', run, items, settle);
  }

  async record(request: RecordRequest): Promise<RecordResult> {
    checkAdmit(request);
    const req = this.onLane(request);
    const b = new ArgsBuilder();
    for (const args of this.bucketArgs(req.tag, req.buckets)) {
      if (b.bucket(args) === 0) throw new InvalidArgumentError('the buckets of one call must not share a Redis key');
    }
    const held = req.hold !== undefined && hasChannels(req.buckets);
    const id = held ? encodeId(req.hold.id) : '';
    const forUs = held ? req.hold.forUs : 0;
    const record = held ? this.keys.inboundRecord(req.tag, id) : '';
    const head = [
      req.now === undefined ? '' : num(req.now),
      this.member(),
      String(this.ttlFloor(req.now)),
      record,
      id,
      num(forUs),
      this.offset.deadline(req.signal),
    ];
    // on a Cluster the record is declared too (admit-args.ts, declareRecords: a slot being moved)
    const more = this.keys.hashTags && held ? [record] : [];
    const sent = this.send('record', b.argv(head, [], false, more), req.signal) as Promise<number[]>;
    if (this.keys.hashTags && held && forUs > 0)
      this.locators.track(
        id,
        sent.then((r) =>
          r[1] === 0
            ? this.locators.locate(req.tag, id, forUs, req.now !== undefined).then(() => undefined)
            : undefined,
        ),
      );
    const r = await sent;
    if (r[1] === 0 && req.now === undefined && req.hold !== undefined && req.hold.forUs > 0)
      this.noteIn(req.tag, req.hold.id, req.buckets, r[0]! + req.hold.forUs);
    if (r[1] === 2) throw skipped();
    return r[1] === 1 ? { now: r[0]!, duplicate: true } : { now: r[0]! };
  }

  async count(req: CountRequest): Promise<CountResult> {
    checkCount(req);
    const key = logKey(this.keys.base(req.tag, req.bucket));
    const r = (await this.run('count', [key], [req.now ?? '', req.windowUs], req.signal)) as (string | number)[];
    return { count: Number(r[0]), now: Number(r[1]) };
  }

  /**
   * Without hash tags (a single Redis) the whole route is one script call: every carrier is in
   * one keyspace, so a reroute costs nothing more. With hash tags each carrier lives on a tag of
   * its own (so carriers spread over a Cluster's shards): the first carrier is tried on its
   * shard, and only when it cannot take the call, the next one on its shard, one script call
   * (one more round trip) per carrier passed over, all at the call's one `now` when it is given.
   */
  reserve(req: ReserveRequest): Promise<ReserveResult> {
    try {
      checkReserve(req);
    } catch (err) {
      return Promise.reject(err);
    }
    // a share's lease ends on Redis TIME: a caller's clock (a replay's) cannot be held to it
    if (
      req.now !== undefined &&
      this.reserveEnv.leased.size > 0 &&
      req.route.some((c) => this.reserveEnv.leased.has(c.name))
    )
      return Promise.reject(
        new InvalidArgumentError('a leased carrier decides on Redis TIME only: no `now` (or `at`)'),
      );
    const now = req.now === undefined ? '' : num(req.now);
    const id = req.hold === undefined ? '' : encodeId(req.hold.id);
    const forUs = req.hold === undefined ? '0' : num(req.hold.forUs);
    const decided = this.keys.hashTags
      ? this.reserveSpread(req, now, id, forUs)
      : this.attempt('', req.route, now, id, forUs, req.hold !== undefined, req.signal);
    const hold = req.hold;
    if (hold !== undefined) {
      decided.then(
        (r) => {
          if (r.index < 0) return;
          const carrier = req.route[r.index]!;
          // the reservation dropped the id's earlier outbound record; a hold on live time enters the ledger
          if (now === '' && carrier.channels !== undefined && hold.forUs > 0)
            this.ledger.add(hold.id, 'out', {
              tag: this.keys.hashTags ? carrierTag(carrier.name) : OUTBOUND_TAG,
              names: [carrier.name],
              end: Math.ceil(r.slotUs) + hold.forUs,
            });
          else this.ledger.remove(hold.id, 'out');
        },
        () => undefined,
      );
    }
    return decided;
  }

  /** One reserve script call for `route`, in the batch of lane `tag` ('' without hash tags). */
  private attempt(
    tag: string,
    route: readonly Carrier[],
    now: string,
    id: string,
    forUs: string,
    held: boolean,
    signal: StopSignal | undefined,
    live = false,
  ): Promise<ReserveResult> {
    const queue = (resolve: (r: ReserveResult) => void, reject: (err: unknown) => void) =>
      this.reservations.add(tag, { route, now, live, id, forUs, signal, resolve, reject });
    // after a loss, decisions counting channels on this tag wait until its holds are back (holds-keeper.ts)
    const gate = held && route.some((c) => c.channels !== undefined) ? this.gateOf(tag || OUTBOUND_TAG) : undefined;
    return new Promise<ReserveResult>((resolve, reject) =>
      gate === undefined ? queue(resolve, reject) : gate.then(() => queue(resolve, reject)),
    );
  }

  /**
   * With hash tags: the route one carrier at a time, each on its own tag (shard), until one takes
   * the call, in carrier lanes that keep issue order (carrier-lanes.ts). Every attempt is at the
   * call's one time: the `now` given, else the Redis time of its first attempt. So each carrier
   * sees the calls that reach it in issue order, at their times, and the decisions are those of
   * the calls applied one by one in issue order (the MemoryStore's, and one Redis').
   *
   * One outbound hold per id: an earlier reservation of the id from this process may hold a
   * record on another carrier's tag; a step in that carrier's lane drops it, in order, once the
   * call is taken (on the carrier that took it the script dropped it already). A call with a hold
   * also writes its outbound locator (call-locators.ts) with each attempt on a carrier with a
   * channel limit (only there is a record written), naming the record it would have on that
   * carrier, and the answer waits for it, so that a release issued after the answer finds the
   * call. The value the first such write replaced names the id's earlier record when another
   * process made it: dropped too (not in order with this process's other calls on that carrier;
   * a call taken by a carrier without a channel limit before any write does not learn of it).
   * When no carrier takes the call, the locator names the earlier record again.
   */
  private reserveSpread(req: ReserveRequest, now: string, id: string, forUs: string): Promise<ReserveResult> {
    const held = req.hold !== undefined;
    const virtual = now !== '';
    const waits: number[] = [];
    const full: boolean[] = [];
    const lacked: boolean[] = [];
    let earlier: Promise<string | null | undefined> | undefined;
    let at = now;
    // the carrier tags where this process's earlier reservations of the id may hold a record
    const mine = held ? [...(this.outTags.get(id) ?? [])] : [];
    if (held) this.noteOutTags(id, req.route);
    const decided = new Promise<ReserveResult>((resolve, reject) => {
      const steps: Step[] = [];
      const cleanups = new Map<string, Step>();
      // no carrier will be tried from step i on, and no earlier record dropped
      const dropAll = (i: number) => {
        for (let j = i; j < steps.length; j++) this.carrierLanes.drop(steps[j]!);
        for (const step of cleanups.values()) this.carrierLanes.drop(step);
      };
      // taken by carrier i - 1 (on `but`): the later steps go, the earlier records elsewhere too
      const dropFrom = (i: number, but: string) => {
        for (let j = i; j < steps.length; j++) this.carrierLanes.drop(steps[j]!);
        for (const [tag, step] of cleanups)
          if (tag === but) this.carrierLanes.drop(step);
          else
            this.carrierLanes.ready(step, () => {
              this.run('release', [this.keys.outboundRecord(tag, id)], [at, id, '', '', this.unmoved]).catch(
                () => undefined,
              );
            });
      };
      const go = (i: number) => () => {
        const c = req.route[i]!;
        const tag = carrierTag(c.name);
        const attempt = this.attempt(tag, [c], at, id, forUs, held, req.signal, !virtual && i > 0);
        let located: Promise<unknown> = Promise.resolve();
        // a record (and so a locator) only on a carrier with a channel limit
        if (held && c.channels !== undefined) {
          const ms = this.locators.ttlMs(c.maxWaitUs + Number(forUs), virtual);
          const write = this.locators.locateOut(id, this.keys.outboundRecord(tag, id), ms, earlier === undefined);
          if (earlier === undefined) earlier = write;
          located = write;
        }
        Promise.all([attempt, located]).then(
          async ([r]) => {
            waits.push(r.waits[0]!);
            full.push(r.full[0]!);
            lacked.push(r.shareLacked?.[0] === true);
            const shareLacked = lacked.includes(true) ? { shareLacked: lacked } : {};
            if (at === '') at = num(r.now);
            if (r.index === 0) {
              dropFrom(i + 1, tag);
              const before = await earlier;
              if (typeof before === 'string' && before !== this.keys.outboundRecord(tag, id)) {
                const other = mine.some((t) => before === this.keys.outboundRecord(t, id));
                if (!other)
                  await this.run('release', [before], [at, id, '', '', this.unmoved], req.signal).catch(
                    () => undefined,
                  );
              }
              resolve({ index: i, waitUs: r.waitUs, slotUs: r.slotUs, now: r.now, waits, full, ...shareLacked });
            } else if (i + 1 < steps.length) this.carrierLanes.ready(steps[i + 1]!);
            else {
              dropAll(steps.length);
              const before = await earlier;
              if (before !== undefined) await this.locators.restoreOut(id, before);
              resolve({ index: -1, waitUs: 0, slotUs: 0, now: r.now, waits, full, ...shareLacked });
            }
          },
          (err: unknown) => {
            dropAll(i + 1);
            reject(err);
          },
        );
      };
      req.route.forEach((c, i) => {
        steps.push(this.carrierLanes.add(carrierTag(c.name), go(i), i === 0));
      });
      for (const tag of mine)
        cleanups.set(
          tag,
          this.carrierLanes.add(tag, () => undefined, false),
        );
    });
    this.outbound.add(decided);
    const forget = () => this.outbound.delete(decided);
    decided.then(forget, forget);
    return decided;
  }

  /** Remember the carrier tags where a reservation of `id` from this process may leave its record (bounded). */
  private noteOutTags(id: string, route: readonly Carrier[]): void {
    const tags = this.outTags.get(id) ?? new Set<string>();
    this.outTags.delete(id);
    for (const c of route) tags.add(carrierTag(c.name));
    this.outTags.set(id, tags);
    if (this.outTags.size > MAX_OUT_TAGS) this.outTags.delete(this.outTags.keys().next().value!);
  }

  /**
   * What an operation on outbound records waits for: `first` (if any) and, with hash tags, the
   * reservations issued before it (errors ignored), whose records and locators it must find.
   */
  private afterOutbound(
    first: Promise<void> | undefined,
    direction: 'in' | 'out' | undefined,
  ): Promise<void> | undefined {
    if (!this.keys.hashTags || direction === 'in' || this.outbound.size === 0) return first;
    const pending = [...this.outbound].map((p) => p.then(noop, noop));
    return Promise.all([first, ...pending]).then(noop);
  }

  /** One reserve script call for a batch (reserve-args.ts); with hash tags its calls all name one carrier. */
  private sendReservations(items: PendingReserve[]): Promise<void> {
    const clock = this.offset.askClock();
    const tag = this.keys.hashTags ? carrierTag(items[0]!.route[0]!.name) : '';
    return this.writeBatch('reserve', reserveArgv(items, clock, this.reserveEnv, tag), items, (reply) =>
      settleReservations(items, reply, clock, this.offset),
    );
  }

  async wait(req: WaitRequest): Promise<WaitResult> {
    checkWait(req);
    const args = [req.now ?? '', rateText(req.carrier)];
    const r = (await this.onCarrier(carrierTag(req.carrier.name), () =>
      this.run('wait', [this.keys.carrier(req.carrier)], args, req.signal),
    )) as (string | number)[];
    return { waitUs: Number(r[0]), now: Number(r[1]) };
  }

  /** Run `name` on every group of call records of `callId` (`id` encoded); the sum of the first reply fields, and the time. */
  private onRecords(
    name: 'release' | 'refresh',
    callId: string,
    id: string,
    direction: 'in' | 'out' | undefined,
    args: (string | number)[],
    now: number | undefined,
    signal: StopSignal | undefined,
    seen?: (groups: string[][]) => void,
  ): Promise<[number, number]> {
    // with hash tags, the records this process's ledger places the call in, beside those its
    // locators name: a locator lost with its shard (written to a master that was deposed
    // before its replica copied it) must not hide a call this process decided
    const own = this.ownRecords(callId, id, direction);
    const run = (found: string[][]): Promise<[number, number]> => {
      const groups =
        own.length === 0
          ? found
          : [...found, ...own.filter((key) => !found.some((g) => g.includes(key))).map((key) => [key])];
      seen?.(groups);
      return Promise.all(groups.map((keys) => this.run(name, keys, args, signal) as Promise<number[]>)).then(
        (replies) => [
          replies.reduce((sum, r) => sum + r[0]!, 0),
          replies.length > 0 ? replies[replies.length - 1]![1]! : (now ?? 0),
        ],
      );
    };
    const groups = this.locators.recordGroups(id, direction, signal);
    return Array.isArray(groups) ? run(groups) : groups.then(run);
  }

  /** The record keys of call `callId` (`id` encoded) that this process's ledger names (hash tags only). */
  private ownRecords(callId: string, id: string, direction: 'in' | 'out' | undefined): string[] {
    if (!this.keys.hashTags) return [];
    const entry = this.ledger.get(callId);
    if (entry === undefined) return [];
    return [
      ...(entry.in !== undefined && direction !== 'out' ? [this.keys.inboundRecord(entry.in.tag, id)] : []),
      ...(entry.out !== undefined && direction !== 'in' ? [this.keys.outboundRecord(entry.out.tag, id)] : []),
    ];
  }

  release(req: ReleaseRequest): Promise<ReleaseResult> {
    try {
      checkRelease(req);
    } catch (err) {
      return Promise.reject(err);
    }
    const id = encodeId(req.id);
    let groups: string[][] = [];
    // soon after a loss, a release that finds nothing leaves a tombstone: the process that admitted
    // the call may not have written it back yet, and must not once this release has landed
    const tomb = req.now === undefined ? this.keeper.tombstoneMs() : '';
    let ticket: ReleaseTicket | undefined;
    const send = () => {
      // what it may race (a re-assertion of its call on its way, a loss): then it is sent again
      if (req.now === undefined) ticket = this.keeper.releaseSent(req.id);
      return this.onRecords(
        'release',
        req.id,
        id,
        req.direction,
        [req.now ?? '', id, tomb, '', this.unmoved],
        req.now,
        req.signal,
        (g) => (groups = g),
      );
    };
    // after a loss, a release waits until this process's calls are back, so that it finds its call;
    // with hash tags, until the reservations issued before it are decided (their records located)
    const recovered = this.afterOutbound(this.recovered(), req.direction);
    if (this.keys.hashTags && req.direction !== 'in') this.outTags.delete(id);
    this.ledger.releasing(req.id, true);
    return (recovered === undefined ? send() : recovered.then(send)).then(
      async ([released, now]) => {
        // the call ended: this process will not write it again; its records, for a re-send after a
        // loss, and at once when it may have landed between a re-assertion's read and its write
        this.ledger.remove(req.id, req.direction);
        if (ticket !== undefined) await this.keeper.releaseDone(req.id, groups, ticket);
        if (this.keys.hashTags) await this.locators.drop(id, req.direction);
        return { released, now };
      },
      (err: unknown) => {
        this.ledger.releasing(req.id, false); // kept: written again after a loss, until the release lands
        throw err;
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
    const args = [req.now ?? '', id, req.forUs, String(this.ttlFloor(req.now)), this.unmoved];
    const recovered = this.afterOutbound(this.recovered(), undefined);
    const send = () => this.onRecords('refresh', req.id, id, undefined, args, req.now, req.signal);
    return (recovered === undefined ? send() : recovered.then(send)).then(async ([refreshed, now]) => {
      if (refreshed > 0 && req.now === undefined) this.ledger.extend(req.id, now + req.forUs);
      if (this.keys.hashTags && refreshed > 0)
        await this.locators.extend(id, Math.max(Math.ceil(req.forUs / 1000) + 1, this.ttlFloor(req.now)));
      return { refreshed, now };
    });
  }

  /**
   * Run `send` in issue order with the reservations on carrier tag `tag` (with hash tags: in its
   * carrier lane, carrier-lanes.ts); any other tag, or without hash tags, at once.
   */
  private onCarrier<T>(tag: string, send: () => Promise<T>): Promise<T> {
    if (!this.keys.hashTags || !isOutboundTag(tag)) return send();
    return new Promise<T>((resolve, reject) => {
      this.carrierLanes.add(tag, () => send().then(resolve, reject), true);
    });
  }

  /** The tag the keys of `name` carry: a carrier named under OUTBOUND_TAG lives under its own (carrierTag). */
  private tagOf(tag: string, name: string): string {
    return isOutboundTag(tag) ? carrierTag(name) : tag;
  }

  async holds(req: HoldsRequest): Promise<HoldsResult> {
    checkHolds(req);
    const tag = this.tagOf(req.tag, req.name);
    const key = this.keys.holds(tag, req.name);
    const r = (await this.onCarrier(tag, () => this.run('holds', [key], [req.now ?? ''], req.signal))) as number[];
    return { holds: r[0]!, now: r[1]! };
  }

  /** Write the ledger's unwritten calls now (a reload that turned a channel limit on). */
  writeLedger(): Promise<void> {
    return this.keeper.runNow();
  }

  /** Write again the holds of calls in progress on one tag (lua/reassert.lua; types.ts, ReassertRequest). */
  async reassert(req: ReassertRequest): Promise<ReassertResult> {
    checkReassert(req);
    const argv = reassertArgv(req, this.keys, this.ttlFloor(req.now));
    const r = reassertResult((await this.send('reassert', argv, req.signal)) as unknown[]);
    if (this.keys.hashTags) {
      // the locators too (their shard may have lost them): a release finds every call held
      const located: Promise<void>[] = [];
      r.statuses.forEach((status, i) => {
        const c = req.calls[i]!;
        if (status !== 'written' && status !== 'present') return;
        const id = encodeId(c.id);
        const forUs = Math.max(0, c.end - r.now);
        const virtual = req.now !== undefined;
        const write =
          c.direction === 'in'
            ? this.locators.locate(req.tag, id, forUs, virtual).then(() => undefined)
            : this.locators
                .locateOut(id, this.keys.outboundRecord(req.tag, id), this.locators.ttlMs(forUs, virtual), false)
                .then(() => undefined);
        this.locators.track(id, write);
        located.push(write);
      });
      await Promise.all(located);
    }
    return r;
  }

  /** Send a release again, leaving tombstones beside its records (holds-keeper.ts). */
  private async resend(id: string, groups: readonly (readonly string[])[], tombstoneMs: number): Promise<void> {
    const encoded = encodeId(id);
    await Promise.all(
      groups.map((keys) => this.run('release', [...keys], ['', encoded, tombstoneMs, '1', this.unmoved])),
    );
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

  /** Lift a ban: drop the bucket's ban key and its strikes. */
  async unban(req: UnbanRequest): Promise<UnbanResult> {
    const base = this.keys.base(req.tag, req.bucket);
    const now = req.now ?? (await this.redisTimeUs());
    const end = await this.redis.get(`${base}:ban`);
    // one key per command: on a Cluster both share the tag's slot, but DEL of two keys is refused by some proxies
    await this.redis.del(`${base}:ban`);
    await this.redis.del(`${base}:strikes`);
    return { lifted: end !== null && Number(end) > now, now };
  }

  /**
   * The bans in force: a SCAN of every master for `…attr:*:ban` keys (an operator's command, not
   * a hot path: its cost grows with the keyspace), each ban's end read with GET.
   */
  async bans(req: BansRequest = {}): Promise<BansResult> {
    try {
      return await this.readBans(req);
    } catch (err) {
      throw unavailable(err); // Redis away: StoreUnavailableError, as every other operation says it
    }
  }

  private async readBans(req: BansRequest): Promise<BansResult> {
    const now = req.now ?? (await this.redisTimeUs());
    const esc = (s: string) => s.replace(/[*?[\]\\]/g, '\\$&');
    const match = `${esc(this.prefix)}${this.keys.hashTags ? '{*}:' : ''}attr:*:ban`;
    const nodes = isCluster(this.redis) ? this.redis.nodes('master') : [this.redis];
    const bans: { tag: string; bucket: string; end: number }[] = [];
    for (const node of nodes) {
      let cursor = '0';
      do {
        const [next, keys] = await node.scan(cursor, 'MATCH', match, 'COUNT', 1000);
        cursor = next;
        const ends = await Promise.all(keys.map((k) => node.get(k)));
        keys.forEach((key, i) => {
          const end = Number(ends[i]);
          if (!(end > now)) return;
          let rest = key.slice(this.prefix.length, -':ban'.length);
          let tag = '';
          if (this.keys.hashTags) {
            const close = rest.indexOf('}:');
            tag = rest.slice(1, close);
            rest = rest.slice(close + 2);
          }
          bans.push({ tag, bucket: rest, end });
        });
      } while (cursor !== '0');
    }
    bans.sort((a, b) => (a.bucket < b.bucket ? -1 : a.bucket > b.bucket ? 1 : 0));
    return { bans, now };
  }

  private async redisTimeUs(): Promise<number> {
    const [s, us] = await this.redis.time();
    return Number(s) * 1_000_000 + Number(us);
  }

  /**
   * Read-only (lua/inspect.lua; inspect-args.ts): one script call per tag for the buckets and one
   * for the carriers; the first call's time is the `now` of the others, so every number is of
   * one instant.
   */
  async inspect(req: InspectRequest): Promise<InspectResult> {
    checkInspect(req);
    if (req.carriers.length > 0) await this.afterOutbound(undefined, 'out');
    const calls = bucketInspectCalls(req, this.keys);
    const groups = carrierGroups(req.carriers, this.keys, this.reserveEnv.leased);
    const argvs = [...calls.map((c) => (now: string) => c.argv(now)), ...groups.map((g) => g.argv)];
    let now = req.now === undefined ? '' : num(req.now);
    const run = async (argv: string[]) => ((await this.send('inspect', argv, req.signal)) as string[]).map(Number);
    const first = await run(argvs[0]!(now));
    now = num(first[0] as number);
    const replies = [first, ...(await Promise.all(argvs.slice(1).map((argv) => run(argv(now)))))];
    const buckets = inspectedBuckets(calls, replies.slice(0, calls.length), req.buckets.length);
    const carriers: InspectResult['carriers'][number][] = new Array(req.carriers.length);
    groups.forEach((g, k) => {
      const seen = inspectedCarriers(replies[calls.length + k]!, g.indices.length);
      g.indices.forEach((i, j) => {
        carriers[i] = seen[j]!;
      });
    });
    return { buckets, carriers, now: Number(now) };
  }

  // Operator operations (src/store/operations.ts): lua/hold-list.lua and lua/reset.lua.

  get tagged(): boolean {
    return this.keys.hashTags;
  }

  async listHolds(req: ListHoldsRequest): Promise<ListHoldsResult> {
    const max = checkListHolds(req);
    const tag = this.tagOf(req.tag, req.name);
    const key = this.keys.holds(tag, req.name);
    const r = (await this.onCarrier(tag, () => this.run('hold-list', [key], [req.now ?? '', max], req.signal))) as (
      | string
      | number
    )[];
    return { holds: listedHolds(r, 2), total: Number(r[1]), now: Number(r[0]) };
  }

  async reset(req: ResetRequest): Promise<ResetResult> {
    checkReset(req);
    const base = this.keys.base(req.tag, req.bucket.name);
    const windows = counterWindows(req.bucket).map((w) => windowKey(base, w));
    const args = [req.now ?? '', this.keys.base(req.tag, '')];
    const r = (await this.run('reset', [logKey(base), holdsKey(base), ...windows], args, req.signal)) as (
      | string
      | number
    )[];
    return { events: Number(r[1]), windows: Number(r[2]), holds: listedHolds(r, 3), now: Number(r[0]) };
  }

  async close(): Promise<void> {
    await this.keeper.close();
    this.locators.close();
    await this.conn.close(this.ownsConnection);
  }
}

function noop(): void {}

/** Pairs (encoded call id, end) of a script reply from index `from` on. */
function listedHolds(reply: readonly (string | number)[], from: number): ListedHold[] {
  const holds: ListedHold[] = [];
  for (let i = from; i + 1 < reply.length; i += 2)
    holds.push({ id: decodeId(String(reply[i])), endUs: Number(reply[i + 1]) });
  return holds;
}

/** Whether two buckets of one name are checked alike: the same limits and ban (config objects), the same channels. */
function sameLimits(a: Bucket, b: Bucket): boolean {
  return a.limits === b.limits && a.channels === b.channels && a.ban === b.ban;
}
