/**
 * LeaseCoordinator's options and setLimit, refused when wrong before anything starts, and two
 * candidates given one id: found by a probe of bad input, each of these let the level pass its
 * limit or stop admitting without a word.
 */
import { expect } from 'chai';
import { CallGate } from '../src/gate.js';
import { InvalidArgumentError } from '../src/errors/index.js';
import { LeaseCoordinator, type LeaseCoordinatorOptions } from '../src/lease/coordinator.js';
import { RedisStore } from '../src/store/redis/redis-store.js';
import { leasedConfig } from './helpers/lease-load.js';
import { redisRig } from './helpers/redis.js';

describe('LeaseCoordinator: options and setLimit checked; one leader per id given', function () {
  this.timeout(30_000);
  const rig = redisRig();
  const client = () => rig.client();

  const base = (prefix: string): LeaseCoordinatorOptions => ({
    deployments: [{ redis: rig.raw, lanes: 2, prefix }],
    limit: { calls: 20, windowUs: 1_000_000 },
  });
  const refused = (opts: LeaseCoordinatorOptions): string => {
    try {
      new LeaseCoordinator(opts);
    } catch (err) {
      expect(err).to.be.instanceOf(InvalidArgumentError);
      return (err as Error).message;
    }
    return 'accepted';
  };

  it('refuses what would pass the limit, halve it, or never tick right', () => {
    const b = base('t:opts:');
    const d = b.deployments[0]!;
    // a negative skew took a silent lane's share back while it still admitted (30 in a window of 20)
    expect(refused({ ...b, skewMs: -5_000 })).to.match(/^skewMs must be a non-negative number/);
    expect(refused({ ...b, skewMs: Number.NaN })).to.match(/^skewMs must be a non-negative number/);
    // the same keys twice: each alias held its own share of one hash (the level halved)
    expect(refused({ ...b, deployments: [d, d] })).to.match(/repeats an earlier deployment/);
    // past 2^31 - 1 ms Node's timers fire after 1 ms (a tick of 1e12 ms ticked every millisecond)
    expect(refused({ ...b, tickMs: 1e12 })).to.match(/^tickMs must be at most 2147483647 ms/);
    expect(refused({ ...b, replyTimeoutMs: 3e9 })).to.match(/^replyTimeoutMs must be at most/);
    expect(refused({ ...b, leaseMs: 1e300 })).to.match(/^leaseMs must be at most/);
    // a NaN weight froze the shares at an even split
    expect(refused({ ...b, params: { up: Number.NaN } })).to.match(/^params\.up must be a number in \(0, 1\]/);
    expect(refused({ ...b, params: { headroom: -1 } })).to.match(/^params\.headroom must be a finite number >= 0/);
    expect(refused({ ...b, id: '' })).to.match(/^id must be a non-empty string/);
    expect(refused({ ...b, deployments: [{ ...d, waitReplicas: -1 }] })).to.match(/waitReplicas must be an integer/);
    expect(refused({ ...b, deployments: [{ ...d, overflow: 'yes' as unknown as boolean }] })).to.match(
      /overflow must be a boolean/,
    );
    expect(refused({ ...b, deployments: [{ ...d, prefix: 'a{b' }] })).to.match(/prefix must not contain/);
    expect(refused(b)).to.equal('accepted');
  });

  it('setLimit refuses a bad limit and keeps the one in force (it stored it, and every tick threw)', () => {
    const c = new LeaseCoordinator(base('t:opts-set:'));
    for (const limit of [
      { calls: -1 },
      { calls: Number.NaN },
      { calls: 1.5 },
      { calls: 10, channels: -3 },
      { calls: 10, windowUs: 0 },
    ])
      expect(() => c.setLimit(limit), JSON.stringify(limit)).to.throw(InvalidArgumentError);
  });

  it('a fractional leaderTtlMs leads (it was sent to SET PX as is, and no tick ever led)', async () => {
    const c = new LeaseCoordinator({ ...base(`t:opts-ttl:${Date.now()}:`), leaderTtlMs: 1000.5 });
    expect((await c.tick()).leader).to.equal(true);
    await c.stop();
  });

  it('two candidates given one id: one leads, and the level never passes its limit', async () => {
    const prefix = `t:opts-sameid:${Date.now()}:`;
    const gate = await CallGate.create({
      config: leasedConfig(20, 1000),
      store: new RedisStore({ redis: client(), prefix, hashTags: true, lease: { lanes: 2 } }),
      shield: false,
    });
    const make = () =>
      LeaseCoordinator.forGate(gate, {
        deployments: [{ redis: client(), lanes: 2, prefix }],
        id: 'host-1',
      });
    const [a, b] = [make(), make()];
    try {
      const reports = [await a.tick(), await b.tick(), await a.tick(), await b.tick()];
      // both said leader, term 1, and both granted
      expect(reports.map((r) => r.leader)).to.deep.equal([true, false, true, false]);
    } finally {
      await a.stop();
      await b.stop();
      await gate.close();
    }
  });
});
