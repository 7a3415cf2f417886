/**
 * Lanes of a leased global level (docs/leasing.md): with leasing on, an inbound call's keys go
 * to one of `lanes` hash tags `in:<lane>.<j>` (laneTag), chosen by its account (or, without one, its peer),
 * instead of the one tag `in` every call shared. Each lane holds its peers' and accounts' keys,
 * its own log and holds of the global level, and its share of the global limit: a decision is
 * still one script call on one shard.
 */
import type { CallGateConfig } from '../config/types.js';
import { accountBucket, GLOBAL_BUCKET, GLOBAL_TAG, peerBucket } from '../store/keys.js';
import { slotOf } from '../store/redis/slot.js';
import { InvalidArgumentError } from '../errors/index.js';
import type { Bucket, LanePlan } from '../store/types.js';

export type { LanePlan };

/** The most lanes a level may have: a coordinator's tick reads every lane. */
export const MAX_LANES = 1024;

export function checkLanes(lanes: unknown): number {
  if (!(Number.isSafeInteger(lanes) && (lanes as number) >= 1 && (lanes as number) <= MAX_LANES))
    throw new InvalidArgumentError(`lease.lanes must be an integer from 1 to ${MAX_LANES}, got ${String(lanes)}`);
  return lanes as number;
}

const SLOTS = 16_384;
const tagsOf = new Map<number, readonly string[]>();

/**
 * Lane `lane`'s hash tag among `lanes`: `in:<lane>.<j>`, with the least j whose slot falls in
 * the lane's equal part of the slot range, so that lanes spread evenly over masters that hold
 * equal ranges (as `redis-cli --cluster create` makes them). Plain `in:<lane>` tags put 416 /
 * 107 / 111 / 416 of a bench's keys on 4 masters, 16 lanes. Slots as Redis and ioredis compute
 * them (slot.ts).
 */
export function laneTag(lane: number, lanes: number): string {
  let tags = tagsOf.get(lanes);
  if (tags === undefined) {
    tags = Array.from({ length: lanes }, (_, k) => {
      const from = Math.floor((k * SLOTS) / lanes);
      const to = Math.floor(((k + 1) * SLOTS) / lanes);
      for (let j = 0; ; j++) {
        const tag = `${GLOBAL_TAG}:${k}.${j}`;
        const slot = slotOf(`{${tag}}`);
        if (slot >= from && slot < to) return tag;
      }
    });
    tagsOf.set(lanes, tags);
  }
  const tag = tags[lane];
  if (tag === undefined) throw new RangeError(`no lane ${lane} of ${lanes}`);
  return tag;
}

/**
 * The overflow lane's tag (docs/leasing.md, "The overflow lane"): a lane with a share of its own
 * and no calls of its own. A call its lane refused for lack of calls share counts its global
 * level there instead, when the deployment has one (`lease.overflow`): the slack a level near
 * its limit has left is then one pool that every lane draws on, not crumbs spread over the lanes.
 */
export const OVERFLOW_TAG = `${GLOBAL_TAG}:overflow`;

/** A leased call's buckets on the overflow lane and on its own lane after a spill (spillParts). */
export interface SpillParts {
  readonly overflow: readonly Bucket[];
  readonly lane: readonly Bucket[];
}

/**
 * A leased call's buckets (the global level first) split for a spill: on the overflow lane, the
 * global level's limit under `overflowName`; on its own lane, the rest, with the global level's
 * channel limit alone when it has one (its channels stay on the lane).
 */
export function spillParts(buckets: readonly Bucket[], overflowName: string): SpillParts {
  const [global, ...rest] = buckets as [Bucket, ...Bucket[]];
  const channels = global.channels ?? 0;
  return {
    overflow: [{ name: overflowName, limits: global.limits }],
    lane: channels > 0 ? [{ name: global.name, limits: [], channels }, ...rest] : rest,
  };
}

/** A decision on a spill's lane part, with limitedBy a position in the call's own buckets again. */
export function onOwnBuckets<R extends { readonly limitedBy: number }>(
  parts: SpillParts,
  own: readonly Bucket[],
  r: R,
): R {
  // the lane's part lacks the global level when it has no channel limit
  return r.limitedBy < 0 || parts.lane[0]?.name === own[0]?.name ? r : { ...r, limitedBy: r.limitedBy + 1 };
}

/** Whether a tag is a lane's (a leased global level's part lives there), the overflow lane's too. */
export const isLaneTag = (tag: string): boolean => tag.startsWith(`${GLOBAL_TAG}:`);

/** FNV-1a (32 bits) of a string's UTF-16 units: stable across processes and versions. */
function fnv1a(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193) >>> 0;
  }
  return h;
}

/**
 * The lane of a call's buckets (global, then account and peer, as src/admission/plan.ts makes
 * them): its account's, else its peer's, so that an account's peers share its lane. A global
 * level leased must be one sliding-log limit (a share is calls per one window) with or without
 * a channel limit; attribute levels span every lane and cannot be leased with it.
 */
export function laneOf(buckets: readonly Bucket[], lanes: number | LanePlan): number {
  const [global, ...rest] = buckets;
  if (global?.name !== GLOBAL_BUCKET)
    throw new InvalidArgumentError('a leased global level needs the global bucket first');
  if (global.limits.length !== 1 || global.limits[0]!.algorithm !== 'sliding-log')
    throw new InvalidArgumentError('a leased global level must have exactly one sliding-log limit');
  if (rest.some((b) => !b.name.startsWith('account:') && !b.name.startsWith('peer:')))
    throw new InvalidArgumentError('a leased global level does not combine with attribute levels');
  const owner = rest.find((b) => b.name.startsWith('account:')) ?? rest.find((b) => b.name.startsWith('peer:'));
  // the global level alone: record() of a call from a peer with no limits naming no configured
  // account; its one event counts on lane 0 (the level's count is the sum over the lanes)
  return owner === undefined ? 0 : ownerLane(owner.name, lanePlan(lanes));
}

/**
 * The hash tag a call's keys sit on when the global level is leased: its lane's (laneOf). The
 * RedisStore places calls by it, and Kamailio's templates (src/kamailio) name the same keys.
 */
export function laneTagOf(buckets: readonly Bucket[], lanes: LanePlan): string {
  return laneTag(laneOf(buckets, lanes), lanes.lanes);
}

/** What the library and the CLI take: lanes per account id and per peer id. */
export interface LanePins {
  readonly accounts?: Readonly<Record<string, number>>;
  readonly peers?: Readonly<Record<string, number>>;
}

const plansOf = new Map<number, LanePlan>();

/**
 * A plan of `lanes` lanes with `pins` (LanePins: validated here, clear errors), or the plain one
 * when there are none. A number of lanes alone is the plain plan (made once per number).
 */
export function lanePlan(lanes: number | LanePlan, pins?: unknown): LanePlan {
  if (isPlan(lanes)) return lanes;
  const n = checkLanes(lanes);
  const map = checkPins(pins, n);
  if (map.size > 0) return { lanes: n, pins: map };
  let plain = plansOf.get(n);
  if (plain === undefined) {
    plain = { lanes: n, pins: map };
    plansOf.set(n, plain);
  }
  return plain;
}

const isPlan = (x: unknown): x is LanePlan =>
  typeof x === 'object' && x !== null && (x as LanePlan).pins instanceof Map;

/** LanePins as bucket names to lanes; a clear error for anything else. */
function checkPins(pins: unknown, lanes: number): Map<string, number> {
  const map = new Map<string, number>();
  if (pins === undefined) return map;
  if (pins === null || typeof pins !== 'object' || Array.isArray(pins))
    throw new InvalidArgumentError('lease.pin must be an object: { accounts?: { id: lane }, peers?: { id: lane } }');
  for (const [field, value] of Object.entries(pins)) {
    const kind = field === 'accounts' ? 'account' : field === 'peers' ? 'peer' : undefined;
    if (kind === undefined)
      throw new InvalidArgumentError(`lease.pin: unknown field ${JSON.stringify(field)} (accounts, peers)`);
    if (value === undefined) continue;
    if (value === null || typeof value !== 'object' || Array.isArray(value))
      throw new InvalidArgumentError(`lease.pin.${field} must be an object of ${kind} id to lane`);
    for (const [id, lane] of Object.entries(value as Record<string, unknown>)) {
      if (id === '') throw new InvalidArgumentError(`lease.pin.${field}: an empty ${kind} id`);
      if (!(Number.isSafeInteger(lane) && (lane as number) >= 0 && (lane as number) < lanes))
        throw new InvalidArgumentError(
          `lease.pin.${field}.${id}: a lane from 0 to ${lanes - 1} (of ${lanes}), got ${JSON.stringify(lane)}`,
        );
      // the bucket's name as plans make it (ids encoded, src/store/keys.ts)
      map.set(kind === 'account' ? accountBucket(id) : peerBucket(id), lane as number);
    }
  }
  return map;
}

/** The lane of the calls whose lane is chosen by bucket `name` (`account:<id>`, else `peer:<id>`). */
function ownerLane(name: string, plan: LanePlan): number {
  // an owner not pinned stays where it was: pinning one never moves another's keys
  return plan.pins.get(name) ?? fnv1a(name) % plan.lanes;
}

/**
 * The lane tags where bucket `name` of a leased deployment may have keys, given the configured
 * accounts' bucket names: the global level on every lane (and the overflow lane), an account on its lane, a peer on its
 * own lane (calls naming no configured account) and on each configured account's (calls naming
 * it); each lane once, in lane order.
 */
export function bucketLaneTags(
  name: string,
  accounts: Iterable<string>,
  lanes: number | LanePlan,
  overflow = false,
): string[] {
  const plan = lanePlan(lanes);
  const n = plan.lanes;
  if (name === GLOBAL_BUCKET)
    return [...Array.from({ length: n }, (_, k) => laneTag(k, n)), ...(overflow ? [OVERFLOW_TAG] : [])];
  const at = new Set([ownerLane(name, plan)]);
  if (!name.startsWith('account:'))
    for (const account of accounts) {
      if (at.size === n) break;
      at.add(ownerLane(account, plan));
    }
  return [...at].sort((a, b) => a - b).map((k) => laneTag(k, n));
}

/**
 * A leased global level's limit, window and channels (0: no channel limit), from a
 * configuration; a clear error when its global level cannot be leased (none, not one sliding-log
 * limit, or attribute levels beside it, which span every lane).
 */
export function leasedLevel(config: CallGateConfig): { calls: number; windowUs: number; channels: number } {
  if ((config.inbound.attributes ?? []).length > 0)
    throw new InvalidArgumentError('a leased global level does not combine with attribute levels');
  const global = config.inbound.global;
  const only = global?.limits.length === 1 ? global.limits[0] : undefined;
  if (only === undefined || only.algorithm !== 'sliding-log')
    throw new InvalidArgumentError('a leased global level must be configured, with exactly one sliding-log limit');
  return { calls: only.limit, windowUs: only.windowUs, channels: global!.channels ?? 0 };
}
