/**
 * Typed events (eventemitter3) and an emitter whose listeners cannot break the engine: a
 * listener that throws, or returns a promise that rejects, is reported on 'error' (or, for an
 * 'error' listener, dropped), and the decision that emitted the event goes on.
 */
import { EventEmitter } from 'eventemitter3';

export class SafeEmitter<Events extends { error: [Error] }> extends EventEmitter<Events> {
  /**
   * Emit to every listener, each isolated: one that throws does not stop the others. A listener's
   * promise is not awaited; its rejection is handled as a throw is (never an unhandled rejection).
   */
  safeEmit<E extends keyof Events & string>(event: E, ...args: Events[E] & unknown[]): void {
    const listeners = this.listeners(event as never) as unknown as ((...a: unknown[]) => unknown)[];
    for (const listener of listeners) {
      try {
        const value = listener.apply(this, args);
        if (isThenable(value)) Promise.resolve(value).catch((err: unknown) => this.listenerFailed(event, err));
      } catch (err) {
        this.listenerFailed(event, err);
      }
    }
  }

  /** A listener of `event` failed with `err`: reported on 'error', unless it was an 'error' listener. */
  private listenerFailed(event: string, err: unknown): void {
    if (event !== 'error') this.safeEmit('error', err instanceof Error ? err : new Error(String(err)));
  }
}

function isThenable(value: unknown): value is PromiseLike<unknown> {
  return (
    (typeof value === 'object' || typeof value === 'function') &&
    value !== null &&
    typeof (value as PromiseLike<unknown>).then === 'function'
  );
}
