/**
 * Who closes a Redis connection: the gate (through its store) closes only what the store opened
 * (RedisStore.connect); a client passed in (`new RedisStore({ redis })`) stays open and usable
 * after gate.close(), for its owner to quit. Counted on the server (CLIENT LIST), not assumed.
 */
import { expect } from 'chai';
import { Redis } from 'ioredis';
import { CallGate } from '../src/gate.js';
import { RECOMMENDED_REDIS_OPTIONS, RedisStore } from '../src/store/redis/redis-store.js';
import { rawCommand, startRedisServer, type RedisServer } from './helpers/redis.js';

const config = { inbound: { defaultPeer: [{ limit: 5, window: 'PT1S' }] } };

describe('who closes the Redis connection', () => {
  let server: RedisServer;
  before(async () => {
    server = await startRedisServer();
  });
  after(() => server.stop());

  /** Clients connected to the server, this test's probe connection left out. */
  const clients = async () =>
    String(await rawCommand(server.port, ['CLIENT', 'LIST']))
      .trim()
      .split('\n').length - 1;

  it('a client passed in stays open after gate.close(); its owner quits it', async () => {
    const before = await clients();
    const redis = new Redis(server.url, RECOMMENDED_REDIS_OPTIONS);
    try {
      const gate = await CallGate.create({ config, store: new RedisStore({ redis, prefix: 'own:' }) });
      expect((await gate.admit({ callId: 'c1', peer: 'p' })).admitted).to.equal(true);
      await gate.close();
      expect(redis.status).to.equal('ready');
      expect(await redis.ping()).to.equal('PONG');
      expect(await clients()).to.equal(before + 1);
    } finally {
      await redis.quit();
    }
    expect(await clients()).to.equal(before);
  });

  it('a connection RedisStore.connect opened is closed by gate.close()', async () => {
    const before = await clients();
    const gate = await CallGate.create({ config, store: RedisStore.connect(server.url, { prefix: 'own2:' }) });
    expect((await gate.admit({ callId: 'c1', peer: 'p' })).admitted).to.equal(true);
    expect(await clients()).to.equal(before + 1);
    await gate.close();
    // the server sees the QUIT at once, or within a few of its event-loop turns
    for (let i = 0; i < 50 && (await clients()) > before; i++) await new Promise((r) => setTimeout(r, 20));
    expect(await clients()).to.equal(before);
  });
});
