/**
 * The flood shield: after the store refused a call by its rate limits with a known retry-after,
 * the next calls with the same buckets (the same plan: peer, account, global) are refused in
 * process until then, without a round trip. A misconfigured auto-dialer offering ten times its
 * limit then costs Redis one decision per retry-after instead of one per call.
 *
 * Why the outcome is the one Redis would give: the refusal at t means some rate limit of the
 * call's buckets lacked room at t, and the retry-after is the time until the last of them has
 * room again (the longest wait). Counts only fall by ageing: a sliding log's events leave their
 * window at s + W, a fixed window's count at the window's end; an admitted or recorded call only
 * adds. So the limit with the longest wait lacks room during all of [t, t + retry-after), and any
 * call of the same buckets in that span is refused by Redis too.
 *
 * Where a shielded refusal may differ from Redis' (never in admitted or not):
 *   - limited_by: the shield names the level that refused the call it learnt from (the first one
 *     without room then); Redis names the first level without room NOW, which may be an earlier
 *     one that filled meanwhile (the peer refused, then the global level filled: Redis says
 *     `global`, the shield `peer:x`), or a later one, when the level named had the shorter wait
 *     and has room again while a later level's longer wait (the retry-after) still runs (global
 *     and peer both full, global's window frees first: Redis says `peer:x`, the shield `global`);
 *   - retry_after_ms: the shield gives what is left of the wait it knows; Redis' is never
 *     shorter, and longer when more limits lack room by then (other levels filled, or calls
 *     counted by record() pushed the wait of a full sliding log further).
 *
 * A leased global level (docs/leasing.md) breaks "counts only fall by ageing" for its limit: a
 * lane's share may grow at the coordinator's next tick. A refusal by it (the first bucket, when
 * the store is leased) guards nothing; one by a later level still does (the leased level had
 * room then, so the retry-after is the later levels' own).
 *
 * Never shielded: refusals by channels (no retry-after: a call in progress may end any time),
 * and calls whose buckets have a channel limit at all (a repeated admit of a call still holding
 * its channels is admitted by Redis whatever the limits, and only Redis knows which calls hold,
 * in any process); buckets with a sliding-window limit (its retry-after is an estimate's); calls
 * whose time goes back (given times: a call further back than one already decided may see a log
 * a later call trimmed); decisions taken by the store-trouble policy. A reload clears the shield.
 *
 * Times: with given times (replay, `at`) a guard covers [t, t + retry-after) of that clock. On
 * Redis TIME the process cannot read Redis' clock, so the guard is kept on the process clock
 * from when the refused call was SENT: Redis' clock had moved at most as far when it decided, so
 * a call arriving before sent + retry-after would find Redis' clock before t + retry-after.
 */
import { systemClockUs } from '../clock.js';
import { GLOBAL_BUCKET } from '../store/keys.js';
import type { Bucket } from '../store/types.js';

interface Guard {
  /** The clock the guard is on: given times, or the process clock. */
  readonly given: boolean;
  /** Calls at from <= time < until are refused. */
  readonly from: number;
  readonly until: number;
  /** Store time of the refusal, and the process time its call was sent (process clock guards). */
  readonly refusedAt: number;
  /** Index of the refusing bucket in the plan's buckets. */
  readonly limitedBy: number;
}

/** What a shielded call is told. */
export interface ShieldRefusal {
  readonly limitedBy: number;
  readonly retryAfterUs: number;
  /** The decision's time: the given one, or Redis' clock as the guard estimates it. */
  readonly now: number;
}

/** The shield of one Admission, keyed by plan objects (a reload makes new ones). */
export class FloodShield<P extends { readonly buckets: readonly Bucket[] }> {
  /** `leased`: the store leases the global level (Store.leaseLanes): its refusals guard nothing. */
  constructor(private readonly leased = false) {}

  private guards = new WeakMap<P, Guard>();
  private readonly eligible = new WeakMap<P, boolean>();
  /** The latest given time seen (a call before it is not shielded). */
  private latestGiven = -Infinity;
  /** Calls refused in process so far. */
  refused = 0;

  /** Forget every guard (a reload: new limits). */
  clear(): void {
    this.guards = new WeakMap();
  }

  /** Whether the shield may ever refuse calls of `plan`: no channel limit, no ban, no sliding window. */
  private shieldable(plan: P): boolean {
    let ok = this.eligible.get(plan);
    if (ok === undefined) {
      // a bucket with a ban must see every refusal (its strikes), and an unban at once
      ok = plan.buckets.every(
        (b) =>
          b.channels === undefined && b.ban === undefined && b.limits.every((l) => l.algorithm !== 'sliding-window'),
      );
      this.eligible.set(plan, ok);
    }
    return ok;
  }

  /**
   * A call about to be decided at `at` (given time) or now (undefined: the store's clock): its
   * refusal when a guard covers it, else undefined (the store decides it).
   */
  check(plan: P, at: number | undefined): ShieldRefusal | undefined {
    const back = at !== undefined && at < this.latestGiven;
    if (at !== undefined && at > this.latestGiven) this.latestGiven = at;
    const g = this.guards.get(plan);
    if (g === undefined || back) return undefined;
    const now = at ?? systemClockUs();
    if ((at !== undefined) !== g.given || now < g.from || now >= g.until) return undefined;
    this.refused++;
    return { limitedBy: g.limitedBy, retryAfterUs: g.until - now, now: g.given ? now : g.refusedAt + (now - g.from) };
  }

  /**
   * What the store decided for a call of `plan` sent at process time `sentUs` with time `at`:
   * a refusal by rate with a retry-after guards the plan's next calls until then.
   */
  learn(
    plan: P,
    at: number | undefined,
    sentUs: number,
    r: { admitted: boolean; limitedBy: number; reason?: string; retryAfterUs: number; now: number },
  ): void {
    if (
      r.admitted ||
      (r.reason !== undefined && r.reason !== 'rate') ||
      !(r.retryAfterUs > 0) ||
      !this.shieldable(plan) ||
      (this.leased && r.limitedBy === 0 && plan.buckets[0]?.name === GLOBAL_BUCKET)
    )
      return;
    const given = at !== undefined;
    const from = given ? r.now : sentUs;
    this.guards.set(plan, { given, from, until: from + r.retryAfterUs, refusedAt: r.now, limitedBy: r.limitedBy });
  }
}
