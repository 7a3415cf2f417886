/**
 * CallGate: the engine a routing process embeds. Inbound admission and outbound dispatch on
 * one store and one clock, a configuration that can be reloaded (or watched) without losing
 * counts, and typed events whose listeners cannot break a decision.
 */
import { watch, type FSWatcher } from 'node:fs';
import { basename, dirname } from 'node:path';
import { Admission, type AdmissionDecision, type AdmissionEvents, type AdmitInput, type StorePolicy } from './admission/Admission.js';
import { SystemClock, type Clock } from './clock.js';
import { diffConfig, loadConfig, type CallgateConfig, type CallgateConfigInput, type ConfigChange } from './config/index.js';
import {
  Dispatcher,
  type DispatchInput,
  type DispatchResult,
  type DispatcherEvents,
  type Reservation,
} from './dispatch/Dispatcher.js';
import { InvalidArgumentError } from './errors/index.js';
import { SafeEmitter } from './events.js';
import { MemoryStore } from './store/MemoryStore.js';
import { ReleaseQueue } from './releaseQueue.js';
import { withDeadline } from './store/timeout.js';
import type { StopSignal, Store } from './store/types.js';

/**
 * What release() did: `released` (the call held channels, now given back), `not-held` (nothing
 * held any more: released already, or its hold lapsed), `deferred` (the store is out of reach:
 * the release is retried in the background until it lands or the hold would have lapsed).
 */
export type ReleaseOutcome = 'released' | 'not-held' | 'deferred';

export type CallGateEvents = AdmissionEvents &
  Omit<DispatcherEvents, 'rejected'> & {
    /** An inbound refusal or an outbound call no carrier could take (tell them apart by `direction`). */
    rejected: [AdmissionDecision | DispatchResult];
    reloaded: [ConfigChange[]];
    /** A call's end was reported (release()); deferred ones are announced again once they land. */
    released: [{ callId: string; outcome: ReleaseOutcome }];
  };

export type ConfigSource = string | CallgateConfigInput | CallgateConfig;

export interface CallGateOptions {
  readonly config: ConfigSource;
  /** Default: a MemoryStore in this process. */
  readonly store?: Store;
  /**
   * Default: live time, read by the store (Redis TIME on Redis, so every routing process shares
   * one clock; the process clock on the memory store). Replay and tests inject a VirtualClock.
   */
  readonly clock?: Clock;
  /** What an inbound decision does when the store cannot be reached in time (default fail-closed). */
  readonly policy?: StorePolicy;
  /**
   * Bound on one store call per decision, admission and dispatch alike, ms (default 500: SIP's
   * T1, after which a caller over UDP retransmits its INVITE). Not applied to the memory store.
   */
  readonly timeoutMs?: number;
  /** Releases that could not reach the store, kept for retrying, at most (default 100,000; the oldest go first). */
  readonly maxDeferredReleases?: number;
}

function isNormalized(c: ConfigSource): c is CallgateConfig {
  return typeof c === 'object' && c !== null && (c as CallgateConfig).inbound?.peers instanceof Map;
}

async function resolveConfig(source: ConfigSource): Promise<CallgateConfig> {
  return isNormalized(source) ? source : loadConfig(source);
}

export class CallGate extends SafeEmitter<CallGateEvents> {
  readonly store: Store;
  readonly clock: Clock;
  private current: CallgateConfig;
  private readonly admission: Admission;
  private readonly dispatcher: Dispatcher;
  private watcher?: FSWatcher;
  /** The reloads started by watch(), in order. */
  private reloading: Promise<void> = Promise.resolve();
  private watchTimer?: NodeJS.Timeout;
  private readonly timeoutMs: number;
  private readonly deferred: ReleaseQueue;

  /** Load and validate the configuration (a file path, an object, or an already parsed one). */
  static async create(opts: CallGateOptions): Promise<CallGate> {
    return new CallGate({ ...opts, config: await resolveConfig(opts.config) });
  }

  constructor(opts: CallGateOptions & { config: CallgateConfig }) {
    super();
    this.current = opts.config;
    this.store = opts.store ?? new MemoryStore();
    this.clock = opts.clock ?? new SystemClock(true);
    this.admission = new Admission({
      store: this.store,
      clock: this.clock,
      config: this.current,
      events: this as unknown as SafeEmitter<AdmissionEvents>,
      policy: opts.policy,
      timeoutMs: opts.timeoutMs,
    });
    this.store.events?.on('error', this.onStoreError);
    this.dispatcher = new Dispatcher({
      store: this.store,
      clock: this.clock,
      carriers: () => this.current.outbound.carriers,
      maxCallDurationUs: () => this.current.maxCallDurationUs,
      events: this as unknown as SafeEmitter<DispatcherEvents>,
      timeoutMs: opts.timeoutMs,
    });
    this.timeoutMs = opts.timeoutMs ?? 500;
    this.deferred = new ReleaseQueue({
      release: (callId) => this.releaseInStore(callId),
      max: opts.maxDeferredReleases ?? 100_000,
      lifetimeMs: () => this.current.maxCallDurationUs / 1000,
      onLanded: (callId, released) => this.safeEmit('released', { callId, outcome: released ? 'released' : 'not-held' }),
      onError: (err) => this.safeEmit('error', err),
    });
  }

  /** A store's trouble outside any call (a Redis outage, once per outage) goes out on 'error'. */
  private readonly onStoreError = (err: Error) => this.safeEmit('error', err);

  get config(): CallgateConfig {
    return this.current;
  }

  /** May this inbound call in? Admitted calls count at every level; refused ones nowhere. */
  admit(input: AdmitInput): Promise<AdmissionDecision> {
    return this.admission.admit(input);
  }

  /** Count a call that must pass regardless (emergency): never refused, counted everywhere. */
  record(input: AdmitInput): Promise<AdmissionDecision> {
    return this.admission.record(input);
  }

  /** The outbound decision alone: a slot on the first carrier of the route that can take the call in time. */
  reserve(input: DispatchInput): Promise<Reservation> {
    return this.dispatcher.reserve(input);
  }

  /** Reserve, hold the call for its offset on the engine's clock, then hand it to `send`. */
  dispatch(
    input: DispatchInput,
    send?: (carrier: string) => unknown | Promise<unknown>,
    opts?: { onReserved?: (r: Reservation) => void },
  ): Promise<DispatchResult> {
    return this.dispatcher.dispatch(input, send, opts);
  }

  /**
   * The caller hung up before its outbound call went out: a call waiting here for its
   * reservation or its slot ends as cancelled, never sent, and gives back its carrier channel.
   * False when no such call waits in this process.
   */
  cancel(callId: string): boolean {
    return this.dispatcher.cancel(callId);
  }

  /**
   * The call ended (BYE, or a failure final response): its channels are given back on every
   * level and on its carrier. Works from any routing process sharing the store, knowing only the
   * call id; a call of that id still waiting here to go out is cancelled. When the store is out
   * of reach the release is kept and retried in the background (`deferred`), so a hang-up seen
   * during an outage still frees its channels once the store answers.
   */
  async release(callId: string): Promise<ReleaseOutcome> {
    checkCallId(callId);
    this.dispatcher.cancel(callId);
    let outcome: ReleaseOutcome;
    try {
      outcome = (await this.releaseInStore(callId)) ? 'released' : 'not-held';
    } catch (err) {
      if (err instanceof InvalidArgumentError) throw err;
      this.deferred.add(callId, err as Error);
      outcome = 'deferred';
    }
    this.safeEmit('released', { callId, outcome });
    return outcome;
  }

  /** One release in the store (and in the `local` policy's stand-in): true when something was held. */
  private async releaseInStore(callId: string): Promise<boolean> {
    const now = this.clock.now();
    const local = this.admission.localStand?.releaseSync({ id: callId, now }).released ?? 0;
    const r = await this.storeCall((signal) => this.store.release({ id: callId, now, signal }));
    return r.released + local > 0;
  }

  /**
   * A long call: its channels stay held for maxCallDuration from now (call it well within that
   * period while the call lasts). False when the call holds nothing any more; rejects with
   * StoreUnavailableError when the store cannot be reached in time.
   */
  async refresh(callId: string): Promise<boolean> {
    checkCallId(callId);
    const now = this.clock.now();
    const forUs = this.current.maxCallDurationUs;
    const local = this.admission.localStand?.refreshSync({ id: callId, forUs, now }).refreshed ?? 0;
    const r = await this.storeCall((signal) => this.store.refresh({ id: callId, forUs, now, signal }));
    return r.refreshed + local > 0;
  }

  /** Releases kept for retrying while the store was out of reach. */
  get deferredReleases(): number {
    return this.deferred.size;
  }

  private storeCall<T>(run: (signal?: StopSignal) => Promise<T>): Promise<T> {
    return this.store.kind === 'memory' ? run() : withDeadline(run, this.timeoutMs);
  }

  /** Calls held, waiting for their slot. */
  get held(): number {
    return this.dispatcher.held;
  }

  /**
   * Apply a new configuration from the next call on. It is validated completely first: a bad
   * one throws ConfigError and the old one stays in force. Recorded counts survive.
   */
  async reload(source: ConfigSource): Promise<ConfigChange[]> {
    const next = await resolveConfig(source);
    const changes = diffConfig(this.current, next);
    this.current = next;
    this.admission.setConfig(next);
    this.safeEmit('reloaded', changes);
    return changes;
  }

  /**
   * Reload whenever the file changes; a bad new file is reported on 'error' and ignored.
   *
   * The directory is watched, not the file: editors and config maps replace a file by rename
   * (or a symlink swap, Kubernetes' `..data`), after which a watch on the old inode would never
   * fire again. Reloads run one after the other, so the last file written is the one in force.
   */
  watch(path: string, debounceMs = 100): void {
    this.watcher?.close();
    clearTimeout(this.watchTimer);
    const file = basename(path);
    this.watcher = watch(dirname(path), (_event, name) => {
      const changed = name === null || name === file || String(name).startsWith('..');
      if (!changed) return;
      clearTimeout(this.watchTimer);
      this.watchTimer = setTimeout(() => {
        this.reloading = this.reloading.then(() => this.reload(path).then(() => undefined, (err: Error) => this.safeEmit('error', err)));
      }, debounceMs);
      this.watchTimer.unref();
    });
    // An FSWatcher 'error' with no listener would crash the process.
    this.watcher.on('error', (err) => this.safeEmit('error', err));
    this.watcher.unref();
  }

  /**
   * Stop taking calls. Held outbound calls are sent at their slot (`drain`, the default) or
   * ended as cancelled (`cancel`). Closes the store.
   */
  async close(opts: { mode?: 'drain' | 'cancel' } = {}): Promise<void> {
    this.watcher?.close();
    clearTimeout(this.watchTimer);
    await this.dispatcher.close(opts);
    await this.deferred.close();
    await this.store.close();
    this.store.events?.off('error', this.onStoreError);
  }
}

function checkCallId(callId: unknown): void {
  if (typeof callId !== 'string' || callId === '') throw new InvalidArgumentError(`callId must be a non-empty string, got ${JSON.stringify(callId)}`);
}
