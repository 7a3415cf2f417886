/**
 * A carrier leased across regions, on one region's Redis (lua/reserve.lua with `leasedCarriers`):
 * it gives a slot only within its share (calls per 1 s window on its slot log, slots given ahead
 * of now included; channels on its holds) and while its lease runs (slot < lease end), moving a
 * call to a later slot within maxWait where its share has room then; where its share lacks room
 * within maxWait the call moves to the route's next carrier, the result says so
 * (`shareLacked`) and the share hash counts it (rc, rh) for the coordinator. The same on one
 * script call per route (no hash tags) and one per carrier (hash tags). The lease scripts count a
 * slot given ahead of now as used.
 */
import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import { Redis } from 'ioredis';
import { CARRIER_LEASE_WINDOW_US, leasedCarrier, leasedCarrierNames } from '../src/lease/carriers.js';
import { parseConfig } from '../src/config/index.js';
import { CallGate } from '../src/gate.js';
import { LeaseCoordinator } from '../src/lease/coordinator.js';
import { inspectState, stateText } from '../src/observe/inspect.js';
import { leaseMetrics } from '../src/observe/lease-metrics.js';
import { Registry } from 'prom-client';
import { carrierName } from '../src/store/keys.js';
import { RedisKeys } from '../src/store/redis/redis-keys.js';
import { RedisStore } from '../src/store/redis/redis-store.js';
import { scripts } from '../src/store/redis/scripts.js';
import type { Carrier } from '../src/store/types.js';
import { newRedisClient, redisRig } from './helpers/redis.js';

const W = CARRIER_LEASE_WINDOW_US;

describe('a carrier leased across regions, in one region (lua/reserve.lua)', function () {
  this.timeout(20_000);
  const rig = redisRig();
  const clients: Redis[] = [];
  after(() => {
    for (const c of clients) c.disconnect();
  });
  const redisNow = async () => {
    const [s, us] = await rig.raw.time();
    return Number(s) * 1e6 + Number(us);
  };
  // x: 10 cps, waits up to 1 s, 10 channels; y: the route's backup, not leased
  const x: Carrier = { name: carrierName('x'), intervalUs: 100_000, maxWaitUs: 1_000_000, channels: 10 };
  const y: Carrier = { name: carrierName('y'), intervalUs: 1_000, maxWaitUs: 1_000_000 };

  for (const hashTags of [false, true])
    describe(
      hashTags ? 'with hash tags (a script call per carrier)' : 'without hash tags (one script call per route)',
      () => {
        let n = 0;
        const setup = async (share?: { c: number; h: number; eFromNow: number }) => {
          const prefix = `t:lc:${hashTags}:${n++}:`;
          const redis = newRedisClient(rig.server);
          clients.push(redis);
          const store = new RedisStore({ redis, prefix, hashTags, leasedCarriers: ['x'] });
          const [shareKey, slotsKey] = new RedisKeys(prefix, hashTags).carrierLease(x);
          if (share) await rig.raw.hset(shareKey, { c: share.c, h: share.h, e: (await redisNow()) + share.eFromNow });
          return { store, shareKey, slotsKey };
        };
        const reserve = (store: RedisStore, id: string, forUs = 60_000_000) =>
          store.reserve({ route: [x, y], hold: { id, forUs } });

        it('no share: the carrier refuses, the call goes on, and the refusal is counted', async () => {
          const { store, shareKey } = await setup();
          const r = await reserve(store, 'a');
          expect(r.index).to.equal(1);
          expect(r.shareLacked).to.deep.equal([true, false]);
          expect(r.full).to.deep.equal([false, false]);
          expect(await rig.raw.hget(shareKey, 'rc')).to.equal('1');
        });

        it('at most c slots in any window, slots given ahead counted: a later slot within maxWait, else the next carrier', async () => {
          const { store, shareKey, slotsKey } = await setup({ c: 3, h: 10, eFromNow: 10 * W });
          const rs = await Promise.all(['a', 'b', 'c', 'd', 'e'].map((id) => reserve(store, id)));
          expect(rs.map((r) => r.index)).to.deep.equal([0, 0, 0, 0, 1]);
          // three slots 100 ms apart, the first at its decision's time; the fourth when the first
          // leaves the window (1 s later: the wait is x's maxWait); the fifth would wait 1.1 s
          const slots = rs.slice(0, 4).map((r) => r.slotUs);
          expect(slots[1]! - slots[0]!).to.equal(100_000);
          expect(slots[2]! - slots[1]!).to.equal(100_000);
          expect(slots[3]! - slots[0]!).to.equal(W);
          expect(rs[3]!.waitUs).to.equal(slots[3]! - rs[3]!.now);
          expect(rs[4]!.shareLacked).to.deep.equal([true, false]);
          expect(rs[0]!.shareLacked).to.equal(undefined);
          expect((await rig.raw.zrange(slotsKey, '0', '-1')).map((v) => Number(v))).to.deep.equal(slots);
          expect(await rig.raw.hget(shareKey, 'rc')).to.equal('1');
          // the slot log says what the lease scripts count as used: the most slots in any window
          // ending now or later, 3 (the window ending at the fourth slot), never more than c,
          // where (now - W, +inf) holds all 4
          const keys = new RedisKeys(store.prefix, hashTags).carrierLease(x);
          const observe = scripts()['lease-observe'].lua;
          const seen = (await rig.raw.call('EVAL', observe, 3, ...keys, '1', String(W), '50000')) as number[];
          expect(seen[1], 'in use').to.equal(3);
          expect(seen[3], 'channels in use').to.equal(4);
          // the mark is the newest slot (ahead of now): the next observation counts no slot twice
          expect(Number(await rig.raw.hget(shareKey, 'o'))).to.equal(slots[3]!);
        });

        it('a slot at or past the lease end is refused', async () => {
          // lease ends 150 ms from now: slots t and t + 100 ms fit, t + 200 ms does not
          const { store } = await setup({ c: 10, h: 10, eFromNow: 150_000 });
          const rs = await Promise.all(['a', 'b', 'c'].map((id) => reserve(store, id)));
          expect(rs.map((r) => r.index)).to.deep.equal([0, 0, 1]);
        });

        it('the channels share: holds at most h, the refusal counted as rh; the carrier’s own limit says full', async () => {
          const { store, shareKey } = await setup({ c: 10, h: 1, eFromNow: 10 * W });
          const [a, b] = await Promise.all([reserve(store, 'a'), reserve(store, 'b')]);
          expect([a.index, b.index]).to.deep.equal([0, 1]);
          expect(b.shareLacked).to.deep.equal([true, false]);
          expect(b.full).to.deep.equal([false, false]);
          expect(await rig.raw.hget(shareKey, 'rh')).to.equal('1');
          expect(await rig.raw.hget(shareKey, 'rc')).to.equal(null);
        });

        it("inspect shows this region's share of the carrier, its use and its lease left; not of another carrier", async () => {
          const { store } = await setup({ c: 3, h: 5, eFromNow: 10 * W });
          await Promise.all(['a', 'b'].map((id) => reserve(store, id)));
          const r = await store.inspect({ buckets: [], carriers: [x, y] });
          const lease = r.carriers[0]!.lease!;
          expect([lease.calls, lease.channels, lease.used]).to.deep.equal([3, 5, 2]);
          expect(lease.leftUs).to.be.within(9 * W, 10 * W);
          expect(r.carriers[0]!.channels).to.equal(2);
          expect(r.carriers[1]!.lease).to.equal(undefined);
          // as GET /v1/state and `callgate inspect` show it
          const config = parseConfig({
            outbound: { carriers: { x: { cps: 10, maxWait: 'PT1S', channels: 10 }, y: { cps: 1000 } } },
          });
          const state = await inspectState(config, store);
          expect(state.carriers[0]!.lease).to.deep.include({ calls_share: 3, channels_share: 5, used: 2 });
          expect(state.carriers[1]!.lease).to.equal(undefined);
          expect(stateText(state)).to.match(/share used\/cps\/ch\s+lease left\n/);
          expect(stateText(state)).to.match(/\nx .* 2\/3\/5 +9\d{3} ms\ny .* - +-\n$/);
        });

        it('decides on Redis TIME only: a given `now` is refused with a clear error', async () => {
          const { store } = await setup({ c: 10, h: 10, eFromNow: 10 * W });
          let err: unknown;
          await store
            .reserve({ route: [y, x], now: 1_000_000, hold: { id: 'a', forUs: 1 } })
            .catch((e: unknown) => (err = e));
          expect(String(err)).to.match(/leased carrier decides on Redis TIME only/);
          // a route without the leased carrier still takes a given time
          expect((await store.reserve({ route: [y], now: 1_000_000 })).index).to.equal(0);
        });
      },
    );

  it("the README's minimal ACL and docs/leasing.md's additions suffice: a coordinator, a reservation, inspect", async () => {
    const readme = readFileSync(new URL('../README.md', import.meta.url), 'utf8');
    const leasing = readFileSync(new URL('../docs/leasing.md', import.meta.url), 'utf8');
    const base = /^ACL SETUSER callgate on >CHANGE-ME (.+)$/m.exec(readme)![1]!.trim().split(/\s+/);
    const more = /commands beyond the minimal ACL user of the README:\s+add `([^`]+)`/.exec(leasing)![1]!.split(/\s+/);
    const prefix = 'callgate:acl-lease:';
    const rules = base.map((r) => (r === '~callgate:*' ? `~${prefix}*` : r));
    await rig.raw.call('ACL', 'SETUSER', 'leaser', 'reset', 'on', '>lease-acl-password', ...rules, ...more);
    await rig.raw.call('ACL', 'LOG', 'RESET');
    const redis = new Redis(rig.server.url, {
      username: 'leaser',
      password: 'lease-acl-password',
      maxRetriesPerRequest: 1,
    });
    clients.push(redis);
    const config = { outbound: { carriers: { x: { cps: 10, maxWait: 'PT1S', channels: 5 }, y: { cps: 1000 } } } };
    const gate = await CallGate.create({ config, store: new RedisStore({ redis, prefix, leasedCarriers: ['x'] }) });
    const coordinator = LeaseCoordinator.forCarrier(gate, 'x', { deployments: [{ redis, prefix }] }).start();
    try {
      await new Promise((r) => setTimeout(r, 300)); // a few ticks: the share granted
      expect((await gate.reserve({ callId: 'acl-1', route: ['x', 'y'] })).carrier).to.equal('x');
      const state = await inspectState(gate.config, gate.store);
      expect(state.carriers[0]!.lease).to.deep.include({ calls_share: 10, used: 1 });
      expect(await rig.raw.call('ACL', 'LOG'), 'nothing refused').to.deep.equal([]);
    } finally {
      await coordinator.stop();
      await gate.close();
    }
  });

  it('a reload: the coordinator follows the carrier’s new CPS and channels; a gate refuses a CPS that cannot be leased, at a reload or at its start', async () => {
    const redis = newRedisClient(rig.server);
    clients.push(redis);
    const prefix = 't:lc:reload:';
    const config = (cps: number) => ({ outbound: { carriers: { x: { cps, maxWait: 'PT1S', channels: 8 } } } });
    const gate = await CallGate.create({
      config: config(10),
      store: new RedisStore({ redis, prefix, leasedCarriers: ['x'] }),
    });
    const coordinator = LeaseCoordinator.forCarrier(gate, 'x', { deployments: [{ redis, prefix }] }).start();
    try {
      const limit = async () => {
        await new Promise((r) => setTimeout(r, 150)); // a few ticks
        return coordinator.report.state?.limit;
      };
      expect(await limit()).to.deep.equal({ calls: 10, channels: 8 });
      await gate.reload(config(20));
      expect(await limit()).to.deep.equal({ calls: 20, channels: 8 });
      let err: unknown;
      await gate.reload(config(2.5)).catch((e: unknown) => (err = e));
      expect(String(err)).to.match(/whole number/);
      expect(gate.config.outbound.carriers.get('x')?.cps, 'the old configuration stays').to.equal(20);
      expect(await limit()).to.deep.equal({ calls: 20, channels: 8 });
      // nor does a new gate take one
      let created: unknown;
      await CallGate.create({
        config: config(2.5),
        store: new RedisStore({ redis, prefix, leasedCarriers: ['x'] }),
      }).catch((e: unknown) => (created = e));
      expect(String(created)).to.match(/whole number/);
    } finally {
      await coordinator.stop();
      await gate.close();
    }
  });

  it('the refusals for lack of share, as the leader read them: coordinator.refusals and callgate_lease_refused_total', async () => {
    const redis = newRedisClient(rig.server);
    clients.push(redis);
    // two regions (two prefixes on one server), the calls in the first: its share is about half the CPS
    const config = { outbound: { carriers: { x: { cps: 10, maxWait: 'PT1S' }, y: { cps: 1000, maxWait: 'PT1S' } } } };
    const gate = await CallGate.create({
      config,
      store: new RedisStore({ redis, prefix: 't:lc:r1:', leasedCarriers: ['x'] }),
    });
    const coordinator = LeaseCoordinator.forCarrier(gate, 'x', {
      deployments: [
        { redis, prefix: 't:lc:r1:' },
        { redis, prefix: 't:lc:r2:' },
      ],
    }).start();
    try {
      await new Promise((r) => setTimeout(r, 200));
      const rs = await Promise.all(
        Array.from({ length: 30 }, () =>
          gate.store.reserve({ route: [{ name: x.name, intervalUs: 100_000, maxWaitUs: 1e6 }, y] }),
        ),
      );
      const lacked = rs.filter((r) => r.shareLacked?.[0] === true).length;
      expect(lacked, 'calls refused on x for lack of share').to.be.greaterThan(0);
      await new Promise((r) => setTimeout(r, 200)); // read at the next ticks
      expect(coordinator.refusals.map((b) => b.calls)).to.deep.equal([lacked, 0]);
      const registry = new Registry();
      leaseMetrics([coordinator], registry);
      const text = await registry.metrics();
      expect(text).to.include(`callgate_lease_refused_total{level="carrier:x",lane="0",resource="calls"} ${lacked}`);
      expect(text).to.include('callgate_lease_leader{level="carrier:x"} 1');
    } finally {
      await coordinator.stop();
      await gate.close();
    }
  });

  it('checks its inputs: leasedCarriers, and a leased carrier’s whole CPS', () => {
    expect(() => leasedCarrierNames('x')).to.throw(/must be an array/);
    expect(() => leasedCarrierNames([''])).to.throw(/non-empty string/);
    expect([...leasedCarrierNames(['a b'])]).to.deep.equal([carrierName('a b')]);
    const config = parseConfig({ outbound: { carriers: { whole: { cps: 30, channels: 5 }, half: { cps: 2.5 } } } });
    expect(leasedCarrier(config, 'whole')).to.deep.equal({ calls: 30, windowUs: W, channels: 5 });
    expect(() => leasedCarrier(config, 'half')).to.throw(/whole number/);
    expect(() => leasedCarrier(config, 'none')).to.throw(/must be configured/);
  });
});
