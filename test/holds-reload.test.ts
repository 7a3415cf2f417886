/**
 * A reload that turns a channel limit on counts the calls already in progress on that level
 * (issue 25): two routing processes' gates on one Redis (each its own connection and ledger)
 * admit calls of a peer without a channel limit, then both reload a configuration that gives
 * the peer one; from then on the calls in progress count against it, and their releases answer
 * `released`.
 */
import { expect } from 'chai';
import type { Redis } from 'ioredis';
import type { CallGateConfigInput } from '../src/config/types.js';
import type { AdmitRequest, AdmitResult } from '../src/store/types.js';
import { CallGate } from '../src/gate.js';
import { peerBucket, peerTag } from '../src/store/keys.js';
import { RedisStore } from '../src/store/redis/redis-store.js';
import { uniquePrefix } from './admission/stores.js';
import { getRedis, newRedisClient, type RedisHandle } from './helpers/redis.js';

const open: CallGateConfigInput = { inbound: { peers: { p1: [{ limit: 1000, window: 'PT1S' }] } } };
const limited: CallGateConfigInput = {
  inbound: { peers: { p1: [{ limit: 1000, window: 'PT1S' }, { channels: 6 }] } },
};

describe('a reload that turns a channel limit on counts the calls in progress', function () {
  this.timeout(20_000);
  let handle: RedisHandle;
  const clients: Redis[] = [];
  const gates: CallGate[] = [];
  before(async () => {
    handle = await getRedis();
  });
  after(async () => {
    for (const g of gates) await g.close();
    for (const c of clients) c.disconnect();
    await handle?.stop();
  });

  it('calls admitted before the reload hold a channel from the moment it takes effect', async () => {
    const prefix = uniquePrefix('holds-reload');
    for (let i = 0; i < 2; i++) {
      const redis = newRedisClient(handle);
      clients.push(redis);
      gates.push(await CallGate.create({ config: open, store: new RedisStore({ redis, prefix }) }));
    }
    const [a, b] = gates as [CallGate, CallGate];
    for (let i = 0; i < 5; i++) expect((await a.admit({ callId: `a${i}`, peer: 'p1' })).admitted).to.equal(true);
    for (let i = 0; i < 3; i++) expect((await b.admit({ callId: `b${i}`, peer: 'p1' })).admitted).to.equal(true);
    await a.reload(limited);
    await b.reload(limited);
    const held = await a.store.holds({ tag: peerTag('p1'), name: peerBucket('p1') });
    expect(held.holds).to.equal(8);
    const refused = await a.admit({ callId: 'new1', peer: 'p1' });
    expect(refused.admitted).to.equal(false);
    expect(refused.reason).to.equal('channels');
    // three calls end (one from the other process): 5 in progress, one more fits
    expect(await a.release('a0')).to.equal('released');
    expect(await a.release('a1')).to.equal('released');
    expect(await a.release('b0')).to.equal('released');
    expect((await b.admit({ callId: 'new2', peer: 'p1' })).admitted).to.equal(true);
    expect((await b.admit({ callId: 'new3', peer: 'p1' })).admitted).to.equal(false);
  });

  it('calls under way as the reload begins, and those asked for during it, count too', async () => {
    const prefix = uniquePrefix('holds-reload-race');
    const redis = newRedisClient(handle);
    clients.push(redis);
    // admissions of ids 'slow*' reach Redis only when the test lets them (in flight meanwhile)
    let letGo!: () => void;
    const slow = new Promise<void>((r) => (letGo = r));
    class SlowStore extends RedisStore {
      override admit(req: AdmitRequest): Promise<AdmitResult> {
        return req.hold?.id.startsWith('slow') ? slow.then(() => super.admit(req)) : super.admit(req);
      }
    }
    const gate = await CallGate.create({ config: open, store: new SlowStore({ redis, prefix }) });
    gates.push(gate);
    for (let i = 0; i < 3; i++) expect((await gate.admit({ callId: `c${i}`, peer: 'p1' })).admitted).to.equal(true);
    const underWay = [0, 1].map((i) => gate.admit({ callId: `slow${i}`, peer: 'p1' }));
    const reloaded = gate.reload(limited);
    await new Promise((r) => setTimeout(r, 50));
    // asked for while the reload waits: decided on the new limit, after the calls were counted
    const during = [0, 1].map((i) => gate.admit({ callId: `during${i}`, peer: 'p1' }));
    letGo();
    await reloaded;
    expect((await Promise.all(underWay)).map((d) => d.admitted)).to.deep.equal([true, true]);
    expect((await Promise.all(during)).map((d) => d.admitted)).to.deep.equal([true, false]);
    const held = await gate.store.holds({ tag: peerTag('p1'), name: peerBucket('p1') });
    expect(held.holds).to.equal(6);
  });
});
