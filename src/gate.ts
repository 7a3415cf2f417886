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
import { SafeEmitter } from './events.js';
import { MemoryStore } from './store/MemoryStore.js';
import type { Store } from './store/types.js';

export type CallGateEvents = AdmissionEvents &
  Omit<DispatcherEvents, 'rejected'> & {
    /** An inbound refusal or an outbound call no carrier could take (tell them apart by `direction`). */
    rejected: [AdmissionDecision | DispatchResult];
    reloaded: [ConfigChange[]];
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
  /** Bound on one store call per decision, ms (default 500). */
  readonly timeoutMs?: number;
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
      events: this as unknown as SafeEmitter<DispatcherEvents>,
      timeoutMs: opts.timeoutMs,
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

  /** The caller hung up while its call was held: it ends as cancelled. */
  cancel(callId: string): boolean {
    return this.dispatcher.cancel(callId);
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
    await this.store.close();
    this.store.events?.off('error', this.onStoreError);
  }
}
