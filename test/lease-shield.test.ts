/**
 * The flood shield (src/admission/shield.ts) with a leased global level: a lane's share may grow
 * at the next tick, so a refusal by the leased level guards nothing; a refusal by a later level
 * (the leased one had room) still guards the plan.
 */
import { expect } from 'chai';
import { FloodShield } from '../src/admission/shield.js';
import { CallGate } from '../src/gate.js';
import { LeaseCoordinator } from '../src/lease/coordinator.js';
import { RedisStore } from '../src/store/redis/redis-store.js';
import type { Bucket } from '../src/store/types.js';
import { newRedisClient, redisRig } from './helpers/redis.js';

const W = 1_000_000;
const plan = {
  buckets: [
    { name: 'global', limits: [{ limit: 40, windowUs: W, algorithm: 'sliding-log' }] },
    { name: 'peer:hot', limits: [{ limit: 10, windowUs: W, algorithm: 'sliding-log' }] },
  ] as Bucket[],
};
const T = 1_700_000_000_000_000;

describe('the flood shield and a leased level', function () {
  this.timeout(30_000);

  it('a refusal by the leased level guards nothing; one by a later level does', () => {
    for (const leased of [false, true]) {
      const shield = new FloodShield<typeof plan>(leased);
      shield.learn(plan, T, 0, { admitted: false, limitedBy: 0, reason: 'rate', retryAfterUs: 500_000, now: T });
      expect(shield.check(plan, T + 1000) !== undefined, `leased ${leased}`).to.equal(!leased);
      const other = { buckets: plan.buckets.slice() };
      shield.learn(other, T, 0, { admitted: false, limitedBy: 1, reason: 'rate', retryAfterUs: 500_000, now: T });
      expect(shield.check(other, T + 1000)).to.deep.include({ limitedBy: 1, retryAfterUs: 499_000 });
    }
  });

  const rig = redisRig();
  it('on Redis: a lane short of share keeps asking Redis, and admits once granted', async () => {
    const prefix = `cgshield:${Date.now()}:`;
    const client = newRedisClient(rig.server);
    const own = newRedisClient(rig.server);
    // the shield left on, as it is by default on Redis
    const gate = await CallGate.create({
      config: { inbound: { global: [{ limit: 40, window: 'PT1S' }], defaultPeer: [{ limit: 1000, window: 'PT1S' }] } },
      store: new RedisStore({ redis: client, prefix, hashTags: true, lease: { lanes: 4 } }),
    });
    const c = LeaseCoordinator.forGate(gate, { deployments: [{ redis: own, lanes: 4, prefix }] });
    try {
      for (let i = 0; i < 4; i++) await c.tick();
      // one peer at once asks for more than its lane's quarter, then 30 calls a second
      let admitted = 0;
      let shielded = 0;
      let n = 0;
      const ticker = setInterval(() => void c.tick().catch(() => undefined), 50);
      const t0 = Date.now();
      while (Date.now() - t0 < 2000) {
        const d = await gate.admit({ callId: `c${n++}`, peer: 'hot' });
        if (d.admitted) admitted++;
        if (d.shielded) shielded++;
        if (n > 20) await new Promise((r) => setTimeout(r, 33));
      }
      clearInterval(ticker);
      expect(shielded).to.equal(0);
      // the share follows: most of the 30 a second get through (the reviewer's run: 39 with the
      // shield guarding lease refusals, 66 without)
      expect(admitted).to.be.greaterThan(50);
    } finally {
      await c.stop();
      await gate.close();
      client.disconnect();
      own.disconnect();
    }
  });
});
