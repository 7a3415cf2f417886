/**
 * npm run bench:instructions [-- --calls N] [-- --listpack 128,32] [-- --cases batch,lone,leased,sync,sizes]
 *   [-- --pace N] [-- --sizes 2,4,8,16]
 *
 * Redis instructions per decision: redis-server runs under valgrind's callgrind, counting only
 * inside script calls (--toggle-collect=luaCallFunction), while CallGate decides N calls of the
 * bench's three levels (bench/limits.ts; 1,000 peers, Zipf 1.1, over 20 accounts, as `npm run bench`) on Redis TIME.
 * Instructions do not depend on the machine's load, where Redis µs on a shared two-core machine
 * swing by more than the changes to a script worth making: this is the measure for Lua work.
 * Cases: `batch` (64 calls in flight at once: admit.lua's batches of ~64) and `lone` (each call
 * awaited: admit-lone.lua / admit-lone-held.lua), each without and with channel limits, on each
 * zset-max-listpack-entries given (128 is Redis' default); `leased` (not by default): lone calls
 * with the global level (its 1 s limit alone) leased over 4 lanes (docs/leasing.md), beside the
 * same levels unleased on the same hash tags. A leased case's coordinator grants the shares
 * (leases of an hour), then stops. In every case the counts are zeroed (callgrind_control) just
 * before the calls: what is counted is the decisions alone (the holds keeper's periodic sync is
 * off, so that a longer run does not count more of it). `sync` (not by default): the holds
 * keeper's sync instead (lua/reassert.lua), per call in progress and pass: SYNC_CALLS calls of
 * the three levels with channels admitted with holds of an hour, then only the syncs counted,
 * every SYNC_MS for SYNC_WAIT_MS. `sizes` (not by default): batches of exactly each of `--sizes`
 * calls, each as one admit.lua call and as one admit-lone-run.lua call (RedisStore loneUpTo),
 * of the three levels without and with channels (`+ch`, calls holding 2 s), counting everything the server does (each command's reading and reply too), not only inside
 * scripts; on the first --listpack. --pace N issues N calls per second
 * (default: as fast as Redis answers; each row shows the rate reached): a log's size, and so the
 * cost of adding to it, follows the calls per window, so cases compared must run at the same
 * pace. Needs valgrind (Debian: valgrind); about 40 s per case unpaced, calls ÷ pace paced.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { CallGate } from '../src/gate.js';
import { LeaseCoordinator } from '../src/lease/coordinator.js';
import { SYNC_BATCH_CALLS } from '../src/store/reassert.js';
import { RedisStore } from '../src/store/redis/redis-store.js';
import { freePort, serverArgs } from '../test/helpers/redis.js';
import { accountName, CONFIG_3, CONFIG_3CH, GLOBAL_3, limitInput, peerName } from './limits.js';
import { callgrindControl, countedInstructions } from './callgrind.js';
import { zipfSequence } from './workload.js';

const argv = process.argv.slice(2);
const opt = (name: string, dflt: string): string => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 && argv[i + 1] !== undefined ? argv[i + 1]! : dflt;
};
const CALLS = Number(opt('calls', '6000'));
const LISTPACK = opt('listpack', '128').split(',').map(Number);
const CASES = opt('cases', 'batch,lone').split(',');
const PACE = Number(opt('pace', '0'));
/** `sizes`: the batch sizes, each as one admit.lua call and as one admit-lone-run.lua call. */
const SIZES = opt('sizes', '2,4,8,16').split(',').map(Number);
const SYNC_CALLS = 1_000;
const SYNC_MS = 1_000;
const SYNC_WAIT_MS = 8_000;
const START_MS = 30_000;

if (spawnSync('valgrind', ['--version'], { stdio: 'ignore' }).status !== 0) {
  process.stderr.write('bench:instructions needs valgrind on the PATH (Debian: apt-get install valgrind)\n');
  process.exit(2);
}

interface Server {
  port: number;
  child: ChildProcess;
  exited: Promise<number | null>;
  out: string;
}

/**
 * redis-server under callgrind, counting instructions only inside script calls, or with `whole`
 * everything the server does between the zeroing and the end (reading and parsing each command,
 * its reply, the event loop): what a lone script call per call costs beside a batch's one.
 */
async function startCounted(listpack: number, dir: string, whole = false): Promise<Server> {
  const port = await freePort();
  const out = join(dir, `callgrind.${port}`);
  const child = spawn(
    'valgrind',
    [
      '--tool=callgrind',
      ...(whole ? [] : ['--toggle-collect=luaCallFunction']),
      `--callgrind-out-file=${out}`,
      'redis-server',
      ...serverArgs(port, dir, ['--zset-max-listpack-entries', String(listpack)]),
    ],
    { stdio: 'ignore' },
  );
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
  const deadline = Date.now() + START_MS;
  for (;;) {
    const probe = new Redis({
      port,
      host: '127.0.0.1',
      lazyConnect: true,
      maxRetriesPerRequest: 0,
      retryStrategy: () => null,
    });
    probe.on('error', () => undefined); // refused until valgrind has started Redis: tried again below
    try {
      await probe.connect();
      await probe.ping();
      probe.disconnect();
      return { port, child, exited, out };
    } catch {
      probe.disconnect();
      if (Date.now() > deadline) {
        child.kill('SIGKILL');
        throw new Error(`redis-server under valgrind did not answer within ${START_MS} ms`);
      }
      await new Promise((r) => setTimeout(r, 250));
    }
  }
}

/** The leased case's levels: the global level's 1 s limit alone (a leased level has one limit). */
const LEASED_GLOBAL = GLOBAL_3[0]!;
const CONFIG_LEASED = { inbound: { ...CONFIG_3.inbound, global: [limitInput(LEASED_GLOBAL)] } };

type Variant = 'plain' | 'unleased' | 'leased';

/**
 * Decides CALLS calls, `inFlight` at a time; returns script calls and commands per decision, and
 * the calls per second reached.
 * `unleased` and `leased`: CONFIG_LEASED's levels on hash tags, the second leased over 4 lanes.
 */
async function decide(
  server: Server,
  channels: boolean,
  inFlight: number,
  variant: Variant,
): Promise<{ stats: Map<string, number>; rate: number }> {
  const redis = new Redis({ port: server.port, host: '127.0.0.1' });
  const leased = variant === 'leased';
  if (leased) {
    // the shares granted for an hour, then the coordinator gone: its scripts are not counted
    const coordinator = new LeaseCoordinator({
      deployments: [{ redis, lanes: 4, prefix: 'i:' }],
      limit: { calls: LEASED_GLOBAL.limit, windowUs: LEASED_GLOBAL.windowUs },
      leaseMs: 3_600_000,
      tickMs: 200,
    }).start();
    await new Promise((r) => setTimeout(r, 3_000));
    await coordinator.stop();
  }
  const gate = await CallGate.create({
    config: variant === 'plain' ? (channels ? CONFIG_3CH : CONFIG_3) : CONFIG_LEASED,
    store: new RedisStore({
      redis,
      prefix: 'i:',
      holds: { syncMs: 0 },
      ...(variant !== 'plain' && { hashTags: true }),
      ...(leased && { lease: { lanes: 4 } }),
    }),
    timeoutMs: 120_000, // valgrind runs Redis some 50 times slower
    shield: false,
  });
  // only the decisions counted
  callgrindControl('zero', server.child.pid ?? -1);
  await redis.config('RESETSTAT');
  const seq = zipfSequence(CALLS, 1000, 1.1, 1); // as npm run bench: 1,000 peers, Zipf 1.1, seed 1
  let next = 0;
  const start = performance.now();
  const worker = async () => {
    while (next < CALLS) {
      const i = next++;
      const wait = PACE > 0 ? start + (i * 1000) / PACE - performance.now() : 0;
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      const p = seq[i]!;
      const d = await gate.admit({ callId: `c${i}`, peer: peerName(p), account: accountName(p) });
      if (d.degraded) throw new Error(`call ${i} degraded: the store did not answer`);
    }
  };
  await Promise.all(Array.from({ length: inFlight }, worker));
  const rate = (CALLS * 1000) / (performance.now() - start);
  const stats = new Map<string, number>();
  for (const m of (await redis.info('commandstats')).matchAll(/cmdstat_([a-z|]+):calls=(\d+)/g))
    if (m[1] !== 'info' && m[1] !== 'ping' && !m[1]!.startsWith('config')) stats.set(m[1]!, Number(m[2]) / CALLS);
  await gate.close();
  redis.disconnect();
  return { stats, rate };
}

/**
 * CALLS calls of the three levels in batches of exactly `size` (issued in one tick, awaited,
 * again: maxBatch `size`, one batch in flight), with the store's `loneUpTo` as given (1: every
 * batch one admit.lua call; `size`: one admit-lone-run.lua call). Returns the script calls
 * per decision and the calls counted (whole batches: CALLS or a few more).
 */
async function fixedBatches(
  server: Server,
  size: number,
  loneUpTo: number,
  channels: boolean,
): Promise<{ scripts: number; calls: number }> {
  const redis = new Redis({ port: server.port, host: '127.0.0.1' });
  const gate = await CallGate.create({
    config: channels ? CONFIG_3CH : CONFIG_3,
    store: new RedisStore({ redis, prefix: 'i:', holds: { syncMs: 0 }, maxBatch: size, maxInFlight: 1, loneUpTo }),
    timeoutMs: 120_000,
    shield: false,
  });
  const seq = zipfSequence(CALLS + size * 20, 1000, 1.1, 1);
  let next = 0;
  const batch = () =>
    Promise.all(
      Array.from({ length: size }, () => {
        const i = next++;
        const p = seq[i]!;
        return gate.admit({ callId: `c${i}`, peer: peerName(p), account: accountName(p) });
      }),
    );
  for (let w = 0; w < 20; w++) await batch(); // every script on the connection before the count
  callgrindControl('zero', server.child.pid ?? -1);
  await redis.config('RESETSTAT');
  const first = next;
  while (next - first < CALLS) await batch();
  const calls = next - first;
  const info = await redis.info('commandstats');
  // stopped here, so that closing the gate is not counted (stopCounted dumps at the exit)
  callgrindControl('dump', server.child.pid ?? -1);
  await gate.close();
  redis.disconnect();
  const scripts = [...info.matchAll(/cmdstat_eval(?:sha)?:calls=(\d+)/g)].reduce((a, m) => a + Number(m[1]), 0);
  return { scripts: scripts / calls, calls };
}

/**
 * The holds keeper's sync: SYNC_CALLS calls admitted (64 at a time) with holds of an hour, then
 * SYNC_WAIT_MS of syncs alone, one every SYNC_MS (a pass of many calls takes longer under
 * valgrind: the passes are counted from the script calls, one per SYNC_BATCH_CALLS calls on a single
 * Redis).
 * Returns the commands per call in progress and pass, the calls held and the passes.
 */
async function syncs(server: Server): Promise<{ stats: Map<string, number>; held: number; passes: number }> {
  const redis = new Redis({ port: server.port, host: '127.0.0.1' });
  const gate = await CallGate.create({
    config: { ...CONFIG_3CH, maxCallDuration: 'PT1H' },
    store: new RedisStore({ redis, prefix: 'i:', holds: { syncMs: SYNC_MS } }),
    timeoutMs: 120_000,
    shield: false,
  });
  const seq = zipfSequence(SYNC_CALLS, 1000, 1.1, 1);
  let next = 0;
  let held = 0;
  const worker = async () => {
    while (next < SYNC_CALLS) {
      const i = next++;
      const p = seq[i]!;
      const d = await gate.admit({ callId: `c${i}`, peer: peerName(p), account: accountName(p) });
      if (d.admitted) held++;
    }
  };
  await Promise.all(Array.from({ length: 64 }, worker));
  callgrindControl('zero', server.child.pid ?? -1);
  await redis.config('RESETSTAT');
  await new Promise((r) => setTimeout(r, SYNC_WAIT_MS));
  const counts = new Map<string, number>();
  for (const m of (await redis.info('commandstats')).matchAll(/cmdstat_([a-z|]+):calls=(\d+)/g))
    if (m[1] !== 'info' && m[1] !== 'ping' && !m[1]!.startsWith('config')) counts.set(m[1]!, Number(m[2]));
  const passes = ((counts.get('evalsha') ?? 0) + (counts.get('eval') ?? 0)) / Math.ceil(held / SYNC_BATCH_CALLS);
  const stats = new Map([...counts].map(([c, n]) => [c, n / (held * passes)]));
  await gate.close();
  redis.disconnect();
  return { stats, held, passes };
}

/** Shut a counted server down and wait for it (valgrind then writes its counts); no reconnection after SHUTDOWN. */
async function stopCounted(server: Server): Promise<void> {
  const admin = new Redis({ port: server.port, host: '127.0.0.1', retryStrategy: () => null });
  admin.on('error', () => undefined);
  await admin.call('SHUTDOWN', 'NOSAVE').catch(() => undefined);
  admin.disconnect();
  await server.exited;
}

/** The commands scripts ran, per unit, most first ("zadd 2.50, zcard 1.00, ..."). */
function commandList(stats: Map<string, number>): string {
  return [...stats]
    .filter(([c]) => c !== 'evalsha' && c !== 'eval')
    .sort((a, b) => b[1] - a[1])
    .map(([c, n]) => `${c} ${n.toFixed(2)}`)
    .join(', ');
}

const dir = mkdtempSync(join(tmpdir(), 'callgate-instr-'));
try {
  process.stdout.write(
    `Redis instructions per decision inside scripts unless a row says whole server (callgrind), ${CALLS.toLocaleString('en-US')} calls, three levels\n`,
  );
  process.stdout.write(
    `case                         listpack   instructions   script calls  calls/s   commands per decision${PACE > 0 ? ` (paced at ${PACE}/s)` : ''}\n`,
  );
  for (const kase of CASES) {
    if (kase !== 'batch' && kase !== 'lone' && kase !== 'leased' && kase !== 'sync' && kase !== 'sizes')
      throw new Error(`--cases: batch, lone, leased, sync or sizes, not ${kase}`);
    if (kase === 'sizes') {
      for (const channels of [false, true])
        for (const size of SIZES)
          for (const loneUpTo of [1, size]) {
            const server = await startCounted(LISTPACK[0]!, dir, true);
            let run: { scripts: number; calls: number };
            try {
              run = await fixedBatches(server, size, loneUpTo, channels);
            } finally {
              await stopCounted(server);
            }
            const name = `${size} calls${channels ? ' +ch' : ''}, ${loneUpTo === 1 ? 'admit.lua' : 'run'}`;
            process.stdout.write(
              `${name.padEnd(28)} ${String(LISTPACK[0]).padStart(8)} ${Math.round(
                countedInstructions(`${server.out}.1`) / run.calls,
              )
                .toLocaleString('en-US')
                .padStart(14)} ${run.scripts.toFixed(3).padStart(14)} ${'-'.padStart(8)}   (whole server)\n`,
            );
          }
      continue;
    }
    if (kase === 'sync') {
      for (const listpack of LISTPACK) {
        const server = await startCounted(listpack, dir);
        let run: Awaited<ReturnType<typeof syncs>>;
        try {
          run = await syncs(server);
        } finally {
          await stopCounted(server);
        }
        const commands = commandList(run.stats);
        const per = Math.round(countedInstructions(server.out) / (run.held * run.passes));
        process.stdout.write(
          `${'sync, per call and pass'.padEnd(28)} ${String(listpack).padStart(8)} ${per.toLocaleString('en-US').padStart(14)} ${'-'.padStart(14)} ${'-'.padStart(8)}   ${commands} (${run.held} calls held, ${run.passes.toFixed(1)} passes)\n`,
        );
      }
      continue;
    }
    const variants: [Variant, boolean][] =
      kase === 'leased'
        ? [
            ['unleased', false],
            ['leased', false],
          ]
        : [
            ['plain', false],
            ['plain', true],
          ];
    for (const [variant, channels] of variants) {
      for (const listpack of LISTPACK) {
        const server = await startCounted(listpack, dir);
        let stats: Map<string, number>;
        let rate: number;
        try {
          ({ stats, rate } = await decide(server, channels, kase === 'batch' ? 64 : 1, variant));
        } finally {
          await stopCounted(server);
        }
        const scripts = (stats.get('evalsha') ?? 0) + (stats.get('eval') ?? 0);
        const commands = commandList(stats);
        const name =
          kase === 'leased'
            ? variant === 'leased'
              ? 'lone, leased (4 lanes)'
              : 'lone, unleased (tags)'
            : `${kase}${channels ? ' + channels' : ''}`;
        process.stdout.write(
          `${name.padEnd(28)} ${String(listpack).padStart(8)} ${Math.round(countedInstructions(server.out) / CALLS)
            .toLocaleString('en-US')
            .padStart(14)} ${scripts.toFixed(3).padStart(14)} ${rate.toFixed(1).padStart(8)}   ${commands}\n`,
        );
      }
    }
  }
} finally {
  rmSync(dir, { recursive: true, force: true });
}
