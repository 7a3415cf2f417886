/**
 * An operator's hand (src/observe/operate.ts): the calls holding a bucket or a carrier, one call
 * freed by id from another process, a bucket reset; through the engine on memory, Redis and a
 * Redis Cluster, and over the sidecar (GET /v1/holds, POST /v1/release, POST /v1/reset).
 */
import { randomBytes } from 'node:crypto';
import { expect } from 'chai';
import type { Cluster, Redis } from 'ioredis';
import { VirtualClock } from '../src/clock.js';
import { InvalidArgumentError } from '../src/errors/index.js';
import { CallGate } from '../src/gate.js';
import { inspectState } from '../src/observe/inspect.js';
import { hasUnprintable } from '../src/ids.js';
import { holdsText, listHolds, resetBucket, resetLine } from '../src/observe/operate.js';
import { buildApp } from '../src/server/app.js';
import { MemoryStore } from '../src/store/memory-store.js';
import { RedisStore } from '../src/store/redis/redis-store.js';
import type { Store } from '../src/store/types.js';
import { getRedis, newClusterClient, newRedisClient, startCluster } from './helpers/redis.js';

const T0 = 1_700_000_000_000_000;
const S = 1_000_000;
const CONFIG = {
  inbound: {
    accounts: { acme: [{ limit: 100, window: 'PT1S' }, { channels: 5 }] },
    peers: {
      p1: [
        { limit: 4, window: 'PT10S' },
        { limit: 4, window: 'PT1S', algorithm: 'fixed-window' as const },
        { channels: 3 },
      ],
    },
  },
  outbound: { carriers: { A: { cps: 10, maxWait: 'PT1S', channels: 2 } } },
  maxCallDuration: 'PT1M',
};

interface Backend {
  /** Two stores over the same data (two routing processes), closed by close(). */
  stores(): Promise<{ a: Store; b: Store; close(): Promise<void> }>;
  stop(): Promise<void>;
}

function onRedis(connect: () => Redis | Cluster): Backend['stores'] {
  return async () => {
    const prefix = `cgops:${randomBytes(4).toString('hex')}:`;
    const clients = [connect(), connect()];
    const [a, b] = clients.map((redis) => new RedisStore({ redis, prefix })) as [RedisStore, RedisStore];
    return {
      a,
      b,
      close: async () => {
        await a.clear();
        await Promise.all([a.close(), b.close()]);
        for (const c of clients) c.disconnect();
      },
    };
  };
}

const backends: [string, () => Promise<Backend>][] = [
  [
    'memory',
    async () => ({
      stores: async () => {
        const s = new MemoryStore();
        return { a: s, b: s, close: async () => {} };
      },
      stop: async () => {},
    }),
  ],
  [
    'Redis',
    async () => {
      const h = await getRedis();
      return { stores: onRedis(() => newRedisClient(h)), stop: () => h.stop() };
    },
  ],
  [
    'Redis Cluster',
    async () => {
      const h = await startCluster();
      return { stores: onRedis(() => newClusterClient(h)), stop: () => h.stop() };
    },
  ],
];

for (const [name, start] of backends) {
  describe(`operator operations on ${name}`, function () {
    this.timeout(60_000);
    let backend: Backend | undefined;
    before(async () => {
      backend = await start();
    });
    after(async () => backend?.stop());

    const tagged = name === 'Redis Cluster';
    it('holds lists the calls of a bucket and a carrier; release frees one from another process; reset empties a bucket', async () => {
      const { a, b, close } = await backend!.stores();
      const clock = new VirtualClock(T0);
      // two routing processes: gate 1 admits, gate 2 (the operator's) frees and resets
      const g1 = await CallGate.create({ config: CONFIG, store: a, clock });
      const g2 = await CallGate.create({ config: CONFIG, store: b, clock });
      try {
        // p1's calls name acme (under acme's tag on a Cluster); p1 holds 3 channels at most
        expect((await g1.admit({ callId: 'x1', peer: 'p1', account: 'acme' })).admitted).to.equal(true);
        clock.advance(T0 + 100_000);
        expect((await g1.admit({ callId: 'x 2', peer: 'p1', account: 'acme' })).admitted).to.equal(true);
        clock.advance(T0 + 200_000);
        expect((await g1.admit({ callId: 'x3', peer: 'p1', account: 'acme' })).admitted).to.equal(true);
        expect((await g1.admit({ callId: 'x4', peer: 'p1', account: 'acme' })).reason, 'p1 is full').to.equal(
          'channels',
        );
        expect((await g1.reserve({ callId: 'o1', route: ['A'] })).carrier).to.equal('A');
        const config = g2.config;
        const l = await listHolds(config, b, { bucket: 'peer:p1' }, { now: T0 + 300_000 });
        expect(l).to.deep.equal({
          target: 'peer:p1',
          limit: 3,
          total: 3,
          holds: [
            { call_id: 'x1', end_us: T0 + 60 * S, left_ms: 59_700 },
            { call_id: 'x 2', end_us: T0 + 100_000 + 60 * S, left_ms: 59_800 },
            { call_id: 'x3', end_us: T0 + 200_000 + 60 * S, left_ms: 59_900 },
          ],
          time_us: T0 + 300_000,
        });
        expect(holdsText(l)).to.match(
          /^peer:p1: 3 calls in progress \(limit 3\)\ncall id\s+ends at\s+in\nx1\s+2023-11-14T22:14:20\.000Z\s+59\.7s$/m,
        );
        expect((await listHolds(config, b, { bucket: 'account:acme' }, { now: T0 + 300_000 })).total).to.equal(3);
        const carrier = await listHolds(config, b, { carrier: 'A' }, { now: T0 + 300_000 });
        expect(carrier.holds.map((h) => h.call_id)).to.deep.equal(['o1']);
        expect(carrier.limit).to.equal(2);
        const one = await listHolds(config, b, { bucket: 'peer:p1' }, { now: T0 + 300_000, max: 1 });
        expect([one.total, one.holds.length]).to.deep.equal([3, 1]);

        // the stuck call x1 freed from the other process: p1 has room again, for a call naming no
        // account (under p1's own tag on a Cluster: holds and reset cover both tags)
        clock.advance(T0 + 400_000);
        expect(await g2.release('x1')).to.equal('released');
        expect(await g2.release('x1')).to.equal('not-held');
        expect((await g1.admit({ callId: 'y1', peer: 'p1' })).admitted).to.equal(true);
        const after = await listHolds(config, b, { bucket: 'peer:p1' }, { now: T0 + 400_000 });
        expect(after.holds.map((h) => h.call_id)).to.deep.equal(['x 2', 'x3', 'y1']);
        expect(after.total).to.equal(3);

        // p1's rate limit (4 per fixed second) is full too (on one Redis; per tag on a Cluster)
        if (!tagged) expect((await g1.admit({ callId: 'x5', peer: 'p1' })).reason).to.equal('rate');
        const r = await resetBucket(config, b, 'peer:p1', { now: T0 + 500_000 });
        expect({ ...r, holds: [...r.holds].sort() }).to.deep.equal({
          bucket: 'peer:p1',
          events: 4,
          windows: tagged ? 2 : 1,
          holds: ['x 2', 'x3', 'y1'],
          time_us: T0 + 500_000,
        });
        expect(resetLine(r)).to.match(
          new RegExp(`^reset peer:p1: removed 4 events, ${tagged ? 2 : 1} window counters, 3 holds: "`),
        );
        expect((await listHolds(config, b, { bucket: 'peer:p1' }, { now: T0 + 500_000 })).total).to.equal(0);

        clock.advance(T0 + 500_000);
        for (const id of ['x5', 'x6', 'x7'])
          expect((await g1.admit({ callId: id, peer: 'p1', account: 'acme' })).admitted, id).to.equal(true);
        // the account kept its holds: x 2, x3 (x1 released) and the new ones
        const acme = await listHolds(config, b, { bucket: 'account:acme' }, { now: T0 + 500_000 });
        expect(acme.holds.map((h) => h.call_id)).to.deep.equal(['x 2', 'x3', 'x5', 'x6', 'x7']);

        for (const bad of ['peer:nobody', 'account:none', 'global', 'nonsense', 'peer:']) {
          let err: unknown;
          try {
            await resetBucket(config, b, bad);
          } catch (e) {
            err = e;
          }
          expect(err, bad).to.be.instanceOf(InvalidArgumentError);
        }
      } finally {
        await g1.close();
        await g2.close();
        await close();
      }
    });

    it("a reset sticks: the admitting process's check of its call ledger does not bring the holds back", async () => {
      const { a, b, close } = await backend!.stores();
      const gate = await CallGate.create({ config: CONFIG, store: a }); // the real clock: the ledger's calls are live
      try {
        for (const id of ['r1', 'r2']) expect((await gate.admit({ callId: id, peer: 'p1' })).admitted).to.equal(true);
        // a process that has run a while has checked its ledger (and knows the generation marker)
        if (a instanceof RedisStore) await a.writeLedger();
        const r = await resetBucket(gate.config, b, 'peer:p1');
        expect([...r.holds].sort()).to.deep.equal(['r1', 'r2']);
        if (a instanceof RedisStore) await a.writeLedger(); // what it does every holds.syncMs
        expect((await listHolds(gate.config, b, { bucket: 'peer:p1' })).total).to.equal(0);
        // the calls still hold elsewhere and are released as usual
        expect(await gate.release('r1')).to.equal('released');
      } finally {
        await gate.close();
        await close();
      }
    });

    it('attribute levels: their buckets by limited_by name, and every inbound key under the platform tag', async () => {
      const { a, b, close } = await backend!.stores();
      const config = {
        inbound: {
          peers: { p1: [{ limit: 100, window: 'PT1S' }, { channels: 5 }] },
          attributes: [
            { name: 'caller', key: 'caller' as const, limits: [{ limit: 10, window: 'PT10S' }, { channels: 2 }] },
          ],
        },
      };
      const clock = new VirtualClock(T0);
      const gate = await CallGate.create({ config, store: a, clock });
      try {
        for (const id of ['k1', 'k2', 'k3']) await gate.admit({ callId: id, peer: 'p1', caller: '+15551234' });
        const now = { now: T0 };
        const caller = await listHolds(gate.config, b, { bucket: 'caller:+15551234' }, now);
        expect([caller.total, caller.limit, caller.holds.map((h) => h.call_id)]).to.deep.equal([2, 2, ['k1', 'k2']]);
        // on a Cluster the peer's keys are under the platform's tag (attribute levels span peers)
        expect((await listHolds(gate.config, b, { bucket: 'peer:p1' }, now)).total).to.equal(2);
        // and inspect reads them there too
        const state = await inspectState(gate.config, b, now);
        expect(state.buckets.find((x) => x.bucket === 'peer:p1')?.channels).to.deep.equal({ limit: 5, in_use: 2 });
        const r = await resetBucket(gate.config, b, 'caller:+15551234', now);
        expect([r.events, r.holds]).to.deep.equal([2, ['k1', 'k2']]);
        expect((await gate.admit({ callId: 'k4', peer: 'p1', caller: '+15551234' })).admitted).to.equal(true);
        let err: unknown;
        try {
          await resetBucket(gate.config, b, 'callee:+1');
        } catch (e) {
          err = e;
        }
        expect(String(err)).to.match(/expected global, account:<id> or peer:<id>, or caller:<value>/);
      } finally {
        await gate.close();
        await close();
      }
    });

    it('the sidecar: GET /v1/holds, POST /v1/release, POST /v1/reset behind the token; bad buckets are a 400 naming the field', async () => {
      const stores = await backend!.stores();
      const clock = new VirtualClock(T0);
      const gate = await CallGate.create({ config: CONFIG, store: stores.a, clock });
      const token = 'a-token-of-16-chars-or-more';
      const app = buildApp({ gate, token, ready: async () => {}, reload: async () => [] });
      const auth = { authorization: `Bearer ${token}` };
      try {
        for (const id of ['c1', 'c2'])
          await app.inject({ method: 'POST', url: '/v1/admit', headers: auth, payload: { call_id: id, peer: 'p1' } });
        expect((await app.inject({ method: 'GET', url: '/v1/holds?bucket=peer:p1' })).statusCode, 'no token').to.equal(
          401,
        );
        expect(
          (await app.inject({ method: 'POST', url: '/v1/reset', payload: { bucket: 'peer:p1' } })).statusCode,
          'no token',
        ).to.equal(401);
        const h = await app.inject({ method: 'GET', url: '/v1/holds?bucket=peer%3Ap1', headers: auth });
        expect(h.statusCode).to.equal(200);
        expect(h.json()).to.deep.include({ target: 'peer:p1', limit: 3, total: 2 });
        const rel = await app.inject({ method: 'POST', url: '/v1/release', headers: auth, payload: { call_id: 'c1' } });
        expect(rel.json()).to.deep.equal({ call_id: 'c1', released: true, outcome: 'released' });
        const reset = await app.inject({
          method: 'POST',
          url: '/v1/reset',
          headers: { ...auth, 'content-type': 'application/x-www-form-urlencoded' },
          payload: 'bucket=peer%3Ap1',
        });
        expect(reset.statusCode, reset.payload).to.equal(200);
        expect(reset.json()).to.deep.equal({ bucket: 'peer:p1', events: 2, windows: 1, holds: ['c2'], time_us: T0 });
        expect((await app.inject({ method: 'GET', url: '/v1/holds?carrier=A', headers: auth })).json()).to.deep.include(
          {
            target: 'carrier:A',
            total: 0,
          },
        );
        const bad = await app.inject({
          method: 'POST',
          url: '/v1/reset',
          headers: auth,
          payload: { bucket: 'peer:zz' },
        });
        expect(bad.statusCode).to.equal(400);
        expect(bad.json().problems[0]).to.match(/^body\.bucket: bucket peer:zz: the configuration has no peer "zz"/);
        const badForm = await app.inject({
          method: 'POST',
          url: '/v1/reset',
          headers: { ...auth, 'content-type': 'application/x-www-form-urlencoded' },
          payload: 'bucket=account%3Anone',
        });
        expect(badForm.json().problems).to.deep.equal([
          'form.bucket: bucket account:none: the configuration has no account "none"',
        ]);
        const both = await app.inject({ method: 'GET', url: '/v1/holds?bucket=global&carrier=A', headers: auth });
        expect(both.statusCode).to.equal(400);
        const max = await app.inject({ method: 'GET', url: '/v1/holds?bucket=peer:p1&max=0', headers: auth });
        expect(max.json().problems).to.deep.equal(['query.max: expected an integer from 1 to 10000, got "0"']);
      } finally {
        await app.close();
        await gate.close();
        await stores.close();
      }
    });
  });
}

describe('holds and reset lines on a terminal', () => {
  it("a call id's escape sequence or bidi override is shown escaped, never acted on", () => {
    const id = 'a\u001b]0;OWNED\u0007\u202eb';
    const text = holdsText({
      target: 'peer:p1',
      limit: 1,
      total: 1,
      holds: [{ call_id: id, end_us: 1_700_000_000_000_000, left_ms: 1_000 }],
      time_us: 1_700_000_000_000_000,
    });
    expect(text).to.include('a\\u001b]0;OWNED\\u0007\\u202eb');
    const line = resetLine({ bucket: 'peer:p1', events: 1, windows: 0, holds: [id], time_us: 1_700_000_000_000_000 });
    expect(line).to.include('"a\\u001b]0;OWNED\\u0007\\u202eb"');
    for (const shown of [text, line]) expect(shown.split('\n').filter(hasUnprintable)).to.deep.equal([]);
  });
});
