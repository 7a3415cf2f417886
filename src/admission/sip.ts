/**
 * From a refusal to what a SIP stack sends. Rate limits: 503 Service Unavailable with Retry-After
 * in whole seconds (rounded up, never 0 when the wait is positive), plus optional jitter so
 * refused peers do not all retry in the same second. Channel limits: 503 without Retry-After by
 * default (when a call in progress ends is not known), or what `channels` says (486 Busy Here
 * and 480 Temporarily Unavailable are common choices for a trunk at its channel count). Unknown
 * peer: 403 Forbidden (retrying cannot help). Store unavailable: 503 without Retry-After (nobody
 * knows when it will be back).
 */
import type { AdmissionDecision } from './admission.js';

export interface SipResponse {
  readonly status: number;
  readonly reason: string;
  /** Seconds, for the Retry-After header; absent when no retry time applies. */
  readonly retryAfter?: number;
}

export interface ChannelRefusal {
  /** A SIP final response status, 400 to 699 (default 503). */
  readonly status?: number;
  /** Its reason phrase (default: the standard one of the status, else "Service Unavailable"). */
  readonly reason?: string;
  /** Retry-After seconds to send (default: none). */
  readonly retryAfter?: number;
}

export interface SipOptions {
  /** Add up to this many whole seconds, uniformly at random (default 0). */
  readonly jitterSeconds?: number;
  /** Source of randomness in [0, 1) (default Math.random), for reproducible tests. */
  readonly random?: () => number;
  /** The answer to a refusal by a channel limit (default 503, no Retry-After). */
  readonly channels?: ChannelRefusal;
}

const REASONS: Readonly<Record<number, string>> = {
  403: 'Forbidden',
  480: 'Temporarily Unavailable',
  486: 'Busy Here',
  488: 'Not Acceptable Here',
  500: 'Server Internal Error',
  503: 'Service Unavailable',
  600: 'Busy Everywhere',
  603: 'Decline',
};

function channelResponse(c: ChannelRefusal | undefined): SipResponse {
  const status = c?.status ?? 503;
  if (!(Number.isInteger(status) && status >= 400 && status <= 699))
    throw new RangeError(`channels.status must be a SIP final response status from 400 to 699, got ${String(status)}`);
  const reason = c?.reason ?? REASONS[status] ?? 'Service Unavailable';
  const retryAfter = c?.retryAfter;
  if (retryAfter === undefined) return { status, reason };
  if (!(Number.isInteger(retryAfter) && retryAfter >= 0))
    throw new RangeError(`channels.retryAfter must be a whole number of seconds >= 0, got ${String(retryAfter)}`);
  return { status, reason, retryAfter };
}

export function toSipResponse(decision: AdmissionDecision, opts: SipOptions = {}): SipResponse | undefined {
  if (decision.admitted) return undefined;
  if (decision.limitedBy === 'unknown-peer') return { status: 403, reason: 'Forbidden' };
  // a banned flooder (attribute levels) is not told when to come back
  if (decision.reason === 'banned') return { status: 403, reason: 'Forbidden' };
  if (decision.reason === 'channels') return channelResponse(opts.channels);
  if (decision.retryAfterMs <= 0) return { status: 503, reason: 'Service Unavailable' };
  const jitter = Math.max(0, Math.floor(opts.jitterSeconds ?? 0));
  const extra = jitter > 0 ? Math.floor((opts.random ?? Math.random)() * (jitter + 1)) : 0;
  return {
    status: 503,
    reason: 'Service Unavailable',
    retryAfter: Math.max(1, Math.ceil(decision.retryAfterMs / 1000)) + extra,
  };
}
