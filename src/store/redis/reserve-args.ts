/** The arguments of a reserve script call (lua/reserve.lua). */
import type { Carrier, ReserveResult, StopSignal } from '../types.js';
import type { Pending } from './batcher.js';
import { num } from './bucket-args.js';
import { runsOf } from './call-runs.js';
import type { RedisKeys } from './redis-keys.js';

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

/** What packing a reserve script call needs of the store. */
export interface ReserveEnv {
  /** The ttl floor (ms) of keys written with a caller-given now. */
  readonly virtualTtlMs: number;
  readonly keys: RedisKeys;
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
      entry.push(
        keyOf(key),
        String(c.intervalUs),
        String(c.maxWaitUs),
        String(channels),
        channels > 0 ? keyOf(`${key}:ch`) : '0',
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
  // keys written at a caller's time live at least the virtual-time floor
  const virtual = items.some((item) => item.now !== '' && item.live !== true);
  const argv: string[] = [num(keys.length)];
  for (const k of keys) argv.push(k);
  argv.push(String(virtual ? env.virtualTtlMs : 0), env.keys.outboundRecord(tag, ''), clock, num(routeIndex.size));
  for (const v of routes) argv.push(v);
  for (const v of calls) argv.push(v);
  return argv;
}
