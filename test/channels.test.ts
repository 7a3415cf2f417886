/**
 * The call's life in the engine, on every store: admitted and dispatched calls hold their
 * channels until release() (from any engine sharing the store, knowing only the call id) or
 * until maxCallDuration; refresh() extends; a repeated admit is counted once, also while the
 * first is still being decided; cancel() during a reservation ends the call unsent and gives its
 * carrier channel back; releases that cannot reach the store are kept and land later; the SIP
 * mapping of a channel refusal.
 */
import { expect } from 'chai';
import type { AdmissionDecision } from '../src/admission/admission.js';
import { toSipResponse } from '../src/admission/sip.js';
import { VirtualClock } from '../src/clock.js';
import type { CallGateConfigInput } from '../src/config/index.js';
import { DispatcherClosedError, StoreUnavailableError } from '../src/errors/index.js';
import { CallGate, type ReleasedEvent, type ReleaseOutcome } from '../src/gate.js';
import { carrierName, OUTBOUND_TAG, peerBucket, peerTag, accountBucket, accountTag } from '../src/store/keys.js';
import { MemoryStore } from '../src/store/memory-store.js';
import { RedisStore } from '../src/store/redis/redis-store.js';
import type { Store } from '../src/store/types.js';
import { Redis } from 'ioredis';
import { startRedisServer, type RedisServer } from './helpers/redis.js';
import { orAfter } from './helpers/wait.js';
import { forEachStore, S, T0, uniquePrefix } from './admission/stores.js';

const outcome = (d: AdmissionDecision): string =>
  d.admitted ? (d.duplicate ? 'dup' : 'A') : `${d.limitedBy}:${d.reason ?? '-'}`;
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

const config: CallGateConfigInput = {
  maxCallDuration: 'PT60S',
  inbound: {
    accounts: { acme: [{ channels: 3 }] },
    peers: { pbx: [{ limit: 100, window: 'PT1S' }, { channels: 2 }], 'sbc {x}: 1': [{ channels: 1 }] },
  },
  outbound: { carriers: { A: { cps: 1000, maxWait: 'PT1S', channels: 1 }, B: { cps: 1000, maxWait: 'PT1S' } } },
};

forEachStore('channels in the engine', (kind, name) => {
  let store: Store;
  let clock: VirtualClock;
  let gate: CallGate;
  let n = 0;
  const admit = (peer = 'pbx', account?: string, callId = `c${n++}`) =>
    gate.admit({ callId, peer, account }).then(outcome);
  const inProgress = async (tag: string, bucket: string) =>
    (await store.holds({ tag, name: bucket, now: clock.now() })).holds;
  const onCarrier = async (id: string) =>
    (await store.holds({ tag: OUTBOUND_TAG, name: carrierName(id), now: clock.now() })).holds;

  beforeEach(async () => {
    store = kind().make();
    clock = new VirtualClock(T0);
    gate = await CallGate.create({ config, store, clock, policy: 'error' });
  });
  afterEach(async () => {
    await gate.close({ mode: 'cancel' });
    await store.clear();
  });

  it('holds until release(), by call id only; a second release finds nothing', async () => {
    expect([
      await admit('pbx', 'acme', 'x1'),
      await admit('pbx', 'acme', 'x2'),
      await admit('pbx', 'acme', 'x3'),
    ]).to.deep.equal(['A', 'A', 'peer:pbx:channels']);
    const released: { callId: string; outcome: ReleaseOutcome }[] = [];
    gate.on('released', ({ callId, outcome, at }) => {
      expect(at, 'the store time of the release').to.equal(T0);
      released.push({ callId, outcome });
    });
    expect(await gate.release('x1')).to.equal('released');
    expect(await inProgress(peerTag('pbx'), peerBucket('pbx'))).to.equal(1);
    expect(await admit('pbx', 'acme', 'x3')).to.equal('A');
    expect(await gate.release('x1')).to.equal('not-held');
    expect(await gate.release('never-seen')).to.equal('not-held');
    expect(released).to.deep.equal([
      { callId: 'x1', outcome: 'released' },
      { callId: 'x1', outcome: 'not-held' },
      { callId: 'never-seen', outcome: 'not-held' },
    ]);
    // the account's 3 channels: x2, x3 held; one more on another peer of acme fits, then full
    expect(await admit('sbc {x}: 1', 'acme', 'y1')).to.equal('A');
    expect(await admit('sbc {x}: 1', undefined, 'y2')).to.equal('peer:sbc {x}: 1:channels');
    expect(await inProgress(accountTag('acme'), accountBucket('acme'))).to.equal(3);
    expect(await gate.release('y1')).to.equal('released');
    expect(await inProgress(accountTag('acme'), accountBucket('acme'))).to.equal(2);
  });

  it('a hold lapses maxCallDuration after its decision unless refreshed', async () => {
    expect([await admit('pbx', undefined, 'long'), await admit('pbx', undefined, 'short')]).to.deep.equal(['A', 'A']);
    clock.advance(T0 + 50 * S);
    expect(await gate.refresh('long')).to.equal(true); // now until T0 + 110 s
    clock.advance(T0 + 60 * S); // 'short' lapses exactly now
    expect(await inProgress(peerTag('pbx'), peerBucket('pbx'))).to.equal(1);
    expect(await admit()).to.equal('A');
    expect(await admit()).to.equal('peer:pbx:channels');
    clock.advance(T0 + 110 * S);
    expect(await inProgress(peerTag('pbx'), peerBucket('pbx'))).to.equal(1); // the one admitted at T0+60s holds until T0+120s
    expect(await gate.refresh('long')).to.equal(false); // lapsed
    expect(await gate.release('long')).to.equal('not-held');
  });

  it('a repeated admit is counted once: while still being decided, and while still holding', async () => {
    // issued together: the second joins the first decision (same object, one count)
    const [a, b] = await Promise.all([
      gate.admit({ callId: 'r1', peer: 'pbx' }),
      gate.admit({ callId: 'r1', peer: 'pbx' }),
    ]);
    expect(a).to.equal(b);
    expect(outcome(a)).to.equal('A');
    // a retransmission after the decision: admitted again, flagged, counted nowhere
    expect(await admit('pbx', undefined, 'r1')).to.equal('dup');
    expect(await inProgress(peerTag('pbx'), peerBucket('pbx'))).to.equal(1);
    expect(await admit('pbx', undefined, 'r2')).to.equal('A');
    expect(await admit('pbx', undefined, 'r1')).to.equal('dup'); // the full trunk does not refuse its own call
    expect(await admit('pbx', undefined, 'r3')).to.equal('peer:pbx:channels');
    await gate.release('r1');
    expect(await admit('pbx', undefined, 'r1')).to.equal('A'); // released: the id is a new call again
  });

  it('outbound: a carrier with full channels is passed over; release frees it; the call id ties both legs', async () => {
    const r1 = await gate.reserve({ callId: 'o1', route: ['A', 'B'] });
    const r2 = await gate.reserve({ callId: 'o2', route: ['A', 'B'] });
    expect([r1.carrier, r2.carrier, r2.reroutedFrom]).to.deep.equal(['A', 'B', ['A']]);
    expect(await onCarrier('A')).to.equal(1);
    expect(await admit('pbx', undefined, 'o1')).to.equal('A'); // the inbound leg of o1
    expect(await gate.release('o1')).to.equal('released');
    expect([await onCarrier('A'), await inProgress(peerTag('pbx'), peerBucket('pbx'))]).to.deep.equal([0, 0]);
    const r3 = await gate.reserve({ callId: 'o3', route: ['A', 'B'] });
    expect(r3.carrier).to.equal('A');
  });

  it('cancel() while the reservation is in flight: ends cancelled, never sent, the carrier channel comes back', async () => {
    const sent: string[] = [];
    const p = gate.dispatch({ callId: 'k1', route: ['A'] }, (c) => void sent.push(c));
    expect(gate.cancel('k1'), 'cancel during the reservation').to.equal(true);
    const result = await p;
    expect(result).to.include({ outcome: 'cancelled', reason: 'cancelled', carrier: 'A' });
    clock.advance(T0 + 10 * S);
    await sleep(10);
    expect(sent).to.deep.equal([]);
    await until(async () => (await onCarrier('A')) === 0);
    expect((await gate.reserve({ callId: 'k2', route: ['A'] })).carrier).to.equal('A');
  });

  it('a held call (waiting for its slot) ended by release(): never sent, its channel given back', async () => {
    const sent: string[] = [];
    await gate.reserve({ callId: 'pace', route: ['B'] }); // B's next slot is 1 ms away
    const reserved = new Promise<void>((resolve) => {
      void gate.dispatch({ callId: 'h1', route: ['B', 'A'] }, (c) => void sent.push(c), {
        onReserved: () => resolve(),
      });
    });
    await reserved;
    expect(gate.held).to.equal(1);
    expect(await gate.release('h1')).to.equal('not-held'); // B has no channel limit: nothing was held
    expect(gate.held).to.equal(0);
    clock.advance(T0 + S);
    await sleep(10);
    expect(sent).to.deep.equal([]);
  });

  it('a failed send gives the carrier channel back', async () => {
    const result = await gate.dispatch({ callId: 'f1', route: ['A'] }, () =>
      Promise.reject(new Error('no route to host')),
    );
    expect(result).to.include({ outcome: 'failed', reason: 'send-failed' });
    await until(async () => (await onCarrier('A')) === 0);
  });

  it('channel refusals map to 503 without Retry-After, or as configured', async () => {
    await admit('sbc {x}: 1', undefined, 's1');
    const d = await gate.admit({ callId: 's2', peer: 'sbc {x}: 1' });
    expect(d).to.include({ admitted: false, limitedBy: 'peer:sbc {x}: 1', reason: 'channels', retryAfterMs: 0 });
    expect(toSipResponse(d)).to.deep.equal({ status: 503, reason: 'Service Unavailable' });
    expect(toSipResponse(d, { jitterSeconds: 5 })).to.deep.equal({ status: 503, reason: 'Service Unavailable' });
    expect(toSipResponse(d, { channels: { status: 486 } })).to.deep.equal({ status: 486, reason: 'Busy Here' });
    expect(toSipResponse(d, { channels: { status: 480, retryAfter: 30 } })).to.deep.equal({
      status: 480,
      reason: 'Temporarily Unavailable',
      retryAfter: 30,
    });
    expect(toSipResponse(d, { channels: { status: 503, reason: 'Trunk Full' } })).to.deep.equal({
      status: 503,
      reason: 'Trunk Full',
    });
    expect(() => toSipResponse(d, { channels: { status: 200 } })).to.throw(RangeError);
    expect(() => toSipResponse(d, { channels: { status: 486, retryAfter: -1 } })).to.throw(RangeError);
  });

  it('a reload keeps every hold; new limits apply from the next call', async () => {
    expect([await admit('pbx', undefined, 'z1'), await admit('pbx', undefined, 'z2')]).to.deep.equal(['A', 'A']);
    await gate.reload({ ...config, inbound: { ...config.inbound, peers: { pbx: [{ channels: 3 }] } } });
    expect(await admit('pbx', undefined, 'z3')).to.equal('A');
    expect(await admit('pbx', undefined, 'z4')).to.equal('peer:pbx:channels');
    await gate.reload({ ...config, inbound: { ...config.inbound, peers: { pbx: [{ channels: 1 }] } } });
    await gate.release('z1');
    expect(await admit('pbx', undefined, 'z4')).to.equal('peer:pbx:channels'); // 2 still held > 1
    await gate.release('z2');
    await gate.release('z3');
    expect(await admit('pbx', undefined, 'z4')).to.equal('A');
  });

  if (name === 'redis') {
    it('release() from another engine on the same Redis, knowing only the call id', async () => {
      const other = await CallGate.create({ config, store: kind().make(), clock });
      // the same prefix: make the second engine's store share the first one's keys
      const shared = new RedisStore({ redis: kind().client!, prefix: (store as RedisStore).prefix });
      const peerGate = await CallGate.create({ config, store: shared, clock });
      try {
        expect([await admit('pbx', 'acme', 'q1'), await admit('pbx', 'acme', 'q2')]).to.deep.equal(['A', 'A']);
        expect(await peerGate.release('q1')).to.equal('released');
        expect(await admit('pbx', 'acme', 'q3')).to.equal('A');
        expect(await other.release('q2'), 'another prefix: another platform').to.equal('not-held');
      } finally {
        await other.close();
        await peerGate.close();
      }
    });
  }
});

/** Poll `cond` until true (a background give-back), at most 2 s. */
async function until(cond: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 2_000;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error('condition not met within 2 s');
    await sleep(5);
  }
}

describe('release() while Redis is away', function () {
  this.timeout(30_000);
  let server: RedisServer;
  before(async () => {
    // an append-only file, so that a restarted server still has the holds to release
    server = await startRedisServer({ args: ['--appendonly', 'yes', '--appendfsync', 'always'] });
  });
  after(async () => server?.stop());

  /** The calls holding peer pbx's channels on Redis under `prefix`, read by a store of its own (at `now`, else Redis TIME). */
  const heldOnRedis = async (prefix: string, now?: number): Promise<number> => {
    const reader = RedisStore.connect(server.url, { prefix });
    try {
      return (await reader.holds({ tag: peerTag('pbx'), name: peerBucket('pbx'), now })).holds;
    } finally {
      await reader.close();
    }
  };

  it('is deferred, retried in the background, and lands once Redis is back', async () => {
    const store = RedisStore.connect(server.url, { prefix: uniquePrefix('deferred') });
    const clock = new VirtualClock(T0);
    const gate = await CallGate.create({ config, store, clock, timeoutMs: 200 });
    const errors: Error[] = [];
    const events: { callId: string; outcome: ReleaseOutcome }[] = [];
    gate.on('error', (e) => errors.push(e));
    gate.on('released', (e) => events.push(e));
    try {
      expect(outcome(await gate.admit({ callId: 'd1', peer: 'pbx' }))).to.equal('A');
      expect(outcome(await gate.admit({ callId: 'd2', peer: 'pbx' }))).to.equal('A');
      await server.kill();
      expect(await gate.release('d1')).to.equal('deferred');
      expect(await gate.release('d2')).to.equal('deferred');
      expect(gate.deferredReleases).to.equal(2);
      await server.restart();
      const deadline = Date.now() + 10_000;
      while (gate.deferredReleases > 0 && Date.now() < deadline) await sleep(100);
      expect(gate.deferredReleases).to.equal(0);
      expect(events.slice(2).map(({ callId, outcome }) => ({ callId, outcome }))).to.deep.equal([
        { callId: 'd1', outcome: 'released' },
        { callId: 'd2', outcome: 'released' },
      ]);
      // (reported by then: the client reconnected after it saw the connection close)
      expect(errors.some((e) => e instanceof StoreUnavailableError)).to.equal(true);
      expect((await store.holds({ tag: peerTag('pbx'), name: peerBucket('pbx'), now: T0 })).holds).to.equal(0);
    } finally {
      await gate.close();
    }
  });

  it("an outage is one 'error' (the lost connection), however many releases it defers", async () => {
    const store = RedisStore.connect(server.url, { prefix: uniquePrefix('one-error') });
    const gate = await CallGate.create({ config, store, clock: new VirtualClock(T0), timeoutMs: 200 });
    const errors: Error[] = [];
    const landed: string[] = [];
    gate.on('error', (e) => errors.push(e));
    const bothLanded = new Promise<void>((resolve) =>
      gate.on('released', (e) => {
        if (e.outcome !== 'deferred') landed.push(`${e.callId} ${e.outcome}`);
        if (landed.length === 2) resolve();
      }),
    );
    try {
      expect(outcome(await gate.admit({ callId: 'e1', peer: 'pbx' }))).to.equal('A');
      expect(outcome(await gate.admit({ callId: 'e2', peer: 'pbx' }))).to.equal('A');
      await server.kill();
      expect(await gate.release('e1')).to.equal('deferred');
      expect(await gate.release('e2')).to.equal('deferred');
      await server.restart();
      await orAfter(bothLanded, 10_000, undefined);
      expect(landed).to.deep.equal(['e1 released', 'e2 released']);
      expect(
        errors.map((e) => e instanceof StoreUnavailableError && /^Redis connection lost: /.test(e.message)),
      ).to.deep.equal([true]);
    } finally {
      await gate.close();
    }
  });

  it('an attempt that lands after its deadline answers the retry: released, when it landed', async () => {
    // Redis stalls (CLIENT PAUSE) with the release in its input: the gate stops waiting at its
    // deadline and defers the release, then Redis runs it (the call's channels come back) and
    // answers late; the retry a second later finds nothing held
    const store = RedisStore.connect(server.url, { prefix: uniquePrefix('late') });
    const admin = new Redis(server.url);
    const gate = await CallGate.create({ config, store, timeoutMs: 200 });
    const events: { callId: string; outcome: ReleaseOutcome; at?: number }[] = [];
    gate.on('released', (e) => events.push(e));
    try {
      expect(outcome(await gate.admit({ callId: 'l1', peer: 'pbx' }))).to.equal('A');
      const [sec, usec] = await admin.time();
      const paused = Number(sec) * 1e6 + Number(usec);
      await admin.call('CLIENT', 'PAUSE', '600', 'ALL');
      expect(await gate.release('l1')).to.equal('deferred');
      const deadline = Date.now() + 5_000;
      while (gate.deferredReleases > 0 && Date.now() < deadline) await sleep(50);
      expect(gate.deferredReleases).to.equal(0);
      const landed = events.filter((e) => e.outcome !== 'deferred');
      expect(landed.map((e) => e.outcome)).to.deep.equal(['released']);
      // at: when the stalled attempt ran (after the pause), not the retry's time a second later
      expect(landed[0]!.at! - paused).to.be.within(550_000, 1_000_000);
      expect((await store.holds({ tag: peerTag('pbx'), name: peerBucket('pbx') })).holds).to.equal(0);
    } finally {
      await gate.close();
      admin.disconnect();
    }
  });

  it('the memory store never defers', async () => {
    const gate = await CallGate.create({ config, store: new MemoryStore(), clock: new VirtualClock(T0) });
    await gate.admit({ callId: 'm1', peer: 'pbx' });
    expect(await gate.release('m1')).to.equal('released');
    expect(gate.deferredReleases).to.equal(0);
    await gate.close();
  });

  for (const storeKind of ['memory', 'redis'] as const)
    it(`after close(), on the ${storeKind} store: rejects with DispatcherClosedError, sends nothing, emits nothing`, async () => {
      const prefix = uniquePrefix('after-close');
      const store = storeKind === 'memory' ? new MemoryStore() : RedisStore.connect(server.url, { prefix });
      const gate = await CallGate.create({ config, store, clock: new VirtualClock(T0), timeoutMs: 200 });
      const errors: Error[] = [];
      const events: ReleasedEvent[] = [];
      gate.on('error', (e) => errors.push(e));
      gate.on('released', (e) => events.push(e));
      expect(outcome(await gate.admit({ callId: 'k1', peer: 'pbx' }))).to.equal('A');
      await gate.close();
      const err = await gate.release('k1').then(
        (r) => r,
        (e: unknown) => e,
      );
      expect(err).to.be.instanceOf(DispatcherClosedError);
      expect((err as Error).message).to.equal('the gate is closed: the release of call "k1" was not sent');
      expect(events).to.deep.equal([]);
      expect(errors).to.deep.equal([]);
      expect(gate.deferredReleases).to.equal(0);
      // the call still holds its channel: nothing was sent
      const held =
        storeKind === 'memory'
          ? (await store.holds({ tag: peerTag('pbx'), name: peerBucket('pbx'), now: T0 })).holds
          : await heldOnRedis(prefix, T0);
      expect(held).to.equal(1);
    });

  it('one under way when close() begins is not dropped: deferred, then landed by the last try, before close() resolves', async () => {
    // Redis stalls (CLIENT PAUSE) with the release in its input: the release answers `deferred`
    // at its deadline, after close() began; close() waits for it and gives it its last try, which
    // lands once Redis runs again
    const prefix = uniquePrefix('closing');
    const store = RedisStore.connect(server.url, { prefix });
    const admin = new Redis(server.url);
    const gate = await CallGate.create({ config, store, timeoutMs: 500 });
    const errors: Error[] = [];
    const events: ReleaseOutcome[] = [];
    gate.on('error', (e) => errors.push(e));
    gate.on('released', (e) => events.push(e.outcome));
    try {
      expect(outcome(await gate.admit({ callId: 'u1', peer: 'pbx' }))).to.equal('A');
      await admin.call('CLIENT', 'PAUSE', '750', 'ALL');
      const released = gate.release('u1');
      const closed = gate.close();
      expect(await released).to.equal('deferred');
      await closed;
      expect(events).to.deep.equal(['deferred', 'released']);
      expect(errors).to.deep.equal([]);
      expect(await heldOnRedis(prefix)).to.equal(0);
    } finally {
      await gate.close();
      admin.disconnect();
    }
  });

  it('admit and record after close() began are refused, nothing counted; the calls under way end first, and are released', async () => {
    // a client of the caller's stays open after close(): an admission decided on it then would
    // hold a channel that no release of this gate could give back (until maxCallDuration)
    const prefix = uniquePrefix('admit-closed');
    const redis = new Redis(server.url);
    const admin = new Redis(server.url);
    const store = new RedisStore({ redis, prefix });
    const gate = await CallGate.create({ config, store, timeoutMs: 1000 });
    const refused = (p: Promise<unknown>) =>
      p.then(
        () => 'decided',
        (e: unknown) => (e instanceof DispatcherClosedError ? (e as Error).message : String(e)),
      );
    const order: string[] = [];
    try {
      expect(outcome(await gate.admit({ callId: 'h1', peer: 'pbx' }))).to.equal('A');
      // the admission, the record and the refresh below wait for Redis while close() begins
      await admin.call('CLIENT', 'PAUSE', '200', 'WRITE');
      const inFlight = gate.admit({ callId: 'h2', peer: 'pbx' });
      const recorded = gate.record({ callId: 'h6', peer: 'pbx' }).then((d) => void order.push(`record ${d.admitted}`));
      const refreshed = gate.refresh('h1').then((held) => void order.push(`refresh ${held}`));
      const closed = gate.close().then(() => void order.push('closed'));
      expect(await refused(gate.admit({ callId: 'h3', peer: 'pbx' }))).to.equal(
        'the gate is closed: call "h3" was not admitted',
      );
      expect(await refused(gate.record({ callId: 'h4', peer: 'pbx' }))).to.equal(
        'the gate is closed: call "h4" was not recorded',
      );
      // bad input is still named as such
      expect(await refused(gate.admit({ callId: '', peer: 'pbx' }))).to.match(/InvalidArgumentError.*callId/);
      // the call in flight when close() began is decided on the open store, and its hang-up,
      // while close() still runs, is released there: no channel left behind
      expect(outcome(await inFlight)).to.equal('A');
      expect(await gate.release('h2')).to.equal('released');
      expect(await gate.release('h6')).to.equal('released');
      await Promise.all([closed, recorded, refreshed]);
      // close() resolved after the record and the refresh under way
      expect(order.indexOf('closed')).to.equal(2);
      expect(order.slice(0, 2).sort()).to.deep.equal(['record true', 'refresh true']);
      expect(await refused(gate.release('h1'))).to.equal('the gate is closed: the release of call "h1" was not sent');
      expect(await refused(gate.refresh('h1'))).to.equal('the gate is closed: the refresh of call "h1" was not sent');
      // h1 holds its channel (nothing sent after close); h3 and h4 were never counted
      expect(await heldOnRedis(prefix)).to.equal(1);
    } finally {
      await gate.close();
      redis.disconnect();
      admin.disconnect();
    }
  });

  it('an INVITE in flight when close() begins, admitted, then failed closed: its release lands', async () => {
    // examples/sip-edge/edge.ts: admit, then dispatch (closed), 503, then release()
    const prefix = uniquePrefix('inflight-release');
    const store = RedisStore.connect(server.url, { prefix });
    const admin = new Redis(server.url);
    const gate = await CallGate.create({ config, store, timeoutMs: 1000 });
    try {
      await admin.call('CLIENT', 'PAUSE', '100', 'WRITE');
      const chain = gate.admit({ callId: 'inv1', peer: 'pbx' }).then(async (d) => {
        expect(d.admitted).to.equal(true);
        const r = await gate.dispatch({ callId: 'inv1', route: ['B'] }, () => undefined);
        expect([r.outcome, r.reason]).to.deep.equal(['failed', 'closed']);
        return gate.release('inv1');
      });
      await gate.close({ mode: 'cancel' });
      expect(await chain).to.equal('released');
      expect(await heldOnRedis(prefix)).to.equal(0);
    } finally {
      await gate.close();
      admin.disconnect();
    }
  });

  it('close() with a bad mode rejects and changes nothing: admit still decides', async () => {
    const gate = await CallGate.create({ config, store: new MemoryStore(), clock: new VirtualClock(T0) });
    try {
      const err = await gate.close({ mode: 'Cancel' as never }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect((err as Error).message).to.equal('close mode must be drain or cancel, got "Cancel"');
      expect(outcome(await gate.admit({ callId: 'm1', peer: 'pbx' }))).to.equal('A');
    } finally {
      await gate.close();
    }
  });
});

describe('channels on Redis, live (Redis TIME): every key expires, memory per held call is bounded', function () {
  this.timeout(30_000);
  let server: RedisServer;
  before(async () => {
    server = await startRedisServer();
  });
  after(async () => server?.stop());

  it('holds and records live as long as their holds; a release leaves no key; about 600 bytes per held call at two levels', async () => {
    const prefix = 'callgate:'; // the default: a server of its own
    const store = RedisStore.connect(server.url);
    const admin = new Redis(server.url);
    const liveConfig: CallGateConfigInput = {
      maxCallDuration: 'PT60S',
      inbound: { accounts: { acme: [{ channels: 5000 }] }, peers: { pbx: [{ channels: 5000 }] } },
    };
    const gate = await CallGate.create({ config: liveConfig, store });
    try {
      const before = Number(/used_memory:(\d+)/.exec(await admin.info('memory'))![1]);
      const N = 2_000;
      const ids = Array.from({ length: N }, (_, i) => `call-${i}@pbx.example.net`);
      for (let i = 0; i < N; i += 200)
        await Promise.all(ids.slice(i, i + 200).map((callId) => gate.admit({ callId, peer: 'pbx', account: 'acme' })));
      const after = Number(/used_memory:(\d+)/.exec(await admin.info('memory'))![1]);
      // the store's generation marker (docs/redis.md, restart and failover) lives a day past its last sync
      const marker = `${prefix}gen`;
      expect(await admin.pttl(marker)).to.be.within(86_000_000, 86_400_000);
      const keys = (await admin.keys(`${prefix}*`)).filter((k) => !k.startsWith(marker));
      // two holds sets and one record per call, nothing else
      expect(keys.length).to.equal(2 + N);
      for (const key of keys) {
        const ttl = await admin.pttl(key);
        expect(ttl, `${key} expires with its holds`).to.be.within(55_000, 60_002);
      }
      const perCall = (after - before) / N;
      console.log(`      Redis memory per held call (2 levels with channels): ${perCall.toFixed(0)} bytes`);
      // measured 586 bytes here: the record (key, value, expiry) and one sorted-set member per level
      expect(perCall).to.be.below(700);
      for (let i = 0; i < N; i += 200) await Promise.all(ids.slice(i, i + 200).map((callId) => gate.release(callId)));
      // a release that raced the holds keeper's sync (its second look runs about now) is sent
      // again and leaves a tombstone for 60 s, by design (holds-keeper.ts): nothing else is left
      const tombstone = `${prefix}gone:`;
      const left = (await admin.keys(`${prefix}*`)).filter((k) => !k.startsWith(marker));
      expect(
        left.filter((k) => !k.startsWith(tombstone)),
        'released: no record, no holds set left',
      ).to.deep.equal([]);
      for (const k of left) expect(await admin.pttl(k), `${k} lapses`).to.be.within(0, 60_000);
    } finally {
      await gate.close();
      admin.disconnect();
    }
  });
});
