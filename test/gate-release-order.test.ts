/**
 * A release issued while the same call's admission is still being decided in this gate (a
 * CANCEL right after its INVITE) goes after it: sent at once, it could land first, find nothing
 * held and answer `not-held`, and the call then held its channels until maxCallDuration. On
 * Redis a decision is held back while the store recovers (the grace after an empty restart) and
 * at a new gate's first call; a store slow to decide shows the same on any store.
 */
import { expect } from 'chai';
import type { Redis } from 'ioredis';
import { CallGate } from '../src/gate.js';
import { VirtualClock } from '../src/clock.js';
import { carrierName, OUTBOUND_TAG, peerBucket, peerTag } from '../src/store/keys.js';
import { MemoryStore } from '../src/store/memory-store.js';
import { RedisStore } from '../src/store/redis/redis-store.js';
import type { AdmitRequest, AdmitResult, ReserveRequest, ReserveResult, Store } from '../src/store/types.js';
import { uniquePrefix } from './admission/stores.js';
import { newRedisClient, redisForSuite } from './helpers/redis.js';

/** Calls holding a channel at peer p now. */
const held = async (store: Store) => (await store.holds({ tag: peerTag('p'), name: peerBucket('p') })).holds;

const config = { inbound: { defaultPeer: [{ limit: 1000, window: '1s' }, { channels: 1000 }] } };

/** A memory store whose decisions take 50 ms to come back (a store busy, or waiting a grace out). */
class SlowStore extends MemoryStore {
  override async admit(req: AdmitRequest): Promise<AdmitResult> {
    await new Promise((r) => setTimeout(r, 50));
    return super.admit(req);
  }
  override async reserve(req: ReserveRequest): Promise<ReserveResult> {
    await new Promise((r) => setTimeout(r, 50));
    return super.reserve(req);
  }
}

const carriers = { outbound: { carriers: { A: { cps: 100, maxWait: 'PT1S', channels: 5 } } } };
/** Calls holding a channel of carrier A now. */
const heldOnA = async (store: Store, now?: number) =>
  (await store.holds({ tag: OUTBOUND_TAG, name: carrierName('A'), ...(now !== undefined && { now }) })).holds;

describe('CallGate: a release issued while its admission is decided', function () {
  this.timeout(20_000);

  it('on a store slow to decide: the release waits for the decision, then frees the call', async () => {
    const store = new SlowStore();
    const gate = await CallGate.create({ config, store });
    const [d, outcome] = await Promise.all([
      gate.admit({ callId: 'x1', peer: 'p' }),
      new Promise((r) => setTimeout(r, 5)).then(() => gate.release('x1')),
    ]);
    expect(d.admitted).to.equal(true);
    expect(outcome).to.equal('released');
    expect(await held(store)).to.equal(0);
    await gate.close();
  });

  it("a reservation (the sidecar's /v1/reserve) the same: the release waits, then frees its carrier channel", async () => {
    const store = new SlowStore();
    const gate = await CallGate.create({ config: carriers, store });
    const [r, outcome] = await Promise.all([
      gate.reserve({ callId: 'o1', route: ['A'] }),
      new Promise((res) => setTimeout(res, 5)).then(() => gate.release('o1')),
    ]);
    expect(r.outcome).to.equal('dispatched');
    // it answered not-held, landing before the reservation, which then held A's channel
    expect(outcome).to.equal('released');
    expect(await heldOnA(store)).to.equal(0);
    await gate.close();
  });

  it('a dispatched call held for its slot, released: released (its channel given back), not not-held', async () => {
    const clock = new VirtualClock(1_700_000_000_000_000);
    const store = new MemoryStore();
    const gate = await CallGate.create({
      config: { outbound: { carriers: { A: { cps: 2, maxWait: 'PT2S', channels: 5 } } } },
      store,
      clock,
    });
    const first = gate.dispatch({ callId: 'd1', route: ['A'] });
    const second = gate.dispatch({ callId: 'd2', route: ['A'] }); // its slot 500 ms ahead: held
    while (gate.held < 1) await new Promise((r) => setImmediate(r));
    expect(await heldOnA(store, clock.now())).to.equal(2);
    // the cancel gave the channel back and the release then found nothing: it said not-held,
    // "released already, or lapsed"
    expect(await gate.release('d2')).to.equal('released');
    expect((await second).outcome).to.equal('cancelled');
    expect(await heldOnA(store, clock.now())).to.equal(1);
    expect((await first).outcome).to.equal('dispatched');
    await gate.close();
  });

  describe('on Redis', () => {
    const suite = redisForSuite();
    const clients: Redis[] = [];
    after(() => {
      for (const c of clients) c.disconnect();
    });

    it("a new gate's first call, released at once: released, nothing left held", async () => {
      for (let i = 0; i < 3; i++) {
        const redis = newRedisClient(suite.handle); // a new connection too: the first call of a new store
        clients.push(redis);
        const store = new RedisStore({ redis, prefix: uniquePrefix('order') });
        const gate = await CallGate.create({ config, store });
        const [d, outcome] = await Promise.all([gate.admit({ callId: `y${i}`, peer: 'p' }), gate.release(`y${i}`)]);
        expect(d.admitted, `round ${i}`).to.equal(true);
        expect(outcome, `round ${i}`).to.equal('released');
        expect(await held(store), `round ${i}`).to.equal(0);
        await gate.close();
      }
    });

    it('close() while a reservation is under way: it ends on the open store, dispatched', async () => {
      const gate = await CallGate.create({
        config: carriers,
        store: RedisStore.connect(suite.handle.url, { prefix: uniquePrefix('order-close') }),
      });
      const reserving = gate.reserve({ callId: 'c1', route: ['A'] });
      await gate.close();
      // it failed with "Redis connection closed": close() did not wait for it
      expect((await reserving).outcome).to.equal('dispatched');
    });
  });
});
