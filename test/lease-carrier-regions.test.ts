/**
 * One carrier leased across two regions: two Redis servers, each with its own gate pacing the
 * carrier on its own (region A with hash tags, B without), and one coordinator (forCarrier) in
 * region A that reaches B only through a proxy adding 40 ms each way. Demand moves from A to B,
 * then B is cut off. From every decision's slot and hold (one machine: both servers' clocks are
 * the same): the carrier never gives more than its CPS in any 1 s window across both regions,
 * never more calls in progress than its channels; B's decisions never wait for the link; B's
 * share follows its demand; cut off, B gives nothing once its lease ended, A takes B's calls
 * share a window later, and B keeps its channels share (its calls may still be in progress). A
 * call the carrier's share refused goes to the route's next carrier.
 */
import { expect } from 'chai';
import { CallGate } from '../src/gate.js';
import { LeaseCoordinator } from '../src/lease/coordinator.js';
import { RedisStore } from '../src/store/redis/redis-store.js';
import { expectLocalDecisions, lastSecond, offerPhase, type RegionRow, regionsRig } from './helpers/regions.js';
import { carrierAgainstContract, maxOpen } from './helpers/carrier-lease.js';
import { maxInWindow } from './helpers/window.js';

const CPS = 40;
const CHANNELS = 30;
const HOLD_US = 500_000; // each call holds its channel until its slot + 0.5 s (maxCallDuration)
const config = {
  maxCallDuration: 'PT0.5S',
  outbound: {
    carriers: {
      x: { cps: CPS, maxWait: 'PT0.3S', channels: CHANNELS },
      backup: { cps: 10_000, maxWait: 'PT1S' },
    },
  },
};
/** The carrier's CPS held across both regions: its slots in any 1 s window. */
function expectWithinCps(onX: readonly { readonly slot?: number }[]): void {
  expect(
    maxInWindow(
      onX.map((r) => r.slot!),
      1_000_000,
    ),
    'slots on x in any 1 s window, both regions',
  ).to.be.at.most(CPS);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('a carrier leased across two regions, 40 ms apart', function () {
  this.timeout(120_000);
  const rig = regionsRig(40);

  it('paces locally in each region; never over its CPS or channels; shares follow demand; B cut off: A takes its calls share', async () => {
    const prefix = `t:carrier-regions:${Date.now()}:`;
    const { a, b, proxy, client, farUrl } = rig.regions;
    const gateA = await CallGate.create({
      config,
      store: new RedisStore({ redis: client(a.url), prefix, hashTags: true, leasedCarriers: ['x'] }),
    });
    const gateB = await CallGate.create({
      config,
      store: new RedisStore({ redis: client(b.url), prefix, leasedCarriers: ['x'] }),
    });
    const coordinator = LeaseCoordinator.forCarrier(gateA, 'x', {
      deployments: [
        { redis: client(a.url), prefix, hashTags: true },
        { redis: client(farUrl, true), prefix },
      ],
      tickMs: 200, // a few of the link's 80 ms round trips
      replyTimeoutMs: 150,
      leaderTtlMs: 1_000,
    }).start();
    try {
      await sleep(1_000);
      type Row = RegionRow & { slot?: number; carrier: string | null };
      const rows: Row[] = [];
      const pending: Promise<unknown>[] = [];
      // demand on A, then on B (the level as a whole over its CPS: the share decides), then B cut off
      const phases = [
        { name: 'A busy', ms: 4_000, rateA: 50, rateB: 10 },
        { name: 'B busy', ms: 4_000, rateA: 10, rateB: 50 },
        { name: 'cut', ms: 4_000, rateA: 50, rateB: 20 },
      ];
      const sharesB: { s: number; calls: number }[] = [];
      let n = 0;
      for (const phase of phases) {
        if (phase.name === 'cut') proxy.cut();
        const start = performance.now();
        if (phase.name === 'B busy') {
          const sample = setInterval(() => {
            const share = coordinator.report.state?.shares[1];
            if (share) sharesB.push({ s: (performance.now() - start) / 1000, calls: share.calls });
          }, 50);
          setTimeout(() => clearInterval(sample), phase.ms);
        }
        const calls = await offerPhase(phase.ms, { A: phase.rateA, B: phase.rateB }, (region) => {
          const gate = region === 'A' ? gateA : gateB;
          const began = performance.now();
          return gate.reserve({ callId: `call-${n++}`, route: ['x', 'backup'] }).then((d) => {
            rows.push({
              region,
              at: d.at,
              ...(d.slotAt !== undefined && { slot: d.slotAt }),
              carrier: d.carrier,
              ms: performance.now() - began,
              phase: phase.name,
            });
          });
        });
        pending.push(...calls);
      }
      await Promise.all(pending);

      const onX = rows.filter((r) => r.carrier === 'x');
      expect(
        rows.every((r) => r.carrier !== null),
        'every call dispatched (x or backup)',
      ).to.equal(true);
      expectWithinCps(onX);
      const open = maxOpen(onX.map((r) => [r.at, r.slot! + HOLD_US] as const));
      expect(open, 'calls in progress on x at once, both regions').to.be.at.most(CHANNELS);

      // B's decisions are local: none waits for the 80 ms round trip to the coordinator
      expectLocalDecisions(rows);

      const taken = (list: Row[]) => list.filter((r) => r.carrier === 'x').length;
      const report = (phase: string) => {
        const [ra, rb] = [lastSecond(rows, phase, 'A'), lastSecond(rows, phase, 'B')];
        console.log(`      ${phase}, last second on x: A ${taken(ra)} of ${ra.length}, B ${taken(rb)} of ${rb.length}`);
        return [taken(ra), taken(rb)] as const;
      };
      // the busy region gets what the quiet one leaves: 40 - 10 = 30 of the CPS
      const [aBusy] = report('A busy');
      expect(aBusy, 'A busy: A’s calls on x in the last second').to.be.at.least(0.8 * (CPS - 10));
      const [, bBusy] = report('B busy');
      expect(bBusy, 'B busy: B’s calls on x in the last second').to.be.at.least(0.8 * (CPS - 10));
      // how fast B's share followed: from the shift until its calls share reached 90 % of what it
      // was at the phase's end (the coordinator's state, read every 50 ms)
      const end = sharesB.at(-1)!.calls;
      const followed = sharesB.find((x) => x.calls >= 0.9 * end)!.s;
      console.log(
        `      B’s calls share: ${sharesB[0]!.calls} at the shift, ${end} at the end, 90 % of it after ${followed.toFixed(2)} s`,
      );
      // asserted on a fixed mark, less noisy than the end value: B's fair part is 40 - A's 10 = 30
      // of the CPS (3 of 4 calls offered are B's: the contract's one pacer gives it 30 too)
      const fair = sharesB.find((x) => x.calls >= 0.75 * CPS)?.s ?? Number.POSITIVE_INFINITY;
      expect(fair, 's until B’s calls share reached 30').to.be.below(3);
      // cut off: B's lease ended within leaderTtl + 3 reply timeouts (1.45 s); its share came back a window later
      const [, bCut] = report('cut');
      expect(bCut, 'B gives no slot once its lease ended').to.equal(0);
      // B's calls share came back to A; its channels share stays with it (its calls may still
      // be in progress, and be refreshed: docs/leasing.md), so A holds at most what it had
      const shares = coordinator.report.state!.shares;
      expect(
        shares.map((x) => x.calls),
        'calls shares after the cut',
      ).to.deep.equal([CPS, 0]);
      const cutFrom = Math.min(...rows.filter((r) => r.phase === 'cut').map((r) => r.at)) + 1_500_000;
      const lateA = onX.filter((r) => r.region === 'A' && r.at >= cutFrom);
      expect(maxOpen(lateA.map((r) => [r.at, r.slot! + HOLD_US] as const)), 'A’s calls in progress').to.be.at.most(
        shares[0]!.channels,
      );

      // against the unleased contract (one pacer of x) for the same calls at the same times, before the cut
      const before = rows.filter((r) => r.phase !== 'cut');
      const vs = await carrierAgainstContract(before, config, ['x', 'backup']);
      const pct = (k: number) => `${((100 * k) / before.length).toFixed(2)} %`;
      console.log(
        `      before the cut, of ${before.length} calls: ${vs.onCarrier} on x, the contract ${vs.referenceOnCarrier}; false refusals ${pct(vs.falseRefusals)}, lost ${pct(vs.referenceOnCarrier - vs.onCarrier)}`,
      );
      expect(vs.referenceOnCarrier - vs.onCarrier, 'calls lost to the lease').to.be.at.most(0.1 * before.length);
      expect(coordinator.laneNames).to.deep.equal(['0', '1']);
    } finally {
      await coordinator.stop();
      await Promise.all([gateA.close(), gateB.close()]);
    }
  });
  it('a region whose Redis restarts empty: its share stays held until a window after its lease end; never over the CPS', async () => {
    const prefix = `t:carrier-restart:${Date.now()}:`;
    const { a, b } = rig.regions;
    // each client fails fast while B restarts, and reconnects within 100 ms
    const client = (url: string) => rig.regions.client(url, true);
    // fail-closed: a call decided without Redis goes on no carrier (not paced, it would count nowhere)
    const [gateA, gateB] = await Promise.all(
      [a.url, b.url].map((url) =>
        CallGate.create({
          config,
          store: new RedisStore({ redis: client(url), prefix, leasedCarriers: ['x'] }),
          policy: 'fail-closed',
        }),
      ),
    );
    const coordinator = LeaseCoordinator.forCarrier(gateA!, 'x', {
      deployments: [
        { redis: client(a.url), prefix },
        { redis: client(b.url), prefix },
      ],
      // B's channels share stays held this long after its restart is seen (above the stores'
      // holds.graceMs, 2 s): A then gets it back
      holdsGraceMs: 2_500,
    }).start();
    try {
      await sleep(500);
      type Row = { region: 'A' | 'B'; at: number; slot?: number; carrier: string | null; after: boolean };
      const rows: Row[] = [];
      const pending: Promise<unknown>[] = [];
      let n = 0;
      const offer = async (ms: number, rates: { A: number; B: number; bFromMs?: number }, after: boolean) => {
        const calls = await offerPhase(
          ms,
          rates,
          (region) =>
            (region === 'A' ? gateA! : gateB!)
              .reserve({ callId: `r-${n++}`, route: ['x', 'backup'] })
              .then((d) => {
                rows.push({
                  region,
                  at: d.at,
                  ...(d.slotAt !== undefined && { slot: d.slotAt }),
                  carrier: d.carrier,
                  after,
                });
              })
              .catch(() => undefined),
          { bFromMs: rates.bFromMs ?? 0 },
        );
        pending.push(...calls);
      };
      // B busy: its share grows to nearly the whole CPS; then its Redis restarts empty, and A is busy
      await offer(3_000, { A: 0, B: 60 }, false);
      await b.kill();
      await b.restart();
      await offer(5_000, { A: 60, B: 20, bFromMs: 500 }, true);
      await Promise.all(pending);

      const onX = rows.filter((r) => r.carrier === 'x');
      expect(onX.filter((r) => r.region === 'B' && !r.after).length, 'B’s calls on x before').to.be.at.least(60);
      expectWithinCps(onX);
      expect(maxOpen(onX.map((r) => [r.at, r.slot! + HOLD_US] as const)), 'calls in progress on x').to.be.at.most(
        CHANNELS,
      );
      // B's calls share came back to A a window after B's lease end, its channels share after
      // the grace: A gives the CPS by the last second
      const end = Math.max(...rows.map((r) => r.at));
      const lastA = onX.filter((r) => r.region === 'A' && r.at > end - 1_000_000).length;
      console.log(`      after B's restart, A's last second on x: ${lastA}`);
      expect(lastA).to.be.at.least(0.8 * CPS - 10);
    } finally {
      await coordinator.stop();
      await Promise.all([gateA!.close(), gateB!.close()]);
    }
  });
});
