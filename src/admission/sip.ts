/**
 * From a refusal to what a SIP stack sends. Limits: 503 Service Unavailable with Retry-After in
 * whole seconds (rounded up, never 0 when the wait is positive), plus optional jitter so refused
 * peers do not all retry in the same second. Unknown peer: 403 Forbidden (retrying cannot help).
 * Store unavailable: 503 without Retry-After (nobody knows when it will be back).
 */
import type { AdmissionDecision } from './Admission.js';

export interface SipResponse {
  readonly status: 403 | 503;
  readonly reason: string;
  /** Seconds, for the Retry-After header; absent when no retry time applies. */
  readonly retryAfter?: number;
}

export interface SipOptions {
  /** Add up to this many whole seconds, uniformly at random (default 0). */
  readonly jitterSeconds?: number;
  /** Source of randomness in [0, 1) (default Math.random), for reproducible tests. */
  readonly random?: () => number;
}

export function toSipResponse(decision: AdmissionDecision, opts: SipOptions = {}): SipResponse | undefined {
  if (decision.admitted) return undefined;
  if (decision.limitedBy === 'unknown-peer') return { status: 403, reason: 'Forbidden' };
  if (decision.retryAfterMs <= 0) return { status: 503, reason: 'Service Unavailable' };
  const jitter = Math.max(0, Math.floor(opts.jitterSeconds ?? 0));
  const extra = jitter > 0 ? Math.floor((opts.random ?? Math.random)() * (jitter + 1)) : 0;
  return { status: 503, reason: 'Service Unavailable', retryAfter: Math.max(1, Math.ceil(decision.retryAfterMs / 1000)) + extra };
}
