/**
 * CallGate: the engine a routing process embeds. Inbound admission and outbound dispatch on
 * one store and one clock, a configuration that can be reloaded (or watched) without losing
 * counts, and typed events whose listeners cannot break a decision.
 */
import type { EventEmitter } from 'eventemitter3';
import {
  Admission,
  type AdmissionDecision,
  type AdmissionEvents,
  type AdmitInput,
  type StorePolicy,
  checkAdmitInput,
} from './admission/admission.js';
import { SystemClock, systemClockUs, type Clock } from './clock.js';
import {
  diffConfig,
  loadConfig,
  type CallGateConfig,
  type CallGateConfigInput,
  type ConfigChange,
} from './config/index.js';
import {
  checkCloseMode,
  Dispatcher,
  type DispatchInput,
  type DispatchResult,
  type DispatcherEvents,
  type Reservation,
} from './dispatch/dispatcher.js';
import { DispatcherClosedError, InvalidArgumentError, StoreUnavailableError } from './errors/index.js';
import { checkIdArgument } from './ids.js';
import { SafeEmitter } from './events.js';
import { TraceRecorder, type TraceRecorderOptions } from './recording/trace-recorder.js';
import { leasedCarrier } from './lease/carriers.js';
import { leasedLevel } from './lease/lanes.js';
import { MemoryStore } from './store/memory-store.js';
import { turnsChannelsOn, widenHolds } from './holds/reload.js';
import { ConfigWatch } from './config/watch.js';
import { ReleaseQueue } from './store/release-queue.js';
import { DEFAULT_TIMEOUT_MS, pastDeadline, withDeadline } from './store/timeout.js';
import type { HoldsReassertedEvent, StopSignal, Store, StoreLossEvent } from './store/types.js';

/**
 * What release() did: `released` (the call held channels, now given back), `not-held` (nothing
 * held any more: released already, or its hold lapsed), `deferred` (the store is out of reach:
 * the release is retried in the background until it lands or the hold would have lapsed, and
 * tried a last time by close()).
 */
export type ReleaseOutcome = 'released' | 'not-held' | 'deferred';

/** Releases that landed after their deadline, kept for their retry (CallGate.releasedLate). */
const MAX_RELEASED_LATE = 10_000;

/**
 * The `released` event: a call's end was reported (release()); deferred ones are announced again
 * once they land. `at`: when the store released it, µs (its clock: Redis TIME live on Redis);
 * absent while deferred.
 */
export interface ReleasedEvent {
  readonly callId: string;
  readonly outcome: ReleaseOutcome;
  readonly at?: number;
}

export type CallGateEvents = Omit<AdmissionEvents, 'rejected'> &
  Omit<DispatcherEvents, 'rejected'> & {
    /** An inbound refusal or an outbound call no carrier could take (tell them apart by `direction`). */
    rejected: [AdmissionDecision | DispatchResult];
    reloaded: [ConfigChange[]];
    /** Something works but is likely a mistake (a reload left carriers that routes name unconfigured). */
    warning: [GateWarning];
    /** A call's end was reported (release()); deferred ones are announced again once they land. */
    released: [ReleasedEvent];
    /** Every decision (dispatch: its reservation) or failure, with its latency: for metrics. */
    decided: [DecisionTiming];
    /** The store lost holds of this process's calls (a Redis restart or failover): they are written again. */
    storeLoss: [StoreLossEvent];
    /** This process's calls of one tag were re-asserted after a loss, or the periodic sync changed something. */
    holdsReasserted: [HoldsReassertedEvent];
  };

/**
 * The `warning` event. `route-carrier-unconfigured`: a reload removed carriers that calls were
 * routed to; routes naming them now skip them (each decision lists them in `skipped`).
 */
export interface GateWarning {
  readonly code: 'route-carrier-unconfigured';
  readonly message: string;
  readonly carriers: string[];
}

export interface DecisionTiming {
  readonly operation: 'admit' | 'record' | 'reserve' | 'dispatch';
  readonly seconds: number;
  readonly decision?: AdmissionDecision | Reservation;
  /** The call got no decision (store out of reach under policy `error`, reserve on store trouble, bad input). */
  readonly error?: Error;
}

export type ConfigSource = string | CallGateConfigInput | CallGateConfig;

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
  /** Policy `local`: the share of every limit the in-process stand-in allows (see AdmissionOptions.localShare). */
  readonly localShare?: number;
  /** The flood shield: refuse in process a refused bucket's next calls until its retry-after (see AdmissionOptions.shield; default on, off on the memory store). */
  readonly shield?: boolean;
  /**
   * Write every decision's input as trace rows (replayable), in files rotated by size. (Not to be
   * confused with record(), which counts an emergency call.)
   */
  readonly recordTrace?: TraceRecorderOptions | TraceRecorder;
  /** Releases that could not reach the store, kept for retrying, at most (default 100,000; the oldest go first). */
  readonly maxDeferredReleases?: number;
}

/**
 * A configuration as parseConfig yields it (CallGateConfig), taken as it is. By its whole shape:
 * an input may use Maps for its peers too (configuration.md), and taken for a parsed one it went
 * unvalidated, every decision then failing on what parseConfig would have refused.
 */
function isNormalized(c: ConfigSource): c is CallGateConfig {
  if (typeof c !== 'object' || c === null) return false;
  const n = c as Partial<CallGateConfig>;
  return (
    typeof n.maxCallDurationUs === 'number' &&
    n.inbound?.peers instanceof Map &&
    n.inbound.accounts instanceof Map &&
    n.outbound?.carriers instanceof Map
  );
}

async function resolveConfig(source: ConfigSource): Promise<CallGateConfig> {
  return isNormalized(source) ? source : loadConfig(source);
}

export class CallGate extends SafeEmitter<CallGateEvents> {
  readonly store: Store;
  readonly clock: Clock;
  private current: CallGateConfig;
  private readonly admission: Admission;
  private readonly dispatcher: Dispatcher;
  private watcher?: ConfigWatch;
  /** The reloads, one after the other (reload(): SIGHUP, an HTTP reload and a watched file alike). */
  private reloading: Promise<void> = Promise.resolve();
  /** A reload widened the ledger's holds (a channel limit turned on) and they are not written yet. */
  private widened = false;
  /** The trace recorder, when the `recordTrace` option is given (closed by close()). */
  readonly recorder?: TraceRecorder;
  private readonly timeoutMs: number;
  private readonly deferred: ReleaseQueue;
  /** close() began: admit() and record() are refused from then on (DispatcherClosedError). */
  private closing = false;
  /** close() has nothing left under way and closes the store: release() and refresh() are refused from then on (DispatcherClosedError). */
  private releasesClosed = false;
  /**
   * Releases, records and refreshes under way (not yet answered): close() lets them end on the
   * open store (admissions under way: Admission.allInFlight).
   */
  private readonly underWay = new Set<Promise<unknown>>();

  /** Load and validate the configuration (a file path, an object, or an already parsed one). */
  static async create(opts: CallGateOptions): Promise<CallGate> {
    return new CallGate({ ...opts, config: await resolveConfig(opts.config) });
  }

  constructor(opts: CallGateOptions & { config: CallGateConfig }) {
    super();
    this.current = opts.config;
    this.store = opts.store ?? new MemoryStore();
    checkLeasable(this.store, this.current);
    this.clock = opts.clock ?? new SystemClock(true);
    this.admission = new Admission({
      store: this.store,
      clock: this.clock,
      config: this.current,
      events: this as unknown as SafeEmitter<AdmissionEvents>,
      policy: opts.policy,
      timeoutMs: opts.timeoutMs,
      localShare: opts.localShare,
      shield: opts.shield,
    });
    this.store.events?.on('error', this.onStoreError);
    this.store.events?.on('storeLoss', this.onStoreLoss);
    this.store.events?.on('holdsReasserted', this.onReasserted);
    this.dispatcher = new Dispatcher({
      store: this.store,
      clock: this.clock,
      carriers: () => this.current.outbound.carriers,
      maxCallDurationUs: () => this.current.maxCallDurationUs,
      events: this as unknown as SafeEmitter<DispatcherEvents>,
      timeoutMs: opts.timeoutMs,
    });
    if (opts.recordTrace) {
      this.recorder =
        opts.recordTrace instanceof TraceRecorder ? opts.recordTrace : new TraceRecorder(opts.recordTrace);
      const rec = this.recorder;
      rec.onError = (err) => this.safeEmit('error', err);
      rec.maxCallDurationUs = () => this.current.maxCallDurationUs;
      // the attribute columns, when the configuration at start has attribute levels
      if ((this.current.inbound.attributes ?? []).length > 0) rec.attributes = true;
      rec.now = () => this.clock.now() ?? systemClockUs();
      // the call ended: at the store's release time (a deferred release once it lands); an
      // outbound call that will not go out gave its channel back: its row ends now
      this.on('released', (e) => e.at !== undefined && rec.ended(e.callId, e.at));
      this.on('cancelled', (r) => rec.ended(r.callId, rec.now(), 'out'));
      this.on('failed', (r) => r.reason === 'send-failed' && rec.ended(r.callId, rec.now(), 'out'));
    }
    this.timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.deferred = new ReleaseQueue({
      release: (callId) => this.releaseInStore(callId),
      max: opts.maxDeferredReleases ?? 100_000,
      lifetimeMs: () => this.current.maxCallDurationUs / 1000,
      onLanded: (callId, r) =>
        this.safeEmit('released', { callId, outcome: r.released ? 'released' : 'not-held', at: r.at }),
      onError: (err) => this.safeEmit('error', err),
    });
  }

  /** A store's trouble outside any call (a Redis outage, once per outage) goes out on 'error'. */
  private readonly onStoreError = (err: Error) => {
    // an outage that began before any 'error' listener (Redis down when the process starts, its
    // report made during create()) is told to the first one added, rather than to nobody: the
    // next report comes only with the next outage
    if (this.listenerCount('error') === 0) this.unheard = err;
    else this.safeEmit('error', err);
  };

  /** The store's trouble reported while no 'error' listener was there (onStoreError). */
  private unheard?: Error;

  override on<T extends EventEmitter.EventNames<CallGateEvents>>(
    event: T,
    fn: EventEmitter.EventListener<CallGateEvents, T>,
    context?: unknown,
  ): this {
    super.on(event, fn, context);
    if (event === 'error') this.tellUnheard();
    return this;
  }

  // (eventemitter3's addListener and once do not go through on())
  override addListener<T extends EventEmitter.EventNames<CallGateEvents>>(
    event: T,
    fn: EventEmitter.EventListener<CallGateEvents, T>,
    context?: unknown,
  ): this {
    return this.on(event, fn, context);
  }

  override once<T extends EventEmitter.EventNames<CallGateEvents>>(
    event: T,
    fn: EventEmitter.EventListener<CallGateEvents, T>,
    context?: unknown,
  ): this {
    super.once(event, fn, context);
    if (event === 'error') this.tellUnheard();
    return this;
  }

  /** An 'error' listener was added: the store's trouble none heard, told now (next turn). */
  private tellUnheard(): void {
    const unheard = this.unheard;
    if (unheard === undefined) return;
    this.unheard = undefined;
    setImmediate(() => this.safeEmit('error', unheard));
  }
  private readonly onStoreLoss = (e: StoreLossEvent) => this.safeEmit('storeLoss', e);
  private readonly onReasserted = (e: HoldsReassertedEvent) => {
    // the store answers again (a pass after a loss): an outage none heard is over, not news
    this.unheard = undefined;
    // calls found released elsewhere: policy local's stand-in must not hold them in the next outage
    if (e.gone > 0) this.admission.holdsChanged();
    this.safeEmit('holdsReasserted', e);
  };

  get config(): CallGateConfig {
    return this.current;
  }

  /** May this inbound call in? Admitted calls count at every level; refused ones nowhere. */
  admit(input: AdmitInput): Promise<AdmissionDecision> {
    return this.timed('admit', () => {
      if (this.closing) return this.closedCall(input, 'admitted');
      const d = this.admission.admit(input);
      return this.recorder ? d.then((x) => this.recorder!.inbound(input, x)) : d;
    });
  }

  /** Count a call that must pass regardless (emergency): never refused, counted everywhere. */
  record(input: AdmitInput): Promise<AdmissionDecision> {
    return this.timed('record', () => {
      if (this.closing) return this.closedCall(input, 'recorded');
      const d = this.admission.record(input);
      return this.tracked(this.recorder ? d.then((x) => this.recorder!.inbound(input, x)) : d);
    });
  }

  /**
   * An admit or record after close() began: refused (DispatcherClosedError), nothing counted. A
   * call decided then would hold channels that no release of this gate could give back (its
   * releases stop with close), until maxCallDuration.
   */
  private closedCall(input: AdmitInput, what: string): Promise<never> {
    return Promise.resolve().then(() => {
      checkAdmitInput(input);
      throw new DispatcherClosedError(`the gate is closed: call ${JSON.stringify(input.callId)} was not ${what}`);
    });
  }

  /** The outbound decision alone: a slot on the first carrier of the route that can take the call in time. */
  reserve(input: DispatchInput): Promise<Reservation> {
    return this.timed('reserve', () => {
      const r = this.dispatcher.reserve(input);
      // a release of this id issued meanwhile goes after it (releaseOnce), and close() lets it end
      // on the open store, as an admission under way
      const id = (input as { callId?: unknown } | null)?.callId;
      if (typeof id === 'string') {
        const set = this.reserving.get(id) ?? new Set<Promise<unknown>>();
        set.add(r);
        this.reserving.set(id, set);
        const done = () => {
          set.delete(r);
          if (set.size === 0 && this.reserving.get(id) === set) this.reserving.delete(id);
        };
        r.then(done, done);
      }
      return this.tracked(this.recorder ? r.then((x) => this.recorder!.outbound(input, x)) : r);
    });
  }

  /** Reservations (reserve()) under way, by call id: a release of the id waits for them. */
  private readonly reserving = new Map<string, Set<Promise<unknown>>>();

  /** Reserve, hold the call for its offset on the engine's clock, then hand it to `send`. */
  dispatch(
    input: DispatchInput,
    send?: (carrier: string) => unknown | Promise<unknown>,
    opts?: { onReserved?: (r: Reservation) => void },
  ): Promise<DispatchResult> {
    const rec = this.recorder;
    const onReserved = opts?.onReserved;
    // (an onReserved that is not a function is left for dispatch() to refuse)
    if (rec && (onReserved === undefined || typeof onReserved === 'function'))
      opts = {
        onReserved: (r) => {
          rec.outbound(input, r);
          onReserved?.(r);
        },
      };
    const inner = opts?.onReserved;
    if (this.listenerCount('decided') > 0 && (inner === undefined || typeof inner === 'function')) {
      const start = performance.now();
      opts = {
        onReserved: (r: Reservation) => {
          this.safeEmit('decided', { operation: 'dispatch', seconds: (performance.now() - start) / 1000, decision: r });
          inner?.(r);
        },
      };
    }
    return this.dispatcher.dispatch(input, send, opts);
  }

  /** Run a decision; with 'decided' listeners, time it and tell them. */
  private timed<T extends AdmissionDecision | Reservation>(
    operation: DecisionTiming['operation'],
    run: () => Promise<T>,
  ): Promise<T> {
    if (this.listenerCount('decided') === 0) return run();
    const start = performance.now();
    const seconds = () => (performance.now() - start) / 1000;
    return run().then(
      (decision) => {
        this.safeEmit('decided', { operation, seconds: seconds(), decision });
        return decision;
      },
      (error: Error) => {
        this.safeEmit('decided', { operation, seconds: seconds(), error });
        throw error;
      },
    );
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
   * during an outage still frees its channels once the store answers. Once close() has nothing
   * left under way it rejects with DispatcherClosedError, sending nothing: the gate no longer
   * retries releases, and closes its store.
   */
  async release(callId: string): Promise<ReleaseOutcome> {
    checkCallId(callId);
    if (this.releasesClosed)
      throw new DispatcherClosedError(`the gate is closed: the release of call ${JSON.stringify(callId)} was not sent`);
    return this.tracked(this.releaseOnce(callId));
  }

  /** release() of a gate that still takes releases. */
  private async releaseOnce(callId: string): Promise<ReleaseOutcome> {
    this.dispatcher.cancel(callId);
    // a call held here for its slot gave its carrier channel back as it was cancelled, just now
    const gaveBack = this.dispatcher.givingBack(callId);
    // an admission of this id still being decided here goes first: sent at once, the release
    // could land before it (a decision waiting out a recovery's grace, the first call of a new
    // gate) and find nothing, leaving the call held until maxCallDuration (a CANCEL right
    // after its INVITE)
    const deciding = this.admission.inFlight(callId);
    if (deciding !== undefined) await deciding.catch(() => undefined);
    // likewise a reservation of this id still being decided here (reserve(): the sidecar's
    // /v1/reserve): sent at once, the release could land first (a reservation waiting out a
    // recovery's grace) and the reservation then hold its carrier channel until maxCallDuration
    const reserving = this.reserving.get(callId);
    if (reserving !== undefined) await Promise.allSettled([...reserving]);
    // read before the store is asked: a clock that throws is the caller's fault, not an outage
    // to retry the release through (it was deferred, and retried every second)
    const now = this.clock.now();
    try {
      const r = await this.releaseInStore(callId, now);
      const outcome = r.released || (await gaveBack) === true ? 'released' : 'not-held';
      this.safeEmit('released', { callId, outcome, at: r.at });
      return outcome;
    } catch (err) {
      if (err instanceof InvalidArgumentError) throw err;
      this.deferred.add(callId, err as Error);
      this.safeEmit('released', { callId, outcome: 'deferred' });
      return 'deferred';
    }
  }

  /** One release in the store (and in the `local` policy's stand-in): whether something was held, and when. */
  private async releaseInStore(callId: string, now = this.clock.now()): Promise<{ released: boolean; at: number }> {
    const local = this.admission.localStand?.releaseSync({ id: callId, now }).released ?? 0;
    const r = await this.storeCall((signal) => {
      const answer = this.store.release({ id: callId, now, signal });
      // an answer past the deadline still released the call: kept for the retry (releasedLate)
      if (signal !== undefined)
        answer.then(
          (v) => {
            if (signal.aborted && v.released > 0) this.noteReleasedLate(callId, v.now);
          },
          () => undefined,
        );
      return answer;
    });
    const late = this.releasedLate.get(callId);
    this.releasedLate.delete(callId);
    // (a note older than the longest hold belongs to an earlier call of the same id)
    if (
      r.released + local === 0 &&
      late !== undefined &&
      Date.now() - late.noted < this.current.maxCallDurationUs / 1000
    )
      return { released: true, at: late.at };
    return { released: r.released + local > 0, at: r.now };
  }

  /**
   * Calls whose release reached the store but answered after the deadline (a Redis that stalls,
   * or one busy re-asserting holds after a restart): the gate deferred the release and retries
   * it, and the retry finds nothing held. Its answer is then this earlier attempt's, `released`
   * at the time it landed (`at`, µs), not `not-held`. The oldest dropped past a bound (a retry
   * given up on never reads its entry).
   */
  private readonly releasedLate = new Map<string, { at: number; noted: number }>();

  private noteReleasedLate(callId: string, at: number): void {
    this.releasedLate.delete(callId);
    if (this.releasedLate.size >= MAX_RELEASED_LATE) this.releasedLate.delete(this.releasedLate.keys().next().value!);
    this.releasedLate.set(callId, { at, noted: Date.now() });
  }

  /**
   * A long call: its channels stay held for maxCallDuration from now (call it well within that
   * period while the call lasts). False when the call holds nothing any more; rejects with
   * StoreUnavailableError when the store cannot be reached in time.
   */
  async refresh(callId: string): Promise<boolean> {
    checkCallId(callId);
    if (this.releasesClosed)
      throw new DispatcherClosedError(`the gate is closed: the refresh of call ${JSON.stringify(callId)} was not sent`);
    return this.tracked(this.refreshOnce(callId));
  }

  private async refreshOnce(callId: string): Promise<boolean> {
    const now = this.clock.now();
    const forUs = this.current.maxCallDurationUs;
    const local = this.admission.localStand?.refreshSync({ id: callId, forUs, now }).refreshed ?? 0;
    const r = await this.storeCall((signal) => this.store.refresh({ id: callId, forUs, now, signal }));
    this.recorder?.refreshed(callId, r.now);
    return r.refreshed + local > 0;
  }

  /** `p`, counted under way until it settles (close() waits for it). */
  private tracked<T>(p: Promise<T>): Promise<T> {
    this.underWay.add(p);
    const settled = () => this.underWay.delete(p);
    p.then(settled, settled);
    return p;
  }

  /** The admissions, releases, records and refreshes under way. */
  private pendingCalls(): Promise<unknown>[] {
    return [...this.admission.allInFlight(), ...this.underWay];
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
   * one throws ConfigError and the old one stays in force. Recorded counts survive. Reloads run
   * one after the other, in the order they were asked for: a slow one (its holds written to a
   * stalled Redis) is never overtaken by a later one that it would then undo.
   */
  reload(source: ConfigSource): Promise<ConfigChange[]> {
    const run = this.reloading.then(() => this.reloadNow(source));
    this.reloading = run.then(
      () => undefined,
      () => undefined,
    );
    return run;
  }

  private async reloadNow(source: ConfigSource): Promise<ConfigChange[]> {
    const next = await resolveConfig(source);
    checkLeasable(this.store, next);
    const changes = diffConfig(this.current, next);
    // a channel limit turned on counts the calls already in progress there (src/holds/reload.ts)
    const ledger = this.store.ledger;
    const writeLedger = this.store.writeLedger?.bind(this.store);
    let resume: (() => void) | undefined;
    if (ledger !== undefined && writeLedger !== undefined && turnsChannelsOn(this.current, next)) {
      // new admissions wait until the calls in progress are counted on the new limit, so that
      // none is decided on the old configuration after that (it would hold nothing there) nor
      // on the new one before; those under way enter the ledger first (each within its deadline)
      const underWay = this.admission.allInFlight();
      this.admission.holdBack(new Promise<void>((r) => (resume = r)));
      await Promise.allSettled(underWay);
    }
    try {
      // (a reload refused before widened the ledger already: the next one must write it too)
      if (ledger !== undefined && widenHolds(ledger, next, Date.now() * 1000) > 0) this.widened = true;
      if (this.widened && writeLedger !== undefined) {
        await withDeadline(() => writeLedger(), this.timeoutMs).catch((err: Error) => {
          // a stalled Redis: the holds are sent, not counted yet, and decisions on the new limit
          // could pass it meanwhile; the old configuration stays (Redis down: the holds are written
          // back, before any decision, once it answers, so the new one is safe to apply)
          if (pastDeadline(err))
            throw new StoreUnavailableError(
              `not reloaded: Redis did not answer within ${this.timeoutMs} ms while the calls in progress were written for a channel limit turned on; the configuration in force is unchanged`,
              err,
            );
          this.safeEmit('error', err);
        });
        this.widened = false;
      }
      this.current = next;
      this.store.configChanged?.();
      this.admission.setConfig(next);
    } finally {
      resume?.();
    }
    // an emergency call (record(), never held back) decided on the old configuration meanwhile
    if (ledger !== undefined && writeLedger !== undefined && widenHolds(ledger, next, Date.now() * 1000) > 0)
      await withDeadline(() => writeLedger(), this.timeoutMs).catch((err: Error) => this.safeEmit('error', err));
    this.safeEmit('reloaded', changes);
    this.warnUnrouted(next);
    return changes;
  }

  /** Carriers that routes named and the new configuration no longer has: warn once for them. */
  private warnUnrouted(next: CallGateConfig): void {
    const gone = [...this.dispatcher.routed].filter((id) => !next.outbound.carriers.has(id));
    if (gone.length === 0) return;
    for (const id of gone) this.dispatcher.routed.delete(id);
    const names = gone.map((id) => JSON.stringify(id)).join(', ');
    this.safeEmit('warning', {
      code: 'route-carrier-unconfigured',
      message: `the configuration reloaded has no carrier ${names}, which calls were routed to: routes naming it skip it`,
      carriers: gone,
    });
  }

  /**
   * Reload whenever the file changes (src/config/watch.ts: its directory is watched, and the
   * directory of the file a link points to); a bad new file is reported on 'error' and
   * ignored. Reloads run one after the other, so the last file written is the one in force.
   */
  watch(path: string, debounceMs = 100): void {
    this.watcher?.close();
    this.watcher = new ConfigWatch(
      path,
      debounceMs,
      () => {
        this.reload(path).catch((err: Error) => this.safeEmit('error', err));
      },
      (err) => this.safeEmit('error', err),
    );
  }

  /**
   * Stop taking calls. Held outbound calls are sent at their slot (`drain`, the default) or
   * ended as cancelled (`cancel`); the calls under way end on the open store, releases still
   * taken (hang-ups during the drain, of a call admitted meanwhile), the deferred ones get a last
   * try; then, with nothing under way, releases are refused and the store closes.
   */
  async close(opts: { mode?: 'drain' | 'cancel' } = {}): Promise<void> {
    checkCloseMode(opts?.mode); // before anything changes: a bad mode leaves the gate as it was
    this.closing = true;
    this.watcher?.close();
    await this.dispatcher.close(opts);
    // releases are taken while the store is open: the calls under way end (each bounded by the
    // decision timeout), and an admission among them may end admitted, its hang-up still to come
    for (let p = this.pendingCalls(); p.length > 0; p = this.pendingCalls()) await Promise.allSettled(p);
    await this.deferred.close(); // its last try; a release failing from now on rejects, never 'deferred'
    // (checked and set with no await between: no release slips in before the store closes)
    for (let p = this.pendingCalls(); p.length > 0; p = this.pendingCalls()) await Promise.allSettled(p);
    this.releasesClosed = true;
    await this.store.close();
    await this.recorder?.close();
    this.store.events?.off('error', this.onStoreError);
    this.store.events?.off('storeLoss', this.onStoreLoss);
    this.store.events?.off('holdsReasserted', this.onReasserted);
  }
}

function checkCallId(callId: unknown): void {
  checkIdArgument('callId', callId);
}

/**
 * A store that leases takes only a configuration it can lease (docs/leasing.md): a leased global
 * level must be one sliding-log limit with no attribute levels, a leased carrier a whole CPS
 * (one the configuration no longer has is routed to no more). A clear error otherwise.
 */
function checkLeasable(store: Store, config: CallGateConfig): void {
  if (store.leaseLanes !== undefined) leasedLevel(config);
  for (const id of store.leasedCarriers ?? []) if (config.outbound.carriers.has(id)) leasedCarrier(config, id);
}
