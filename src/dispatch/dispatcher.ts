/**
 * Outbound dispatch: leaky-bucket pacing with reroute (DESIGN.md "Leaky bucket (outbound)").
 *
 * One `store.reserve` per call covers its whole route (configured carriers only, in route
 * order, a repeated id tried again: see plan()): one atomic script on a single Redis; on a
 * Cluster, where each carrier has a shard of its own, one carrier at a time in issue order, with
 * the same decisions (RedisStore.reserve). The call is then held on the clock until its
 * slot and handed to `send(carrier)`.
 *
 * Time. When the clock gives a time (VirtualClock, SystemClock without store time) or the caller
 * passes `at`, the decision is taken at that time and a clock that gives a time holds the call
 * until `slotAt` on it, so replay never sleeps. When the clock gives no time (SystemClock in store-
 * time mode) the store decides on its own clock (Redis TIME, shared by every routing process): the
 * slot is in Redis time, so the call is held for `waitUs` from the moment the reply arrived, on the
 * process clock (`systemClockUs`, the time base of SystemClock's timers), since the local and the
 * Redis clocks may differ. A timer that fires early (Node timers have millisecond resolution) is
 * re-armed: a call is never sent before its slot on the clock that holds it.
 *
 * Wire spacing. Calls this Dispatcher sends on one carrier leave at least 1/cps apart on the
 * holding time base, whatever the timer lateness: a send that left late pushes the next one on
 * that carrier back (to 1/cps after it), it never squeezes the gap. Slots are exactly 1/cps apart
 * in the store; this keeps the actual sends of one process so too. Calls whose time came wait in
 * their carrier's lane, in the order of their targets, and leave one per 1/cps. The spacing
 * counts from the clock reading just before send(); when send's promise settles before the next
 * send on that carrier, from that moment instead. So a send that resolves once its message is
 * written is spaced on the wire, even if the process was held up between the reading and the
 * write; resolve on writing, not on the carrier's answer (that would slow the carrier down).
 *
 * Nothing lost. Every call dispatch() accepts ends exactly once, as `dispatched`, `rejected`,
 * `cancelled` or `failed`; its promise resolves with that result (it never rejects) and exactly one
 * event of that name is emitted, just before the promise resolves. dispatch() rejects (with no
 * event) only for a call it did not accept: InvalidArgumentError for invalid input or a callId
 * that is still in progress here.
 *
 * Decisions where the contract is silent:
 * - a store error or timeout ends the call `failed` / `store-unavailable` (the error attached);
 *   past the timeout the command may still run on Redis and take a slot nobody uses;
 * - a call after close() ends `failed` / `closed` with a DispatcherClosedError (promise + event);
 * - close({ mode: 'cancel' }) ends held calls `cancelled` / `closed` (cancel() gives `cancelled` /
 *   `cancelled`); a call still waiting for the store ends `cancelled` / `closed` if it got a slot
 *   (the slot stays taken: a leaky bucket gives nothing back), or as decided otherwise;
 * - cancel() acts on a call waiting for its reservation (it then ends `cancelled` whatever the
 *   store decided, never sent) or for its slot; while its send is in progress it returns false;
 * - a call that took a carrier with a channel limit holds that channel from its decision: a call
 *   that then ends without going out (cancelled, closed, send failed) gives it back at once;
 *   a call sent holds it until release() (the hang-up) or until its hold lapses;
 * - close() resolves once every accepted call has ended, including sends in progress; bound sends
 *   with `sendTimeoutMs` if a send may never settle. Meanwhile it keeps the process alive (the
 *   clock's keepAlive: a real clock's timers do not);
 * - reserve() is a pure decision (it takes the slot but holds nothing and emits no event); it
 *   rejects on store trouble (StoreUnavailableError) and after close() (DispatcherClosedError);
 * - a route with no configured carrier is rejected without a store call, at `at`, else the
 *   clock's time, else (store-time mode) the process clock;
 * - on a VirtualClock, close() in drain mode resolves as the clock passes the last held slot;
 * - `slotAt` is the store's slot as is: it may be fractional when 1/cps is not a whole number of µs;
 *   `sentAt` is the holding clock's time (the process clock in store-time mode).
 */
import { systemClockUs, type Clock } from '../clock.js';
import type { CarrierConfig } from '../config/types.js';
import { checkIdArgument } from '../ids.js';
import { InvalidArgumentError } from '../errors/index.js';
import { checkFields, show } from '../input-fields.js';
import { SafeEmitter } from '../events.js';
import { carrierName } from '../store/keys.js';
import { DEFAULT_TIMEOUT_MS, withDeadline } from '../store/timeout.js';
import type { Carrier, ReserveResult, StopSignal, Store } from '../store/types.js';
import { DispatcherClosedError } from '../errors/dispatcher-closed-error.js';

export { DispatcherClosedError } from '../errors/dispatcher-closed-error.js';

export interface DispatchInput {
  readonly callId: string;
  /** Carrier ids in order of preference; ids not configured are skipped. */
  readonly route: readonly string[];
  /** Decision time, µs since the epoch; default: the clock (the store's clock when it gives none). */
  readonly at?: number;
  /**
   * How long the call lasts once sent, µs, when known at the decision (replay): it holds its
   * carrier's channel until slot + duration. Default: until released, at most maxCallDuration.
   */
  readonly durationUs?: number;
}

/** The decision, known as soon as the store answered. */
export interface Reservation {
  readonly callId: string;
  readonly direction: 'out';
  readonly outcome: 'dispatched' | 'rejected';
  readonly carrier: string | null;
  /** Math.round(waitUs) / 1000; null when rejected. */
  readonly delayMs: number | null;
  /** Configured carriers tried before the chosen one (every one tried when rejected). */
  readonly reroutedFrom: string[];
  readonly reason?: 'all-routes-congested';
  /**
   * Route ids that are not configured carriers, left out of the decision (a typo, or a carrier a
   * reload removed); absent when every id is configured. A route of unknown ids only is rejected
   * as `all-routes-congested` like any other: this field tells the two apart.
   */
  readonly skipped?: string[];
  /** Decision time, µs (the store's clock when no time was given). */
  readonly at: number;
  /** The slot taken, µs on the decision's clock; absent when rejected. */
  readonly slotAt?: number;
  /**
   * The wait from `at` to the slot, µs; absent when rejected. Exact where `slotAt` is not: a
   * slot near today's dates as one number of µs steps in quarter-µs, while this wait compares,
   * rounds (delayMs) and rounds up (a hold's end, `at` + its ceiling + the call's duration) as
   * the exact one does.
   */
  readonly waitUs?: number;
}

export type DispatchOutcome = 'dispatched' | 'rejected' | 'cancelled' | 'failed';
export type DispatchReason = 'all-routes-congested' | 'cancelled' | 'store-unavailable' | 'send-failed' | 'closed';

export interface DispatchResult {
  readonly callId: string;
  readonly direction: 'out';
  readonly outcome: DispatchOutcome;
  readonly carrier: string | null;
  readonly delayMs: number | null;
  readonly reroutedFrom: string[];
  readonly reason?: DispatchReason;
  /** Route ids that are not configured carriers, left out (see Reservation.skipped). */
  readonly skipped?: string[];
  /** Decision time, µs; absent when no decision was taken (store trouble, closed). */
  readonly at?: number;
  readonly slotAt?: number;
  /** The wait from `at` to the slot, µs (see Reservation.waitUs). */
  readonly waitUs?: number;
  /** The holding clock's time when send ran (or, without send, when the slot came). */
  readonly sentAt?: number;
  readonly error?: Error;
}

/** The `rerouted` event: carriers `from` could not take the call; `to` did (null: none could). */
export interface ReroutedEvent {
  readonly callId: string;
  readonly from: string[];
  readonly to: string | null;
}

export interface DispatcherEvents {
  error: [Error];
  dispatched: [DispatchResult];
  rerouted: [ReroutedEvent];
  rejected: [DispatchResult];
  cancelled: [DispatchResult];
  failed: [DispatchResult];
}

/** What the Dispatcher needs of an emitter: a SafeEmitter with (at least) DispatcherEvents. */
export interface DispatchEventSink {
  safeEmit<E extends keyof DispatcherEvents & string>(event: E, ...args: DispatcherEvents[E]): void;
}

export type SendFn = (carrier: string) => unknown | Promise<unknown>;

export interface DispatcherOptions {
  readonly store: Store;
  readonly clock: Clock;
  /** Read on every call: a reload applies from the next call on. */
  readonly carriers: () => ReadonlyMap<string, CarrierConfig>;
  /** How long a call whose end is never reported holds its channel, µs (read on every call; default 4 h). */
  readonly maxCallDurationUs?: () => number;
  /** Default: a fresh SafeEmitter (see `events`). */
  readonly events?: DispatchEventSink;
  /** Bound on one store call, ms (default 500, as admission; not applied to the in-process memory store). */
  readonly timeoutMs?: number;
  /** Bound on one send, ms: past it the call ends `failed` / `send-failed` (default: none). */
  readonly sendTimeoutMs?: number;
}

export interface DispatchOptions {
  /** Called with the decision as soon as the store answered (before any hold); may not throw (reported on 'error'). */
  readonly onReserved?: (r: Reservation) => void;
}

interface Decision {
  reservation: Reservation;
  /** When to send, on the holding time base. */
  target: number;
  /** The holding time base: the clock's, or the process clock in store-time mode. */
  now: () => number;
}

type State = 'reserving' | 'holding' | 'sending';

/** A held call whose time came. */
interface Due {
  readonly call: Call;
  readonly decision: Decision;
  readonly send: SendFn | undefined;
}

/** Wire spacing of one carrier: its last send here, and the calls due waiting for 1/cps after it. */
interface Lane {
  lastSent?: number;
  /** The call of the last send: when its send settles, the spacing counts from then. */
  lastCall?: Call;
  readonly waiting: Due[];
  cancelTimer?: () => void;
}

interface Call {
  readonly callId: string;
  state: State;
  done: boolean;
  /** cancel() came while the reservation was in flight. */
  cancelled?: boolean;
  reservation?: Reservation;
  cancelTimer?: () => void;
  resolve(result: DispatchResult): void;
}

function fail(message: string): never {
  throw new InvalidArgumentError(message);
}

const DISPATCH_FIELDS: ReadonlySet<string> = new Set(['callId', 'route', 'at', 'durationUs']);

/** A close() mode: `drain` (the default, undefined) or `cancel`; else InvalidArgumentError. */
export function checkCloseMode(mode: unknown): void {
  if (mode !== undefined && mode !== 'drain' && mode !== 'cancel')
    fail(`close mode must be drain or cancel, got ${show(mode)}`);
}

function checkInput(input: DispatchInput, op: 'reserve' | 'dispatch'): void {
  // an array is an object too, whose indexes checkFields would call unknown fields ("0")
  if (typeof input !== 'object' || input === null || Array.isArray(input))
    fail(`${op} input must be an object { callId, route }, got ${show(input)}`);
  checkFields(input, DISPATCH_FIELDS, `${op} input`);
  checkIdArgument('callId', input.callId);
  const route: unknown = input.route;
  if (!Array.isArray(route)) fail(`route must be an array of carrier ids (strings), got ${show(route)}`);
  // by index, not every()/forEach(): those skip the holes of a sparse array (`[, 'A']`), which
  // then reached the decision as an id `undefined`; each entry named by its position
  for (let i = 0; i < route.length; i++) {
    if (!(i in route)) fail(`route[${i}] must be a string, got a hole (route is a sparse array)`);
    checkIdArgument(`route[${i}]`, route[i]);
  }
  if (input.at !== undefined && !(Number.isSafeInteger(input.at) && input.at >= 0)) {
    fail(`at must be a non-negative integer number of microseconds, got ${show(input.at)}`);
  }
  if (input.durationUs !== undefined && !(Number.isSafeInteger(input.durationUs) && input.durationUs >= 0)) {
    fail(`durationUs must be a non-negative integer number of microseconds, got ${show(input.durationUs)}`);
  }
}

/** A route as the store sees it (see Dispatcher.plan). */
interface Route {
  readonly ids: string[];
  readonly carriers: Carrier[];
  readonly skipped?: string[];
}

const toError = (err: unknown): Error => (err instanceof Error ? err : new Error(String(err)));

export class Dispatcher {
  readonly events: DispatchEventSink;
  private readonly store: Store;
  private readonly clock: Clock;
  private readonly carriers: () => ReadonlyMap<string, CarrierConfig>;
  private readonly maxCallDurationUs: () => number;
  private readonly timeoutMs: number;
  private readonly sendTimeoutMs: number;
  private readonly calls = new Map<string, Call>();
  /** Configured carriers that some route named: a reload that removes one of them is worth a warning. */
  readonly routed = new Set<string>();
  private holding = 0;
  private closed = false;
  private cancelling = false;
  private idleWaiters: (() => void)[] = [];
  /** Per carrier: the wire spacing (see Lane). */
  private readonly lanes = new Map<string, Lane>();

  constructor(opts: DispatcherOptions) {
    this.store = opts.store;
    this.clock = opts.clock;
    this.carriers = opts.carriers;
    this.maxCallDurationUs = opts.maxCallDurationUs ?? (() => 4 * 3600 * 1_000_000);
    this.events = opts.events ?? new SafeEmitter<DispatcherEvents>();
    this.timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.sendTimeoutMs = opts.sendTimeoutMs ?? 0;
  }

  /** Calls held, waiting for their slot. */
  get held(): number {
    return this.holding;
  }

  /** Calls accepted and not yet ended (reserving, held or sending). */
  get active(): number {
    return this.calls.size;
  }

  get isClosed(): boolean {
    return this.closed;
  }

  /** The decision alone (replay, dry runs): takes the slot, holds nothing, emits nothing. */
  async reserve(input: DispatchInput): Promise<Reservation> {
    checkInput(input, 'reserve');
    if (this.closed) throw new DispatcherClosedError();
    return (await this.decide(input, this.plan(input.route))).reservation;
  }

  /**
   * Reserve, hold the call until its slot, then hand it to `send` (without `send`, the call is
   * only announced: 'dispatched' at its slot). Resolves once the call has ended; never rejects
   * for an accepted call.
   */
  dispatch(input: DispatchInput, send?: SendFn, opts: DispatchOptions = {}): Promise<DispatchResult> {
    let route: Route;
    try {
      checkInput(input, 'dispatch');
      if (send !== undefined && typeof send !== 'function') fail(`send must be a function, got ${show(send)}`);
      if (opts?.onReserved !== undefined && typeof opts.onReserved !== 'function')
        fail(`onReserved must be a function, got ${show(opts.onReserved)}`);
      if (this.calls.has(input.callId)) fail(`call ${JSON.stringify(input.callId)} is already in progress`);
      route = this.plan(input.route);
    } catch (err) {
      return Promise.reject(err);
    }
    if (this.closed) {
      const result: DispatchResult = {
        callId: input.callId,
        direction: 'out',
        outcome: 'failed',
        carrier: null,
        delayMs: null,
        reroutedFrom: [],
        reason: 'closed',
        error: new DispatcherClosedError(),
      };
      this.events.safeEmit('failed', result);
      return Promise.resolve(result);
    }
    return new Promise<DispatchResult>((resolve) => {
      const call: Call = { callId: input.callId, state: 'reserving', done: false, resolve };
      this.calls.set(call.callId, call);
      this.decide(input, route).then(
        (decision) => this.onDecision(call, decision, send, opts?.onReserved),
        (err) =>
          this.finish(call, 'failed', {
            carrier: null,
            delayMs: null,
            reroutedFrom: [],
            reason: 'store-unavailable',
            error: toError(err),
          }),
      );
    });
  }

  /**
   * End a call as `cancelled` before it is sent: one held for its slot at once, one whose
   * reservation is in flight as soon as the store answers (it is never sent, and a channel it
   * took is given back). False if no call of that id waits here (unknown, or being sent).
   */
  cancel(callId: string): boolean {
    const call = this.calls.get(callId);
    if (!call) return false;
    if (call.state === 'reserving') {
      call.cancelled = true;
      return true;
    }
    if (call.state !== 'holding') return false;
    this.endHeld(call, 'cancelled');
    return true;
  }

  /**
   * Stop taking calls (later ones end `failed` / `closed`) and resolve once every accepted call
   * has ended. `drain` (default): held calls are sent at their slot. `cancel`: held calls end
   * `cancelled` / `closed` at once. A `cancel` close may follow a `drain` close still in progress.
   */
  close(opts: { mode?: 'drain' | 'cancel' } = {}): Promise<void> {
    const mode = opts.mode ?? 'drain';
    try {
      checkCloseMode(mode);
    } catch (err) {
      return Promise.reject(err);
    }
    this.closed = true;
    if (mode === 'cancel') {
      this.cancelling = true;
      for (const call of [...this.calls.values()]) if (call.state === 'holding') this.endHeld(call, 'closed');
    }
    if (this.calls.size === 0) return Promise.resolve();
    // the hold timers do not keep the process alive, and on the memory store nothing else may:
    // a process awaiting close() would exit with its held calls never sent
    const release = this.clock.keepAlive?.();
    return new Promise<void>((resolve) =>
      this.idleWaiters.push(() => {
        release?.();
        resolve();
      }),
    );
  }

  // ---------------------------------------------------------------------------------------------

  /**
   * The route as the store sees it: its configured carriers, in order. A carrier named twice is
   * tried twice, as the contract reads ("for each carrier in order"); it is refused again (its
   * state did not change) and listed twice in rerouted_from.
   */
  private plan(route: readonly string[]): Route {
    const configured = this.carriers();
    const ids: string[] = [];
    const carriers: Carrier[] = [];
    let skipped: string[] | undefined;
    for (const id of route) {
      const cfg = configured.get(id);
      if (!cfg) {
        (skipped ??= []).push(id);
        continue;
      }
      ids.push(id);
      this.routed.add(id);
      const carrier = { name: carrierName(id), intervalUs: cfg.intervalUs, cps: cfg.cps, maxWaitUs: cfg.maxWaitUs };
      carriers.push(cfg.channels === undefined ? carrier : { ...carrier, channels: cfg.channels });
    }
    return skipped ? { ids, carriers, skipped } : { ids, carriers };
  }

  private async decide(input: DispatchInput, route: Route): Promise<Decision> {
    const clockNow = this.clock.now();
    const now = input.at ?? clockNow;
    // The holding time base: the clock when it has one, else the process clock (store-time mode).
    const timeBase = clockNow === undefined ? systemClockUs : () => this.clock.now() ?? systemClockUs();
    if (route.carriers.length === 0) {
      const at = now ?? systemClockUs();
      return { reservation: this.rejected(input.callId, [], at, route.skipped), target: 0, now: timeBase };
    }
    const hold = { id: input.callId, forUs: input.durationUs ?? this.maxCallDurationUs() };
    const reserve = (signal?: StopSignal) => {
      const reserved = this.store.reserve({ route: route.carriers, now, hold, signal });
      // Redis ran it in time but its answer was read after the deadline: the call already ended
      // (failed, store-unavailable) or the caller got an error, so the carrier channel Redis
      // reserved for it is given back (a retry of the id sent after this answer lands after it)
      reserved.then(
        (r) => {
          if (signal?.aborted !== true || r.index < 0) return;
          // a dispatch of the same id since (a retry: this one has ended) was sent before this
          // answer was read and holds the channel now
          if (this.calls.has(input.callId)) return;
          this.store
            .release({ id: input.callId, direction: 'out', now })
            .catch((err: unknown) => this.events.safeEmit('error', err as Error));
        },
        () => undefined,
      );
      return reserved;
    };
    const res: ReserveResult = await (this.store.kind === 'memory' ? reserve() : withDeadline(reserve, this.timeoutMs));
    if (res.index < 0)
      return { reservation: this.rejected(input.callId, route.ids, res.now, route.skipped), target: 0, now: timeBase };
    const dispatched: Reservation = {
      callId: input.callId,
      direction: 'out',
      outcome: 'dispatched',
      carrier: route.ids[res.index]!,
      delayMs: Math.round(res.waitUs) / 1000,
      reroutedFrom: route.ids.slice(0, res.index),
      at: res.now,
      slotAt: res.slotUs,
      waitUs: res.waitUs,
    };
    const reservation = route.skipped ? { ...dispatched, skipped: route.skipped } : dispatched;
    const target = clockNow === undefined ? systemClockUs() + res.waitUs : res.slotUs;
    return { reservation, target, now: timeBase };
  }

  private rejected(callId: string, tried: string[], at: number, skipped: string[] | undefined): Reservation {
    const r: Reservation = {
      callId,
      direction: 'out',
      outcome: 'rejected',
      carrier: null,
      delayMs: null,
      reroutedFrom: tried,
      reason: 'all-routes-congested',
      at,
    };
    return skipped ? { ...r, skipped } : r;
  }

  private onDecision(
    call: Call,
    decision: Decision,
    send: SendFn | undefined,
    onReserved: ((r: Reservation) => void) | undefined,
  ): void {
    const r = decision.reservation;
    call.reservation = r;
    if (onReserved) {
      try {
        onReserved(r);
      } catch (err) {
        this.events.safeEmit('error', toError(err));
      }
    }
    if (r.outcome === 'rejected') {
      if (r.reroutedFrom.length > 1)
        this.events.safeEmit('rerouted', { callId: r.callId, from: [...r.reroutedFrom], to: null });
      if (call.cancelled) this.finish(call, 'cancelled', this.decided(r, { reason: 'cancelled' }));
      else this.finish(call, 'rejected', this.decided(r, { reason: 'all-routes-congested' }));
      return;
    }
    if (r.reroutedFrom.length > 0)
      this.events.safeEmit('rerouted', { callId: r.callId, from: [...r.reroutedFrom], to: r.carrier });
    if (call.cancelled || this.cancelling) {
      this.giveBack(call.callId);
      this.finish(call, 'cancelled', this.decided(r, { reason: call.cancelled ? 'cancelled' : 'closed' }));
      return;
    }
    call.state = 'holding';
    this.holding++;
    this.arm(call, decision, send);
  }

  /** Hold until `target` on the decision's time base (re-arm a timer that fired early), then join the carrier's lane. */
  private arm(call: Call, decision: Decision, send: SendFn | undefined): void {
    if (decision.now() >= decision.target) {
      this.due({ call, decision, send });
      return;
    }
    call.cancelTimer = this.clock.setTimer(decision.target, () => {
      call.cancelTimer = undefined;
      if (call.done || call.state !== 'holding') return;
      this.arm(call, decision, send);
    });
  }

  /** A held call whose time came: it waits in its carrier's lane, in target order, for the wire spacing. */
  private due(d: Due): void {
    const carrier = d.decision.reservation.carrier!;
    let lane = this.lanes.get(carrier);
    if (lane === undefined) this.lanes.set(carrier, (lane = { waiting: [] }));
    const waiting = lane.waiting;
    let i = waiting.length;
    while (i > 0 && waiting[i - 1]!.decision.target > d.decision.target) i--;
    waiting.splice(i, 0, d);
    const l = lane;
    d.call.cancelTimer = () => {
      const j = l.waiting.indexOf(d);
      if (j >= 0) l.waiting.splice(j, 1);
      if (l.waiting.length === 0) l.cancelTimer?.();
    };
    this.pump(carrier, lane);
  }

  /** Send the lane's calls one per 1/cps (as configured now) after its last send, however late that one left. */
  private pump(carrier: string, lane: Lane): void {
    lane.cancelTimer?.();
    lane.cancelTimer = undefined;
    while (lane.waiting.length > 0) {
      const head = lane.waiting[0]!;
      const next =
        lane.lastSent === undefined ? -Infinity : lane.lastSent + (this.carriers().get(carrier)?.intervalUs ?? 0);
      if (head.decision.now() < next) {
        lane.cancelTimer = this.clock.setTimer(next, () => {
          lane.cancelTimer = undefined;
          this.pump(carrier, lane);
        });
        return;
      }
      lane.waiting.shift();
      head.call.cancelTimer = undefined;
      this.fire(head.call, head.decision, head.send);
    }
  }

  private fire(call: Call, decision: Decision, send: SendFn | undefined): void {
    call.state = 'sending';
    this.holding--;
    const r = decision.reservation;
    const sentAt = decision.now();
    const lane = this.lanes.get(r.carrier!)!;
    lane.lastSent = sentAt;
    lane.lastCall = call;
    // the send's end, while it is the carrier's last one: the next send counts from then
    const settled = () => {
      if (lane.lastCall === call) lane.lastSent = Math.max(sentAt, decision.now());
    };
    if (!send) {
      this.finish(call, 'dispatched', this.decided(r, { sentAt }));
      return;
    }
    let outcome: Promise<unknown>;
    let pending = false; // send returned a promise: it ends when that settles, else on return
    try {
      const value = send(r.carrier!);
      pending = typeof (value as PromiseLike<unknown> | null | undefined)?.then === 'function';
      outcome = Promise.resolve(value);
    } catch (err) {
      outcome = Promise.reject(err);
    }
    if (!pending) settled();
    if (this.sendTimeoutMs > 0 && Number.isFinite(this.sendTimeoutMs)) {
      const ms = this.sendTimeoutMs;
      outcome = new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`send did not settle within ${ms} ms`)), ms);
        timer.unref();
        outcome.then(
          (v) => {
            clearTimeout(timer);
            resolve(v);
          },
          (e) => {
            clearTimeout(timer);
            reject(e);
          },
        );
      });
    }
    outcome.then(
      () => {
        if (pending) settled();
        this.finish(call, 'dispatched', this.decided(r, { sentAt }));
      },
      (err) => {
        if (pending) settled();
        this.giveBack(call.callId);
        this.finish(call, 'failed', this.decided(r, { sentAt, reason: 'send-failed', error: toError(err) }));
      },
    );
  }

  /** End a held call (cancel() or close cancel). */
  private endHeld(call: Call, reason: 'cancelled' | 'closed'): void {
    call.cancelTimer?.();
    call.cancelTimer = undefined;
    this.holding--;
    this.giveBack(call.callId);
    this.finish(call, 'cancelled', this.decided(call.reservation!, { reason }));
  }

  /**
   * A call that will not go out gives back the channel it holds on its carrier (if any: the store
   * knows). Not awaited: the call ends now; a failure is reported on 'error' and the hold lapses.
   */
  private giveBack(callId: string): void {
    // on the engine's clock (a virtual one in replay), else the store's
    const back = this.store.release({ id: callId, direction: 'out', now: this.clock.now() }).then(
      (r) => r.released > 0,
      (err: unknown) => {
        this.events.safeEmit('error', toError(err));
        return false;
      },
    );
    this.givenBack.set(callId, back);
    void back.then(() => {
      if (this.givenBack.get(callId) === back) this.givenBack.delete(callId);
    });
  }

  /** Per call id, a give-back under way (giveBack): whether it freed a channel. */
  private readonly givenBack = new Map<string, Promise<boolean>>();

  /**
   * The give-back under way of the call `callId` ended here (cancel() of a held call, a send
   * that failed): whether it freed a carrier channel; undefined when none is under way. A
   * release right behind a cancel() answers `released` by it, not `not-held` (the channel was
   * given back, by the cancel).
   */
  givingBack(callId: string): Promise<boolean> | undefined {
    return this.givenBack.get(callId);
  }

  private decided(
    r: Reservation,
    extra: Partial<DispatchResult>,
  ): Omit<DispatchResult, 'callId' | 'direction' | 'outcome'> {
    const base: Omit<DispatchResult, 'callId' | 'direction' | 'outcome'> = {
      carrier: r.carrier,
      delayMs: r.delayMs,
      reroutedFrom: [...r.reroutedFrom],
      ...(r.skipped && { skipped: [...r.skipped] }),
      at: r.at,
    };
    return r.slotAt === undefined ? { ...base, ...extra } : { ...base, slotAt: r.slotAt, waitUs: r.waitUs, ...extra };
  }

  private finish(
    call: Call,
    outcome: DispatchOutcome,
    rest: Omit<DispatchResult, 'callId' | 'direction' | 'outcome'>,
  ): void {
    if (call.done) return;
    call.done = true;
    this.calls.delete(call.callId);
    const result: DispatchResult = { callId: call.callId, direction: 'out', outcome, ...rest };
    this.events.safeEmit(outcome, result);
    call.resolve(result);
    if (this.calls.size === 0 && this.idleWaiters.length > 0) {
      const waiters = this.idleWaiters;
      this.idleWaiters = [];
      for (const w of waiters) w();
    }
  }
}
