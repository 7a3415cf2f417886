/**
 * The arguments of the inspect script calls (lua/inspect.lua): one per tag for the buckets (all
 * buckets in one on a single Redis, at most 256 per call), one for the carriers (one per carrier
 * with hash tags: each carrier has its own tag).
 */
import { InvalidArgumentError } from '../../errors/index.js';
import { CARRIER_LEASE_WINDOW_US } from '../../lease/carriers.js';
import { carrierTag } from '../keys.js';
import { rateText } from '../slots.js';
import type { Carrier, InspectRequest, Limit } from '../types.js';
import { ArgsBuilder, bucketArgsOf } from './bucket-args.js';
import { type RedisKeys, holdsKey } from './redis-keys.js';

/** Buckets in one call, at most. */
const CHUNK = 256;

/** One script call over some of the request's buckets. */
export interface BucketInspectCall {
  /** Per bucket of the request it covers: its index there, its index in the call, its limits. */
  readonly at: readonly { readonly i: number; readonly index: number; readonly limits: readonly Limit[] }[];
  /** The call's arguments at `now` (µs; '' = Redis TIME). */
  argv(now: string): string[];
}

/** The script calls over the buckets of a request; throws for a bucket named twice with other limits. */
export function bucketInspectCalls(req: InspectRequest, keys: RedisKeys): BucketInspectCall[] {
  const chunks: number[][] = [];
  const open = new Map<string, number[]>();
  req.buckets.forEach((b, i) => {
    const tag = keys.hashTags ? b.tag : '';
    let chunk = open.get(tag);
    if (chunk === undefined || chunk.length >= CHUNK) {
      open.set(tag, (chunk = []));
      chunks.push(chunk);
    }
    chunk.push(i);
  });
  return chunks.map((indices) => {
    const b = new ArgsBuilder();
    const at = indices.map((i) => {
      const { tag, bucket } = req.buckets[i]!;
      const index = b.bucket(bucketArgsOf(tag, keys.base(tag, bucket.name), bucket));
      if (index === 0)
        throw new InvalidArgumentError(
          `buckets[${i}]: bucket ${JSON.stringify(bucket.name)} is named twice with different limits`,
        );
      return { i, index, limits: bucket.limits };
    });
    return { at, argv: (now: string) => b.argv([now], ['0'], false) };
  });
}

/**
 * The calls over the carriers: one for all without hash tags, else one per carrier tag (each
 * carrier on its own); at least one (over no carrier, it reads the time).
 */
export function carrierGroups(
  carriers: readonly Carrier[],
  keys: RedisKeys,
  leased: ReadonlySet<string> = new Set(),
): { readonly indices: readonly number[]; argv(now: string): string[] }[] {
  const byTag = new Map<string, number[]>();
  carriers.forEach((c, i) => {
    const tag = keys.hashTags ? carrierTag(c.name) : '';
    let list = byTag.get(tag);
    if (list === undefined) byTag.set(tag, (list = []));
    list.push(i);
  });
  if (byTag.size === 0) byTag.set('', []);
  return [...byTag.values()].map((indices) => ({
    indices,
    argv: (now: string) =>
      carrierInspectArgv(
        indices.map((i) => carriers[i]!),
        keys,
        now,
        leased,
      ),
  }));
}

/**
 * The arguments of the call over the carriers at `now`: KEYS, each carrier's last slot, then
 * the holds of those with a channel limit, then the share hash and slot log of those `leased`
 * (carrier names: docs/leasing.md), each once.
 */
export function carrierInspectArgv(
  carriers: readonly Carrier[],
  keys: RedisKeys,
  now: string,
  leased: ReadonlySet<string> = new Set(),
): string[] {
  const list: string[] = [];
  const keyOf = (k: string): string => {
    let i = list.indexOf(k);
    if (i < 0) i = list.push(k) - 1;
    return String(i + 1);
  };
  const entries: string[] = [];
  for (const c of carriers) entries.push(keyOf(keys.carrier(c)), rateText(c), '', '0', '0', '0');
  carriers.forEach((c, i) => {
    entries[6 * i + 2] = (c.channels ?? 0) > 0 ? keyOf(holdsKey(keys.carrier(c))) : '0';
  });
  carriers.forEach((c, i) => {
    if (!leased.has(c.name)) return;
    const [share, slots] = keys.carrierLease(c);
    entries.splice(6 * i + 3, 3, keyOf(share), keyOf(slots), String(CARRIER_LEASE_WINDOW_US));
  });
  return [String(list.length), ...list, now, '0', '0', String(carriers.length), ...entries];
}
