/**
 * The holds keeper's cases with one Redis and two routing processes' stores (each its own
 * connection and ledger), faster than the multi-process runs of test/holds-*.test.ts:
 * - a call released by another process just before Redis restarts empty does not come back
 *   (its release is sent again with a tombstone; whichever of the two processes is first);
 * - the periodic sync forgets a call released by another process;
 * - keys lost without a reconnect (FLUSHALL) are seen by the sync (the marker changed) and the
 *   holds come back.
 */
import { expect } from 'chai';
import type { Redis } from 'ioredis';
import { RedisStore } from '../src/store/redis/redis-store.js';
import type { HoldsReassertedEvent, StoreLossEvent } from '../src/store/types.js';
import { peerBucket, peerTag } from '../src/store/keys.js';
import { uniquePrefix } from './admission/stores.js';
import { newRedisClient, startRedisServer, type RedisServer } from './helpers/redis.js';
import { sleep } from './holds/harness.js';

const tag = peerTag('k');
const bucket = { name: peerBucket('k'), limits: [], channels: 10 };
const hold = (id: string) => ({ id, forUs: 60_000_000 });

describe('holds keeper: releases elsewhere, sync, a loss without reconnect', function () {
  this.timeout(30_000);
  let server: RedisServer | undefined;
  const clients: Redis[] = [];
  const stores: RedisStore[] = [];
  const pair = (prefix: string, syncMs: number) =>
    [0, 1].map(() => {
      const redis = newRedisClient(server!);
      clients.push(redis);
      const s = new RedisStore({ redis, prefix, holds: { syncMs, graceMs: 300 } });
      stores.push(s);
      return s;
    }) as [RedisStore, RedisStore];
  const held = (s: RedisStore) => s.holds({ tag, name: bucket.name }).then((r) => r.holds);
  before(async () => {
    server = await startRedisServer();
  });
  afterEach(async () => {
    for (const s of stores.splice(0)) await s.close();
    for (const c of clients.splice(0)) c.disconnect();
  });
  after(async () => {
    await server?.stop();
  });

  it('a call released elsewhere just before an empty restart does not come back', async () => {
    const [a, b] = pair(uniquePrefix('keeper-tomb'), 200);
    for (const id of ['x', 'y'])
      expect((await a.admit({ tag, buckets: [bucket], hold: hold(id) })).admitted).to.equal(true);
    expect((await b.release({ id: 'x' })).released).to.equal(1);
    const reasserted: HoldsReassertedEvent[] = [];
    a.events.on('holdsReasserted', (e) => reasserted.push(e));
    for (const s of [a, b]) s.events.on('error', () => undefined);
    await server!.restart();
    // both reconnect, re-assert (a: x and y) and re-send (b: x, with a tombstone), in either order
    for (let i = 0; i < 100 && reasserted.length === 0; i++) await sleep(50);
    // a brought x back before b's re-send dropped it, or found b's tombstone: its ledger forgets x either way
    for (let i = 0; i < 40 && a.ledger.get('x') !== undefined; i++) await sleep(50);
    expect(await held(a)).to.equal(1);
    expect(a.ledger.get('x')).to.equal(undefined);
    expect((await a.release({ id: 'y' })).released).to.equal(1);
  });

  it('a call released elsewhere after a restart, before its process wrote it back, does not come back', async () => {
    const [a, b] = pair(uniquePrefix('keeper-late'), 200);
    for (const s of [a, b]) s.events.on('error', () => undefined);
    expect((await a.admit({ tag, buckets: [bucket], hold: hold('z') })).admitted).to.equal(true);
    // a is away while Redis restarts empty and b releases the call: b finds nothing
    clients[0]!.disconnect();
    await server!.restart();
    let answer = -1;
    for (let i = 0; i < 100 && answer < 0; i++)
      answer = (await b.release({ id: 'z' }).catch(() => ({ released: -1 }))).released;
    expect(answer).to.equal(0);
    // a comes back and writes its calls back: the tombstone b left keeps z out
    await clients[0]!.connect();
    for (let i = 0; i < 40 && a.ledger.get('z') !== undefined; i++) await sleep(50);
    expect(a.ledger.get('z')).to.equal(undefined);
    expect(await held(a)).to.equal(0);
  });

  it('the periodic sync forgets a call released by another process', async () => {
    const [a, b] = pair(uniquePrefix('keeper-sync'), 200);
    expect((await a.admit({ tag, buckets: [bucket], hold: hold('s1') })).admitted).to.equal(true);
    await sleep(500); // a sync learns the marker
    expect((await b.release({ id: 's1' })).released).to.equal(1);
    const events: HoldsReassertedEvent[] = [];
    a.events.on('holdsReasserted', (e) => events.push(e));
    for (let i = 0; i < 40 && a.ledger.get('s1') !== undefined; i++) await sleep(50);
    expect(a.ledger.get('s1')).to.equal(undefined);
    expect(events.some((e) => e.gone === 1)).to.equal(true);
    expect(await held(a)).to.equal(0);
  });

  it('keys lost without a reconnect (FLUSHALL): the sync sees the marker changed and the holds come back', async () => {
    const [a] = pair(uniquePrefix('keeper-flush'), 200);
    for (const id of ['f1', 'f2']) await a.admit({ tag, buckets: [bucket], hold: hold(id) });
    await sleep(500); // a sync learns the marker
    const losses: StoreLossEvent[] = [];
    a.events.on('storeLoss', (e) => losses.push(e));
    await clients[0]!.flushall();
    expect(await held(a)).to.equal(0);
    for (let i = 0; i < 40 && losses.length === 0; i++) await sleep(50);
    expect(losses.map((l) => l.cause)).to.include('marker');
    expect(await held(a)).to.equal(2);
    expect((await a.release({ id: 'f1' })).released).to.equal(1);
  });
});
