/**
 * A lane the coordinator cannot reach (issue 28; coordinator.ts): a shard that
 * failed over, a region cut off. Nothing is ever over-granted, because a share is leased:
 *
 * - Every message the coordinator sends a lane (renewal, shrink, grant) carries the lane's
 *   lease end E, a time on the lane's clock, and the lane's epoch. A lane admits on the leased
 *   level only before its lease end; the coordinator renews live lanes at every tick.
 * - A lane the coordinator cannot read, or whose shrink result does not come back in time, is
 *   lost: it gets no renewal and no order, its share stays counted as held (planStep's `lost`),
 *   and its epoch moves on, so that messages of the old epoch still on their way are ignored.
 *   Whatever it really did (a shrink applied but its reply lost, a grant received), its share
 *   is at most the one the coordinator holds for it.
 * - It admits nothing at or after the last lease end it was sent, E. Its calls then leave every
 *   window (t - W, t] by E + W, and its channels are free by E + the longest hold (the calls'
 *   maximum duration, after which a hold lapses by itself). Only then does its share go back to
 *   the pool: calls at E + W, channels at E + maxHold (plus the bound on the clocks' skew
 *   between the lane and the coordinator, on a real deployment). Until then the other lanes
 *   share what is left of the limit; a lost lane's capacity is missing for at most the lease,
 *   a window, and the coordinator's wait for the shrink result.
 * - A lane that answers again after E has admitted nothing since: what its calls still use
 *   (calls in its window, channels held) only falls. The first message of its new epoch sets
 *   its share to that use (lua/includes/lease.lua), and the coordinator keeps the use it read,
 *   returning the rest at once (restore), without waiting E + W or E + maxHold; grants rebuild
 *   its share. reclaim (above) is for the lanes that stay out of reach.
 */
import { type Budget, add } from './share.js';
import type { LeaseState } from './step.js';

export type Resource = keyof Budget;

/** The times at which a lost lane's share may go back to the pool (see the header). */
export function reclaimTimes(leaseEnd: number, windowUs: number, maxHoldUs: number, skewUs = 0): Budget {
  return { calls: leaseEnd + windowUs + skewUs, channels: leaseEnd + maxHoldUs + skewUs };
}

/**
 * A lost lane's share of one resource back to the pool (after paying a reload's debt, as a
 * shrink's freed capacity does). Call it only once reclaimTimes has passed for that resource.
 */
export function reclaim(state: LeaseState, lane: number, resource: Resource): LeaseState {
  const share = state.shares[lane];
  if (share === undefined) throw new RangeError(`no lane ${lane}`);
  const freed = share[resource];
  const paid = Math.min(state.debt[resource], freed);
  const shares = [...state.shares];
  shares[lane] = { ...share, [resource]: 0 };
  const back: Budget =
    resource === 'calls' ? { calls: freed - paid, channels: 0 } : { calls: 0, channels: freed - paid };
  const debt = { ...state.debt, [resource]: state.debt[resource] - paid };
  return { ...state, shares, debt, pool: add(state.pool, back) };
}

/**
 * A lost lane that answers again once its lease has ended: it has admitted nothing since, and
 * the first order of its new epoch sets its share to what its calls still use (lua/includes/
 * lease.lua), which only falls from the observation on. So its share becomes `used` as
 * observed, and the rest of what the coordinator held for it goes back to the pool (after
 * paying a reload's debt) at once, without waiting a window or the longest hold. Were `used`
 * ever above the share held for it, the excess would be a debt (never over the limit).
 */
export function restore(state: LeaseState, lane: number, used: Budget): LeaseState {
  const share = state.shares[lane];
  if (share === undefined) throw new RangeError(`no lane ${lane}`);
  let next = state;
  for (const r of ['calls', 'channels'] as const) {
    const held = next.shares[lane]![r];
    const keep = used[r];
    const shares = [...next.shares];
    shares[lane] = { ...shares[lane]!, [r]: keep };
    if (keep >= held) {
      next = { ...next, shares, debt: { ...next.debt, [r]: next.debt[r] + (keep - held) } };
      continue;
    }
    const freed = held - keep;
    const paid = Math.min(next.debt[r], freed);
    next = {
      ...next,
      shares,
      debt: { ...next.debt, [r]: next.debt[r] - paid },
      pool: { ...next.pool, [r]: next.pool[r] + freed - paid },
    };
  }
  return next;
}
