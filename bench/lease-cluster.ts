/**
 * A leased global level on a real local Redis Cluster (3 masters), the figures issue 28 asks
 * for: false refusals against the unleased contract and how fast the shares follow demand, with
 * the hot peers moving every 5 s. Three gates, each on its own Cluster client, and three
 * coordinator candidates (LeaseCoordinator.forGate, each on a client of its own); calls offered
 * on schedule (open loop) from 64 Zipf (1) peers whose ranks rotate at each shift.
 *
 *   npx tsx bench/lease-cluster.ts [--lanes 8,16] [--loads 0.9,0.95] [--seconds 30] [--limit 600]
 *     [--tick 50] [--overflow no,yes]
 *
 * spilled: calls admitted through the overflow lane (`--overflow yes`: RedisStore's lease.overflow).
 * ms: from a call's scheduled time to its decision, p50 / p99, of the calls not spilled and of
 * those spilled (two more script calls).
 * false refusals: calls the leased level refused that the unleased contract admits, replayed on
 * a MemoryStore with the same arrivals at the same Redis times, in % of offered.
 * lost: how many fewer calls the leased level admitted than the contract, in % of offered. Near
 * the limit a false refusal may let the leased level admit a later call the contract refuses:
 * the two traded places, and only the difference is lost (test/helpers/lease-load.ts,
 * againstContract).
 * max in 1 s: the most calls admitted in any 1 s window (from the decisions' Redis times), which
 * must not pass the limit.
 * convergence: bench/lease-convergence.ts, on the leader's shares sampled every tick.
 */
import { parseArgs } from 'node:util';
import type { Cluster } from 'ioredis';
import { CallGate } from '../src/gate.js';
import { LeaseCoordinator } from '../src/lease/coordinator.js';
import { RedisStore } from '../src/store/redis/redis-store.js';
import { againstContract, leasedConfig, offerLoad } from '../test/helpers/lease-load.js';
import { newClusterClient, startCluster } from '../test/helpers/redis.js';
import { maxInWindow } from '../test/helpers/window.js';
import { convergence, type SharePoint } from './lease-convergence.js';

const { values } = parseArgs({
  options: {
    lanes: { type: 'string', default: '8,16' },
    loads: { type: 'string', default: '0.9,0.95' },
    seconds: { type: 'string', default: '30' },
    limit: { type: 'string', default: '600' },
    tick: { type: 'string', default: '50' },
    overflow: { type: 'string', default: 'no' },
  },
});
const SECONDS = Number(values.seconds);
const LIMIT = Number(values.limit);
const TICK = Number(values.tick);
const SHIFT_MS = 5_000;
const PEERS = 64;
const config = leasedConfig(LIMIT, 100_000);

const handle = await startCluster(3);
const clients: Cluster[] = [];
const client = () => {
  const c = newClusterClient(handle);
  clients.push(c);
  return c;
};
console.log(`limit ${LIMIT}/s, ${SECONDS} s per run, hot peers moving every ${SHIFT_MS / 1000} s, ${TICK} ms ticks`);
console.log(
  'lanes | overflow | load | offered | admitted | spilled | ms p50 / p99 | spilled ms p50 / p99 | false refusals | lost | max in 1 s | convergence median / worst',
);
try {
  for (const lanes of values.lanes.split(',').map(Number))
    for (const overflow of values.overflow.split(',').map((v) => v === 'yes'))
      for (const load of values.loads.split(',').map(Number)) {
        const prefix = `bench:lease:${lanes}:${overflow}:${load}:${Date.now()}:`;
        const gates: CallGate[] = [];
        const coordinators: LeaseCoordinator[] = [];
        for (let i = 0; i < 3; i++) {
          const store = new RedisStore({ redis: client(), prefix, lease: { lanes, overflow } });
          const gate = await CallGate.create({ config, store, shield: false });
          gates.push(gate);
          coordinators.push(
            LeaseCoordinator.forGate(gate, {
              deployments: [{ redis: client(), lanes, prefix, overflow }],
              tickMs: TICK,
            }).start(),
          );
        }
        await new Promise((r) => setTimeout(r, 500));
        const trace: SharePoint[] = [];
        const start = performance.now();
        const sampler = setInterval(() => {
          const state = coordinators.map((c) => c.report).find((r) => r.leader)?.state;
          if (state) trace.push({ t: (performance.now() - start) * 1000, shares: state.shares.map((b) => b.calls) });
        }, TICK);
        const decided = await offerLoad({
          gates,
          rate: load * LIMIT,
          seconds: SECONDS,
          peers: PEERS,
          shiftMs: SHIFT_MS,
        });
        clearInterval(sampler);
        // the level counted a call spilled to the overflow lane there, at spilledAt
        const admitted = decided
          .filter((x) => x.d.admitted)
          .map((x) => x.d.spilledAt ?? x.d.at)
          .sort((a, b) => a - b);
        const spilled = decided.filter((x) => x.d.spilledAt !== undefined).length;
        // what a spill costs the call: its decision time against the others', from the scheduled time
        const pq = (xs: number[], q: number) => xs.sort((a, b) => a - b)[Math.floor(q * (xs.length - 1))] ?? Number.NaN;
        const lat = (pick: (x: (typeof decided)[number]) => boolean) => {
          const xs = decided.filter(pick).map((x) => x.ms);
          return `${pq(xs, 0.5).toFixed(1)} / ${pq(xs, 0.99).toFixed(1)}`;
        };
        const vs = await againstContract(decided, config);
        const c = convergence(trace, SHIFT_MS * 1000, SECONDS * 1e6);
        console.log(
          `${lanes} | ${overflow ? 'yes' : 'no'} | ${Math.round(load * 100)} % | ${decided.length} | ${admitted.length} | ${spilled} | ${lat((x) => x.d.spilledAt === undefined)} | ${spilled > 0 ? lat((x) => x.d.spilledAt !== undefined) : '-'} | ${((100 * vs.falseRefusals) / decided.length).toFixed(2)} % | ${((100 * (vs.referenceAdmitted - vs.admitted)) / decided.length).toFixed(2)} % | ${maxInWindow(admitted, 1_000_000)} | ${c.median.toFixed(2)} / ${c.worst.toFixed(2)} s`,
        );
        await Promise.all(coordinators.map((co) => co.stop()));
        await Promise.all(gates.map((g) => g.close()));
      }
} finally {
  for (const c of clients) c.disconnect();
  await handle.stop();
}
