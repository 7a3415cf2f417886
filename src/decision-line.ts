/**
 * The contract's decision line (DESIGN "Decisions"): snake_case fields, the contract's fields in
 * the contract's order, then what the contract welcomes besides (`time_us`, `retry_after_ms`,
 * `duplicate`). The replay writes it as JSON Lines; the sidecar answers it with a few fields more
 * (server/answers.ts). Built here only, so that the two never drift apart.
 */
import type { AdmissionDecision } from './admission/admission.js';
import type { Reservation } from './dispatch/dispatcher.js';
import type { RefusalReason } from './store/types.js';

export interface InboundDecisionLine {
  call_id: string;
  direction: 'in';
  outcome: 'admitted' | 'rejected';
  /** On rejections: `global`, `account:<id>`, `peer:<id>`, `unknown-peer` or `store-unavailable`. */
  limited_by?: string;
  /** A repeated admit of a call still holding its channels. */
  duplicate?: true;
  time_us: number;
  /** On rejections. */
  retry_after_ms?: number;
  /** On rejections by a bucket. */
  reason?: RefusalReason;
}

/** `outcome`: the contract's two, or more where the caller has more (the sidecar's `failed`). */
export interface OutboundDecisionLine<Outcome extends string = Reservation['outcome']> {
  call_id: string;
  direction: 'out';
  outcome: Outcome;
  carrier: string | null;
  delay_ms: number | null;
  rerouted_from: string[];
  time_us: number;
  reason?: string;
  /** Route ids that are not configured carriers, left out; absent when none (more than the contract's fields). */
  skipped?: string[];
}

/** One line of the replay's decisions output (JSON Lines). */
export type DecisionLine = InboundDecisionLine | OutboundDecisionLine;

/** An inbound decision's line; `timeUs`: the call's time (a duplicate's decision keeps the first call's). */
export function inboundLine(d: AdmissionDecision, timeUs: number): InboundDecisionLine {
  if (d.admitted) {
    return d.duplicate
      ? { call_id: d.callId, direction: 'in', outcome: 'admitted', duplicate: true, time_us: timeUs }
      : { call_id: d.callId, direction: 'in', outcome: 'admitted', time_us: timeUs };
  }
  const line: InboundDecisionLine = {
    call_id: d.callId,
    direction: 'in',
    outcome: 'rejected',
    limited_by: d.limitedBy!,
    time_us: timeUs,
    retry_after_ms: d.retryAfterMs,
  };
  if (d.reason !== undefined) line.reason = d.reason;
  return line;
}

/** What an outbound line is made of: a Reservation, or an outcome without a decision. */
export interface OutboundInput<Outcome extends string> {
  readonly callId: string;
  readonly outcome: Outcome;
  readonly carrier: string | null;
  readonly delayMs: number | null;
  readonly reroutedFrom: string[];
  readonly reason?: string;
  readonly skipped?: string[];
}

/** An outbound decision's line; without a time (no decision was taken), no `time_us`. */
export function outboundLine<O extends string>(r: OutboundInput<O>, timeUs: number): OutboundDecisionLine<O>;
export function outboundLine<O extends string>(
  r: OutboundInput<O>,
  timeUs: undefined,
): Omit<OutboundDecisionLine<O>, 'time_us'>;
export function outboundLine<O extends string>(
  r: OutboundInput<O>,
  timeUs: number | undefined,
): Omit<OutboundDecisionLine<O>, 'time_us'> & { time_us?: number } {
  const line: Omit<OutboundDecisionLine<O>, 'time_us'> & { time_us?: number } = {
    call_id: r.callId,
    direction: 'out',
    outcome: r.outcome,
    carrier: r.carrier,
    delay_ms: r.delayMs,
    rerouted_from: r.reroutedFrom,
  };
  if (timeUs !== undefined) line.time_us = timeUs;
  if (r.reason !== undefined) line.reason = r.reason;
  if (r.skipped !== undefined) line.skipped = r.skipped;
  return line;
}
