/**
 * Counting only what was decided: calls whose decision timed out while Redis was stalled
 * (SIGSTOP) were decided by the store-trouble policy, so when Redis wakes and finally runs the
 * commands already written to it, the scripts skip them (their deadline, in Redis time, has
 * passed): nothing is counted and no slot is taken, under every policy; the channels of the calls
 * the policy let in (fail-open, local) are then held once, written back from the call ledger.
 */
import { expect } from 'chai';
import { Redis } from 'ioredis';
import type { AdmissionDecision, StorePolicy } from '../src/admission/admission.js';
import type { CallGateConfigInput } from '../src/config/index.js';
import { StoreUnavailableError } from '../src/errors/index.js';
import { CallGate } from '../src/gate.js';
import { carrierName, OUTBOUND_TAG, peerBucket, peerTag } from '../src/store/keys.js';
import { RedisStore } from '../src/store/redis/redis-store.js';
import { startRedisServer, type RedisServer } from './helpers/redis.js';
import { uniquePrefix } from './admission/stores.js';

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const config: CallGateConfigInput = {
  inbound: { peers: { p: [{ limit: 1_000, window: 'PT60S' }, { channels: 1_000 }] } },
  outbound: { carriers: { A: { cps: 1, maxWait: 'PT100S', channels: 100 } } },
};

describe('decisions that timed out while Redis was stalled are never counted when it wakes', function () {
  this.timeout(30_000);
  let server: RedisServer;
  before(async () => {
    server = await startRedisServer();
  });
  after(async () => {
    server?.resume();
    await server?.stop();
  });

  for (const policy of ['fail-closed', 'fail-open', 'local'] as StorePolicy[]) {
    it(`policy ${policy}: 20 admits, 5 records and 5 reservations issued during a 1.5 s stall count nothing`, async () => {
      const prefix = uniquePrefix(`stall-${policy}`);
      const client = new Redis(server.url, { maxRetriesPerRequest: 1 });
      const store = new RedisStore({ redis: client, prefix });
      const gate = await CallGate.create({ config, store, policy, timeoutMs: 200 });
      const admin = new Redis(server.url);
      try {
        // warm: Redis' clock is measured, scripts are loaded, one call of each kind counted
        expect((await gate.admit({ callId: 'warm', peer: 'p' })).admitted).to.equal(true);
        expect((await gate.reserve({ callId: 'warm-out', route: ['A'] })).carrier).to.equal('A');
        server.pause();
        const started = Date.now();
        const decisions = await Promise.all([
          ...Array.from({ length: 20 }, (_, i) => gate.admit({ callId: `s${i}`, peer: 'p' })),
          ...Array.from({ length: 5 }, (_, i) => gate.record({ callId: `r${i}`, peer: 'p' })),
        ]);
        const outbound = await Promise.all(
          Array.from({ length: 5 }, (_, i) => gate.reserve({ callId: `o${i}`, route: ['A'] }).catch((e: Error) => e)),
        );
        expect(Date.now() - started, 'every decision came within its timeout').to.be.below(1_200);
        for (const d of decisions) expect(d.degraded, d.callId).to.equal(policy);
        for (const r of outbound) expect(r).to.be.instanceOf(Error);
        await sleep(1_500 - (Date.now() - started));
        server.resume();
        // the commands written during the stall now run (and are skipped); then look
        expect(await admin.ping()).to.equal('PONG');
        await sleep(200);
        const count = await store.count({ tag: peerTag('p'), bucket: peerBucket('p'), windowUs: 60_000_000 });
        expect(count.count, 'only the warm call is counted').to.equal(1);
        // the calls the policy let in hold their channels once Redis answers (the ledger writes
        // them back, docs/redis.md): the stalled commands themselves counted nothing
        await store.writeLedger();
        const holds = await store.holds({ tag: peerTag('p'), name: peerBucket('p') });
        // (the 5 emergency calls of record() go through under every policy, fail-closed too)
        const letIn = policy === 'fail-closed' ? 5 : 25;
        expect(holds.holds, 'the warm call, and those the policy let in, hold a channel').to.equal(1 + letIn);
        const onA = await store.holds({ tag: OUTBOUND_TAG, name: carrierName('A') });
        expect(onA.holds, 'only the warm outbound call holds on A').to.equal(1);
        const wait = await store.wait({ carrier: { name: carrierName('A'), intervalUs: 1_000_000, maxWaitUs: 0 } });
        expect(wait.waitUs, 'no slot was taken after the warm one').to.be.at.most(1_000_000);
        // and the engine decides on Redis again
        const after = await gate.admit({ callId: 'after', peer: 'p' });
        expect(after.admitted && after.degraded === undefined).to.equal(true);
      } finally {
        await gate.close();
        client.disconnect();
        admin.disconnect();
      }
    });
  }
});

describe('Redis down when the process starts', function () {
  this.timeout(10_000);
  for (const add of ['on', 'once', 'addListener'] as const)
    it(`is told on 'error' once, to the listener added after create() (${add})`, async () => {
      // nothing listens on port 1: every connection attempt is refused, the first before any gate listens
      const store = RedisStore.connect('redis://127.0.0.1:1');
      await sleep(300);
      const gate = await CallGate.create({ config, store, timeoutMs: 200 });
      const errors: Error[] = [];
      try {
        gate[add]('error', (e: Error) => errors.push(e));
        expect(await gate.admit({ callId: 'a', peer: 'p' })).to.include({ limitedBy: 'store-unavailable' });
        for (let i = 0; i < 50 && errors.length === 0; i++) await sleep(20);
        await sleep(500);
        expect(errors.map((e) => e.name)).to.deep.equal(['StoreUnavailableError']);
        expect(errors[0]!.message).to.match(/^Redis connection lost/);
      } finally {
        await gate.close();
      }
    });
});

describe('while Redis stalls (SIGSTOP) or restarts: close, policy calls, reload', function () {
  this.timeout(30_000);
  let server: RedisServer;
  before(async () => {
    server = await startRedisServer();
  });
  after(async () => {
    server?.resume();
    await server?.stop();
  });

  it('close() returns in seconds on a store that owns its connection (it waited for QUIT until Redis woke)', async () => {
    const gate = await CallGate.create({
      config,
      store: RedisStore.connect(server.url, { prefix: uniquePrefix('q') }),
    });
    gate.on('error', () => {});
    expect((await gate.admit({ callId: 'a', peer: 'p' })).admitted).to.equal(true);
    server.pause();
    try {
      const started = Date.now();
      const closed = await Promise.race([gate.close().then(() => 'closed'), sleep(10_000).then(() => 'pending')]);
      expect(closed).to.equal('closed');
      expect(Date.now() - started).to.be.below(4_000);
    } finally {
      server.resume();
    }
  });

  it('calls let in by policy are written once it answers, with no periodic sync (syncMs 0) too', async () => {
    const store = RedisStore.connect(server.url, { prefix: uniquePrefix('unwritten'), holds: { syncMs: 0 } });
    const gate = await CallGate.create({ config, store, policy: 'fail-closed', timeoutMs: 200 });
    const losses: unknown[] = [];
    gate.on('storeLoss', (e) => losses.push(e));
    gate.on('error', () => {});
    try {
      expect((await gate.admit({ callId: 'a', peer: 'p' })).admitted).to.equal(true);
      server.pause();
      // an emergency call passes under any policy: its channel must count for everyone once Redis is back
      expect(await gate.record({ callId: 'sos', peer: 'p' })).to.include({ admitted: true, degraded: 'fail-closed' });
      await sleep(300);
      server.resume();
      const back = Date.now();
      const held = () => store.holds({ tag: peerTag('p'), name: peerBucket('p') }).then((h) => h.holds);
      while ((await held()) < 2 && Date.now() - back < 5_000) await sleep(20);
      expect(await held(), 'a and sos hold').to.equal(2);
      expect(Date.now() - back, 'written soon after Redis answered').to.be.below(1_500);
      expect(losses, 'a first write of a policy decision is no loss').to.deep.equal([]);
    } finally {
      await gate.close();
    }
  });

  it('policy local: a decision as Redis wakes waits for the calls let in during the stall', async () => {
    const two: CallGateConfigInput = {
      inbound: { peers: { p: [{ limit: 1_000, window: 'PT60S' }, { channels: 2 }] } },
    };
    const store = RedisStore.connect(server.url, { prefix: uniquePrefix('wake'), holds: { syncMs: 0 } });
    const gate = await CallGate.create({ config: two, store, policy: 'local', timeoutMs: 200 });
    gate.on('error', () => {});
    const stalls: boolean[] = [];
    gate.on('storeStall', (e) => stalls.push(e.stalled));
    try {
      expect((await gate.admit({ callId: 'c1', peer: 'p' })).admitted).to.equal(true);
      server.pause();
      expect(await gate.admit({ callId: 'c2', peer: 'p' })).to.include({ admitted: true, degraded: 'local' });
      server.resume();
      // decided on Redis as soon as it answers, it counted c1 alone: admitted, a third call on 2
      const c3 = await gate.admit({ callId: 'c3', peer: 'p' });
      expect([c3.admitted, c3.reason, c3.degraded]).to.deep.equal([false, 'channels', undefined]);
      expect((await store.holds({ tag: peerTag('p'), name: peerBucket('p') })).holds).to.equal(2);
      // said once as the stall began, once as Redis decided again (no lost connection: no 'error')
      expect(stalls).to.deep.equal([true, false]);
    } finally {
      await gate.close();
    }
  });

  it('a reload turning a channel limit on is refused in time; reloads apply in the order asked', async () => {
    const plain: CallGateConfigInput = { inbound: { peers: { p: [{ limit: 1_000, window: 'PT60S' }] } } };
    const withChannels = (n: number): CallGateConfigInput => ({
      inbound: { peers: { p: [{ limit: 1_000, window: 'PT60S' }, { channels: n }] } },
    });
    const store = RedisStore.connect(server.url, { prefix: uniquePrefix('reload') });
    const gate = await CallGate.create({ config: plain, store, timeoutMs: 300 });
    gate.on('error', () => {});
    try {
      expect((await gate.admit({ callId: 'c1', peer: 'p' })).admitted).to.equal(true);
      server.pause();
      const started = Date.now();
      // A turns channels on: its holds cannot be written. B, asked later, runs after A (it was
      // applied first, then undone by A once Redis woke) and is refused too: the calls A widened
      // are still not written (it applied at once, their holds not counted)
      const a = gate.reload(withChannels(1)).then(
        () => 'applied',
        (e: Error) => e,
      );
      const b = gate.reload(withChannels(50)).then(
        () => 'applied',
        (e: Error) => e,
      );
      for (const r of [await a, await b]) {
        expect(r).to.be.instanceOf(StoreUnavailableError);
        expect((r as Error).message).to.match(/^not reloaded: Redis did not answer within 300 ms/);
      }
      expect(Date.now() - started, 'both answered within their timeouts').to.be.below(2_000);
      expect(gate.config.inbound.peers.get('p')?.channels).to.equal(undefined);
      server.resume();
      // Redis answers: the next reload writes the calls in progress, then applies
      expect(await gate.reload(withChannels(50))).to.have.length(1);
      expect(gate.config.inbound.peers.get('p')?.channels).to.equal(50);
      expect((await store.holds({ tag: peerTag('p'), name: peerBucket('p') })).holds, 'c1 counts').to.equal(1);
    } finally {
      server.resume();
      await gate.close();
    }
  });

  it('a reload just after an empty restart, during the recovery grace, applies: its write does not wait out the grace', async () => {
    // found by a review: the reload's write waited for the keeper's run, which waited out the
    // grace (3 s here) past the decision timeout, and the reload was refused as if Redis slept
    const plain: CallGateConfigInput = { inbound: { peers: { p: [{ limit: 1_000, window: 'PT60S' }] } } };
    const withChannels: CallGateConfigInput = {
      inbound: { peers: { p: [{ limit: 1_000, window: 'PT60S' }, { channels: 5 }] } },
    };
    const prefix = uniquePrefix('reload-grace');
    const holds = { syncMs: 200, graceMs: 3_000 };
    const other = RedisStore.connect(server.url, { prefix, holds });
    other.events.on('error', () => undefined);
    const store = RedisStore.connect(server.url, { prefix, holds });
    const gate = await CallGate.create({ config: plain, store, timeoutMs: 500 });
    gate.on('error', () => {});
    try {
      expect((await gate.admit({ callId: 'c1', peer: 'p' })).admitted).to.equal(true);
      await sleep(1_500); // both synced: each has seen the other, so each waits out the grace
      await server.restart();
      const back = Date.now();
      // Redis answers this store again (a decision without channels goes on Redis)
      let d = await gate.admit({ callId: 'probe', peer: 'p' });
      while (d.degraded !== undefined && Date.now() - back < 5_000) {
        await sleep(50);
        d = await gate.admit({ callId: `probe-${Date.now()}`, peer: 'p' });
      }
      expect(d.degraded).to.equal(undefined);
      const started = Date.now();
      expect(await gate.reload(withChannels)).to.have.length(1);
      expect(Date.now() - started, 'not the grace').to.be.below(1_000);
      expect(gate.config.inbound.peers.get('p')?.channels).to.equal(5);
    } finally {
      await gate.close();
      await other.close();
    }
  });
});

describe('policy local during an outage: each process takes its share of the limits', function () {
  this.timeout(20_000);
  let server: RedisServer;
  before(async () => {
    server = await startRedisServer();
  });
  after(async () => server?.stop());

  const outage: CallGateConfigInput = {
    inbound: { peers: { p: [{ limit: 5, window: 'PT60S' }, { channels: 100 }], q: [{ channels: 4 }] } },
  };

  async function admittedDuringOutage(localShare: number | undefined): Promise<{ p: number; q: number }> {
    const gates = [];
    for (let i = 0; i < 2; i++) {
      const store = RedisStore.connect(server.url, { prefix: uniquePrefix('share') });
      gates.push(await CallGate.create({ config: outage, store, policy: 'local', timeoutMs: 100, localShare }));
    }
    await server.kill();
    try {
      const n = { p: 0, q: 0 };
      for (const [i, g] of gates.entries()) {
        for (let k = 0; k < 8; k++) {
          for (const peer of ['p', 'q'] as const) {
            const d = await g.admit({ callId: `${i}-${peer}-${k}`, peer });
            expect(d.degraded).to.equal('local');
            if (d.admitted) n[peer]++;
          }
        }
      }
      return n;
    } finally {
      for (const g of gates) await g.close();
      await server.restart();
    }
  }

  it('localShare 1/2 with two processes: the platform stays within the limits (5 per minute, 4 channels)', async () => {
    expect(await admittedDuringOutage(0.5)).to.deep.equal({ p: 4, q: 4 }); // 2 x floor(2.5) calls, 2 x floor(2) channels
  });

  it('without a share each process allows the whole limit: N times it in all', async () => {
    expect(await admittedDuringOutage(undefined)).to.deep.equal({ p: 10, q: 8 });
  });

  it('each outage starts from the calls in progress now: one released elsewhere since holds nothing', async () => {
    const prefix = uniquePrefix('stale');
    const one: CallGateConfigInput = { inbound: { peers: { p: [{ channels: 1 }] } } };
    const store = RedisStore.connect(server.url, { prefix, holds: { syncMs: 500 } });
    const gate = await CallGate.create({ config: one, store, policy: 'local', timeoutMs: 100 });
    const other = await CallGate.create({ config: one, store: RedisStore.connect(server.url, { prefix }) });
    for (const g of [gate, other]) g.on('error', () => {});
    try {
      await server.kill();
      expect(await gate.admit({ callId: 'L1', peer: 'p' })).to.include({ admitted: true, degraded: 'local' });
      await server.restart();
      // L1 is written back once Redis answers, then released by the other process
      const held = () =>
        store.holds({ tag: peerTag('p'), name: peerBucket('p') }).then(
          (h) => h.holds,
          () => -1,
        );
      for (const until = Date.now() + 8_000; (await held()) !== 1 && Date.now() < until; ) await sleep(50);
      expect(await held(), 'L1 written back').to.equal(1);
      // (the other process may still be reconnecting: its release is then deferred, and lands)
      const landed = new Promise<string>((resolve) =>
        other.on('released', (e) => e.callId === 'L1' && e.outcome !== 'deferred' && resolve(e.outcome)),
      );
      await other.release('L1');
      expect(await landed, 'released elsewhere').to.equal('released');
      // a sync finds it gone; nothing is in progress anywhere now
      for (const until = Date.now() + 5_000; (store.ledger?.size ?? 0) > 0 && Date.now() < until; ) await sleep(50);
      expect(store.ledger?.size, "the gate's ledger forgot L1").to.equal(0);
      await server.kill();
      // the stand-in held L1 from the first outage and refused this call by channels
      expect(await gate.admit({ callId: 'L2', peer: 'p' })).to.include({ admitted: true, degraded: 'local' });
    } finally {
      await gate.close();
      await other.close();
      await server.restart();
    }
  });

  it('a share outside (0, 1] is refused', async () => {
    for (const localShare of [0, -0.5, 1.5, Number.NaN]) {
      let err: unknown;
      try {
        await CallGate.create({ config: outage, policy: 'local', localShare });
      } catch (e) {
        err = e;
      }
      expect(String(err), String(localShare)).to.match(/localShare must be a number in \(0, 1\]/);
    }
  });
});

describe('while Redis is known to be down, the policy decides at once; back on Redis as soon as it answers', function () {
  this.timeout(30_000);
  const TIMEOUT_MS = 400;
  /**
   * "At once": well under the timeout a decision that waited for Redis would take. Half of it
   * leaves room for a loaded 2-core machine (this process descheduled, a GC pause); unloaded,
   * these decisions take well under a millisecond.
   */
  const AT_ONCE_MS = TIMEOUT_MS / 2;
  let server: RedisServer;
  before(async () => {
    server = await startRedisServer();
  });
  after(async () => server?.stop());

  it('no decision waits its timeout once the outage is known; the first after the restart is on Redis again', async () => {
    const store = RedisStore.connect(server.url, { prefix: uniquePrefix('down') });
    const gate = await CallGate.create({ config, store, policy: 'fail-closed', timeoutMs: TIMEOUT_MS });
    const errors: Error[] = [];
    gate.on('error', (e) => errors.push(e));
    try {
      expect((await gate.admit({ callId: 'up', peer: 'p' })).admitted).to.equal(true);
      await server.kill();
      // the first decision may wait (its timeout at most) while the client finds Redis gone; a
      // failed reconnection makes the outage known
      const first = await gate.admit({ callId: 'first', peer: 'p' });
      expect(first).to.include({ admitted: false, limitedBy: 'store-unavailable' });
      for (let waited = 0; errors.length === 0 && waited < 2_000; waited += 10) await sleep(10);
      expect(errors.length, 'the outage was reported').to.equal(1);
      // a failed reconnection (ioredis retries after 50 ms) makes it known: from then on, at once
      const knownBy = Date.now() + 5_000;
      for (;;) {
        const t = performance.now();
        await gate.admit({ callId: `probe-${Date.now()}`, peer: 'p' });
        if (performance.now() - t < AT_ONCE_MS || Date.now() > knownBy) break;
      }
      const took: number[] = [];
      for (let i = 0; i < 20; i++) {
        const t = performance.now();
        const d = await gate.admit({ callId: `down-${i}`, peer: 'p' });
        took.push(performance.now() - t);
        expect(d).to.include({ admitted: false, limitedBy: 'store-unavailable', degraded: 'fail-closed' });
      }
      expect(Math.max(...took), `decision times ${took.map((x) => x.toFixed(1)).join(', ')} ms`).to.be.below(
        AT_ONCE_MS,
      );
      // a hang-up is deferred at once too (it waited its whole timeout for the calls to come back),
      // and a refresh fails at once
      const landed = new Promise<string>((resolve) =>
        gate.on('released', (e) => e.callId === 'up' && e.outcome !== 'deferred' && resolve(e.outcome)),
      );
      let t = performance.now();
      expect(await gate.release('up')).to.equal('deferred');
      expect(performance.now() - t, 'release').to.be.below(AT_ONCE_MS);
      t = performance.now();
      const refreshed = await gate.refresh('up').catch((e: Error) => e);
      expect(performance.now() - t, 'refresh').to.be.below(AT_ONCE_MS);
      expect(refreshed).to.be.instanceOf(StoreUnavailableError);
      await server.restart();
      // the deferred release lands once the calls are back: the hold is given up, not left
      expect(await landed, 'the deferred release, once Redis is back').to.equal('released');
      const restarted = Date.now();
      let d: AdmissionDecision;
      do {
        d = await gate.admit({ callId: `back-${Date.now()}`, peer: 'p' });
        if (d.degraded) await sleep(5);
      } while (d.degraded && Date.now() - restarted < 10_000);
      expect(d.admitted && d.degraded === undefined, 'decided on Redis again').to.equal(true);
      expect(errors.length, 'still one report for the one outage').to.equal(1);
    } finally {
      await gate.close();
    }
  });
});
