/**
 * One leased global level over two regions: two Redis servers, each with its own gate and four
 * lanes, and one coordinator in region A that reaches region B only through a proxy adding 40 ms
 * each way (test/helpers/delay-proxy.ts). Region B's decisions never wait for that link; the
 * level never admits more than its limit in any window, across both regions, from every
 * decision's Redis time (one machine: both servers' clocks are the same); when region B is cut
 * off, its share returns to region A once B's leases ended and a window passed, and after the
 * link heals B is granted again.
 */
import { expect } from 'chai';
import { CallGate } from '../src/gate.js';
import { LeaseCoordinator } from '../src/lease/coordinator.js';
import { RedisStore } from '../src/store/redis/redis-store.js';
import { expectLocalDecisions, lastSecond, offerPhase, type RegionRow, regionsRig } from './helpers/regions.js';
import { maxInWindow } from './helpers/window.js';
import { leasedConfig } from './helpers/lease-load.js';
import { scripts } from '../src/store/redis/scripts.js';

const LIMIT = 100;
const CHANNELS = 400;
const LANES = 4;
const config = leasedConfig(LIMIT, CHANNELS);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('a leased global level over two regions, 40 ms apart', function () {
  this.timeout(120_000);
  const rig = regionsRig(40);

  // with an overflow lane in each region too: each serves its own region's lanes
  for (const overflow of [false, true])
    it(`B decides locally; never over the limit; B cut off: its share goes to A after its leases; healed: B again${overflow ? ' (overflow lanes)' : ''}`, async () => {
      const prefix = `t:regions:${overflow}:${Date.now()}:`;
      const { a, b, proxy, client, farUrl } = rig.regions;
      const gateA = await CallGate.create({
        config,
        store: new RedisStore({ redis: client(a.url), prefix, hashTags: true, lease: { lanes: LANES, overflow } }),
        shield: false,
      });
      const gateB = await CallGate.create({
        config,
        store: new RedisStore({ redis: client(b.url), prefix, hashTags: true, lease: { lanes: LANES, overflow } }),
        shield: false,
      });
      const coordinator = new LeaseCoordinator({
        deployments: [
          { redis: client(a.url), lanes: LANES, prefix, overflow },
          { redis: client(farUrl, true), lanes: LANES, prefix, overflow },
        ],
        limit: { calls: LIMIT, windowUs: 1_000_000, channels: CHANNELS },
        tickMs: 200, // a few of the link's 80 ms round trips
        replyTimeoutMs: 150,
        leaderTtlMs: 1_000,
      }).start();
      try {
        await sleep(1_000);
        // at: when the level counted the call (a spilled call's spilledAt)
        type Row = RegionRow & { admitted: boolean; spilled: boolean };
        const rows: Row[] = [];
        const pending: Promise<unknown>[] = [];
        // phases: 3 s both at 45/s, 4 s with B cut off (A at 90/s), 3 s healed (both at 45/s)
        const phases = [
          { name: 'before', ms: 3_000, rateA: 45, rateB: 45 },
          { name: 'cut', ms: 4_000, rateA: 90, rateB: 45 },
          { name: 'healed', ms: 3_000, rateA: 45, rateB: 45 },
        ];
        let n = 0;
        for (const phase of phases) {
          if (phase.name === 'cut') proxy.cut();
          if (phase.name === 'healed') proxy.heal();
          const calls = await offerPhase(
            phase.ms,
            { A: phase.rateA, B: phase.rateB },
            (region) => {
              const gate = region === 'A' ? gateA : gateB;
              const began = performance.now();
              const id = `call-${n++}`;
              return gate.admit({ callId: id, peer: `peer-${region}-${n % 5}` }).then((d) => {
                rows.push({
                  region,
                  at: d.spilledAt ?? d.at,
                  admitted: d.admitted,
                  spilled: d.spilledAt !== undefined,
                  ms: performance.now() - began,
                  phase: phase.name,
                });
              });
            },
            { offsetBMs: 7 },
          );
          pending.push(...calls);
        }
        await Promise.all(pending);

        const admitted = rows.filter((r) => r.admitted).map((r) => r.at);
        expect(maxInWindow(admitted, 1_000_000), 'calls in any 1 s window, both regions').to.be.at.most(LIMIT);
        expect(maxInWindow(admitted, 2_000_000), 'calls holding at once').to.be.at.most(CHANNELS);

        // B's decisions are local: none waits for the 80 ms round trip to the coordinator
        expectLocalDecisions(rows);

        const last = (phase: string, region: 'A' | 'B') => lastSecond(rows, phase, region);
        const count = (list: Row[]) => list.filter((r) => r.admitted).length;
        // the last second of the cut: B's leases ended 1.6 s after the cut at most, its calls
        // share came back a window later; A takes what it offers (90 of the limit's 100)
        const cutA = last('cut', 'A');
        const cutB = last('cut', 'B');
        console.log(
          `      last second of the cut: A ${count(cutA)} of ${cutA.length} admitted, B ${count(cutB)} of ${cutB.length}`,
        );
        expect(count(cutA)).to.be.at.least(0.8 * cutA.length);
        expect(count(cutB), 'B admits nothing on the level once its leases ended').to.equal(0);
        // healed: B is granted again
        const healedB = last('healed', 'B');
        expect(count(healedB)).to.be.at.least(0.8 * healedB.length);
        if (overflow) {
          expect(coordinator.laneNames).to.deep.equal([
            '0',
            '1',
            '2',
            '3',
            'overflow',
            '5',
            '6',
            '7',
            '8',
            'overflow:1',
          ]);
          console.log(`      spilled: ${rows.filter((r) => r.spilled).length} of ${rows.length}`);
        }
      } finally {
        await coordinator.stop();
        await Promise.all([gateA.close(), gateB.close()]);
      }
    });
});

describe('a ticking coordinator and a lane 150 ms away', function () {
  this.timeout(30_000);
  const rig = regionsRig(150);

  it('reads the far lane about once a round trip: it does not wait for its grants first', async () => {
    const prefix = `t:far-ticks:${Date.now()}:`;
    const { a, b, client, farUrl } = rig.regions;
    // every command region B runs, read on its own connection (not through the link)
    const monitor = await client(b.url).monitor();
    const observeSha = scripts()['lease-observe'].sha;
    // per lane of region B (its lane and its unused overflow lane, both read every tick)
    const readings = new Map<string, number>();
    monitor.on('monitor', (_time: string, args: string[]) => {
      if (args[0]?.toLowerCase() === 'evalsha' && args[1] === observeSha)
        readings.set(args[3]!, (readings.get(args[3]!) ?? 0) + 1);
    });
    const coordinator = new LeaseCoordinator({
      deployments: [
        { redis: client(a.url), lanes: 1, prefix },
        { redis: client(farUrl, true), lanes: 1, prefix },
      ],
      limit: { calls: LIMIT, windowUs: 1_000_000 },
      tickMs: 10, // as often as the link allows
      replyTimeoutMs: 1_000,
      leaderTtlMs: 5_000,
    }).start();
    await sleep(5_000);
    await coordinator.stop();
    monitor.disconnect();
    // a 300 ms round trip: a tick of a reading and its grants, each awaited, reads the far lane
    // every 600 ms (at most 9 times in 5 s); with the grants left in flight, every 300 ms (at
    // most 17; the first second goes to taking the leadership and the first shares)
    console.log(`      region B's lanes read ${[...readings.values()].join(' and ')} times in 5 s`);
    expect(readings.size).to.equal(2);
    for (const n of readings.values()) expect(n).to.be.at.least(11);
    // every grant landed before stop() returned: the lanes of both regions hold the whole limit
    let held = 0;
    for (const url of [a.url, b.url]) {
      const redis = client(url);
      for (const key of await redis.keys(`${prefix}*:share`)) held += Number(await redis.hget(key, 'c'));
    }
    expect(held).to.equal(LIMIT);
  });
});
