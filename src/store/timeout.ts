import { StoreUnavailableError } from '../errors/index.js';

/**
 * Bound one store call in time: past `ms`, the decision stops waiting and the call rejects with
 * StoreUnavailableError (the command itself may still run on Redis later).
 */
export function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  if (!(ms > 0 && Number.isFinite(ms))) return promise;
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new StoreUnavailableError(`store did not answer within ${ms} ms`)), ms);
    timer.unref();
    promise.then(
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
