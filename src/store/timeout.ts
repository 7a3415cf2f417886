import { systemClockUs } from '../clock.js';
import { StoreUnavailableError } from '../errors/index.js';
import type { StopSignal } from './types.js';

/**
 * The default bound on one store call per decision, inbound and outbound alike: SIP's T1
 * (500 ms), the interval after which a caller over UDP retransmits its INVITE. A decision that
 * waits longer on a stalled Redis adds more post-dial delay than the policy's answer is worth.
 */
export const DEFAULT_TIMEOUT_MS = 500;

/**
 * How long an operator's read waits for the store, ms: the sidecar's /v1/state, /v1/holds,
 * /v1/reset, /v1/bans, and the live series of /metrics. Redis killed fails at once, but a
 * stalled one (SIGSTOP, a cut link) answers nothing: past this the read answers 503 (a scrape,
 * no live series), far inside Prometheus' 10 s scrape timeout, instead of never.
 */
export const OPERATOR_TIMEOUT_MS = 2000;

const NO_ANSWER = 'store did not answer within';

/** Whether `err` is withDeadline's: the call was given up, and may still land. */
export const pastDeadline = (err: unknown): boolean =>
  err instanceof StoreUnavailableError && err.message.startsWith(NO_ANSWER);

/**
 * Bound one store call in time. Past `ms`, the decision stops waiting and rejects with
 * StoreUnavailableError, and the signal handed to the call is aborted: a store that has not
 * sent its command yet (Redis reconnecting, or a batch not yet written) then never sends it, so
 * a call decided by the store-trouble policy is not counted on Redis later as well; one already
 * sent carries the deadline and is skipped by the script if it runs too late. The signal is a
 * plain flag, set before the rejection: cheap enough for every decision.
 */
export function withDeadline<T>(call: (signal: StopSignal) => Promise<T>, ms: number): Promise<T> {
  const signal = { aborted: false, deadlineUs: systemClockUs() + ms * 1000 };
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => {
      signal.aborted = true;
      reject(new StoreUnavailableError(`${NO_ANSWER} ${ms} ms`));
    }, ms);
    timer.unref();
    call(signal).then(
      (value) => {
        clearTimeout(timer);
        resolve(value);
      },
      (err) => {
        clearTimeout(timer);
        reject(err);
      },
    );
  });
}
