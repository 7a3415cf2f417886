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
 *   window (t - W, t] by E + W: only then does its calls share go back to the pool (plus the
 *   bound on the clocks' skew between the lane and the coordinator). Until then the other lanes
 *   share what is left of the limit.
 * - Its channels are free by E + the longest hold only if no call refreshes its hold meanwhile
 *   (lua/refresh.lua extends holds from now): the simulator (scripts/lease-simulate.ts) has no
 *   refresh and reclaims channels at E + maxHold (reclaimTimes); the coordinator on Redis keeps
 *   a lane's channels share until the lane answers again.
 * - A lane that answers again a window after E: none of its calls is left in a window, even one
 *   a failed-over replica missed, so the first message of its new epoch sets its share to what
 *   its calls use (lua/includes/lease.lua: no calls, its holds) and the coordinator returns its
 *   calls share (restore) and keeps its channels share, which the next shrinks bring down to its
 *   holds (written back by then by the routing processes after a failover).
 * - A lane whose Redis lost its share hash (restarted empty) is lost as well (coordinator.ts,
 *   emptied): its holds come back only as the routing processes write them again, so its
 *   channels share is held for holdsGraceMs whatever its shrinks say.
 */
import type { Budget } from './share.js';
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
  return restore(state, lane, { ...share, [resource]: 0 });
}

/**
 * A lost lane that answers again after its lease has ended: its share becomes `used` (what the
 * coordinator still counts for it, at least what the first order of its new epoch will set),
 * the rest of what the coordinator held for it goes back to the pool (after paying a reload's
 * debt) at once. Were `used` ever above the share held for it, the excess would be a debt
 * (never over the limit). The coordinator passes no calls (a window has passed) and the
 * channels share as it was (see the header).
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
