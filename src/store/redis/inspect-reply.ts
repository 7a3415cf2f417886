/** What the inspect script calls (lua/inspect.lua) saw, from their replies (numbers). */
import type { Bucket, InspectResult } from '../types.js';
import type { BucketInspectCall } from './inspect-args.js';

/** The order bucketArgsOf gives a bucket's limits: sliding-log ones widest window first. */
const logWindowOf = (lim: Bucket['limits'][number]): number => (lim.algorithm === 'sliding-log' ? lim.windowUs : 0);

type Buckets = { counts: number[]; retryAfterUs: number[]; channels?: number }[];

/**
 * The buckets of the request (`count` of them), from the replies of their calls: per bucket of a
 * call (each once, in its index order), its limits in profile order, then its calls in progress
 * (-1: no channel limit); back in each bucket's own order of limits.
 */
export function inspectedBuckets(
  calls: readonly BucketInspectCall[],
  replies: readonly number[][],
  count: number,
): InspectResult['buckets'] {
  const buckets: Buckets = new Array(count);
  calls.forEach((call, c) => {
    const reply = replies[c]!;
    const offsets: number[] = [];
    let off = 1;
    for (const { index, limits } of call.at) {
      if (offsets[index] === undefined) {
        offsets[index] = off;
        off += 2 * limits.length + 1;
      }
    }
    for (const { i, index, limits } of call.at) {
      const order = limits.map((_, j) => j).sort((x, y) => logWindowOf(limits[y]!) - logWindowOf(limits[x]!));
      const counts: number[] = new Array(limits.length);
      const retryAfterUs: number[] = new Array(limits.length);
      order.forEach((j, q) => {
        counts[j] = reply[offsets[index]! + 2 * q]!;
        retryAfterUs[j] = reply[offsets[index]! + 2 * q + 1]!;
      });
      const channels = reply[offsets[index]! + 2 * limits.length]!;
      buckets[i] = channels < 0 ? { counts, retryAfterUs } : { counts, retryAfterUs, channels };
    }
  });
  return buckets;
}

/** The carriers (`count` of them), from the reply of their call: per carrier its wait and its calls in progress (-1: no channel limit). */
export function inspectedCarriers(reply: readonly number[], count: number): InspectResult['carriers'] {
  return Array.from({ length: count }, (_, k) => {
    const [waitUs, channels, calls, channelsShare, leftUs, used] = reply.slice(1 + 6 * k, 7 + 6 * k) as number[];
    return {
      waitUs: waitUs!,
      ...(channels! >= 0 && { channels }),
      ...(calls! >= 0 && { lease: { calls: calls!, channels: channelsShare!, leftUs: leftUs!, used: used! } }),
    };
  });
}
