/**
 * `serve --lease-regions`: every region's Redis, for the sidecar's coordinator candidates of a
 * level leased across regions (docs/leasing.md, "Regions" and "Carriers across regions"). Each
 * entry is a Redis URL, or `cluster:` and the URL of one node of a Cluster; every region's
 * sidecars list the same regions in the same order (the first holds the leadership and the
 * coordinator's state), each by the address it reaches it at.
 */
import type { Cluster, Redis } from 'ioredis';
import { InvalidArgumentError } from '../errors/index.js';
import { checkRedisUrl, openRedis, type RedisConnectionArgs } from './redis.js';

export interface LeaseRegion {
  readonly url: string;
  /** The URL names one node of a Redis Cluster. */
  readonly cluster: boolean;
}

/** --lease-regions as regions (a clear error for an empty entry, a bad URL or a region twice). */
export function parseLeaseRegions(list: string): LeaseRegion[] {
  const regions = list.split(',').map((entry): LeaseRegion => {
    const e = entry.trim();
    const cluster = e.startsWith('cluster:');
    const url = cluster ? e.slice('cluster:'.length) : e;
    if (url === '') throw new InvalidArgumentError(`--lease-regions: an empty entry in ${JSON.stringify(list)}`);
    checkRedisUrl(url, '--lease-regions entry');
    return { url, cluster };
  });
  // the same Redis spelled twice (a trailing '/', a default port, a host's case) is one region:
  // listed twice, its lanes were counted twice and the level halved. (Two seed nodes of one
  // Cluster cannot be told apart here: the coordinator should check at start, e.g. by writing a
  // nonce under each deployment's prefix and reading it back on the others.)
  const same = (u: string): string => {
    const x = new URL(u);
    return `${x.protocol}//${x.hostname.toLowerCase()}:${x.port || '6379'}/${x.pathname.replace(/^\/+|\/+$/g, '') || '0'}`;
  };
  if (new Set(regions.map((r) => same(r.url))).size !== regions.length)
    throw new InvalidArgumentError('--lease-regions: a region is listed twice');
  return regions;
}

/**
 * A client per region, for one coordinator (WAIT, with replicas, blocks the connection it is
 * sent on: each coordinator has its own). Credentials and TLS files as for --redis-url. A
 * command to a region out of reach fails at once and the client retries every 100 ms: its
 * lanes are then lost at once, and found again within 100 ms of the link coming back (docs/leasing.md).
 */
export async function openRegions(
  args: RedisConnectionArgs,
  regions: readonly LeaseRegion[],
): Promise<(Redis | Cluster)[]> {
  return Promise.all(
    regions.map((r) => openRedis({ ...args, redisUrl: r.url, redisCluster: r.cluster }, { service: true, far: true })),
  );
}
