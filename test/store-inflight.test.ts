/**
 * Commands in flight when the connection breaks: with RECOMMENDED_REDIS_OPTIONS (no re-send),
 * ioredis 6 never settles them if it reconnects at once. The store fails them itself at the
 * 'close', so its batch lanes and its holds keeper do not wait for ever: decisions issued after
 * such a break are decided by Redis again, not by the policy. Redis is made to hold the commands
 * (CLIENT PAUSE WRITE) while the store's connection is killed (CLIENT KILL), on a real server.
 */
import { expect } from 'chai';
import { Redis } from 'ioredis';
import { CallGate } from '../src/gate.js';
import { RECOMMENDED_REDIS_OPTIONS, RedisStore } from '../src/store/redis/redis-store.js';
import { rawCommand, startRedisServer, type RedisServer } from './helpers/redis.js';

// no channel limit: after a loss, channel decisions wait for the holds to be re-asserted (and a
// grace), which is not what this measures
const config = { inbound: { defaultPeer: [{ limit: 100, window: 'PT1S' }] } };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('commands in flight when the connection breaks', function () {
  this.timeout(20_000);
  let server: RedisServer;
  before(async () => {
    server = await startRedisServer();
  });
  after(() => server.stop());

  it('fail at the close: a lane whose batches were in flight decides on Redis again at once', async () => {
    const redis = new Redis(server.url, RECOMMENDED_REDIS_OPTIONS);
    const store = new RedisStore({ redis, prefix: 'inflight:', maxInFlight: 2 });
    const gate = await CallGate.create({ config, store, policy: 'fail-closed', timeoutMs: 300 });
    try {
      expect((await gate.admit({ callId: 'warm', peer: 'p' })).degraded).to.equal(undefined);
      const id = String(await redis.client('ID'));
      await rawCommand(server.port, ['CLIENT', 'PAUSE', '5000', 'WRITE']);
      // two batches in flight on the lane (its bound), each a call of its own tick
      const held = [gate.admit({ callId: 'a1', peer: 'p' })];
      await sleep(20);
      held.push(gate.admit({ callId: 'a2', peer: 'p' }));
      await sleep(100);
      await rawCommand(server.port, ['CLIENT', 'KILL', 'ID', id]);
      // each is decided by the policy (its timeout or the close), long before the pause ends
      const settled = await Promise.race([Promise.all(held), sleep(3_000).then(() => 'still pending')]);
      expect(settled).to.not.equal('still pending');
      await rawCommand(server.port, ['CLIENT', 'UNPAUSE']);
      for (const d of settled as Awaited<(typeof held)[number]>[]) expect(d.degraded).to.equal('fail-closed');
      // the lane is free again: decided by Redis (without the fix: both slots held for ever, and
      // every later call waits out its timeout and is refused by the policy)
      await sleep(200);
      for (let i = 0; i < 3; i++) {
        const d = await gate.admit({ callId: `after${i}`, peer: 'p' });
        expect(d, `after${i}: ${JSON.stringify(d)}`).to.include({ admitted: true });
        expect(d.degraded, `after${i}`).to.equal(undefined);
      }
    } finally {
      await gate.close();
      await redis.quit().catch(() => redis.disconnect());
    }
  });
});
