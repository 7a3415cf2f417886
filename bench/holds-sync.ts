/**
 * npm run build && npx tsx bench/holds-sync.ts [--held 40000] [--rate 5000] [--seconds 6]
 *   [--sync-ms 2000] [--rounds 3] [--against DIR]
 *
 * What the holds keeper's periodic sync (lua/reassert.lua in mode sync) costs the decisions
 * beside it. A process holds `--held` calls in progress (three levels with channels, holds of an
 * hour), checked against Redis every `--sync-ms`; new calls then arrive in the open loop at
 * `--rate` for `--seconds` (bench/driver.ts: latency from each call's scheduled time), and the
 * same with the sync off (the floor the sync adds to), beside the driver alone. Each row: p50 /
 * p99 / p99.9 / max of the decisions, and Redis' CPU per second of the run (INFO cpu).
 * Every pass checks every call in progress, one script call per group of calls, so a pass is a
 * train of script calls, each of which the decisions queue behind.
 *
 * `--against DIR`: another checkout of callgate (built: `npm run build` there; node_modules may
 * be a link to this one's), run in turn with this one, rounds interleaved: the ratios are of one
 * run.
 */
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { startRedisServer } from '../test/helpers/redis.js';
import { callIdOf, openLoop } from './driver.js';
import { builtEntry } from './shipped.js';
import { zipfSequence } from './workload.js';

const { values } = parseArgs({
  options: {
    held: { type: 'string', default: '40000' },
    rate: { type: 'string', default: '5000' },
    seconds: { type: 'string', default: '6' },
    'sync-ms': { type: 'string', default: '2000' },
    rounds: { type: 'string', default: '3' },
    against: { type: 'string' },
  },
});
const HELD = Number(values.held);
const RATE = Number(values.rate);
const SECONDS = Number(values.seconds);
const SYNC_MS = Number(values['sync-ms']);
const ROUNDS = Number(values.rounds);
for (const [name, v] of [
  ['--held', HELD],
  ['--rate', RATE],
  ['--seconds', SECONDS],
  ['--sync-ms', SYNC_MS],
  ['--rounds', ROUNDS],
] as const)
  if (!(Number.isFinite(v) && v > 0)) throw new Error(`${name} must be a positive number`);

const ACCOUNTS = 20;
const BIG = 1_000_000;
// rate limits that never refuse (the fill admits every call at once), channels that never bind
const limits = [{ limit: BIG, window: '1s' }, { channels: BIG }];
const CONFIG = {
  maxCallDuration: 'PT1H',
  inbound: {
    global: limits,
    accounts: Object.fromEntries(Array.from({ length: ACCOUNTS }, (_, a) => [`acct${a}`, limits])),
    defaultPeer: limits,
  },
};
const seq = zipfSequence(HELD + Math.ceil(RATE * SECONDS), 1000, 1.1, 1);
const peerOf = (i: number) => seq[i % seq.length]!;

interface Row {
  name: string;
  p50: number;
  p99: number;
  p999: number;
  max: number;
  /** Redis' CPU (user + sys) per second of the measured run, ms. */
  redisCpuMs: number;
}

async function redisCpu(admin: Redis): Promise<number> {
  const info = await admin.info('cpu');
  const sys = Number(/used_cpu_sys:([\d.]+)/.exec(info)?.[1]);
  const user = Number(/used_cpu_user:([\d.]+)/.exec(info)?.[1]);
  return (sys + user) * 1000;
}

const pct = (r: Awaited<ReturnType<typeof openLoop>>, p: number) => r.hist.getValueAtPercentile(p) / 1e6;

async function gateRow(root: string, label: string, sync: boolean): Promise<Row> {
  const { CallGate, RedisStore } = (await import(builtEntry(root))) as typeof import('../src/index.js');
  const server = await startRedisServer();
  const client = new Redis(server.port, '127.0.0.1');
  const admin = new Redis(server.port, '127.0.0.1');
  const gate = await CallGate.create({
    config: CONFIG,
    store: new RedisStore({ redis: client, prefix: 'sync:', holds: { syncMs: sync ? SYNC_MS : 0 } }),
    timeoutMs: 30_000,
    shield: false,
  });
  try {
    const admit = (id: string, i: number) =>
      gate.admit({ callId: id, peer: `peer${peerOf(i)}`, account: `acct${peerOf(i) % ACCOUNTS}` });
    // the calls in progress, 64 at a time
    let next = 0;
    const worker = async () => {
      while (next < HELD) {
        const i = next++;
        const d = await admit(callIdOf('h', i), i);
        if (!d.admitted) throw new Error(`fill: call ${i} refused (${d.limitedBy})`);
      }
    };
    await Promise.all(Array.from({ length: 64 }, worker));
    // a second of arrivals first (JIT, the young generation), then the measured run
    await openLoop(RATE, 1, (i) => admit(callIdOf('w', i), HELD + i).then(() => undefined));
    const cpu0 = await redisCpu(admin);
    const run = await openLoop(RATE, SECONDS, (i) => admit(callIdOf('c', i), HELD + i).then(() => undefined));
    const cpu1 = await redisCpu(admin);
    return {
      name: `${label}, sync ${sync ? `every ${SYNC_MS} ms` : 'off'}`,
      p50: pct(run, 50),
      p99: pct(run, 99),
      p999: pct(run, 99.9),
      max: run.hist.maxValue / 1e6,
      redisCpuMs: (cpu1 - cpu0) / run.seconds,
    };
  } finally {
    await gate.close();
    client.disconnect();
    admin.disconnect();
    await server.stop();
  }
}

async function driverRow(): Promise<Row> {
  const run = await openLoop(RATE, SECONDS, () => Promise.resolve());
  return {
    name: 'driver alone',
    p50: pct(run, 50),
    p99: pct(run, 99),
    p999: pct(run, 99.9),
    max: run.hist.maxValue / 1e6,
    redisCpuMs: 0,
  };
}

const trees: [string, string][] = [['.', 'this tree']];
if (values.against !== undefined) trees.push([resolve(values.against), resolve(values.against)]);
console.log(
  `holds sync: ${HELD.toLocaleString('en-US')} calls in progress (3 levels with channels), then ${RATE.toLocaleString('en-US')} calls/s for ${SECONDS} s, sync every ${SYNC_MS} ms or off; ${ROUNDS} rounds, interleaved`,
);
console.log(
  `${'row'.padEnd(48)} ${'p50 ms'.padStart(8)} ${'p99 ms'.padStart(8)} ${'p99.9 ms'.padStart(9)} ${'max ms'.padStart(8)} ${'redis cpu ms/s'.padStart(15)}`,
);
const print = (r: Row) =>
  console.log(
    `${r.name.padEnd(48)} ${r.p50.toFixed(3).padStart(8)} ${r.p99.toFixed(3).padStart(8)} ${r.p999.toFixed(3).padStart(9)} ${r.max.toFixed(2).padStart(8)} ${r.redisCpuMs.toFixed(0).padStart(15)}`,
  );
const p99s = new Map<string, number[]>();
for (let round = 1; round <= ROUNDS; round++) {
  console.log(`round ${round}`);
  const rows = [await driverRow()];
  for (const [root, label] of trees) for (const sync of [true, false]) rows.push(await gateRow(root, label, sync));
  for (const r of rows) {
    print(r);
    p99s.set(r.name, [...(p99s.get(r.name) ?? []), r.p99]);
  }
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
console.log('median p99 of the rounds, ms:');
for (const [name, xs] of p99s) console.log(`  ${name.padEnd(46)} ${median(xs).toFixed(3)}`);
