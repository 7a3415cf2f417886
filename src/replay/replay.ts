/**
 * Replay: every call of a trace through the engine (admission and dispatch), in trace time on a
 * virtual clock, so a day of traffic takes seconds. Decisions come out in processing order
 * (time order; equal times keep file order), exactly as the contract's "Decisions" says.
 *
 * The trace is validated in a first streaming pass: a bad trace stops the replay before any
 * decision is made. A sorted trace then streams (flat memory); an unsorted one is sorted in runs
 * spilled to temporary files and merged (time-order.ts: bounded memory too).
 */
import type { AdmissionDecision } from '../admission/admission.js';
import { VirtualClock } from '../clock.js';
import type { BucketConfig, CallGateConfig } from '../config/types.js';
import type { Reservation } from '../dispatch/dispatcher.js';
import { type DecisionLine, inboundLine, outboundLine } from '../decision-line.js';
import { CallGate } from '../gate.js';
import type { Store } from '../store/types.js';
import type { ReplaySeries } from './series.js';
import { carriersPassed, newCarrier, newLevel, type CarrierStats, type LevelStats } from './stats.js';
import { TraceError } from '../errors/trace-error.js';
import { inboundHolds, RowIds } from './row-ids.js';
import { TopValues } from './top-values.js';
import { readTrace, refuseUnreadableTwice, validateTrace, type TraceCall } from './trace.js';
import { inTimeOrder } from './time-order.js';
import { PeerTagCheck } from './peer-tags.js';

export type { DecisionLine };

export interface ReplayOptions {
  readonly config: CallGateConfig;
  readonly tracePath: string;
  readonly store: Store;
  /** Called with each decision, in processing order; a returned promise is awaited (backpressure). */
  readonly onDecision?: (d: DecisionLine) => void | Promise<void>;
  /** Called every `progressEvery` calls with (done, total). */
  readonly onProgress?: (done: number, total: number) => void;
  readonly progressEvery?: number;
  /** Stops the replay (at the latest at the next row or call): it then rejects with the signal's reason. */
  readonly signal?: AbortSignal;
  /** Fed with every decision when given: the time series of the HTML report. */
  readonly series?: ReplaySeries;
  /** An unsorted trace is sorted in runs of this many rows (default DEFAULT_RUN_ITEMS, time-order.ts). */
  readonly sortRunRows?: number;
}

export interface ReplayResult {
  readonly calls: number;
  readonly inbound: {
    offered: number;
    admitted: number;
    rejected: number;
    /** Rejections by `limited_by`. */
    byReason: Map<string, number>;
    /** Rejections by a level, by kind of limit. */
    byKind: { rate: number; channels: number; banned: number };
  };
  readonly outbound: { offered: number; dispatched: number; rejected: number; rerouted: number };
  /** Keys: `global`, `account:<id>`, `peer:<id>` (as in limited_by). */
  readonly levels: Map<string, LevelStats>;
  /** Refusals named by attribute levels, per level and value (bounded: top-values.ts). */
  readonly attributes: TopValues;
  readonly carriers: Map<string, CarrierStats>;
  readonly elapsedMs: number;
  readonly firstUs?: number;
  readonly lastUs?: number;
  readonly sorted: boolean;
  readonly store: string;
}

/**
 * Dispatch one call held on the virtual clock under id `callId`: its decision is known as soon as
 * the store answers; its send happens later, when the clock passes its slot.
 */
function dispatchHeld(
  gate: CallGate,
  call: TraceCall,
  callId: string,
  sent: (carrier: string, at: number) => void,
): { reserved: Promise<Reservation>; ended: Promise<unknown> } {
  const input = { callId, route: call.route!, at: call.time, durationUs: call.durationUs };
  let ended: Promise<unknown> = Promise.resolve();
  const reserved = new Promise<Reservation>((resolve, reject) => {
    let reservedYet = false;
    ended = gate
      .dispatch(input, (carrier) => sent(carrier, gate.clock.now()!), {
        onReserved: (r) => {
          reservedYet = true;
          resolve(r);
        },
      })
      .then((result) => {
        if (!reservedYet)
          reject(
            result.error ?? new Error(`call ${callId} ended ${result.outcome} (${result.reason}) before a decision`),
          );
      }, reject);
  });
  return { reserved, ended };
}

export async function replay(opts: ReplayOptions): Promise<ReplayResult> {
  const { signal } = opts;
  signal?.throwIfAborted();
  refuseUnreadableTwice(opts.tracePath, 'a replay reads its trace twice');
  const tags = opts.store.hashTags === true ? new PeerTagCheck(opts.config, opts.tracePath) : undefined;
  const check = await validateTrace(opts.tracePath, { signal, ...(tags && { onCall: tags.see }) });
  if (check.problems.length > 0) throw new TraceError(check.problems, check.problemCount);
  if (tags?.problem !== undefined) throw new TraceError([tags.problem]);
  const started = performance.now();
  const clock = new VirtualClock(check.first ?? 0);
  // a replay on a store that fails must stop, not turn the failure into decisions
  const gate = new CallGate({ config: opts.config, store: opts.store, clock, policy: 'error', timeoutMs: 30_000 });
  const { inbound: cfgIn, outbound: cfgOut } = opts.config;
  const series = opts.series;

  const inbound = {
    offered: 0,
    admitted: 0,
    rejected: 0,
    byReason: new Map<string, number>(),
    byKind: { rate: 0, channels: 0, banned: 0 },
  };
  const outbound = { offered: 0, dispatched: 0, rejected: 0, rerouted: 0 };
  const attributes = new TopValues();
  const attributeLevels = new Set((cfgIn.attributes ?? []).map((l) => l.name));
  const levels = new Map<string, LevelStats>();
  const carriers = new Map<string, CarrierStats>();
  const level = (key: string, bucket: () => BucketConfig | undefined): LevelStats => {
    let s = levels.get(key);
    if (!s) levels.set(key, (s = newLevel(bucket())));
    return s;
  };
  const carrier = (id: string): CarrierStats => {
    let s = carriers.get(id);
    if (!s) {
      const cfg = cfgOut.carriers.get(id)!;
      carriers.set(id, (s = newCarrier(cfg.intervalUs, cfg.channels)));
    }
    return s;
  };
  // how long a call holds its channels: its duration, else until maxCallDuration
  const holdUs = (call: TraceCall): number => call.durationUs ?? opts.config.maxCallDurationUs;
  for (const id of cfgOut.carriers.keys()) carrier(id);

  const onInbound = (call: TraceCall, d: AdmissionDecision): void => {
    inbound.offered++;
    const touched: [string, LevelStats][] = [];
    const touch = (key: string, bucket: () => BucketConfig | undefined) => touched.push([key, level(key, bucket)]);
    if (d.limitedBy !== 'unknown-peer') {
      if (cfgIn.global) touch('global', () => cfgIn.global);
      const acc = call.account !== undefined ? cfgIn.accounts.get(call.account) : undefined;
      if (acc) touch(`account:${call.account}`, () => acc);
      touch(`peer:${call.peer}`, () => cfgIn.peers.get(call.peer!) ?? cfgIn.defaultPeer);
    }
    series?.inboundCall(d.at, d.admitted);
    for (const [key, s] of touched) {
      s.offered++;
      let counts: number[] | undefined;
      if (d.admitted) {
        s.admitted++;
        counts = s.peaks.map((peak) => peak.add(d.at));
        s.channels?.add(d.at, d.at + holdUs(call), series && ((at, n) => series.levelChannel(key, at, n)));
      } else s.rejected++;
      series?.levelCall(key, s.peaks.length, d.at, d.admitted ? 'admitted' : 'rejected', counts);
    }
    if (d.admitted) inbound.admitted++;
    else {
      inbound.rejected++;
      // an attribute level's refusals count under its name (its values: unbounded), each value in `attributes`
      let by = d.limitedBy!;
      const colon = by.indexOf(':');
      if (colon > 0 && attributeLevels.has(by.slice(0, colon))) {
        attributes.add(by.slice(0, colon), by.slice(colon + 1), d.reason === 'banned');
        by = by.slice(0, colon);
      }
      inbound.byReason.set(by, (inbound.byReason.get(by) ?? 0) + 1);
      if (d.reason !== undefined) inbound.byKind[d.reason]++;
    }
  };

  /** `end`: a dispatched call's hold end (outEnd), unused otherwise. */
  const onOutbound = (r: Reservation, end: number): void => {
    outbound.offered++;
    series?.outboundCall(r.at, r);
    const passed = carriersPassed(r.reroutedFrom);
    for (const id of passed) carrier(id).reroutedAway++;
    if (r.reroutedFrom.length > 0) outbound.rerouted++;
    if (r.outcome === 'dispatched') {
      outbound.dispatched++;
      const s = carrier(r.carrier!);
      s.dispatched++;
      s.delays.add(Math.round((r.delayMs ?? 0) * 1000));
      if (!Number.isNaN(s.lastSlot)) s.minSpacingUs = Math.min(s.minSpacingUs, r.slotAt! - s.lastSlot);
      s.lastSlot = r.slotAt!;
      s.channels?.add(r.at, end, series && ((at, n) => series.carrierChannel(r.carrier!, at, n)));
    } else {
      outbound.rejected++;
      for (const id of passed) carrier(id).rejected++;
    }
  };

  /** Sends seen on the virtual clock: the spacing actually achieved on each carrier. */
  const sent = (id: string, at: number): void => {
    const s = carrier(id);
    if (!Number.isNaN(s.lastSent)) s.minSentSpacingUs = Math.min(s.minSentSpacingUs, at - s.lastSent);
    s.lastSent = at;
  };

  // each row a call of its own (row-ids.ts)
  const ids = new RowIds();
  /** Per outbound id, its dispatch until it has ended (sent): the dispatcher's id until then. */
  const ending = new Map<string, Promise<unknown>>();
  const inHolds = inboundHolds(opts.config);
  // a dispatched call's hold ends as the stores end it: its slot rounded up to a whole µs, plus
  // its duration (src/store/slots.ts). From the exact wait, not the slot: as one number of µs
  // the slot is within a quarter-µs of the stores' exact one, and its ceiling could be a µs
  // short, so an id given again at the hold's last µs was taken as free
  const outEnd = (call: TraceCall, r: Reservation): number => r.at + Math.ceil(r.waitUs!) + holdUs(call);
  const read = readTrace(opts.tracePath, { signal });
  const calls = check.sorted ? read : inTimeOrder(read, (c) => c.time, { chunkRows: opts.sortRunRows });
  const every = opts.progressEvery ?? 10_000;
  let done = 0;
  let closed = false;
  try {
    for await (const call of calls) {
      signal?.throwIfAborted(); // a sort reads its whole input before the first call
      clock.advance(call.time);
      if (call.direction === 'in') {
        const callId = ids.idFor('in', call.callId, call.time);
        const d = await gate.admit({
          callId,
          peer: call.peer!,
          account: call.account,
          at: call.time,
          durationUs: call.durationUs,
          caller: call.caller,
          callee: call.callee,
          source: call.source,
        });
        if (d.admitted && inHolds) ids.held('in', callId, d.at + holdUs(call), d.at);
        onInbound(call, d);
        const wait = opts.onDecision?.({ ...inboundLine(d, call.time), call_id: call.callId });
        if (wait) await wait;
      } else {
        const callId = ids.idFor('out', call.callId, call.time);
        // an earlier row of this id was sent at its slot, before t (else idFor gave another id):
        // the clock fired its send, and its dispatch ends a few microtasks later
        const before = ending.get(callId);
        if (before !== undefined) await before;
        const { reserved, ended } = dispatchHeld(gate, call, callId, sent);
        ending.set(callId, ended);
        const drop = () => ending.get(callId) === ended && ending.delete(callId);
        void ended.then(drop, drop);
        const r = await reserved;
        // held until past its send at its slot (the live dispatcher's one call in flight per id,
        // which a row at the slot's very µs still meets), or as long as it holds a channel
        const end = r.outcome === 'dispatched' ? outEnd(call, r) : 0;
        if (r.outcome === 'dispatched') {
          const sentBy = Math.ceil(r.slotAt!) + 1;
          const holds = cfgOut.carriers.get(r.carrier!)?.channels !== undefined;
          ids.held('out', callId, holds ? Math.max(sentBy, end) : sentBy, r.at);
        }
        onOutbound(r, end);
        const wait = opts.onDecision?.({ ...outboundLine(r, call.time), call_id: call.callId });
        if (wait) await wait;
      }
      if (++done % every === 0) opts.onProgress?.(done, check.calls);
    }
    opts.onProgress?.(done, check.calls);
    if (series) {
      // the ends after the last decision of each level and carrier: the channels in use fall to 0
      for (const [key, s] of levels) s.channels?.drain((at, n) => series.levelChannel(key, at, n));
      for (const [id, s] of carriers) s.channels?.drain((at, n) => series.carrierChannel(id, at, n));
    }
    // let the calls still held reach their slots, then close with nothing pending
    for (let next = clock.nextTimer; next !== undefined; next = clock.nextTimer) clock.advance(next);
    await gate.close({ mode: 'drain' });
    closed = true;
  } finally {
    // on failure: end the held calls; on success the drain above already closed the gate
    if (!closed) await gate.close({ mode: 'cancel' });
  }
  return {
    calls: done,
    inbound,
    outbound,
    levels,
    attributes,
    carriers,
    elapsedMs: performance.now() - started,
    firstUs: check.first,
    lastUs: check.last,
    sorted: check.sorted,
    store: opts.store.kind,
  };
}
