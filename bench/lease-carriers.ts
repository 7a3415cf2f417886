/**
 * A carrier leased across two regions (docs/leasing.md, "Carriers across regions"): two Redis
 * servers, region B reached by the coordinator through a proxy adding `--delay` ms each way
 * (test/helpers/delay-proxy.ts), a gate in each region, one coordinator (forCarrier) in region A.
 * Calls arrive on schedule (open loop, Poisson, seeded) at `load` × the carrier's CPS in all,
 * 80 % in one region and 20 % in the other, the two swapping every 5 s; the route is the leased
 * carrier, then a backup.
 *
 *   npx tsx bench/lease-carriers.ts [--cps 100] [--loads 0.9,0.95,1] [--seconds 30] [--tick 200]
 *     [--delay 40] [--max-wait 300] [--hold 1000] [--up 0.6] [--down 0.2] [--headroom 2]
 *
 * false refusals: calls the unleased contract (one pacer, the same calls at the same Redis times
 * on a MemoryStore) gives the carrier that the lease sent to the backup, in % of offered.
 * lost: how many fewer calls the lease gave the carrier than the contract, in % of offered.
 * max in 1 s: the most slots on the carrier in any 1 s window, both regions (at most the CPS);
 * max open: the most calls in progress on it at once (each holds from its decision to its slot +
 * `--hold`; at most its channels, 2 × CPS × hold).
 * convergence: after each swap, until the regions that gain hold 90 % of what they gain
 * (bench/lease-convergence.ts), on the leader's shares sampled every tick; median / worst.
 */
import { parseArgs } from 'node:util';
import { CallGate } from '../src/gate.js';
import { LeaseCoordinator } from '../src/lease/coordinator.js';
import { RedisStore } from '../src/store/redis/redis-store.js';
import { carrierAgainstContract, maxOpen } from '../test/helpers/carrier-lease.js';
import { startRegions } from '../test/helpers/regions.js';
import { maxInWindow } from '../test/helpers/window.js';
import { expGapUs } from '../scripts/make-fixtures.js';
import { convergence, type SharePoint } from './lease-convergence.js';
import { rng } from './workload.js';

const { values } = parseArgs({
  options: {
    cps: { type: 'string', default: '100' },
    loads: { type: 'string', default: '0.9,0.95,1' },
    seconds: { type: 'string', default: '30' },
    tick: { type: 'string', default: '200' },
    delay: { type: 'string', default: '40' },
    'max-wait': { type: 'string', default: '300' },
    hold: { type: 'string', default: '1000' },
    // the demand estimate's EWMA weights (src/lease/demand.ts), default the coordinator's
    up: { type: 'string' },
    down: { type: 'string' },
    headroom: { type: 'string' },
  },
});
const CPS = Number(values.cps);
const SECONDS = Number(values.seconds);
const TICK = Number(values.tick);
const HOLD_MS = Number(values.hold);
const SHIFT_MS = 5_000;
const CHANNELS = Math.ceil((2 * CPS * HOLD_MS) / 1000);
const ROUTE = ['x', 'backup'];
const config = {
  maxCallDuration: `PT${HOLD_MS / 1000}S`,
  outbound: {
    carriers: {
      x: { cps: CPS, maxWait: `PT${Number(values['max-wait']) / 1000}S`, channels: CHANNELS },
      backup: { cps: 100_000, maxWait: 'PT1S' },
    },
  },
};

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const { a, b, client, farUrl, stop } = await startRegions(Number(values.delay));
console.log(
  `carrier of ${CPS} cps and ${CHANNELS} channels over 2 regions ${values.delay} ms apart each way, ${SECONDS} s per row, demand 80/20 swapping every ${SHIFT_MS / 1000} s, ${TICK} ms ticks`,
);
console.log(
  'load | offered | on the carrier | contract | false refusals | lost | max in 1 s | max open | ms p50 / p99 | convergence median / worst',
);
try {
  for (const load of values.loads.split(',').map(Number)) {
    const prefix = `bench:lease-carriers:${load}:${Date.now()}:`;
    const gates = await Promise.all(
      [a.url, b.url].map((url, i) =>
        CallGate.create({
          config,
          store: new RedisStore({ redis: client(url), prefix, hashTags: i === 0, leasedCarriers: ['x'] }),
        }),
      ),
    );
    const coordinator = LeaseCoordinator.forCarrier(gates[0]!, 'x', {
      deployments: [
        { redis: client(a.url), prefix, hashTags: true },
        { redis: client(farUrl, true), prefix },
      ],
      tickMs: TICK,
      replyTimeoutMs: Math.max(150, 3 * Number(values.delay)),
      params: {
        ...(values.up !== undefined && { up: Number(values.up) }),
        ...(values.down !== undefined && { down: Number(values.down) }),
        ...(values.headroom !== undefined && { headroom: Number(values.headroom) }),
      },
    }).start();
    await sleep(1_000);
    const rnd = rng(7);
    const rate = load * CPS;
    const rows: { at: number; slot?: number; carrier: string | null; ms: number }[] = [];
    const pending: Promise<void>[] = [];
    const trace: SharePoint[] = [];
    const start = performance.now();
    const sampler = setInterval(() => {
      const state = coordinator.report.state;
      if (state) trace.push({ t: (performance.now() - start) * 1000, shares: state.shares.map((s) => s.calls) });
    }, TICK);
    let n = 0;
    for (let dueMs = 0; dueMs < SECONDS * 1000; dueMs += expGapUs(rnd, rate) / 1000) {
      const wait = start + dueMs - performance.now();
      if (wait > 0) await sleep(wait);
      // the hot region swaps every SHIFT_MS: 80 % of the calls there
      const hot = Math.floor(dueMs / SHIFT_MS) % 2;
      const region = rnd() < 0.8 ? hot : 1 - hot;
      const due = start + dueMs;
      pending.push(
        gates[region]!.reserve({ callId: `call-${n++}`, route: ROUTE }).then((d) => {
          rows.push({
            at: d.at,
            ...(d.slotAt !== undefined && { slot: d.slotAt }),
            carrier: d.carrier,
            ms: performance.now() - due,
          });
        }),
      );
    }
    await Promise.all(pending);
    clearInterval(sampler);
    const onX = rows.filter((r) => r.carrier === 'x');
    const vs = await carrierAgainstContract(rows, config, ROUTE);
    const pct = (k: number) => `${((100 * k) / rows.length).toFixed(2)} %`;
    const ms = rows.map((r) => r.ms).sort((p, q) => p - q);
    const q = (f: number) => ms[Math.floor(f * (ms.length - 1))]!.toFixed(1);
    const c = convergence(trace, SHIFT_MS * 1000, SECONDS * 1e6);
    console.log(
      `${Math.round(load * 100)} % | ${rows.length} | ${vs.onCarrier} | ${vs.referenceOnCarrier} | ${pct(vs.falseRefusals)} | ${pct(vs.referenceOnCarrier - vs.onCarrier)} | ${maxInWindow(
        onX.map((r) => r.slot!),
        1_000_000,
      )} | ${maxOpen(onX.map((r) => [r.at, r.slot! + HOLD_MS * 1000] as const))} | ${q(0.5)} / ${q(0.99)} | ${c.median.toFixed(2)} / ${c.worst.toFixed(2)} s`,
    );
    await coordinator.stop();
    await Promise.all(gates.map((g) => g.close()));
  }
} finally {
  await stop();
}
