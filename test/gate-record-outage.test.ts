/**
 * An emergency call counted by record() while Redis is away goes through whatever the policy,
 * and holds its channels like an admitted call: under the default `fail-closed` too, its holds
 * are written once Redis answers again (an empty restart), and its release finds it.
 */
import { expect } from 'chai';
import type { Redis } from 'ioredis';
import { CallGate } from '../src/gate.js';
import { peerBucket, peerTag } from '../src/store/keys.js';
import { RedisStore } from '../src/store/redis/redis-store.js';
import { uniquePrefix } from './admission/stores.js';
import { newRedisClient, startRedisServer, type RedisServer } from './helpers/redis.js';
import { sleep } from './holds/harness.js';

describe('CallGate: record() during an outage, fail-closed', function () {
  this.timeout(30_000);
  let server: RedisServer | undefined;
  let redis: Redis | undefined;
  after(async () => {
    redis?.disconnect();
    await server?.stop();
  });

  it('the emergency call is written back when Redis returns empty, and its release frees it', async () => {
    server = await startRedisServer();
    redis = newRedisClient(server);
    const store = new RedisStore({ redis, prefix: uniquePrefix('record-outage'), holds: { graceMs: 200 } });
    const config = { inbound: { defaultPeer: [{ limit: 100, window: '1s' }, { channels: 10 }] } };
    const gate = await CallGate.create({ config, store, timeoutMs: 300 });
    gate.on('error', () => undefined);
    const held = async () => (await store.holds({ tag: peerTag('p'), name: peerBucket('p') })).holds;
    expect((await gate.admit({ callId: 'c1', peer: 'p' })).admitted).to.equal(true);
    await sleep(300); // the holds keeper has seen the store
    await server.kill();
    const sos = await gate.record({ callId: 'sos', peer: 'p' });
    expect(sos).to.include({ admitted: true, forced: true, degraded: 'fail-closed' });
    expect((await gate.admit({ callId: 'c2', peer: 'p' })).admitted, 'an ordinary call is refused').to.equal(false);
    await server.restart();
    let n = 0;
    for (let i = 0; i < 50 && (n = await held().catch(() => 0)) < 2; i++) await sleep(100);
    expect(n, 'c1 and the emergency call hold').to.equal(2);
    expect(await gate.release('sos')).to.equal('released');
    expect(await held()).to.equal(1);
    await gate.close();
  });
});
