/**
 * A RedisStore on a client from another copy of ioredis than the one callgate resolves (an
 * application with its own ioredis): a Cluster must still be known as one, so keys get hash tags,
 * clear() reaches every master, and a Redis reply error surfaces as itself. The copy is the real
 * ioredis with its dependencies, copied to a scratch node_modules and loaded from there.
 */
import { expect } from 'chai';
import { cpSync, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as ours from 'ioredis';
import { CallGate } from '../src/gate.js';
import { StoreUnavailableError } from '../src/errors/index.js';
import { RedisStore } from '../src/store/redis/redis-store.js';
import { uniquePrefix } from './admission/stores.js';
import { startCluster, type RedisClusterHandle } from './helpers/redis.js';

const ROOT = new URL('..', import.meta.url).pathname;

/** Copies `name` and everything it depends on from the project's node_modules into `into`. */
function copyPackage(name: string, into: string, seen = new Set<string>()): void {
  if (seen.has(name)) return;
  seen.add(name);
  const from = join(ROOT, 'node_modules', name);
  if (!existsSync(from)) throw new Error(`${name} is not in node_modules`);
  cpSync(from, join(into, 'node_modules', name), { recursive: true, dereference: true });
  const pkg = JSON.parse(readFileSync(join(from, 'package.json'), 'utf8')) as { dependencies?: Record<string, string> };
  for (const dep of Object.keys(pkg.dependencies ?? {})) {
    // a dependency nested in the package's own node_modules came along with it
    if (!existsSync(join(from, 'node_modules', dep))) copyPackage(dep, into, seen);
  }
}

type IoRedis = typeof ours;

describe('RedisStore with a client from another copy of ioredis', function () {
  this.timeout(120_000);
  let dir: string;
  let copy: IoRedis;
  let handle: RedisClusterHandle;
  let cluster: ours.Cluster;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'callgate-ioredis-copy-'));
    copyPackage('ioredis', dir);
    copy = createRequire(join(dir, 'app.js'))('ioredis') as IoRedis;
    handle = await startCluster();
    // typed as our Cluster: the copy's class is the same code, a distinct class at run time
    cluster = new copy.Cluster(handle.nodes, {
      enableReadyCheck: true,
      slotsRefreshTimeout: 2_000,
      clusterRetryStrategy: (times: number) => (times > 10 ? null : Math.min(100 * times, 1_000)),
      redisOptions: { connectTimeout: 2_000, maxRetriesPerRequest: 1 },
    });
    await new Promise<void>((resolve, reject) => {
      cluster.once('ready', resolve);
      cluster.once('error', reject);
    });
  });
  after(async () => {
    cluster?.disconnect();
    await handle?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  /** Every key under `prefix`, from every master. */
  async function keysOf(prefix: string): Promise<string[][]> {
    return Promise.all(cluster.nodes('master').map((node) => node.keys(`${prefix}*`)));
  }

  it('the copy is a distinct ioredis: its classes are not ours', () => {
    expect(copy.Cluster).not.to.equal(ours.Cluster);
    expect(copy.ReplyError).not.to.equal(ours.ReplyError);
    expect(cluster).not.to.be.instanceOf(ours.Cluster);
  });

  it('admissions on three levels, records and reservations: exact, hash-tagged keys, no CROSSSLOT', async () => {
    const prefix = uniquePrefix('copy');
    // policy 'error': a store error throws instead of being decided by a policy
    const gate = await CallGate.create({
      config: {
        inbound: {
          global: [{ limit: 3, window: 'PT60S' }],
          accounts: { acme: [{ limit: 2, window: 'PT60S' }] },
          peers: { p1: [{ limit: 5, window: 'PT60S' }] },
        },
        outbound: { carriers: { A: { cps: 1, maxWait: 'PT0S' }, B: { cps: 1, maxWait: 'PT0S' } } },
      },
      store: new RedisStore({ redis: cluster, prefix }),
      policy: 'error',
    });
    try {
      const decisions = [];
      for (const id of ['c1', 'c2', 'c3'])
        decisions.push(await gate.admit({ callId: id, peer: 'p1', account: 'acme' }));
      expect(decisions.map((d) => [d.admitted, d.limitedBy ?? null, d.degraded ?? null])).to.deep.equal([
        [true, null, null],
        [true, null, null],
        [false, 'account:acme', null],
      ]);
      // an emergency call counts at every level; the global limit (3) is then reached
      expect((await gate.record({ callId: 'e1', peer: 'p1' })).degraded).to.equal(undefined);
      expect(await gate.admit({ callId: 'c4', peer: 'p1' })).to.include({ admitted: false, limitedBy: 'global' });
      // reservations: A takes the first, the second moves to B, the third finds no carrier
      const r = [];
      for (const id of ['o1', 'o2', 'o3']) r.push(await gate.reserve({ callId: id, route: ['A', 'B'] }));
      expect(r.map((x) => [x.outcome, x.carrier])).to.deep.equal([
        ['dispatched', 'A'],
        ['dispatched', 'B'],
        ['rejected', null],
      ]);
      const keys = (await keysOf(prefix)).flat();
      expect(keys.length).to.be.greaterThan(0);
      for (const key of keys) expect(key, key).to.match(/^[^{}]*\{(in|out(:[^{}]+)?)\}/);
    } finally {
      await gate.store.clear();
      await gate.close();
    }
  });

  it('clear() deletes the keys on every master, not only one', async () => {
    const prefix = uniquePrefix('copy-clear');
    const peers = Object.fromEntries(Array.from({ length: 24 }, (_, i) => [`p${i}`, [{ limit: 1, window: 'PT60S' }]]));
    const store = new RedisStore({ redis: cluster, prefix });
    const gate = await CallGate.create({ config: { inbound: { peers } }, store, policy: 'error' });
    for (const peer of Object.keys(peers))
      expect((await gate.admit({ callId: `c-${peer}`, peer })).admitted).to.equal(true);
    const before = await keysOf(prefix);
    expect(before.filter((k) => k.length > 0).length, 'keys on several masters').to.be.at.least(2);
    await store.clear();
    expect((await keysOf(prefix)).flat()).to.deep.equal([]);
    await gate.close();
  });

  it("a Redis reply error from the copy surfaces as itself, not as 'store unavailable'", async () => {
    // without hash tags the three buckets of a call sit in different slots: Redis answers CROSSSLOT
    const store = new RedisStore({ redis: cluster, prefix: uniquePrefix('copy-crossslot'), hashTags: false });
    const gate = await CallGate.create({
      config: {
        inbound: {
          global: [{ limit: 9, window: 'PT1S' }],
          accounts: { acme: [{ limit: 9, window: 'PT1S' }] },
          peers: { p1: [{ limit: 9, window: 'PT1S' }] },
        },
      },
      store,
      policy: 'error',
    });
    const err = await gate.admit({ callId: 'x', peer: 'p1', account: 'acme' }).then(
      () => undefined,
      (e: unknown) => e as Error,
    );
    expect(err).to.be.instanceOf(copy.ReplyError);
    expect(err).not.to.be.instanceOf(StoreUnavailableError);
    expect(err!.message).to.match(/CROSSSLOT/);
    await gate.close();
  });
});
