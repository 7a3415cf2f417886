/** The arguments of a reserve script call (lua/reserve.lua). */
import type { Carrier, ReserveResult, StopSignal } from '../types.js';
import { CARRIER_LEASE_WINDOW_US } from '../../lease/carriers.js';
import type { Pending } from './batcher.js';
import { num } from './bucket-args.js';
import { runsOf } from './call-runs.js';
import { rateText } from '../slots.js';
import { type RedisKeys, holdsKey } from './redis-keys.js';

/** A reservation waiting for its batch. */
export interface PendingReserve extends Pending<ReserveResult> {
  readonly route: readonly Carrier[];
  readonly now: string;
  /** `now` is the Redis time of the call's first attempt (a reroute across shards), not a caller's time. */
  readonly live?: boolean;
  /** The call's encoded id ('' without a hold) and hold time (µs). */
  readonly id: string;
  readonly forUs: string;
}

/**
 * How late a reroute's later attempt may run after its first attempt's Redis time (the time it
 * is decided at), and still be decided exactly as in issue order: one minute.
 */
export const REROUTE_LAG_MS = 60_000;

/**
 * The least expiry (ms) of what an attempt at a borrowed time (a reroute's later attempt, at
 * the Redis time of its first attempt on another shard) writes on `carrier`. Redis expires keys
 * by its own clock, and the script sets a key's life from the call's time t: the last slot of a
 * carrier lives until last + I after t. But t lags the Redis time the attempt runs at by the
 * reroute's round trips (and by the skew between the shards' clocks), and a call issued later
 * may lag more: it would run after the key expired, and find the carrier free where the calls
 * applied in issue order at their times find its slot taken (a call 4.5 ms late under load
 * found wait 0 where the replay said 4,500 µs). So these keys live at least the longest life
 * the script can give them (last + I - t <= maxWait + I) plus REROUTE_LAG_MS: exact for every
 * later attempt that runs less than that after its own first attempt. The same goes for what a
 * call at Redis TIME writes on a spread carrier (first in one route, it may be second in
 * another): a reroute's attempt at an earlier time may follow it, so it gets the floor too.
 * (Records and holds of the group get the floor as well; records usually live longer anyway,
 * for their hold time.)
 */
export function rerouteTtlMs(carrier: Carrier): number {
  return Math.ceil((carrier.maxWaitUs + carrier.intervalUs) / 1000) + 1 + REROUTE_LAG_MS;
}

/** What packing a reserve script call needs of the store. */
export interface ReserveEnv {
  /** The ttl floor (ms) of keys written with a caller-given now. */
  readonly virtualTtlMs: number;
  readonly keys: RedisKeys;
  /** The names of the carriers leased across regions (RedisStoreOptions.leasedCarriers). */
  readonly leased: ReadonlySet<string>;
  /** A call's deadline in Redis time ('' = none). */
  deadline(signal: StopSignal | undefined): string;
}

/**
 * One reserve script call for a batch: each carrier's key once, each route (carriers with their
 * interval and maxWait) once, then the calls in runs sharing a time. `tag`: the batch's tag,
 * where its outbound call records go (with hash tags every route of the batch is one carrier,
 * of that tag; without them keys carry no tag).
 */
export function reserveArgv(items: readonly PendingReserve[], clock: string, env: ReserveEnv, tag: string): string[] {
  const keys: string[] = [];
  const keyIndex = new Map<string, string>();
  const routes: string[] = [];
  const routeIndex = new Map<string, string>();
  const leases: string[] = [];
  const keyOf = (key: string): string => {
    let k = keyIndex.get(key);
    if (k === undefined) {
      k = num(keys.push(key));
      keyIndex.set(key, k);
    }
    return k;
  };
  const routeOf = (route: readonly Carrier[]): string => {
    const entry = [num(route.length)];
    for (const c of route) {
      const key = env.keys.carrier(c);
      const channels = c.channels ?? 0;
      if (env.leased.has(c.name) && !keyIndex.has(key)) {
        const k = keyOf(key);
        const [share, slots] = env.keys.carrierLease(c);
        // the carrier's whole limit per window: its CPS (whole: leasedCarrier), 1e6 / I rounded
        const limit = Math.round(CARRIER_LEASE_WINDOW_US / c.intervalUs);
        leases.push(k, keyOf(share), keyOf(slots), String(CARRIER_LEASE_WINDOW_US), String(limit));
      }
      entry.push(
        keyOf(key),
        rateText(c),
        String(c.maxWaitUs),
        String(channels),
        channels > 0 ? keyOf(holdsKey(key)) : '0',
      );
    }
    const id = entry.join(' ');
    let r = routeIndex.get(id);
    if (r === undefined) {
      r = num(routeIndex.size + 1);
      routeIndex.set(id, r);
      for (const v of entry) routes.push(v);
    }
    return r;
  };
  const { calls } = runsOf(items, (i, out) => {
    const item = items[i]!;
    out.push(routeOf(item.route), env.deadline(item.signal), item.id, item.forUs);
  });
  // keys written at a caller's time live at least the virtual-time floor; at a reroute's borrowed
  // time, at least the reroute floor of its carrier (rerouteTtlMs); with carriers spread (a tag),
  // at Redis TIME too: a reroute's attempt at an earlier time may follow
  let floor = 0;
  let liveFloor = 0;
  for (const item of items) {
    if (item.now === '') {
      if (tag !== '') liveFloor = Math.max(liveFloor, rerouteTtlMs(item.route[0]!));
      continue;
    }
    const f = item.live === true ? rerouteTtlMs(item.route[0]!) : env.virtualTtlMs;
    if (f > floor) floor = f;
  }
  // on a Cluster, each call's record last: the script names it from the prefix, but a Cluster
  // checks only the keys declared before it runs (a slot being moved: TRYAGAIN then, not an
  // error in the script's midst)
  if (env.keys.hashTags) for (const item of items) if (item.id !== '') keyOf(env.keys.outboundRecord(tag, item.id));
  const argv: string[] = [num(keys.length)];
  for (const k of keys) argv.push(k);
  argv.push(String(floor), String(liveFloor), env.keys.outboundRecord(tag, ''), clock, num(routeIndex.size));
  for (const v of routes) argv.push(v);
  argv.push(num(leases.length / 5));
  for (const v of leases) argv.push(v);
  for (const v of calls) argv.push(v);
  return argv;
}
