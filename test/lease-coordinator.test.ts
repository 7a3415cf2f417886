/**
 * The coordinator when its own Redis forgets it: the leader key, the term counter and the saved
 * state gone (a restart without persistence) while the lanes remember a later term. Before the
 * fix the new candidate's term (1) was refused by every lane for ever, and the level refused
 * every call once the leases ended. Now the candidate learns the lanes' term, gives up, and the
 * next term counts past it; the lanes are taken as lost and admit again once their leases ended.
 */
import { expect } from 'chai';
import { CallGate } from '../src/gate.js';
import { LeaseCoordinator } from '../src/lease/coordinator.js';
import { RedisStore } from '../src/store/redis/redis-store.js';
import { leasedConfig } from './helpers/lease-load.js';
import { newRedisClient, redisRig, startRedisServer, type RedisServer } from './helpers/redis.js';
import { scripts } from '../src/store/redis/scripts.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('a leased level whose coordinator state is lost (its Redis restarted empty)', function () {
  this.timeout(30_000);
  let server: RedisServer;
  before(async () => {
    server = await startRedisServer();
  });
  after(async () => {
    await server?.stop();
  });

  it('the next leader counts past the term the lanes saw, and the level admits again', async () => {
    const prefix = `t:lease-term:${Date.now()}:`;
    const client = newRedisClient(server);
    const own = newRedisClient(server);
    const gate = await CallGate.create({
      config: leasedConfig(100, 1000),
      store: new RedisStore({ redis: client, prefix, hashTags: true, lease: { lanes: 4 } }),
      shield: false,
    });
    const make = (id: string) =>
      LeaseCoordinator.forGate(gate, {
        deployments: [{ redis: own, lanes: 4, prefix }],
        id,
        tickMs: 50,
        leaseMs: 300,
      });
    let n = 0;
    const admitted = async () => (await gate.admit({ callId: `c${n++}`, peer: `p${n % 8}` })).admitted;
    const until = async (what: string, check: () => Promise<boolean>, c: LeaseCoordinator) => {
      const deadline = Date.now() + 8_000;
      while (!(await check())) {
        if (Date.now() > deadline) throw new Error(`${what} within 8 s`);
        await c.tick();
        await sleep(50);
      }
    };
    try {
      // two leaders in turn: the lanes see term 2
      const a = make('a');
      await until('a admits', admitted, a);
      await a.stop();
      const b = make('b');
      await until('b leads with term 2', async () => b.report.leader && b.report.term === 2, b);
      await b.tick();
      await b.stop();
      // the coordinator's keys gone, as after a restart without persistence
      const keys = await client.keys(`${prefix}{lease:global}:*`);
      expect(keys.length).to.be.greaterThan(0);
      await client.del(...keys);
      await sleep(400); // the leases end: the level refuses meanwhile
      expect(await admitted()).to.equal(false);
      const c = make('c');
      await until('c admits again', admitted, c);
      expect(c.report.term).to.be.greaterThan(2);
      await c.stop();
    } finally {
      await gate.close();
      client.disconnect();
      own.disconnect();
    }
  });
});

describe('a reload while the coordinator ticks', function () {
  this.timeout(30_000);
  const rig = redisRig();

  it('a limit set while a tick shrinks the lanes is kept by that tick, never overwritten with the old one', async () => {
    const prefix = `t:lease-midtick:${Date.now()}:`;
    const own = newRedisClient(rig.server);
    // the shrink script: the first one sent once armed sets the new limit first, inside the tick
    // (deterministic, where a reload under load raced with a slow tick)
    const shrink = scripts()['lease-shrink'].command;
    let reloadAt: (() => void) | undefined;
    const redis = new Proxy(own, {
      get(target, prop, receiver) {
        const v = Reflect.get(target, prop, receiver);
        if (prop !== shrink || typeof v !== 'function') return typeof v === 'function' ? v.bind(target) : v;
        return (...args: unknown[]) => {
          const run = reloadAt;
          reloadAt = undefined;
          run?.();
          return v.apply(target, args);
        };
      },
    });
    const c = new LeaseCoordinator({
      deployments: [{ redis, lanes: 4, prefix }],
      limit: { calls: 200, windowUs: 1_000_000, channels: 50 },
    });
    const client = newRedisClient(rig.server);
    const gate = await CallGate.create({
      config: leasedConfig(200, 50),
      store: new RedisStore({ redis: client, prefix, hashTags: true, lease: { lanes: 4 } }),
      shield: false,
    });
    try {
      await c.tick();
      expect(c.report.state!.limit).to.deep.equal({ calls: 200, channels: 50 });
      reloadAt = () => c.setLimit({ calls: 100, channels: 50 });
      // one peer's lane wants more than its even part: the others shrink
      for (let i = 0; i < 20 && reloadAt !== undefined; i++) {
        for (let k = 0; k < 20; k++) await gate.admit({ callId: `m${i}.${k}`, peer: 'hot' });
        await c.tick();
      }
      expect(reloadAt, 'the limit was set during a shrink').to.equal(undefined);
      const s = c.report.state!;
      expect(s.limit).to.deep.equal({ calls: 100, channels: 50 });
      // the shares, the pool and the debt of the decrease sum to the new limit and the debt
      const held = s.shares.reduce((n, b) => n + b.calls, 0) + s.pool.calls;
      expect(held).to.equal(100 + s.debt.calls);
    } finally {
      await c.stop();
      await gate.close();
      client.disconnect();
      own.disconnect();
    }
  });
});
