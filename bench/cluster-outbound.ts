/**
 * Outbound scaling on a Redis Cluster, by Redis time (issue 28): on local Clusters of 1, 2, 3 and
 * 4 masters, an open loop of `store.reserve` over 3-carrier routes (12 carriers, each route three
 * consecutive ones, every carrier with a channel limit, each call holding), then per master its
 * script time (EVALSHA + EVAL usec in INFO commandstats) and all its command time, per decision.
 * The projected ceiling is 1 s ÷ the busiest master's script time per decision: what the
 * Cluster could decide per second were Redis the only limit (this machine has two cores shared
 * by the masters and the driver, so wall-clock throughput says nothing about scaling).
 *
 *   npx tsx bench/cluster-outbound.ts [--rate 3000] [--seconds 4] [--masters 1,2,3,4] [--carriers 12]
 */
import { parseArgs } from 'node:util';
import { Cluster, type Redis } from 'ioredis';
import { RECOMMENDED_REDIS_OPTIONS, RedisStore } from '../src/store/redis/redis-store.js';
import type { Carrier } from '../src/store/types.js';
import { startCluster } from '../test/helpers/redis.js';
import { openLoop } from './openloop.js';

const { values } = parseArgs({
  options: {
    rate: { type: 'string', default: '3000' },
    seconds: { type: 'string', default: '4' },
    masters: { type: 'string', default: '1,2,3,4' },
    carriers: { type: 'string', default: '12' },
  },
});
const rate = Number(values.rate);
const seconds = Number(values.seconds);
const sizes = values.masters.split(',').map(Number);

const CARRIERS = Number(values.carriers);
// each carrier is first choice for 1/12 of the calls; every fourth carrier paces at half its
// share (about half its first-choice calls are rerouted), the others at twice theirs, so some
// 1 call in 8 is rerouted whatever the timer jitter
const share = rate / CARRIERS;
const carriers: Carrier[] = Array.from({ length: CARRIERS }, (_, i) => ({
  name: `carrier:k${i}`,
  intervalUs: i % 4 === 0 ? 1e6 / (share * 0.5) : 1e6 / (share * 2),
  maxWaitUs: i % 4 === 0 ? 2_000 : 20_000,
  channels: 100_000,
}));
const routes = carriers.map((_, i) => [0, 1, 2].map((k) => carriers[(i + k) % CARRIERS]!));

/** usec and calls per command of one node's INFO commandstats. */
async function commandstats(node: Redis): Promise<Map<string, { calls: number; usec: number }>> {
  const info = await node.info('commandstats');
  const out = new Map<string, { calls: number; usec: number }>();
  for (const m of info.matchAll(/^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/gm))
    out.set(m[1]!, { calls: Number(m[2]), usec: Number(m[3]) });
  return out;
}

async function run(masters: number) {
  const handle = await startCluster(masters);
  const cluster = new Cluster(handle.nodes, {
    redisOptions: RECOMMENDED_REDIS_OPTIONS,
    enableOfflineQueue: true,
    slotsRefreshTimeout: 2_000,
  });
  try {
    await cluster.set('warm', '1');
    const store = new RedisStore({ redis: cluster, prefix: `cgbench${masters}:` });
    // warm-up: scripts loaded on every master, connections open
    await Promise.all(routes.map((route, i) => store.reserve({ route, hold: { id: `w${i}`, forUs: 1e6 } })));
    const nodes = cluster.nodes('master');
    await Promise.all(nodes.map((n) => n.config('RESETSTAT')));
    let taken = 0;
    let rerouted = 0;
    let refused = 0;
    const result = await openLoop(rate, seconds, async (i) => {
      const r = await store.reserve({ route: routes[i % CARRIERS]!, hold: { id: `c${i}`, forUs: 2e6 } });
      if (r.index < 0) refused++;
      else {
        taken++;
        if (r.index > 0) rerouted++;
      }
    });
    const stats = await Promise.all(nodes.map(commandstats));
    // where the keys sit (carriers, holds, records, locators), per master
    const keys = (await Promise.all(nodes.map((n) => n.dbsize()))).join(' / ');
    const decisions = taken + refused;
    const perMaster = stats.map((s) => {
      let script = 0;
      let all = 0;
      for (const [cmd, v] of s) {
        if (cmd === 'evalsha' || cmd === 'eval') script += v.usec;
        if (cmd !== 'config' && cmd !== 'info') all += v.usec;
      }
      return { script: script / decisions, all: all / decisions };
    });
    const busiest = Math.max(...perMaster.map((m) => m.script));
    const busiestAll = Math.max(...perMaster.map((m) => m.all));
    const sumScript = perMaster.reduce((a, m) => a + m.script, 0);
    await store.close();
    return {
      masters,
      keys,
      decisions,
      rerouted,
      refused,
      p99ms: result.hist.getValueAtPercentile(99) / 1e6,
      scriptPerMaster: perMaster.map((m) => m.script.toFixed(1)).join(' / '),
      sumScript,
      busiest,
      ceiling: 1e6 / busiest,
      ceilingAll: 1e6 / busiestAll,
    };
  } finally {
    cluster.disconnect();
    await handle.stop();
  }
}

const rows = [];
for (const m of sizes) rows.push(await run(m));
const base = rows[0]!.ceiling;
console.log(
  `outbound on a Redis Cluster: ${rate} reservations/s for ${seconds} s, ${CARRIERS} carriers, 3-carrier routes`,
);
console.log(
  'masters | keys per master | decisions | rerouted | refused | script µs/decision per master | sum | busiest | ceiling/s | x one master | ceiling/s, all commands | p99 ms',
);
for (const r of rows)
  console.log(
    `${r.masters} | ${r.keys} | ${r.decisions} | ${r.rerouted} | ${r.refused} | ${r.scriptPerMaster} | ${r.sumScript.toFixed(1)} | ${r.busiest.toFixed(1)} | ${Math.round(r.ceiling)} | ${(r.ceiling / base).toFixed(2)} | ${Math.round(r.ceilingAll)} | ${r.p99ms.toFixed(1)}`,
  );
