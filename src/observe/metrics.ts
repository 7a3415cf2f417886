/**
 * Prometheus metrics for a CallGate (prom-client), opt-in: `gateMetrics(gate)` subscribes to the
 * gate's events and fills a registry that any embedder exposes as it likes; `callgate serve`
 * serves it at /metrics. Names and labels follow Prometheus' conventions (snake_case, `_total`
 * counters, seconds). Every label's values are bounded (README "Metrics" lists them):
 *
 *   callgate_decisions_total{direction, outcome, limited_by, reason}
 *       direction in|out; outcome admitted|rejected|recorded (in), dispatched|rejected|failed (out);
 *       limited_by: the kind of level that refused (global, account, peer, the name of an
 *       attribute level, unknown-peer, store-unavailable) or none; with `perBucket`, `account:<id>` / `peer:<id>` for the ids of
 *       the configuration (a peer on defaultPeer stays `peer`); reason rate|channels|banned|
 *       all-routes-congested|store-unavailable|none
 *   callgate_decision_duration_seconds{operation}   histogram; admit|record|reserve|dispatch
 *   callgate_store_errors_total{operation}          decisions the store did not answer in time
 *   callgate_degraded_decisions_total{policy}       decisions taken by the policy instead
 *   callgate_lease_spilled_total                    inbound calls admitted through a leased level's
 *       overflow lane (docs/leasing.md): two more script calls each
 *   callgate_calls_held                             calls this process holds for their slot
 *   callgate_carrier_decisions_total{carrier, outcome}   per carrier tried: dispatched (it took
 *       the call), rerouted (passed over, a later carrier took it), rejected (passed over, none did)
 *   callgate_carrier_wait_seconds{carrier}          histogram of the wait given with each slot
 *   callgate_route_carriers_skipped_total         route ids that are not configured carriers, left
 *       out of a decision (no label: the ids come from callers; each decision names them in `skipped`)
 *   callgate_config_reloads_total
 *   callgate_releases_total{outcome}                released | not-held | deferred
 *   callgate_store_loss_detected_total{cause}       the store lost this process's holds: reconnect
 *       (found missing after a lost connection) | marker (a tag's generation marker changed)
 *   callgate_holds_reasserted_total                 holds written again after a loss
 *   callgate_holds_released_elsewhere_total         ledger calls found released by another process
 *
 * and, read from the store at each scrape when `live` is given (one read-only store call):
 *
 *   callgate_channels_in_use{bucket}, callgate_carrier_channels_in_use{carrier},
 *   callgate_carrier_queue_wait_seconds{carrier}
 *
 * Carriers are those of the configuration (a route's unknown ids are never tried); buckets are
 * the configured global, accounts and peers with a channel limit.
 */
import { Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { AdmissionDecision } from '../admission/admission.js';
import type { DispatchResult, Reservation } from '../dispatch/dispatcher.js';
import { StoreUnavailableError } from '../errors/index.js';
import type { CallGate, DecisionTiming } from '../gate.js';
import type { HoldsReassertedEvent, StoreLossEvent } from '../store/types.js';
import { inspectGate } from './inspect.js';
import { OPERATOR_TIMEOUT_MS, withDeadline } from '../store/timeout.js';

export interface MetricsOptions {
  /** Where the metrics go (default: a new Registry). */
  readonly registry?: Registry;
  /** Name prefix (default `callgate_`). */
  readonly prefix?: string;
  /** limited_by with the configured account and peer ids (default: the kind of level only). */
  readonly perBucket?: boolean;
  /** Decision latency buckets, seconds. */
  readonly latencyBuckets?: number[];
  /** Carrier wait buckets, seconds. */
  readonly waitBuckets?: number[];
  /**
   * Live gauges, read at each scrape: channels in use per bucket and carrier, each carrier's
   * queue wait (e.g. from inspect()).
   */
  readonly live?: () => Promise<LiveState>;
}

/** What the live gauges show, as read from the store at scrape time. */
export interface LiveState {
  readonly buckets: readonly { readonly bucket: string; readonly channelsInUse?: number }[];
  readonly carriers: readonly { readonly carrier: string; readonly waitMs: number; readonly channelsInUse?: number }[];
}

/** The live gauges read from the gate's store at each scrape (inspect; one read-only store call). */
export function inspectLive(gate: CallGate): () => Promise<LiveState> {
  return async () => {
    // the gauges show channels in use: the buckets without a channel limit are not read
    const s = await inspectGate(gate, { channelsOnly: true });
    return {
      buckets: s.buckets.map((b) => ({ bucket: b.bucket, channelsInUse: b.channels?.in_use })),
      carriers: s.carriers.map((c) => ({
        carrier: c.carrier,
        waitMs: c.queue_wait_ms,
        channelsInUse: c.channels?.in_use,
      })),
    };
  };
}

export const DEFAULT_LATENCY_BUCKETS = [
  0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1,
];
export const DEFAULT_WAIT_BUCKETS = [0, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

export interface GateMetrics {
  readonly registry: Registry;
  /** Stop listening to the gate (the registry keeps what it has). */
  close(): void;
}

/** The kind of a `limited_by` value (or the configured id, with perBucket). */
function levelLabel(gate: CallGate, limitedBy: string | undefined, perBucket: boolean): string {
  if (limitedBy === undefined) return 'none';
  const colon = limitedBy.indexOf(':');
  if (colon < 0) return limitedBy;
  const kind = limitedBy.slice(0, colon);
  if (!perBucket) return kind;
  const id = limitedBy.slice(colon + 1);
  // an attribute level's values are never a label (unbounded): its name only
  const configured =
    kind === 'account' ? gate.config.inbound.accounts.has(id) : kind === 'peer' && gate.config.inbound.peers.has(id);
  return configured ? limitedBy : kind;
}

export function gateMetrics(gate: CallGate, opts: MetricsOptions = {}): GateMetrics {
  const registry = opts.registry ?? new Registry();
  const p = opts.prefix ?? 'callgate_';
  const perBucket = opts.perBucket ?? false;
  const registers = [registry];

  const decisions = new Counter({
    name: `${p}decisions_total`,
    help: 'Decisions by direction, outcome, the kind of level that refused and why',
    labelNames: ['direction', 'outcome', 'limited_by', 'reason'] as const,
    registers,
  });
  const latency = new Histogram({
    name: `${p}decision_duration_seconds`,
    help: 'Time to decide, from the call to the engine to its answer',
    labelNames: ['operation'] as const,
    buckets: opts.latencyBuckets ?? DEFAULT_LATENCY_BUCKETS,
    registers,
  });
  const storeErrors = new Counter({
    name: `${p}store_errors_total`,
    help: 'Decisions whose store call failed or timed out',
    labelNames: ['operation'] as const,
    registers,
  });
  const skipped = new Counter({
    name: `${p}route_carriers_skipped_total`,
    help: 'Route carrier ids that are not configured, left out of an outbound decision (a typo, or removed by a reload)',
    registers,
  });
  const degraded = new Counter({
    name: `${p}degraded_decisions_total`,
    help: 'Inbound decisions taken by the store-trouble policy instead of the store',
    labelNames: ['policy'] as const,
    registers,
  });
  const spilled = new Counter({
    name: `${p}lease_spilled_total`,
    help: "Inbound calls admitted through the leased global level's overflow lane (two more script calls each)",
    registers,
  });
  new Gauge({
    name: `${p}calls_held`,
    help: 'Outbound calls held in this process, waiting for their slot',
    registers,
    collect() {
      this.set(gate.held);
    },
  });
  const carrierDecisions = new Counter({
    name: `${p}carrier_decisions_total`,
    help: 'Per carrier tried: dispatched (took the call), rerouted (passed over, a later carrier took it), rejected (passed over, none did)',
    labelNames: ['carrier', 'outcome'] as const,
    registers,
  });
  const carrierWait = new Histogram({
    name: `${p}carrier_wait_seconds`,
    help: 'Wait given with each slot: how long the call is held before it is sent',
    labelNames: ['carrier'] as const,
    buckets: opts.waitBuckets ?? DEFAULT_WAIT_BUCKETS,
    registers,
  });
  const reloads = new Counter({
    name: `${p}config_reloads_total`,
    help: 'Configurations applied by reload',
    registers,
  });
  const releases = new Counter({
    name: `${p}releases_total`,
    help: 'Calls whose end was reported: released (held channels), not-held (nothing held any more), deferred (store out of reach, retried)',
    labelNames: ['outcome'] as const,
    registers,
  });

  const losses = new Counter({
    name: `${p}store_loss_detected_total`,
    help: "The store lost holds of this process's calls (a Redis restart or failover), by what showed it: reconnect or marker",
    labelNames: ['cause'] as const,
    registers,
  });
  const reasserted = new Counter({
    name: `${p}holds_reasserted_total`,
    help: "Holds of this process's calls written again after the store lost them",
    registers,
  });
  const goneElsewhere = new Counter({
    name: `${p}holds_released_elsewhere_total`,
    help: "Calls of this process's ledger found released by another process (checked by the periodic sync)",
    registers,
  });

  if (opts.live) {
    const live = opts.live;
    // one store read per scrape, shared by the three gauges of that scrape
    let pending: Promise<LiveState> | undefined;
    const read = (): Promise<LiveState> => {
      // a store out of reach shows no live series rather than failing the whole scrape
      // (bounded: a stalled Redis answers nothing, and the scrape would time out, the target read as down)
      pending ??= withDeadline(live, OPERATOR_TIMEOUT_MS)
        .catch((): LiveState => ({ buckets: [], carriers: [] }))
        .finally(() => setImmediate(() => (pending = undefined)));
      return pending;
    };
    new Gauge({
      name: `${p}channels_in_use`,
      help: 'Calls holding a channel, per configured bucket with a channel limit',
      labelNames: ['bucket'] as const,
      registers,
      async collect() {
        this.reset();
        for (const b of (await read()).buckets)
          if (b.channelsInUse !== undefined) this.set({ bucket: b.bucket }, b.channelsInUse);
      },
    });
    new Gauge({
      name: `${p}carrier_channels_in_use`,
      help: 'Calls holding a channel, per configured carrier with a channel limit',
      labelNames: ['carrier'] as const,
      registers,
      async collect() {
        this.reset();
        for (const c of (await read()).carriers)
          if (c.channelsInUse !== undefined) this.set({ carrier: c.carrier }, c.channelsInUse);
      },
    });
    new Gauge({
      name: `${p}carrier_queue_wait_seconds`,
      help: 'Wait a call arriving now would get on each configured carrier',
      labelNames: ['carrier'] as const,
      registers,
      async collect() {
        this.reset();
        for (const c of (await read()).carriers) this.set({ carrier: c.carrier }, c.waitMs / 1000);
      },
    });
  }

  const inbound = (d: AdmissionDecision, operation: 'admit' | 'record') => {
    const reason = (d as { reason?: string }).reason;
    if (operation === 'record')
      decisions.inc({ direction: 'in', outcome: 'recorded', limited_by: 'none', reason: 'none' });
    else {
      decisions.inc({
        direction: 'in',
        outcome: d.admitted ? 'admitted' : 'rejected',
        limited_by: d.admitted ? 'none' : levelLabel(gate, d.limitedBy, perBucket),
        reason: reason ?? (d.limitedBy === 'store-unavailable' ? 'store-unavailable' : 'none'),
      });
      if (d.spilledAt !== undefined) spilled.inc();
    }
    if (d.degraded !== undefined) {
      degraded.inc({ policy: d.degraded });
      storeErrors.inc({ operation });
    }
  };

  const outbound = (r: Reservation) => {
    decisions.inc({ direction: 'out', outcome: r.outcome, limited_by: 'none', reason: r.reason ?? 'none' });
    if (r.skipped !== undefined) skipped.inc(r.skipped.length);
    const passed = r.outcome === 'dispatched' ? 'rerouted' : 'rejected';
    for (const c of r.reroutedFrom) carrierDecisions.inc({ carrier: c, outcome: passed });
    if (r.carrier !== null) {
      carrierDecisions.inc({ carrier: r.carrier, outcome: 'dispatched' });
      carrierWait.observe({ carrier: r.carrier }, (r.delayMs ?? 0) / 1000);
    }
  };

  const onDecided = (t: DecisionTiming) => {
    latency.observe({ operation: t.operation }, t.seconds);
    if (t.decision !== undefined) {
      if (t.decision.direction === 'out') outbound(t.decision);
      else inbound(t.decision, t.operation as 'admit' | 'record');
    } else if (t.error instanceof StoreUnavailableError) {
      storeErrors.inc({ operation: t.operation });
      if (t.operation === 'reserve')
        decisions.inc({ direction: 'out', outcome: 'failed', limited_by: 'none', reason: 'store-unavailable' });
    }
  };
  // dispatch(): a store failure ends the call before any reservation
  const onFailed = (r: DispatchResult) => {
    if (r.reason !== 'store-unavailable') return;
    storeErrors.inc({ operation: 'dispatch' });
    decisions.inc({ direction: 'out', outcome: 'failed', limited_by: 'none', reason: 'store-unavailable' });
  };
  const onReloaded = () => reloads.inc();
  // a deferred release is announced again when it lands: count the first answer only
  const deferred = new Set<string>();
  const onReleased = (e: { callId: string; outcome: string }) => {
    if (e.outcome === 'deferred') {
      if (deferred.size >= 100_000) deferred.clear(); // bounded: the engine keeps at most as many
      deferred.add(e.callId);
    } else if (deferred.delete(e.callId)) return;
    releases.inc({ outcome: e.outcome });
  };
  const onLoss = (e: StoreLossEvent) => losses.inc({ cause: e.cause });
  const onReasserted = (e: HoldsReassertedEvent) => {
    if (e.reasserted > 0) reasserted.inc(e.reasserted);
    if (e.gone > 0) goneElsewhere.inc(e.gone);
  };
  gate.on('decided', onDecided);
  gate.on('released', onReleased);
  gate.on('storeLoss', onLoss);
  gate.on('holdsReasserted', onReasserted);
  gate.on('failed', onFailed);
  gate.on('reloaded', onReloaded);

  return {
    registry,
    close() {
      gate.off('decided', onDecided);
      gate.off('failed', onFailed);
      gate.off('reloaded', onReloaded);
      gate.off('released', onReleased);
      gate.off('storeLoss', onLoss);
      gate.off('holdsReasserted', onReasserted);
    },
  };
}
