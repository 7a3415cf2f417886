/**
 * A reload that changes a leased level's limit (share.ts; coordinator.ts's setLimit).
 *
 * An increase goes to the pool at once (after paying any debt left by an earlier decrease), so
 * the next tick can grant it. A decrease takes what the pool holds; the rest becomes a debt:
 * the lanes keep their shares until the next ticks shrink them (each as far as its use allows,
 * within one window at most, since calls leave the window), and what they free pays the debt
 * before anything reaches the pool again. So the level is never above the old limit meanwhile
 * (Σ shares + pool = new limit + debt, and the debt only falls), and never refuses more than
 * the new limit requires once the debt is paid.
 */
import type { Budget } from './share.js';
import type { LeaseState } from './step.js';

function one(limit: number, pool: number, debt: number, next: number): [pool: number, debt: number] {
  if (!Number.isInteger(next) || next < 0) throw new RangeError(`a limit must be an integer >= 0, not ${next}`);
  const delta = next - limit;
  if (delta >= 0) {
    const paid = Math.min(debt, delta);
    return [pool + delta - paid, debt - paid];
  }
  const fromPool = Math.min(pool, -delta);
  return [pool - fromPool, debt + (-delta - fromPool)];
}

export function reload(state: LeaseState, limit: Budget): LeaseState {
  const [pc, dc] = one(state.limit.calls, state.pool.calls, state.debt.calls, limit.calls);
  const [ph, dh] = one(state.limit.channels, state.pool.channels, state.debt.channels, limit.channels);
  return { ...state, limit, pool: { calls: pc, channels: ph }, debt: { calls: dc, channels: dh } };
}
