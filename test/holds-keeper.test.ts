/**
 * The holds keeper's cases with one Redis and two routing processes' stores (each its own
 * connection and ledger), faster than the multi-process runs of test/holds-*.test.ts:
 * - a call released by another process just before Redis restarts empty does not come back
 *   (its release is sent again with a tombstone; whichever of the two processes is first);
 * - the periodic sync forgets a call released by another process;
 * - keys lost without a reconnect (FLUSHALL) are seen by the sync (the marker changed) and the
 *   holds come back;
 * - a release that lands between a re-assertion's read of the ledger and its write does not leave
 *   its call held: after a sync's read (the release sent while the write waits), and after a loss
 *   (the release on its way when the connection broke, held back by Redis until after the read).
 *   The order is made, not waited for: a store whose re-assertions wait for the test, and
 *   `CLIENT PAUSE WRITE` on the real server;
 * - a decision issued just as the connection breaks waits for the holds to come back;
 * - a process that once saw another keeps waiting out the recovery grace for it after an empty
 *   restart, even when a sync in an earlier grace read no other (the other not back yet).
 */
import { expect } from 'chai';
import type { Redis } from 'ioredis';
import { RedisStore } from '../src/store/redis/redis-store.js';
import type {
  AdmitResult,
  HoldsReassertedEvent,
  ReassertRequest,
  ReassertResult,
  ReleaseResult,
  StoreLossEvent,
} from '../src/store/types.js';
import { peerBucket, peerTag } from '../src/store/keys.js';
import { uniquePrefix } from './admission/stores.js';
import { newRedisClient, startRedisServer, type RedisServer } from './helpers/redis.js';
import { sleep } from './holds/harness.js';

const tag = peerTag('k');
const bucket = { name: peerBucket('k'), limits: [], channels: 10 };
const hold = (id: string) => ({ id, forUs: 60_000_000 });

/** The real store, whose re-assertions (the keeper's writes, each after its read of the ledger) first await `before`. */
class OrderedStore extends RedisStore {
  before?: (req: ReassertRequest) => Promise<void>;
  override async reassert(req: ReassertRequest): Promise<ReassertResult> {
    await this.before?.(req);
    return super.reassert(req);
  }
}

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
  const ordered = (prefix: string, graceMs = 300) => {
    const redis = newRedisClient(server!);
    clients.push(redis);
    const s = new OrderedStore({ redis, prefix, holds: { syncMs: 0, graceMs } });
    stores.push(s);
    s.events.on('error', () => undefined);
    return s;
  };

  it("a release landing between a sync's read of the ledger and its write: the call stays released", async () => {
    const a = ordered(uniquePrefix('keeper-race-sync'));
    for (const id of ['x', 'y'])
      expect((await a.admit({ tag, buckets: [bucket], hold: hold(id) })).admitted).to.equal(true);
    await a.writeLedger(); // a sync: a learns the marker
    await clients[0]!.flushall(); // the keys are lost without a reconnect: the next sync writes them back
    let reached!: (ids: string[]) => void;
    const read = new Promise<string[]>((r) => (reached = r));
    let write!: () => void;
    const go = new Promise<void>((r) => (write = r));
    a.before = async (req) => {
      a.before = undefined;
      reached(req.calls.map((c) => c.id));
      await go;
    };
    const sync = a.writeLedger();
    expect(await read).to.deep.equal(['x', 'y']); // read from the ledger; the write waits
    // x's release lands first: nothing to drop (flushed)
    expect((await a.release({ id: 'x' })).released).to.equal(0);
    write();
    await sync;
    // the write found x's tombstone (its release was sent again): only y holds
    expect(await held(a)).to.equal(1);
    expect(a.ledger.get('x')).to.equal(undefined);
    expect((await a.release({ id: 'y' })).released).to.equal(1);
    expect(await held(a)).to.equal(0);
  });

  it('a release on its way when the connection broke, landing after the re-assertion read: released', async () => {
    const a = ordered(uniquePrefix('keeper-race-lost'));
    for (const id of ['x', 'y'])
      expect((await a.admit({ tag, buckets: [bucket], hold: hold(id) })).admitted).to.equal(true);
    const admin = newRedisClient(server!);
    clients.push(admin);
    const reads: string[][] = [];
    a.before = async (req) => {
      reads.push(req.calls.map((c) => c.id));
    };
    const reasserted: HoldsReassertedEvent[] = [];
    a.events.on('holdsReasserted', (e) => reasserted.push(e));
    const connection = String(await clients[0]!.client('ID'));
    // writes wait on the server: x's release will be answered only after the keeper's read
    await admin.call('CLIENT', 'PAUSE', '5000', 'WRITE');
    let release: Promise<ReleaseResult> | undefined;
    try {
      // x is released just as the connection breaks, before the store hears of it: no wait for
      // the recovery, its command leaves once the connection is back (after the keeper's INFO)
      clients[0]!.stream.once('close', () => (release = a.release({ id: 'x' })));
      await admin.client('KILL', 'ID', connection);
      for (let i = 0; i < 100 && reads.length === 0; i++) await sleep(20);
    } finally {
      await admin.call('CLIENT', 'UNPAUSE');
    }
    expect(reads[0], 'the keeper read x while its release was on its way').to.deep.equal(['x', 'y']);
    expect(release).to.not.equal(undefined);
    expect((await release!).released).to.equal(1);
    for (let i = 0; i < 100 && reasserted.length === 0; i++) await sleep(20);
    expect(reasserted.length).to.be.greaterThan(0);
    // the write brought x back after its release; the release, sent again, dropped it
    expect(await held(a)).to.equal(1);
    expect(a.ledger.get('x')).to.equal(undefined);
    expect((await a.release({ id: 'y' })).released).to.equal(1);
    expect(await held(a)).to.equal(0);
  });

  it('a marker changed under a pass of policy decisions alone: the next whole pass writes the rest back', async () => {
    // found by a review: the policy decisions' pass took the new marker as known, and the next
    // sync took every other call's missing record for a release elsewhere and forgot it
    const [a] = pair(uniquePrefix('keeper-unwritten'), 60_000);
    a.events.on('error', () => undefined);
    const losses: StoreLossEvent[] = [];
    a.events.on('storeLoss', (e) => losses.push(e));
    for (const id of ['f1', 'f2'])
      expect((await a.admit({ tag, buckets: [bucket], hold: hold(id) })).admitted).to.equal(true);
    await a.writeLedger(); // a sync: the marker is known
    await clients[0]!.flushall(); // FLUSHALL behind the open connection: no loss seen
    // a call let in by policy (as Admission's noteUnwritten adds it)
    a.ledger.add('u1', 'in', { tag, buckets: [bucket], end: Date.now() * 1000 + 60_000_000, unwritten: true });
    for (let i = 0; i < 100 && (await held(a)) < 3; i++) await sleep(20);
    expect(await held(a), 'u1 written, then f1 and f2 by the whole pass it asked for').to.equal(3);
    await a.writeLedger(); // and the periodic sync keeps them
    expect(await held(a)).to.equal(3);
    expect(a.ledger.size).to.equal(3);
    expect(losses.map((e) => e.cause)).to.deep.equal(['marker']);
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
    // (while b knows Redis is down its release fails at once: try until it is back)
    for (let i = 0; i < 100 && answer < 0; i++) {
      answer = (await b.release({ id: 'z' }).catch(() => ({ released: -1 }))).released;
      if (answer < 0) await sleep(50);
    }
    expect(answer).to.equal(0);
    // a comes back and writes its calls back: the tombstone b left keeps z out
    await clients[0]!.connect();
    for (let i = 0; i < 40 && a.ledger.get('z') !== undefined; i++) await sleep(50);
    expect(a.ledger.get('z')).to.equal(undefined);
    expect(await held(a)).to.equal(0);
  });

  it('a decision issued as the connection breaks, before the store hears of it, waits for the holds', async () => {
    const a = ordered(uniquePrefix('keeper-race-admit'));
    const one = { ...bucket, channels: 1 };
    expect((await a.admit({ tag, buckets: [one], hold: hold('x') })).admitted).to.equal(true);
    const admin = newRedisClient(server!);
    clients.push(admin);
    const connection = String(await clients[0]!.client('ID'));
    await admin.flushall(); // Redis lost x's hold: a's connection breaks next
    let decided: Promise<AdmitResult> | undefined;
    // y is issued after the socket closed, before ioredis says so: no gate closed yet; it leaves
    // once the connection is back, which is before x's hold is (the keeper writes it after its INFO)
    clients[0]!.stream.once('close', () => (decided = a.admit({ tag, buckets: [one], hold: hold('y') })));
    await admin.client('KILL', 'ID', connection);
    for (let i = 0; i < 100 && decided === undefined; i++) await sleep(20);
    expect(decided).to.not.equal(undefined);
    // it waited for x's hold: refused, as x is still in progress
    expect((await decided!).admitted).to.equal(false);
    expect(await held(a)).to.equal(1);
    expect((await a.release({ id: 'x' })).released).to.equal(1);
  });

  it("a sync in a new marker's grace, before another process wrote back: the next empty restart still waits for it", async () => {
    const prefix = uniquePrefix('keeper-grace');
    const [a, b] = [ordered(prefix, 2_000), ordered(prefix, 2_000)];
    const two = { ...bucket, channels: 2 };
    expect((await a.admit({ tag, buckets: [two], hold: hold('a1') })).admitted).to.equal(true);
    expect((await b.admit({ tag, buckets: [two], hold: hold('b1') })).admitted).to.equal(true);
    // each registers; a looks twice and sees b
    await b.writeLedger();
    await a.writeLedger();
    await a.writeLedger();
    // b's write-back after a loss waits for the test (letB: once it is there)
    let blocked: (() => void) | undefined;
    b.before = (req) => (req.mode === 'lost' ? new Promise<void>((go) => (blocked = go)) : Promise.resolve());
    const letB = async () => {
      for (let i = 0; i < 200 && blocked === undefined; i++) await sleep(10);
      expect(blocked, "b's write-back").to.not.equal(undefined);
      const go = blocked!;
      blocked = undefined;
      go();
    };
    const backs: number[] = [];
    a.events.on('holdsReasserted', () => backs.push(Date.now()));
    const restartedEmpty = async () => {
      const n = backs.length;
      await server!.restart();
      for (let i = 0; i < 200 && backs.length === n; i++) await sleep(10);
      expect(backs.length, 'a wrote its calls back').to.be.above(n);
    };
    // first empty restart: a is back first (a new marker, in its grace) and syncs before b
    // registers again: that sync reads no other process
    await restartedEmpty();
    await a.writeLedger();
    await letB();
    for (let i = 0; i < 100 && (await held(a)) < 2; i++) await sleep(10);
    expect(await held(a), 'a1 and b1 back').to.equal(2);
    await sleep(2_100); // the grace is over
    // second empty restart: a, back first again, must wait out the grace for b (which it saw
    // before): a decision taken at once would not count b1, which comes back next
    await restartedEmpty();
    const a2 = a.admit({ tag, buckets: [two], hold: hold('a2') });
    // (a decision that does not wait is back within ms; only then may b write back)
    await Promise.race([a2, sleep(300)]);
    await letB();
    expect((await a2).admitted, 'a2 waited for b1: refused').to.equal(false);
    expect(await held(a)).to.equal(2);
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

  it('the periodic sync writes back a holds set lost alone (evicted), with its expiry; it leaves a hold still there as it is', async () => {
    const prefix = uniquePrefix('keeper-evict');
    const [a] = pair(prefix, 200);
    const other = { name: peerBucket('k2'), limits: [], channels: 10 };
    await a.admit({ tag, buckets: [bucket, other], hold: hold('e1') });
    await a.admit({ tag, buckets: [bucket], hold: hold('e2') });
    await sleep(500); // a sync learns the marker
    const raw = clients[0]!;
    const sets = (await raw.keys(`${prefix}*:ch`)).sort();
    expect(sets).to.have.length(2);
    const [kept, evicted] = sets[0]!.includes('k2') ? [sets[1]!, sets[0]!] : [sets[0]!, sets[1]!];
    const before = await raw.zrange(kept, '0', '-1', 'WITHSCORES');
    // a set whose expiry no longer covers its holds: the sync leaves its holds as they are but
    // lengthens the set's expiry (checked once per set and pass)
    await raw.pexpire(kept, 20_000);
    await raw.del(evicted); // the marker unchanged: no loss seen, the sync trusts the records
    for (let i = 0; i < 40 && (await raw.exists(evicted)) === 0; i++) await sleep(50);
    expect(await raw.zrange(evicted, '0', '-1', 'WITHSCORES')).to.deep.equal(['e1', before[1]!]);
    expect(await raw.pttl(evicted), 'back until its hold ends').to.be.within(55_000, 60_001);
    await sleep(300); // another sync
    expect(await raw.zrange(kept, '0', '-1', 'WITHSCORES')).to.deep.equal(before);
    expect(await raw.pttl(kept), 'lengthened to its latest hold').to.be.within(55_000, 60_001);
    expect(await held(a)).to.equal(2);
  });

  it('a sync pass: its record read once per call, a tombstone only where one is missing, 64 calls per script call', async () => {
    // a sync runs every syncMs for every call in progress, whatever the traffic: what each call
    // costs it is what channels cost Redis for calls of minutes
    const [a] = pair(uniquePrefix('keeper-cost'), 0);
    const other = { name: peerBucket('k3'), limits: [], channels: 1000 };
    const wide = { ...bucket, channels: 1000 };
    for (let i = 0; i < 100; i++) await a.admit({ tag, buckets: [wide, other], hold: hold(`c${i}`) });
    await a.writeLedger(); // the first pass learns the marker
    const raw = clients[0]!;
    await raw.config('RESETSTAT');
    await a.writeLedger();
    const stats = await raw.info('commandstats');
    const calls = (cmd: string) => Number(new RegExp(`cmdstat_${cmd}:calls=(\\d+)`).exec(stats)?.[1] ?? 0);
    expect(calls('evalsha') + calls('eval'), 'script calls: 64 + 36 calls').to.equal(2);
    expect(calls('get'), "each call's record, and the marker per script call (no tombstone)").to.equal(100 + 2);
    expect(calls('zadd'), 'each hold checked (left as it is)').to.equal(200);
    expect(await held(a)).to.equal(100);
  });

  it('a holds set evicted, then made again by other writes: the sync brings back every hold', async () => {
    const prefix = uniquePrefix('keeper-remade');
    const [a] = pair(prefix, 0);
    const wide = { ...bucket, channels: 1000 };
    for (let i = 0; i < 100; i++) await a.admit({ tag, buckets: [wide], hold: hold(`r${i}`) });
    await a.writeLedger(); // the marker learnt
    const raw = clients[0]!;
    const [set] = await raw.keys(`${prefix}*:ch`);
    await raw.del(set!); // evicted, the marker unchanged: no loss seen
    // a new call makes the set again, with its own hold only
    await a.admit({ tag, buckets: [wide], hold: hold('new') });
    expect(await held(a)).to.equal(1);
    // one pass, two script calls: the second finds the set there (made again by the first)
    await a.writeLedger();
    expect(await held(a)).to.equal(101);
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

  /** A store with hash tags (a Cluster's key layout: locators) on the single server, and its raw client. */
  const tagged = (prefix: string) => {
    const redis = newRedisClient(server!);
    clients.push(redis);
    const s = new RedisStore({ redis, prefix, hashTags: true, holds: { syncMs: 0, graceMs: 300 } });
    stores.push(s);
    s.events.on('error', () => undefined);
    return { s, raw: redis };
  };

  it('hash tags: a call whose locator was lost is still released by the process that admitted it', async () => {
    const prefix = uniquePrefix('keeper-own');
    const { s: a, raw } = tagged(prefix);
    expect((await a.admit({ tag, buckets: [bucket], hold: hold('o1') })).admitted).to.equal(true);
    // its locator written to a master deposed before its replica copied it: gone
    expect(await raw.del(`${prefix}{c:o1}:loc`)).to.equal(1);
    expect((await a.release({ id: 'o1' })).released).to.equal(1);
    expect(await held(a)).to.equal(0);
  });

  it('hash tags: a release answered late, then retried, is sent again after a loss with what it first found', async () => {
    const prefix = uniquePrefix('keeper-retry');
    const { s: a, raw } = tagged(prefix);
    expect((await a.admit({ tag, buckets: [bucket], hold: hold('r1') })).admitted).to.equal(true);
    const record = `${prefix}{${tag}}:call:in:r1`;
    const [set] = await raw.keys(`${prefix}*:ch`);
    const saved = { record: await raw.dumpBuffer(record), score: await raw.zscore(set!, 'r1') };
    expect(saved.record).to.not.equal(null);
    expect((await a.release({ id: 'r1' })).released).to.equal(1);
    // the retry of a deferred release: nothing left where the first attempt found the call
    expect((await a.release({ id: 'r1' })).released).to.equal(0);
    // the first attempt had landed on a master deposed before its replica copied it: the call
    // is back on the new master, and the process's connection to it is lost and made again
    await raw.restore(record, 0, saved.record!, 'REPLACE');
    await raw.zadd(set!, saved.score!, 'r1');
    expect(await held(a)).to.equal(1);
    const connection = String(await raw.client('ID'));
    const admin = newRedisClient(server!);
    clients.push(admin);
    await admin.client('KILL', 'ID', connection);
    // (no call left in the ledger: no re-assertion to wait for; the re-sent release, or nothing)
    for (let i = 0; i < 50 && (await held(a)) > 0; i++) await sleep(20);
    expect(await held(a)).to.equal(0);
    expect(await raw.exists(record)).to.equal(0);
  });
});
