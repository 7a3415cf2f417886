/**
 * npx tsx bench/log-trim.ts [--seconds 16] [--rounds 2] [--workers 8] [--against DIR]
 *
 * What a sliding log's trim costs Redis in steady state (lua/includes/log.lua, logWrite): the
 * three levels of `npm run bench` (global 15,000/1 s + 100,000/10 s, 20 accounts, 5,000 peers
 * that never reach their limits), calls admitted as fast as `--workers` callers in a loop get
 * them decided, for longer than the widest window and its quarter (the longest step), so that
 * the logs hold their full window when measuring starts (a run shorter than the window, as the
 * open loop's, never trims at all). Steps sit on a fixed grid of Redis time, so a quarter-window
 * step's first trim in the measured part removes anywhere from a few hundred ms to 2.5 s of calls.
 * Each EVALSHA's own time in Redis from SLOWLOG (every command logged) over the run's last
 * seconds: its p50, p99, p99.9, the longest, and how many took over 1 ms, beside the calls
 * admitted per second meanwhile. A script that runs long holds every caller of that Redis.
 *
 * `--against DIR`: another checkout of callgate (a worktree with node_modules), run in turn
 * with this one, rounds interleaved, each on a redis-server of its own.
 */
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { CONFIG_3 } from './limits.js';
import { startRedisServer } from '../test/helpers/redis.js';

const { values } = parseArgs({
  options: {
    seconds: { type: 'string', default: '16' },
    rounds: { type: 'string', default: '2' },
    workers: { type: 'string', default: '8' },
    against: { type: 'string' },
  },
});
const SECONDS = Number(values.seconds);
const ROUNDS = Number(values.rounds);
const WORKERS = Number(values.workers);
// the widest window (10 s) and a quarter of it (the longest step): from then on the logs hold a
// full window and trim in their steady steps
const MEASURE_FROM_S = 12.5;
if (!(SECONDS > MEASURE_FROM_S + 1)) throw new Error(`--seconds must exceed ${MEASURE_FROM_S + 1}`);

interface Row {
  readonly tree: string;
  /** Calls admitted per second over the measured part. */
  readonly admitted: number;
  readonly measured: number;
  readonly us: readonly number[];
}

async function run(root: string): Promise<Row> {
  const { CallGate, RedisStore } = (await import(resolve(root, 'src/index.ts'))) as typeof import('../src/index.js');
  const server = await startRedisServer();
  const admin = new Redis(server.port, '127.0.0.1');
  const client = new Redis(server.port, '127.0.0.1');
  const gate = await CallGate.create({
    config: CONFIG_3,
    store: new RedisStore({ redis: client, prefix: 'trim:' }),
    timeoutMs: 5000,
    shield: false,
  });
  try {
    await admin.config('SET', 'slowlog-log-slower-than', '0');
    await admin.config('SET', 'slowlog-max-len', '1000000');
    const start = Date.now();
    const end = start + SECONDS * 1000;
    let measuring = false;
    let next = 0;
    let admitted = 0;
    const worker = async () => {
      while (Date.now() < end) {
        if (!measuring && Date.now() >= start + MEASURE_FROM_S * 1000) {
          measuring = true;
          await admin.slowlog('RESET');
        }
        const k = next++;
        const d = await gate.admit({ callId: `c${k.toString(36)}`, peer: `peer${k % 5000}`, account: `acct${k % 20}` });
        if (measuring && d.admitted) admitted++;
      }
    };
    await Promise.all(Array.from({ length: WORKERS }, worker));
    const log = (await admin.slowlog('GET', 1_000_000)) as [number, number, number, string[]][];
    const us = log
      .filter((e) => e[3][0]?.toLowerCase() === 'evalsha')
      .map((e) => e[2])
      .sort((a, b) => a - b);
    return { tree: root, admitted: admitted / (SECONDS - MEASURE_FROM_S), measured: us.length, us };
  } finally {
    await gate.close();
    admin.disconnect();
    client.disconnect();
    await server.stop();
  }
}

const q = (us: readonly number[], p: number) => us[Math.min(us.length - 1, Math.floor(us.length * p))] ?? 0;
const trees = [resolve('.'), ...(values.against ? [resolve(values.against)] : [])];
console.log(
  `log trims in steady state: ${SECONDS} s per run, the last ${SECONDS - MEASURE_FROM_S} s measured, ${WORKERS} callers, ${ROUNDS} rounds`,
);
console.log('tree                        admitted/s  EVALSHA  p50 µs  p99 µs  p99.9 µs  max µs  > 1 ms');
for (let r = 0; r < ROUNDS; r++) {
  for (const tree of r % 2 === 0 ? trees : [...trees].reverse()) {
    const row = await run(tree);
    console.log(
      [
        row.tree.padEnd(28),
        String(Math.round(row.admitted)).padStart(10),
        String(row.measured).padStart(8),
        String(q(row.us, 0.5)).padStart(7),
        String(q(row.us, 0.99)).padStart(7),
        String(q(row.us, 0.999)).padStart(9),
        String(row.us.at(-1) ?? 0).padStart(7),
        String(row.us.filter((x) => x > 1000).length).padStart(7),
      ].join(' '),
    );
  }
}
