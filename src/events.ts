/**
 * Typed events (eventemitter3) and an emitter whose listeners cannot break the engine: a
 * listener that throws is reported on 'error' (or, for a throwing 'error' listener, dropped),
 * and the decision that emitted the event goes on.
 */
import { EventEmitter } from 'eventemitter3';

export class SafeEmitter<Events extends { error: [Error] }> extends EventEmitter<Events> {
  /** Emit to every listener, each isolated: one that throws does not stop the others. */
  safeEmit<E extends keyof Events & string>(event: E, ...args: Events[E] & unknown[]): void {
    const listeners = this.listeners(event as never) as unknown as ((...a: unknown[]) => void)[];
    for (const listener of listeners) {
      try {
        listener.apply(this, args);
      } catch (err) {
        if (event !== 'error') this.safeEmit('error', err instanceof Error ? err : new Error(String(err)));
      }
    }
  }
}
