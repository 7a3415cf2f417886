/**
 * Bounded waits that leave no timer behind: the suite ends by itself (mocha runs without
 * `exit: true`), so a `Promise.race` with a sleep would keep the process alive for the rest of
 * the sleep after the race was won.
 */

/** `promise`'s value, or `fallback` if `ms` pass first; the timer is cleared either way. */
export async function orAfter<T, F>(promise: Promise<T>, ms: number, fallback: F): Promise<T | F> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<F>((resolve) => (timer = setTimeout(() => resolve(fallback), ms))),
    ]);
  } finally {
    clearTimeout(timer);
  }
}
