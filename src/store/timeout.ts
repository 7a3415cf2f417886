import { StoreUnavailableError } from '../errors/index.js';

/**
 * Bound one store call in time. Past `ms`, the decision stops waiting and rejects with
 * StoreUnavailableError, and the signal handed to the call is aborted: a store that has not
 * sent its command yet (Redis reconnecting) then never sends it, so a call decided by the
 * store-trouble policy is not counted on Redis later as well.
 */
export function withDeadline<T>(call: (signal: AbortSignal) => Promise<T>, ms: number): Promise<T> {
  const controller = new AbortController();
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => {
      controller.abort();
      reject(new StoreUnavailableError(`store did not answer within ${ms} ms`));
    }, ms);
    timer.unref();
    call(controller.signal).then(
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
