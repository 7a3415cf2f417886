/**
 * Two Redis "regions" on loopback (test/lease-regions.test.ts, test/lease-carrier-regions.test.ts,
 * bench/lease-carriers.ts): servers A and B, and a proxy to B adding `delayMs` each way (the
 * link a coordinator in region A reaches B through), with the clients made for them closed at
 * the end.
 */
import { expect } from 'chai';
import { Redis } from 'ioredis';
import { startDelayProxy, type DelayProxy } from './delay-proxy.js';
import { startRedisServer, type RedisServer } from './redis.js';

export interface Regions {
  readonly a: RedisServer;
  readonly b: RedisServer;
  readonly proxy: DelayProxy;
  /** B through the proxy. */
  readonly farUrl: string;
  /**
   * A client (closed by stop). `far`: a coordinator's client over the link, which fails fast
   * while the link is down (the lane is then lost at once) and reconnects every 100 ms, not
   * after ioredis' growing backoff. Its errors (the cut link's resets, a restart) are expected.
   */
  client(url: string, far?: boolean): Redis;
  stop(): Promise<void>;
}

export async function startRegions(delayMs: number): Promise<Regions> {
  const [a, b] = await Promise.all([startRedisServer(), startRedisServer()]);
  const proxy = await startDelayProxy({ host: b.host, port: b.port }, delayMs);
  const clients: Redis[] = [];
  return {
    a,
    b,
    proxy,
    farUrl: `redis://127.0.0.1:${proxy.port}`,
    client(url, far = false) {
      const c = new Redis(
        url,
        far ? { maxRetriesPerRequest: 0, enableOfflineQueue: false, retryStrategy: () => 100 } : {},
      );
      c.on('error', () => {});
      clients.push(c);
      return c;
    },
    async stop() {
      for (const c of clients) c.disconnect();
      await proxy.close();
      await Promise.all([a.stop(), b.stop()]);
    },
  };
}

/** startRegions for a mocha suite: started before its tests, stopped after them. */
export function regionsRig(delayMs: number): { readonly regions: Regions } {
  const rig = {} as { regions: Regions };
  before(async () => {
    rig.regions = await startRegions(delayMs);
  });
  after(async () => {
    await rig.regions?.stop();
  });
  return rig;
}

export type Region = 'A' | 'B';

/**
 * One phase of calls on schedule, evenly spaced in each region at its rate (calls per second),
 * B's `offsetBMs` after A's and none of B's before `bFromMs`; `call(region)` for each at its
 * time, not awaited. Resolves at the phase's end, with the calls' promises.
 */
export async function offerPhase(
  ms: number,
  rates: Readonly<Record<Region, number>>,
  call: (region: Region) => Promise<unknown>,
  opts: { readonly offsetBMs?: number; readonly bFromMs?: number } = {},
): Promise<Promise<unknown>[]> {
  const start = performance.now();
  const at = (region: Region, offset: number) =>
    Array.from({ length: (rates[region] * ms) / 1000 }, (_, i) => ({ region, t: (i * 1000) / rates[region] + offset }));
  const arrivals = [...at('A', 0), ...at('B', opts.offsetBMs ?? 3).filter((x) => x.t >= (opts.bFromMs ?? 0))].sort(
    (p, q) => p.t - q.t,
  );
  const pending: Promise<unknown>[] = [];
  for (const x of arrivals) {
    const wait = start + x.t - performance.now();
    if (wait > 0) await sleep(wait);
    pending.push(call(x.region));
  }
  await sleep(Math.max(0, start + ms - performance.now()));
  return pending;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** What the regions' tests note of a call. */
export interface RegionRow {
  readonly region: Region;
  /** Its decision's time, µs (its region's Redis TIME). */
  readonly at: number;
  /** From its issue to its decision, ms. */
  readonly ms: number;
  readonly phase: string;
}

/** Region B's decisions are local: their p99 is under the link's one-way delay (40 ms: a round trip is 80). */
export function expectLocalDecisions(rows: readonly RegionRow[]): void {
  const msB = rows
    .filter((r) => r.region === 'B')
    .map((r) => r.ms)
    .sort((x, y) => x - y);
  expect(msB[Math.floor(msB.length * 0.99)]!, 'p99 of B’s decisions, ms').to.be.below(40);
}

/** The calls of `region` in the last second of `phase` (by decision time). */
export function lastSecond<R extends RegionRow>(rows: readonly R[], phase: string, region: Region): R[] {
  const inPhase = rows.filter((r) => r.phase === phase);
  const end = Math.max(...inPhase.map((r) => r.at));
  return inPhase.filter((r) => r.region === region && r.at > end - 1_000_000);
}
