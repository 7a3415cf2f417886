/**
 * Calls decided while Redis is away hold their channels as they would with it:
 * - an emergency call counted by record() goes through whatever the policy, and under the
 *   default `fail-closed` too its holds are written once Redis answers again (an empty
 *   restart), and its release finds it;
 * - under policy `local`, the in-process stand-in starts from the calls this process has in
 *   progress: a peer whose channels were full before the outage stays full during it.
 */
import { expect } from 'chai';
import type { Redis } from 'ioredis';
import { CallGate } from '../src/gate.js';
import { peerBucket, peerTag } from '../src/store/keys.js';
import { RedisStore } from '../src/store/redis/redis-store.js';
import { uniquePrefix } from './admission/stores.js';
import { newRedisClient, startRedisServer, type RedisServer } from './helpers/redis.js';
import { sleep } from './holds/harness.js';

describe('CallGate: calls decided during an outage hold their channels', function () {
  this.timeout(30_000);
  let server: RedisServer | undefined;
  let redis: Redis | undefined;
  before(async () => {
    server = await startRedisServer();
  });
  after(async () => {
    redis?.disconnect();
    await server?.stop();
  });

  it('the emergency call is written back when Redis returns empty, and its release frees it', async () => {
    redis = newRedisClient(server!);
    redis.on('error', () => undefined); // Redis killed on purpose
    const store = new RedisStore({ redis, prefix: uniquePrefix('record-outage'), holds: { graceMs: 200 } });
    const config = { inbound: { defaultPeer: [{ limit: 100, window: '1s' }, { channels: 10 }] } };
    const gate = await CallGate.create({ config, store, timeoutMs: 300 });
    gate.on('error', () => undefined);
    const held = async () => (await store.holds({ tag: peerTag('p'), name: peerBucket('p') })).holds;
    expect((await gate.admit({ callId: 'c1', peer: 'p' })).admitted).to.equal(true);
    await sleep(300); // the holds keeper has seen the store
    await server!.kill();
    const sos = await gate.record({ callId: 'sos', peer: 'p' });
    expect(sos).to.include({ admitted: true, forced: true, degraded: 'fail-closed' });
    expect((await gate.admit({ callId: 'c2', peer: 'p' })).admitted, 'an ordinary call is refused').to.equal(false);
    await server!.restart();
    let n = 0;
    for (let i = 0; i < 50 && (n = await held().catch(() => 0)) < 2; i++) await sleep(100);
    expect(n, 'c1 and the emergency call hold').to.equal(2);
    expect(await gate.release('sos')).to.equal('released');
    expect(await held()).to.equal(1);
    await gate.close();
  });

  it('policy local: the stand-in counts the calls in progress from before the outage', async () => {
    const client = newRedisClient(server!);
    client.on('error', () => undefined);
    const store = new RedisStore({ redis: client, prefix: uniquePrefix('local-outage'), holds: { graceMs: 200 } });
    const config = { inbound: { defaultPeer: [{ limit: 100, window: '1s' }, { channels: 3 }] } };
    const gate = await CallGate.create({ config, store, timeoutMs: 300, policy: 'local' });
    gate.on('error', () => undefined);
    for (const id of ['h1', 'h2', 'h3']) expect((await gate.admit({ callId: id, peer: 'p' })).admitted).to.equal(true);
    await server!.kill();
    const x1 = await gate.admit({ callId: 'x1', peer: 'p' });
    expect(x1).to.include({ admitted: false, limitedBy: 'peer:p', reason: 'channels', degraded: 'local' });
    // a hang-up during the outage gives its channel back there too
    expect(await gate.release('h1')).to.equal('deferred');
    expect(await gate.admit({ callId: 'x2', peer: 'p' })).to.include({ admitted: true, degraded: 'local' });
    expect(await gate.admit({ callId: 'x3', peer: 'p' })).to.include({ admitted: false, reason: 'channels' });
    await gate.close();
    client.disconnect();
  });
});
