/**
 * Inbound admission: one atomic store call per decision, whatever the number of levels and
 * windows; the store-trouble policy when that call fails or times out.
 */
import type { Clock } from '../clock.js';
import type { BucketConfig, CallGateConfig } from '../config/types.js';
import { checkIdArgument } from '../ids.js';
import { InvalidArgumentError } from '../errors/index.js';
import { checkFields, show } from '../input-fields.js';
import type { SafeEmitter } from '../events.js';
import { reassertCall } from '../holds/ledger.js';
import { MemoryStore } from '../store/memory-store.js';
import { MAX_REASSERT_CALLS } from '../store/reassert.js';
import { DEFAULT_TIMEOUT_MS, pastDeadline, withDeadline } from '../store/timeout.js';
import type { AdmitResult, Hold, RefusalReason, StopSignal, Store } from '../store/types.js';
import { PlanCache, UNKNOWN_PEER, type AdmissionPlan } from './plan.js';
import type { CallAttributes } from './attributes.js';
import { CallIdTable } from './call-id-table.js';
import { FloodShield } from './shield.js';
import { systemClockUs } from '../clock.js';

/**
 * What a decision does when the store cannot be reached in time: refuse (`fail-closed`), admit
 * (`fail-open`), decide on an in-process store with the same limits (`local`), or reject the
 * promise with StoreUnavailableError (`error`: replay, or callers with their own fallback).
 */
export type StorePolicy = 'fail-closed' | 'fail-open' | 'local' | 'error';

export interface AdmitInput extends CallAttributes {
  readonly callId: string;
  readonly peer: string;
  /** The customer account, when the call names one ('' counts as none). */
  readonly account?: string;
  /** Decision time in µs since the epoch; default: the engine's clock (Redis TIME live on Redis). */
  readonly at?: number;
  /**
   * How long the call lasts, µs, when known at the decision (replay): it holds its channels that
   * long. Default: until it is released (hang-up), at most the configuration's maxCallDuration.
   */
  readonly durationUs?: number;
}

export interface AdmissionDecision {
  readonly callId: string;
  /** Always `in`: tells an inbound decision from an outbound one on the gate's shared `rejected` event. */
  readonly direction: 'in';
  readonly admitted: boolean;
  /**
   * On refusal: `global`, `account:<id>`, `peer:<id>` (the first level without room),
   * `unknown-peer`, or `store-unavailable` (policy fail-closed).
   */
  readonly limitedBy?: string;
  /** On refusal by a level: `rate` when one of its rate limits lacked room, else `channels`. */
  readonly reason?: RefusalReason;
  /**
   * Whole ms until every rate limit that lacked room has room again (0 when admitted or not
   * applicable, and on a `channels` refusal: when a call in progress ends is not known).
   */
  readonly retryAfterMs: number;
  /** The time the decision was taken at, µs (the store's clock when none was given). */
  readonly at: number;
  /** Set when the store was out of reach and the policy decided instead. */
  readonly degraded?: StorePolicy;
  /** True for a call counted by record(): it passes regardless of the limits. */
  readonly forced?: boolean;
  /** True for a repeated admit of a call still holding its channels: the same decision, counted once. */
  readonly duplicate?: boolean;
  /** True for a refusal by the flood shield, in process (see src/admission/shield.ts). */
  readonly shielded?: boolean;
  /**
   * Admitted through the leased global level's overflow lane (docs/leasing.md): when the
   * global level counted the call there, µs (`at` is when its other levels did, a little later).
   */
  readonly spilledAt?: number;
}

/** The `degraded` event: the store was out of reach for a call, and `policy` decided it instead. */
export interface DegradedEvent {
  readonly callId: string;
  readonly policy: StorePolicy;
  readonly error: Error;
}

/**
 * The store stopped answering decisions with its connection open (a Redis that stalls: SIGSTOP,
 * a link that drops packets), or answers them again: `stalled` true once, when the first
 * decision gives up on it (the decision timeout), false at the first decision it takes again.
 */
export interface StoreStallEvent {
  readonly stalled: boolean;
  /** The decision timeout, ms. */
  readonly timeoutMs: number;
}

export interface AdmissionEvents {
  error: [Error];
  admitted: [AdmissionDecision];
  rejected: [AdmissionDecision];
  degraded: [DegradedEvent];
  storeStall: [StoreStallEvent];
}

export interface AdmissionOptions {
  readonly store: Store;
  readonly clock: Clock;
  readonly config: CallGateConfig;
  readonly events: SafeEmitter<AdmissionEvents>;
  readonly policy?: StorePolicy;
  /** Bound on one store call, ms (default 500); not applied to the memory store. */
  readonly timeoutMs?: number;
  /**
   * Policy `local`: the share of every limit (rate and channels) the in-process stand-in allows,
   * 0 < share <= 1 (default 1). With P routing processes deciding locally during an outage, each
   * allows max(1, floor(share x L)) per window: set 1/P to keep the platform within L (as long as
   * L >= P; the floor of one call per process per window is never lost).
   */
  readonly localShare?: number;
  /**
   * The flood shield (src/admission/shield.ts): after a refusal by rate with a retry-after, the
   * next calls of the same buckets are refused in process until then. Default: on for calls on
   * the store's clock (Redis TIME, live), except on the memory store (in process already); with
   * given times (replay) only when set to true, so that a replay's limited_by and retry_after
   * stay exactly Redis' (the shield may name another level, see shield.ts).
   */
  readonly shield?: boolean;
}

const ADMIT_FIELDS: ReadonlySet<string> = new Set([
  'callId',
  'peer',
  'account',
  'at',
  'durationUs',
  'caller',
  'callee',
  'source',
  'fields',
]);

/** Refuse bad admit / record input (InvalidArgumentError), before any I/O. */
export function checkAdmitInput(input: AdmitInput): void {
  // an array is an object too, whose indexes checkFields would call unknown fields ("0")
  if (typeof input !== 'object' || input === null || Array.isArray(input))
    throw new InvalidArgumentError(`admit input must be an object { callId, peer }, got ${show(input)}`);
  checkFields(input, ADMIT_FIELDS, 'admit input');
  checkIdArgument('callId', input.callId);
  checkIdArgument('peer', input.peer);
  if (input.account !== undefined) checkIdArgument('account', input.account, { empty: true });
  // the attributes of attribute levels (empty: none), ids as any other
  if (input.caller !== undefined) checkIdArgument('caller', input.caller, { empty: true });
  if (input.callee !== undefined) checkIdArgument('callee', input.callee, { empty: true });
  if (input.source !== undefined) checkIdArgument('source', input.source, { empty: true });
  if (input.fields !== undefined) {
    if (typeof input.fields !== 'object' || input.fields === null || Array.isArray(input.fields))
      throw new InvalidArgumentError(`fields must be an object of strings, got ${show(input.fields)}`);
    for (const [name, value] of Object.entries(input.fields)) checkIdArgument(`fields.${name}`, value, { empty: true });
  }
  if (input.at !== undefined && !(Number.isSafeInteger(input.at) && input.at >= 0)) {
    throw new InvalidArgumentError(`at must be a non-negative integer number of microseconds, got ${show(input.at)}`);
  }
  if (input.durationUs !== undefined && !(Number.isSafeInteger(input.durationUs) && input.durationUs >= 0)) {
    throw new InvalidArgumentError(
      `durationUs must be a non-negative integer number of microseconds, got ${show(input.durationUs)}`,
    );
  }
}

export class Admission {
  private plans: PlanCache;
  private readonly store: Store;
  private readonly clock: Clock;
  private readonly events: SafeEmitter<AdmissionEvents>;
  readonly policy: StorePolicy;
  private readonly timeoutMs: number;
  /** The in-process stand-in of policy `local`, created on first need. */
  private local?: MemoryStore;
  /**
   * Decisions in flight on the store, by call id: a repeated admit meanwhile gets the same one
   * (counted once). Decisions taken at once in process (unknown peer, flood shield) are not
   * kept: a repeat is decided again, with the same outcome while the shield holds.
   */
  private readonly deciding = new CallIdTable<Promise<AdmissionDecision>>();
  /** New decisions wait for this (holdBack), undefined almost always. */
  private held?: Promise<void>;
  private readonly localShare: number;
  /** The stand-in's plans: the limits scaled by localShare (built on first need, per configuration). */
  private localPlans?: PlanCache;
  /** The flood shield, unless turned off. */
  readonly shield?: FloodShield<AdmissionPlan>;
  /** The shield also covers calls with given times (set explicitly). */
  private readonly shieldGiven: boolean;

  constructor(opts: AdmissionOptions) {
    this.store = opts.store;
    this.clock = opts.clock;
    this.events = opts.events;
    this.policy = opts.policy ?? 'fail-closed';
    this.timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.localShare = opts.localShare ?? 1;
    if (!(this.localShare > 0 && this.localShare <= 1))
      throw new InvalidArgumentError(`localShare must be a number in (0, 1], got ${String(opts.localShare)}`);
    this.plans = new PlanCache(opts.config);
    if (opts.shield ?? opts.store.kind !== 'memory') this.shield = new FloodShield(opts.store.leaseLanes !== undefined);
    this.shieldGiven = opts.shield === true;
  }

  /** New limits apply from the next call; counts live in the store and survive. */
  setConfig(config: CallGateConfig): void {
    this.plans = new PlanCache(config);
    this.localPlans = undefined;
    this.shield?.clear();
  }

  /** The stand-in's plan of a call (limits scaled by localShare; same buckets, tag and labels). */
  private localPlan(input: AdmitInput, plan: AdmissionPlan): AdmissionPlan {
    if (this.localShare === 1) return plan;
    this.localPlans ??= new PlanCache(scaleConfig(this.plans.config, this.localShare));
    return this.localPlans.forCall(input) as AdmissionPlan;
  }

  /** The stand-in holds this process's calls in progress since the store last failed (seedLocal). */
  private localSeeded = false;
  /** Decisions gave up on the store since it last answered one (storeStall). */
  private stalled = false;

  /**
   * A pass of the holds keeper found calls released elsewhere (gone from the ledger): the next
   * outage's stand-in starts afresh from the ledger, even if no decision reached the store in
   * between.
   */
  holdsChanged(): void {
    this.localSeeded = false;
  }

  /** The stand-in of policy `local`, if it was ever used (its holds need releasing too). */
  get localStand(): MemoryStore | undefined {
    return this.local;
  }

  /** How long an admitted call holds its channels. */
  holdFor(input: AdmitInput): Hold {
    return { id: input.callId, forUs: input.durationUs ?? this.plans.config.maxCallDurationUs };
  }

  admit(input: AdmitInput): Promise<AdmissionDecision> {
    try {
      return this.admitNow(input);
    } catch (err) {
      // bad input, or a clock that threw: a rejected promise, never a throw
      return Promise.reject(err);
    }
  }

  /** The store's decision of `callId` still being taken here, if any (a release of the call waits for it). */
  inFlight(callId: string): Promise<AdmissionDecision> | undefined {
    return this.deciding.get(callId);
  }

  /**
   * New admissions wait until `until` settles (a reload writing the calls in progress for a
   * channel limit it turns on); they count as under way meanwhile (a release of the same id
   * waits for its decision; close() lets them end).
   */
  holdBack(until: Promise<void>): void {
    this.held = until;
    const done = () => {
      if (this.held === until) this.held = undefined;
    };
    until.then(done, done);
  }

  /** Every store decision still being taken here (close() lets them end before the store closes). */
  allInFlight(): Promise<AdmissionDecision>[] {
    return this.deciding.values();
  }

  /** A decision taken here at once (unknown peer, flood shield), else the store's, shared by a repeat meanwhile. */
  private admitNow(input: AdmitInput): Promise<AdmissionDecision> {
    checkAdmitInput(input);
    const inFlight = this.deciding.get(input.callId);
    if (inFlight !== undefined) return inFlight;
    if (this.held !== undefined) {
      const waiting: Promise<AdmissionDecision> = this.held.then(() => {
        if (this.deciding.get(input.callId) === waiting) this.deciding.delete(input.callId);
        return this.admitNow(input);
      });
      this.deciding.set(input.callId, waiting);
      return waiting;
    }
    const plan = this.plans.forCall(input);
    const at = input.at ?? this.clock.now();
    if (plan === UNKNOWN_PEER) {
      return Promise.resolve(
        this.emit({
          callId: input.callId,
          direction: 'in',
          admitted: false,
          limitedBy: UNKNOWN_PEER,
          retryAfterMs: 0,
          at: at ?? Date.now() * 1000,
        }),
      );
    }
    const shield = at === undefined || this.shieldGiven ? this.shield : undefined;
    const shielded = shield?.check(plan, at);
    if (shielded !== undefined) {
      // a literal, not a spread of decision(): spread objects made every young collection copy
      // and promote its survivors (measured with --trace-gc-nvp, shielded calls only: 1.2 MB promoted per collection instead of 0.15 MB)
      return Promise.resolve(
        this.emit({
          callId: input.callId,
          direction: 'in',
          admitted: false,
          limitedBy: plan.labels[shielded.limitedBy],
          reason: 'rate',
          retryAfterMs: Math.ceil(shielded.retryAfterUs / 1000),
          at: shielded.now,
          shielded: true,
        }),
      );
    }
    const decided = this.decide(input, plan, at, shield);
    this.deciding.set(input.callId, decided);
    return decided;
  }

  /**
   * A decision by the store. It takes its call out of `deciding` itself, in a finally (no
   * `.finally()` chain of two more promises per call); the store call is awaited before that
   * runs, so the entry admit() sets after calling this is always there to take out.
   */
  private async decide(
    input: AdmitInput,
    plan: AdmissionPlan,
    at: number | undefined,
    shield: FloodShield<AdmissionPlan> | undefined,
  ): Promise<AdmissionDecision> {
    try {
      const hold = this.holdFor(input);
      const sentUs = shield && systemClockUs();
      let result: AdmitResult;
      // the store's own answer and the signal it was given, for the deadline's path below
      let sent: Promise<AdmitResult> | undefined;
      let given: StopSignal | undefined;
      try {
        result = await this.call((signal) => {
          given = signal;
          return (sent = this.store.admit({ tag: plan.tag, buckets: plan.buckets, now: at, hold, signal }));
        });
      } catch (err) {
        // Redis may run the call before its deadline and the answer be read after it: the caller
        // then has the policy's answer, and a call the store admitted but the caller was refused
        // (fail-closed, a local refusal, or an error) would hold its channels with nobody to
        // release it; it is released as soon as both are known, whichever comes second. Only a
        // decision that failed pays for this watch (a promise and two closures).
        const late = { admitted: false, refused: undefined as boolean | undefined };
        const takeBack = () => {
          if (!late.admitted || late.refused !== true) return;
          late.admitted = false;
          // a decision of the same id issued since (a retry: this one has ended, its entry is gone)
          // was sent before this answer was read and found the call there (a duplicate): it is
          // that decision's call now
          if (this.deciding.get(input.callId) !== undefined) return;
          this.store
            .release({ id: input.callId, direction: 'in', now: at })
            .catch((e: unknown) => this.events.safeEmit('error', e as Error));
        };
        const signal = given;
        sent?.then(
          (r) => {
            if (signal?.aborted !== true || !r.admitted || r.duplicate === true) return;
            late.admitted = true;
            takeBack();
          },
          () => undefined,
        );
        let d: AdmissionDecision;
        try {
          d = await this.degrade(input, plan, at, hold, err as Error);
        } catch (thrown) {
          late.refused = true; // the caller gets an error (policy 'error'): nobody admitted it
          takeBack();
          throw thrown;
        }
        late.refused = !d.admitted;
        takeBack();
        return this.emit(d);
      }
      if (shield && !result.admitted) shield.learn(plan, at, sentUs as number, result);
      this.localSeeded = false; // the store answers: the next outage's stand-in starts afresh from the ledger
      if (this.stalled) this.stallEnds();
      return this.emit(decision(input.callId, plan, result));
    } finally {
      this.deciding.delete(input.callId);
    }
  }

  /**
   * Count a call that must pass whatever the limits (an emergency call): recorded at every
   * level it touches, never refused. An unknown peer is counted at the levels that exist.
   */
  async record(input: AdmitInput): Promise<AdmissionDecision> {
    checkAdmitInput(input);
    const at = input.at ?? this.clock.now();
    const plan = this.plans.forCall(input);
    const known = plan === UNKNOWN_PEER ? withoutPeer(this.plans.config, input) : plan;
    let now = at ?? Date.now() * 1000;
    let degraded: StorePolicy | undefined;
    let duplicate = false;
    if (known.buckets.length > 0) {
      const req = { tag: known.tag, buckets: known.buckets, now: at, hold: this.holdFor(input) };
      try {
        const r = await this.call((signal) => this.store.record({ ...req, signal }));
        now = r.now;
        duplicate = r.duplicate === true;
        if (this.stalled) this.stallEnds();
      } catch (err) {
        this.stallBegins(err);
        if (err instanceof InvalidArgumentError || this.policy === 'error') throw err;
        degraded = this.policy;
        this.events.safeEmit('degraded', { callId: input.callId, policy: this.policy, error: err as Error });
        if (this.policy === 'local') now = this.localStore().recordSync(req).now;
        // counted whatever the policy (it went through): its holds are written once Redis answers
        noteUnwritten(this.store, input.callId, known, at, req.hold);
      }
    }
    return this.emit({
      callId: input.callId,
      direction: 'in',
      admitted: true,
      retryAfterMs: 0,
      at: now,
      forced: true,
      ...(degraded && { degraded }),
      ...(duplicate && { duplicate }),
    });
  }

  /** A decision gave up on the store (its timeout): the first since it last answered is a stall. */
  private stallBegins(err: unknown): void {
    if (this.stalled || !pastDeadline(err)) return;
    this.stalled = true;
    this.events.safeEmit('storeStall', { stalled: true, timeoutMs: this.timeoutMs });
  }

  private stallEnds(): void {
    this.stalled = false;
    this.events.safeEmit('storeStall', { stalled: false, timeoutMs: this.timeoutMs });
  }

  /** A store call, bounded by the decision timeout (not needed in process). */
  private call<T>(run: (signal?: StopSignal) => Promise<T>): Promise<T> {
    return this.store.kind === 'memory' ? run() : withDeadline(run, this.timeoutMs);
  }

  private localStore(): MemoryStore {
    const local = (this.local ??= new MemoryStore());
    if (!this.localSeeded) {
      this.localSeeded = true;
      seedLocal(local, this.store);
    }
    return local;
  }

  private async degrade(
    input: AdmitInput,
    plan: AdmissionPlan,
    at: number | undefined,
    hold: Hold,
    error: Error,
  ): Promise<AdmissionDecision> {
    this.stallBegins(error);
    if (error instanceof InvalidArgumentError || this.policy === 'error') throw error;
    this.events.safeEmit('degraded', { callId: input.callId, policy: this.policy, error });
    const now = at ?? Date.now() * 1000;
    switch (this.policy) {
      case 'fail-open':
        noteUnwritten(this.store, input.callId, plan, at, hold);
        return {
          callId: input.callId,
          direction: 'in',
          admitted: true,
          retryAfterMs: 0,
          at: now,
          degraded: 'fail-open',
        };
      case 'local': {
        const local = this.localPlan(input, plan);
        const r = this.localStore().admitSync({ tag: local.tag, buckets: local.buckets, now: at, hold });
        if (r.admitted && !r.duplicate) noteUnwritten(this.store, input.callId, plan, at, hold);
        return { ...decision(input.callId, local, r), degraded: 'local' };
      }
      default:
        return {
          callId: input.callId,
          direction: 'in',
          admitted: false,
          limitedBy: 'store-unavailable',
          retryAfterMs: 0,
          at: now,
          degraded: 'fail-closed',
        };
    }
  }

  private emit(d: AdmissionDecision): AdmissionDecision {
    this.events.safeEmit(d.admitted ? 'admitted' : 'rejected', d);
    return d;
  }
}

/**
 * At an outage's first local decision, the stand-in holds exactly the calls this process has in
 * progress (the ledger's inbound calls, with their ends): a peer whose channels were full before
 * the outage stays full during it. Its holds from an earlier outage go first: a call it let in
 * then may have been released by another process since, or found gone by a sync, and held on
 * here it refused calls until its maxCallDuration (its rate logs stay: the calls it let in still
 * count in their windows).
 */
function seedLocal(local: MemoryStore, store: Store): void {
  if (store.ledger === undefined) return;
  local.dropHolds();
  const now = Date.now() * 1000;
  for (const [tag, calls] of store.ledger.byTag(now, true, true)) {
    const inbound = calls.filter((c) => c.direction === 'in');
    for (let i = 0; i < inbound.length; i += MAX_REASSERT_CALLS)
      local.reassertSync({ tag, now, mode: 'lost', calls: inbound.slice(i, i + MAX_REASSERT_CALLS).map(reassertCall) });
  }
}

/**
 * A call let in by policy while the store was away enters the store's ledger (live time only),
 * to be written to the store once it answers: its holds count there from then on.
 */
function noteUnwritten(store: Store, callId: string, plan: AdmissionPlan, at: number | undefined, hold: Hold): void {
  if (store.ledger === undefined || at !== undefined || hold.forUs <= 0) return;
  store.ledger.add(callId, 'in', {
    tag: plan.tag,
    buckets: plan.buckets,
    end: Date.now() * 1000 + hold.forUs,
    unwritten: true,
  });
}

function decision(callId: string, plan: AdmissionPlan, r: AdmitResult): AdmissionDecision {
  if (r.admitted)
    return r.duplicate
      ? { callId, direction: 'in', admitted: true, retryAfterMs: 0, at: r.now, duplicate: true }
      : {
          callId,
          direction: 'in',
          admitted: true,
          retryAfterMs: 0,
          at: r.now,
          ...(r.spilledAt !== undefined && { spilledAt: r.spilledAt }),
        };
  return {
    callId,
    direction: 'in',
    admitted: false,
    limitedBy: plan.labels[r.limitedBy],
    reason: r.reason ?? 'rate',
    retryAfterMs: Math.ceil(r.retryAfterUs / 1000),
    at: r.now,
  };
}

/** Every limit (and channel limit) scaled by `share`, never below one call. */
function scaleConfig(config: CallGateConfig, share: number): CallGateConfig {
  const scale = (n: number) => Math.max(1, Math.floor(n * share));
  const bucket = (b: BucketConfig): BucketConfig => {
    const limits = b.limits.map((l) => ({ ...l, limit: scale(l.limit) }));
    return b.channels === undefined ? { limits } : { limits, channels: scale(b.channels) };
  };
  const map = (m: Map<string, BucketConfig>) => new Map([...m].map(([id, b]) => [id, bucket(b)]));
  const { global, accounts, peers, defaultPeer, attributes = [] } = config.inbound;
  const inbound: CallGateConfig['inbound'] = {
    accounts: map(accounts),
    peers: map(peers),
    attributes: attributes.map((l) => ({ ...l, limits: bucket(l.limits), overrides: map(new Map(l.overrides)) })),
  };
  if (global !== undefined) inbound.global = bucket(global);
  if (defaultPeer !== undefined) inbound.defaultPeer = bucket(defaultPeer);
  return { ...config, inbound };
}

/** The global and account levels of a call whose peer is unknown (for record()). */
function withoutPeer(config: CallGateConfig, input: AdmitInput): AdmissionPlan {
  const plan = new PlanCache({ ...config, inbound: { ...config.inbound, defaultPeer: { limits: [] } } }).forCall(
    input,
  ) as AdmissionPlan;
  const peer = plan.labels.indexOf(`peer:${input.peer}`);
  return {
    tag: plan.tag,
    buckets: plan.buckets.filter((_, i) => i !== peer),
    labels: plan.labels.filter((_, i) => i !== peer),
  };
}
