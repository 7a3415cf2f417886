/**
 * What the sidecar answers for a decision: the contract's decision line (decision-line.ts, as the
 * replay writes it) with `time_us` the decision's time, `retry_after_ms` always, what the engine
 * adds (`degraded`, `forced`, `slot_us`) and `sip`: the status, reason phrase and headers the
 * routing process sends back to the caller (null when the call goes on).
 */
import type { AdmissionDecision } from '../admission/admission.js';
import { toSipResponse, type SipOptions } from '../admission/sip.js';
import { type InboundDecisionLine, type OutboundDecisionLine, inboundLine, outboundLine } from '../decision-line.js';
import type { Reservation } from '../dispatch/dispatcher.js';

export interface SipAnswer {
  readonly status: number;
  readonly reason: string;
  readonly headers: Record<string, string>;
}

export interface AdmitAnswer extends InboundDecisionLine {
  retry_after_ms: number;
  degraded?: string;
  forced?: true;
  sip: SipAnswer | null;
}

export interface ReserveAnswer extends Omit<OutboundDecisionLine<Reservation['outcome'] | 'failed'>, 'time_us'> {
  /** Absent when no decision was taken (`failed`). */
  time_us?: number;
  slot_us?: number;
  sip: SipAnswer | null;
}

/** An outbound call no carrier can take, or no decision at all: nobody knows when to retry. */
const OUTBOUND_REFUSED: SipAnswer = { status: 503, reason: 'Service Unavailable', headers: {} };

export function admitAnswer(d: AdmissionDecision, sip: SipOptions): AdmitAnswer {
  const a: Omit<AdmitAnswer, 'sip'> = { ...inboundLine(d, d.at), retry_after_ms: d.retryAfterMs };
  if (d.degraded !== undefined) a.degraded = d.degraded;
  if (d.forced) a.forced = true;
  const r = toSipResponse(d, sip);
  return {
    ...a,
    sip: r
      ? {
          status: r.status,
          reason: r.reason,
          headers: r.retryAfter === undefined ? {} : { 'Retry-After': String(r.retryAfter) },
        }
      : null,
  };
}

export function reserveAnswer(r: Reservation): ReserveAnswer {
  const a: Omit<ReserveAnswer, 'sip'> = outboundLine(r, r.at);
  if (r.slotAt !== undefined) a.slot_us = r.slotAt;
  return { ...a, sip: r.outcome === 'rejected' ? OUTBOUND_REFUSED : null };
}

/**
 * The store did not answer in time: the call is refused (past the timeout its command may still
 * have run on Redis and taken a slot nobody uses; see Dispatcher).
 */
export function reserveFailed(callId: string): ReserveAnswer {
  const line = outboundLine(
    { callId, outcome: 'failed', carrier: null, delayMs: null, reroutedFrom: [], reason: 'store-unavailable' },
    undefined,
  );
  return { ...line, sip: OUTBOUND_REFUSED };
}
