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
import { peerBucket, peerTag } from '../src/store/keys.js';
import { MemoryStore } from '../src/store/memory-store.js';
import { RedisStore } from '../src/store/redis/redis-store.js';
import type { AdmitRequest, AdmitResult, Store } from '../src/store/types.js';
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
}

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
  });
});
