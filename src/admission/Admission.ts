/**
 * Inbound admission: one atomic store call per decision, whatever the number of levels and
 * windows; the store-trouble policy when that call fails or times out.
 */
import type { Clock } from '../clock.js';
import type { CallgateConfig } from '../config/types.js';
import { InvalidArgumentError } from '../errors/index.js';
import type { SafeEmitter } from '../events.js';
import { MemoryStore } from '../store/MemoryStore.js';
import { DEFAULT_TIMEOUT_MS, withDeadline } from '../store/timeout.js';
import type { AdmitResult, StopSignal, Store } from '../store/types.js';
import { PlanCache, UNKNOWN_PEER, type AdmissionPlan } from './plan.js';

/**
 * What a decision does when the store cannot be reached in time: refuse (`fail-closed`), admit
 * (`fail-open`), decide on an in-process store with the same limits (`local`), or reject the
 * promise with StoreUnavailableError (`error`: replay, or callers with their own fallback).
 */
export type StorePolicy = 'fail-closed' | 'fail-open' | 'local' | 'error';

export interface AdmitInput {
  readonly callId: string;
  readonly peer: string;
  /** The customer account, when the call names one ('' counts as none). */
  readonly account?: string;
  /** Decision time in µs since the epoch; default: the engine's clock (Redis TIME live on Redis). */
  readonly at?: number;
}

export interface AdmissionDecision {
  readonly callId: string;
  readonly admitted: boolean;
  /**
   * On refusal: `global`, `account:<id>`, `peer:<id>` (the first level without room),
   * `unknown-peer`, or `store-unavailable` (policy fail-closed).
   */
  readonly limitedBy?: string;
  /** Whole ms until every level that lacked room has room again (0 when admitted or not applicable). */
  readonly retryAfterMs: number;
  /** The time the decision was taken at, µs (the store's clock when none was given). */
  readonly at: number;
  /** Set when the store was out of reach and the policy decided instead. */
  readonly degraded?: StorePolicy;
  /** True for a call counted by record(): it passes regardless of the limits. */
  readonly forced?: boolean;
}

export interface AdmissionEvents {
  error: [Error];
  admitted: [AdmissionDecision];
  rejected: [AdmissionDecision];
  degraded: [{ callId: string; policy: StorePolicy; error: Error }];
}

export interface AdmissionOptions {
  readonly store: Store;
  readonly clock: Clock;
  readonly config: CallgateConfig;
  readonly events: SafeEmitter<AdmissionEvents>;
  readonly policy?: StorePolicy;
  /** Bound on one store call, ms (default 500); not applied to the memory store. */
  readonly timeoutMs?: number;
}

function checkInput(input: AdmitInput): void {
  if (typeof input?.callId !== 'string' || input.callId === '') throw new InvalidArgumentError('callId must be a non-empty string');
  if (typeof input.peer !== 'string' || input.peer === '') throw new InvalidArgumentError('peer must be a non-empty string');
  if (input.account !== undefined && typeof input.account !== 'string') throw new InvalidArgumentError('account must be a string');
  if (input.at !== undefined && !(Number.isSafeInteger(input.at) && input.at >= 0)) {
    throw new InvalidArgumentError(`at must be a non-negative integer number of microseconds, got ${String(input.at)}`);
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

  constructor(opts: AdmissionOptions) {
    this.store = opts.store;
    this.clock = opts.clock;
    this.events = opts.events;
    this.policy = opts.policy ?? 'fail-closed';
    this.timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.plans = new PlanCache(opts.config);
  }

  /** New limits apply from the next call; counts live in the store and survive. */
  setConfig(config: CallgateConfig): void {
    this.plans = new PlanCache(config);
  }

  async admit(input: AdmitInput): Promise<AdmissionDecision> {
    checkInput(input);
    const plan = this.plans.get(input.peer, input.account);
    const at = input.at ?? this.clock.now();
    if (plan === UNKNOWN_PEER) {
      return this.emit({ callId: input.callId, admitted: false, limitedBy: UNKNOWN_PEER, retryAfterMs: 0, at: at ?? Date.now() * 1000 });
    }
    let result: AdmitResult;
    try {
      result = await this.call((signal) => this.store.admit({ tag: plan.tag, buckets: plan.buckets, now: at, signal }));
    } catch (err) {
      return this.emit(await this.degrade(input, plan, at, err as Error));
    }
    return this.emit(decision(input.callId, plan, result));
  }

  /**
   * Count a call that must pass whatever the limits (an emergency call): recorded at every
   * level it touches, never refused. An unknown peer is counted at the levels that exist.
   */
  async record(input: AdmitInput): Promise<AdmissionDecision> {
    checkInput(input);
    const at = input.at ?? this.clock.now();
    const plan = this.plans.get(input.peer, input.account);
    const known = plan === UNKNOWN_PEER ? withoutPeer(this.plans.config, input) : plan;
    let now = at ?? Date.now() * 1000;
    let degraded: StorePolicy | undefined;
    if (known.buckets.length > 0) {
      try {
        now = (await this.call((signal) => this.store.record({ tag: known.tag, buckets: known.buckets, now: at, signal }))).now;
      } catch (err) {
        if (err instanceof InvalidArgumentError || this.policy === 'error') throw err;
        degraded = this.policy;
        this.events.safeEmit('degraded', { callId: input.callId, policy: this.policy, error: err as Error });
        if (this.policy === 'local') now = this.localStore().recordSync({ tag: known.tag, buckets: known.buckets, now: at }).now;
      }
    }
    return this.emit({ callId: input.callId, admitted: true, retryAfterMs: 0, at: now, forced: true, ...(degraded && { degraded }) });
  }

  /** A store call, bounded by the decision timeout (not needed in process). */
  private call<T>(run: (signal?: StopSignal) => Promise<T>): Promise<T> {
    return this.store.kind === 'memory' ? run() : withDeadline(run, this.timeoutMs);
  }

  private localStore(): MemoryStore {
    return (this.local ??= new MemoryStore());
  }

  private async degrade(input: AdmitInput, plan: AdmissionPlan, at: number | undefined, error: Error): Promise<AdmissionDecision> {
    if (error instanceof InvalidArgumentError || this.policy === 'error') throw error;
    this.events.safeEmit('degraded', { callId: input.callId, policy: this.policy, error });
    const now = at ?? Date.now() * 1000;
    switch (this.policy) {
      case 'fail-open':
        return { callId: input.callId, admitted: true, retryAfterMs: 0, at: now, degraded: 'fail-open' };
      case 'local':
        return { ...decision(input.callId, plan, this.localStore().admitSync({ tag: plan.tag, buckets: plan.buckets, now: at })), degraded: 'local' };
      default:
        return { callId: input.callId, admitted: false, limitedBy: 'store-unavailable', retryAfterMs: 0, at: now, degraded: 'fail-closed' };
    }
  }

  private emit(d: AdmissionDecision): AdmissionDecision {
    this.events.safeEmit(d.admitted ? 'admitted' : 'rejected', d);
    return d;
  }
}

function decision(callId: string, plan: AdmissionPlan, r: AdmitResult): AdmissionDecision {
  return r.admitted
    ? { callId, admitted: true, retryAfterMs: 0, at: r.now }
    : { callId, admitted: false, limitedBy: plan.labels[r.limitedBy], retryAfterMs: Math.ceil(r.retryAfterUs / 1000), at: r.now };
}

/** The global and account levels of a call whose peer is unknown (for record()). */
function withoutPeer(config: CallgateConfig, input: AdmitInput): AdmissionPlan {
  const plan = new PlanCache({ ...config, inbound: { ...config.inbound, defaultPeer: [] } }).get(input.peer, input.account) as AdmissionPlan;
  return { tag: plan.tag, buckets: plan.buckets.slice(0, -1), labels: plan.labels.slice(0, -1) };
}
