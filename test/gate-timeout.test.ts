/**
 * One default bound on a decision's store call, for admission and dispatch alike (500 ms):
 * against a Redis that answers nothing (CLIENT PAUSE), both end by the policy after 500 ms.
 * And an admission or a reservation Redis made before the deadline but whose answer was read
 * after it (the policy refused the call, the dispatch failed) holds no channel afterwards.
 */
import { expect } from 'chai';
import { performance } from 'node:perf_hooks';
import type { Redis } from 'ioredis';
import { CallGate } from '../src/gate.js';
import { carrierName, OUTBOUND_TAG, peerBucket, peerTag } from '../src/store/keys.js';
import { RedisStore } from '../src/store/redis/redis-store.js';
import { uniquePrefix } from './admission/stores.js';
import { newRedisClient, rawCommand, startRedisServer, type RedisServer } from './helpers/redis.js';

/** Once the current turn has ended (a command just sent has left), the process is held `ms`: no answer is read meanwhile. */
function holdProcessSoon(ms: number): void {
  setImmediate(() => {
    const until = performance.now() + ms;
    while (performance.now() < until);
  });
}

/** `read()` until it gives `want` (a late answer's release is asynchronous), 1 s at most; its last value. */
async function settledAt(read: () => Promise<number>, want: number): Promise<number> {
  let n = await read();
  for (let i = 0; i < 50 && n !== want; i++) {
    await new Promise((r) => setTimeout(r, 20));
    n = await read();
  }
  return n;
}

describe('CallGate: the default decision timeout', function () {
  this.timeout(30_000);
  let server: RedisServer;
  let client: Redis;
  before(async () => {
    server = await startRedisServer();
    client = newRedisClient(server);
    await client.ping();
  });
  after(async () => {
    client?.disconnect();
    await server?.stop();
  });

  it('admit and dispatch both give up after 500 ms when Redis does not answer', async () => {
    const gate = await CallGate.create({
      config: {
        inbound: { peers: { p: [{ limit: 10, window: 'PT1S' }] } },
        outbound: { carriers: { A: { cps: 100 } } },
      },
      store: new RedisStore({ redis: client, prefix: uniquePrefix('timeout') }),
    });
    const degraded: Error[] = [];
    gate.on('degraded', (e) => degraded.push(e.error));
    // scripts loaded, connection warm: only the pause can make the next two slow
    expect((await gate.admit({ callId: 'w1', peer: 'p' })).admitted).to.equal(true);
    expect((await gate.dispatch({ callId: 'w2', route: ['A'] })).outcome).to.equal('dispatched');

    expect(await rawCommand(server.port, ['CLIENT', 'PAUSE', '1500', 'ALL'])).to.equal('OK');
    const t0 = performance.now();
    const [d, r] = await Promise.all([
      gate.admit({ callId: 'c1', peer: 'p' }).then((x) => ({ x, ms: performance.now() - t0 })),
      gate.dispatch({ callId: 'o1', route: ['A'] }).then((x) => ({ x, ms: performance.now() - t0 })),
    ]);
    expect(d.x).to.include({ admitted: false, limitedBy: 'store-unavailable', degraded: 'fail-closed' });
    expect(degraded.map((e) => e.message)).to.deep.equal(['store did not answer within 500 ms']);
    expect(r.x).to.include({ outcome: 'failed', reason: 'store-unavailable' });
    expect(r.x.error?.message).to.equal('store did not answer within 500 ms');
    // both bounded by the same 500 ms (the pause lasts 1.5 s); generous slack for a loaded machine
    for (const ms of [d.ms, r.ms]) expect(ms).to.be.within(490, 1_400);
    await gate.close();
  });

  /**
   * A gate (100 ms deadline) on a peer with channels, and an admission of `callId` whose answer
   * comes late: once it has left, the process is held 300 ms, so Redis runs it at once (admitted,
   * well before the deadline) and the timer fires before the answer is read.
   */
  async function lateAdmission(name: string, callId: string) {
    const store = new RedisStore({ redis: client, prefix: uniquePrefix(name), holds: { syncMs: 0 } });
    const gate = await CallGate.create({
      config: { inbound: { peers: { p: [{ channels: 5 }] } } },
      store,
      timeoutMs: 100,
    });
    const held = () => store.holds({ tag: peerTag('p'), name: peerBucket('p') }).then((r) => r.holds);
    expect(await held()).to.equal(0); // connection warm
    const decided = gate.admit({ callId, peer: 'p' });
    holdProcessSoon(300);
    return { gate, held, decided };
  }

  it('an admission answered after the deadline and refused by the policy holds no channel', async () => {
    const { gate, held, decided } = await lateAdmission('timeout-late', 'late');
    expect(await decided).to.include({ admitted: false, limitedBy: 'store-unavailable', degraded: 'fail-closed' });
    // the caller was told no: the store's late yes is taken back, nothing holds
    expect(await settledAt(held, 0)).to.equal(0);
    await gate.close();
  });

  it('a retry of that admission issued at once keeps the channel its first attempt took', async () => {
    const { gate, held, decided: first } = await lateAdmission('timeout-retry', 'again');
    expect(await first).to.include({ admitted: false, degraded: 'fail-closed' });
    // issued before the first attempt's late answer is read: Redis finds the call there
    const retry = await gate.admit({ callId: 'again', peer: 'p' });
    expect(retry).to.include({ admitted: true, duplicate: true });
    await new Promise((r) => setTimeout(r, 100));
    expect(await held()).to.equal(1); // not taken back: the retry holds it
    expect(await gate.release('again')).to.equal('released');
    expect(await held()).to.equal(0);
    await gate.close();
  });

  it('a reservation answered after the deadline, the dispatch failed, holds no carrier channel', async () => {
    const store = new RedisStore({ redis: client, prefix: uniquePrefix('timeout-late-out'), holds: { syncMs: 0 } });
    const gate = await CallGate.create({
      config: { outbound: { carriers: { A: { cps: 1000, channels: 5 } } } },
      store,
      timeoutMs: 100,
    });
    const held = () => store.holds({ tag: OUTBOUND_TAG, name: carrierName('A') }).then((r) => r.holds);
    expect(await held()).to.equal(0); // connection warm
    const dispatched = gate.dispatch({ callId: 'late-out', route: ['A'] });
    holdProcessSoon(300);
    expect(await dispatched).to.include({ outcome: 'failed', reason: 'store-unavailable' });
    expect(await settledAt(held, 0)).to.equal(0);
    await gate.close();
  });
});
