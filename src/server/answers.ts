/**
 * What the sidecar answers for a decision: the contract's decision line (snake_case, as the
 * replay writes it) plus `time_us` and, for a refusal, `sip`: the status, reason phrase and
 * headers the routing process sends back to the caller (null when the call goes on).
 */
import type { AdmissionDecision } from '../admission/admission.js';
import { toSipResponse, type SipOptions } from '../admission/sip.js';
import type { Reservation } from '../dispatch/dispatcher.js';

export interface SipAnswer {
  readonly status: number;
  readonly reason: string;
  readonly headers: Record<string, string>;
}

export interface AdmitAnswer {
  call_id: string;
  direction: 'in';
  outcome: 'admitted' | 'rejected';
  limited_by?: string;
  reason?: string;
  retry_after_ms: number;
  time_us: number;
  degraded?: string;
  forced?: true;
  duplicate?: true;
  sip: SipAnswer | null;
}

export interface ReserveAnswer {
  call_id: string;
  direction: 'out';
  outcome: 'dispatched' | 'rejected' | 'failed';
  carrier: string | null;
  delay_ms: number | null;
  rerouted_from: string[];
  reason?: string;
  time_us?: number;
  slot_us?: number;
  sip: SipAnswer | null;
}

/** An outbound call no carrier can take, or no decision at all: nobody knows when to retry. */
const OUTBOUND_REFUSED: SipAnswer = { status: 503, reason: 'Service Unavailable', headers: {} };

export function admitAnswer(d: AdmissionDecision, sip: SipOptions): AdmitAnswer {
  const extra = d as AdmissionDecision & { reason?: string; duplicate?: boolean };
  const a: AdmitAnswer = {
    call_id: d.callId,
    direction: 'in',
    outcome: d.admitted ? 'admitted' : 'rejected',
    retry_after_ms: d.retryAfterMs,
    time_us: d.at,
    sip: null,
  };
  if (d.limitedBy !== undefined) a.limited_by = d.limitedBy;
  if (extra.reason !== undefined) a.reason = extra.reason;
  if (d.degraded !== undefined) a.degraded = d.degraded;
  if (d.forced) a.forced = true;
  if (extra.duplicate) a.duplicate = true;
  const r = toSipResponse(d, sip);
  if (r)
    a.sip = {
      status: r.status,
      reason: r.reason,
      headers: r.retryAfter === undefined ? {} : { 'Retry-After': String(r.retryAfter) },
    };
  return a;
}

export function reserveAnswer(r: Reservation): ReserveAnswer {
  const a: ReserveAnswer = {
    call_id: r.callId,
    direction: 'out',
    outcome: r.outcome,
    carrier: r.carrier,
    delay_ms: r.delayMs,
    rerouted_from: r.reroutedFrom,
    time_us: r.at,
    sip: r.outcome === 'rejected' ? OUTBOUND_REFUSED : null,
  };
  if (r.reason !== undefined) a.reason = r.reason;
  if (r.slotAt !== undefined) a.slot_us = r.slotAt;
  return a;
}

/**
 * The store did not answer in time: the call is refused (past the timeout its command may still
 * have run on Redis and taken a slot nobody uses; see Dispatcher).
 */
export function reserveFailed(callId: string): ReserveAnswer {
  return {
    call_id: callId,
    direction: 'out',
    outcome: 'failed',
    carrier: null,
    delay_ms: null,
    rerouted_from: [],
    reason: 'store-unavailable',
    sip: OUTBOUND_REFUSED,
  };
}
