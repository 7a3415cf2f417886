/**
 * Kamailio's call capacity through callgate against Kamailio's own limiter (npm run bench:sip
 * [-- --quick] [--seconds N] [--json]). sipp UAC -> SIP server (stateful relay) -> sipp UAS
 * (200 at once; the caller hangs up after --call-ms), everything on loopback, one redis-server
 * child on a free port. The variants, each its own processes, measured rung by rung in turn:
 *
 *   relay     Kamailio relaying only (bench/sip/kamailio-anchor.cfg): the base of CPU per call
 *   pipelimit Kamailio with pipelimit + dialog profiles on three levels (the anchor)
 *   callgate  examples/kamailio/kamailio-redis.cfg: callgate's admit script on Redis through
 *             ndb_redis on every INVITE (global, account and peer levels, each with a channel
 *             limit), its release script on BYE
 *   leased    callgate as above, its global level leased over 4 lanes (`callgate kamailio
 *             --lease-lanes 4`: each call on its lane, checked against the lane's share, the
 *             shares granted for an hour by hand: no coordinator runs)
 *   cluster   leased as above on a Redis Cluster of 3 masters (`-A REDIS_CLUSTER`), Kamailio
 *             pointed at the master that holds the call's lane: no MOVED
 *   moved     the same Cluster, Kamailio pointed at another master: every admission and release
 *             answered MOVED, then sent again to the lane's master (two round trips)
 *   edge      the Node SIP edge (examples/sip-edge) embedding the library on the same Redis
 *
 * Per variant: capacity = the highest offered rate with no failed call, no refusal and INVITE ->
 * final response p99 under 50 ms (rates x1.5 until a rung fails, then 10 % steps above the last
 * that passed); p50 / p99 at 25, 50 and 90 % of it; what happens at 1.5 x (failed calls, 503s);
 * at one common rate (half the anchor's capacity) every variant's p50 / p99 and CPU seconds per
 * 1,000 calls per process (utime + stime from /proc, less what the process burns idle over the
 * rung: Kamailio's main process and children, the edge's Node process, redis-server). Limits are
 * far above the offered load in these rungs; a last run with real limits on the callgate variant
 * checks each limit held, from Kamailio's decisions and sipp's log.
 *
 * The variants run rung by rung in turn (A B C A B C ...), so that the ratios pair runs close in
 * time on a shared machine. Latency is from the caller's short message log (µs): the first
 * INVITE sent to the first final response received.
 */
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { loadConfig } from '../src/config/index.js';
import { kamailioCommands, kamailioInclude } from '../src/kamailio/redis-commands.js';
import { laneTag } from '../src/lease/lanes.js';
import {
  masterOfKey,
  type RedisClusterHandle,
  rawCommand,
  startCluster,
  startRedisServer,
} from '../test/helpers/redis.js';
import {
  freeUdpPort,
  leftAfter,
  parseShortLog,
  maxInWindow,
  provenInOneSecond,
  type SipLogEntry,
  sippAvailable,
  SIPP_INSTALL_HINT,
} from '../test/helpers/sipp.js';

const { values } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    seconds: { type: 'string' },
    'call-ms': { type: 'string', default: '1000' },
    start: { type: 'string', default: '200' },
    json: { type: 'boolean', default: false },
    variants: { type: 'string', default: 'pipelimit,callgate,edge' },
  },
});
const QUICK = values.quick;
const SECONDS = Number(values.seconds ?? (QUICK ? 2 : 5));
const CALL_MS = Number(values['call-ms']);
const START = Number(values.start);
if (!(SECONDS >= 1 && SECONDS <= 60)) throw new Error(`--seconds must be from 1 to 60, got ${values.seconds}`);
if (!(CALL_MS >= 0 && CALL_MS <= 10_000))
  throw new Error(`--call-ms must be from 0 to 10000, got ${values['call-ms']}`);
if (!(START >= 10 && START <= 10_000)) throw new Error(`--start must be from 10 to 10000, got ${values.start}`);
if (!sippAvailable()) throw new Error(SIPP_INSTALL_HINT);
if (spawnSync('kamailio', ['-v'], { stdio: 'ignore' }).status !== 0)
  throw new Error('kamailio not found: apt-get install kamailio kamailio-redis-modules');

const P99_BOUND_MS = 50;
/** A rung that lost no call but no answer came within this: the call failed (sipp -recv_timeout). */
const RECV_TIMEOUT_MS = 5_000;
const MAX_RUNGS = QUICK ? 6 : 10;
/** The capacity search stops here whatever is left (the whole run stays within ~8 minutes). */
const SEARCH_BUDGET_MS = QUICK ? 90_000 : 240_000;
const ROOT = path.resolve('.');
const BENCH = path.join(ROOT, 'bench/sip');
const TICK_S = 1 / 100; // /proc/<pid>/stat times are in clock ticks (USER_HZ, 100 on Linux)
const HUGE = 1_000_000_000;

type VariantName = 'relay' | 'pipelimit' | 'callgate' | 'leased' | 'cluster' | 'moved' | 'edge';
const ALL: readonly VariantName[] = ['relay', 'pipelimit', 'callgate', 'leased', 'cluster', 'moved', 'edge'];
/** The leased variants' lanes. */
const LANES = 4;
const chosen = values.variants.split(',').map((v) => v.trim()) as VariantName[];
for (const v of chosen) if (!ALL.includes(v)) throw new Error(`--variants: unknown ${v} (of ${ALL.join(', ')})`);

const dir = mkdtempSync(path.join(os.tmpdir(), 'callgate-bench-sip-'));
const children: ChildProcess[] = [];
function killGroup(child: ChildProcess, signal: NodeJS.Signals): void {
  try {
    if (child.pid !== undefined && child.exitCode === null) process.kill(-child.pid, signal);
  } catch {
    // gone already
  }
}
process.once('exit', () => {
  for (const c of children) killGroup(c, 'SIGKILL');
});

function spawnLogged(cmd: string, args: string[], name: string, cwd = dir): { child: ChildProcess; log: () => string } {
  // its own process group: Kamailio's workers go with it (killGroup)
  const child = spawn(cmd, args, { cwd, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  children.push(child);
  let log = '';
  const keep = (b: Buffer) => {
    log += b.toString();
    if (log.length > 8_000_000) log = log.slice(-4_000_000);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  child.once('error', (e) => {
    log += `\n${name}: ${e.message}`;
  });
  return { child, log: () => log };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function waitFor(what: string, ok: () => boolean, log: () => string, ms = 20_000): Promise<void> {
  const until = Date.now() + ms;
  while (!ok()) {
    if (Date.now() > until) throw new Error(`${what} did not start:\n${log().slice(-3000)}`);
    await sleep(100);
  }
}

/** utime + stime of a process, seconds (0 when it is gone). */
function cpuOf(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(f[11]) + Number(f[12])) * TICK_S;
  } catch {
    return 0;
  }
}

/** A process and its children (Kamailio's workers). */
function familyOf(pid: number): number[] {
  const out = [pid];
  for (const entry of spawnSync('ps', ['-o', 'pid=', '--ppid', String(pid)], { encoding: 'utf8' }).stdout.split('\n'))
    if (entry.trim() !== '') out.push(Number(entry.trim()));
  return out;
}

interface Variant {
  readonly name: VariantName;
  readonly port: number;
  /** Process groups whose CPU counts: name -> pids. */
  readonly processes: Record<string, number[]>;
  /** What it printed (Kamailio). */
  readonly log?: () => string;
  stop(): Promise<void>;
}

async function startUas(name: string): Promise<{ port: number; child: ChildProcess }> {
  const port = await freeUdpPort();
  const { child, log } = spawnLogged(
    'sipp',
    ['-sf', path.join(BENCH, 'uas.xml'), '-i', '127.0.0.1', '-p', String(port), '-nostdin', '-fd', '60'],
    `uas ${name}`,
  );
  await sleep(300);
  if (child.exitCode !== null) throw new Error(`uas ${name}: ${log()}`);
  return { port, child };
}

async function startKamailio(
  name: VariantName,
  cfg: string,
  defines: string[],
  uasPort: number,
  runDir: string = name,
): Promise<Variant> {
  const port = await freeUdpPort();
  const run = path.join(dir, runDir);
  spawnSync('mkdir', ['-p', run]);
  const args = ['-f', cfg, '-DD', '-E', '-m', '256', '-M', '16', '-Y', run, '-P', path.join(run, 'kamailio.pid')];
  args.push('-A', `LISTEN=udp:127.0.0.1:${port}`, '-A', `DESTINATION="sip:127.0.0.1:${uasPort}"`);
  for (const d of defines) args.push('-A', d);
  const { child, log } = spawnLogged('kamailio', args, name, run);
  await waitFor(`kamailio ${name}`, () => /Listening on/.test(log()) || child.exitCode !== null, log);
  await sleep(1500);
  if (child.exitCode !== null) throw new Error(`kamailio ${name} exited:\n${log().slice(-3000)}`);
  return {
    name,
    port,
    processes: { kamailio: familyOf(child.pid!) },
    log,
    async stop() {
      killGroup(child, 'SIGTERM');
      await sleep(300);
      writeFileSync(path.join(run, 'kamailio.log'), log());
    },
  };
}

/** Limits of the capacity rungs: three levels with channels, far above the load. */
function limitsOf(real?: { cps: number; channels: number }) {
  const lim = (cps: number, channels: number) => [{ limit: cps, window: 'PT1S' }, { channels }];
  const top = real ? lim(real.cps * 4, real.channels * 4) : lim(HUGE, HUGE);
  return {
    inbound: {
      global: top,
      accounts: { acct: top },
      peers: { p1: real ? lim(real.cps, real.channels) : lim(HUGE, HUGE) },
    },
    // (the edge paces every call out: a slot a µs apart, waits up to 1 s allowed, never congested)
    outbound: { carriers: { A: { cps: 1_000_000, maxWait: 'PT1S', channels: HUGE } } },
  };
}

/**
 * Where a callgate variant's Kamailio finds Redis: one server (`port`), or a Cluster and the
 * master it is pointed at, the one holding the call's lane or (`moved`) another.
 */
type CallgateRedis = { readonly port: number } | { readonly cluster: RedisClusterHandle; readonly moved: boolean };

/** The Cluster node each Cluster variant's Kamailio is pointed at (its port). */
const pointedAt = new Map<VariantName, number>();

/** The MOVED answers a node has given since it started (INFO errorstats). */
async function movedAnswers(port: number): Promise<number> {
  const info = String(await rawCommand(port, ['INFO', 'errorstats']));
  return Number(/errorstat_MOVED:count=(\d+)/.exec(info)?.[1] ?? 0);
}

async function startCallgate(
  where: CallgateRedis,
  uasPort: number,
  opts: { real?: { cps: number; channels: number }; name?: VariantName } = {},
) {
  const { real } = opts;
  const variant: VariantName = opts.name ?? 'callgate';
  const leased = variant !== 'callgate';
  const runName = real ? 'callgate-limits' : variant;
  const run = path.join(dir, runName);
  spawnSync('mkdir', ['-p', run]);
  const cfg = path.join(run, 'kamailio-redis.cfg');
  copyFileSync(path.join(ROOT, 'examples/kamailio/kamailio-redis.cfg'), cfg);
  const config = await loadConfig(limitsOf(real) as never);
  // each variant its own keys: they share one Redis
  const prefix = real ? 'cgl:' : leased ? `cg-${variant}:` : 'callgate:';
  const commands = kamailioCommands(config, prefix, 1, leased ? { lease: { lanes: LANES } } : {});
  writeFileSync(path.join(run, 'callgate-redis.cfg'), kamailioInclude(commands, 'bench'));
  const portOf = async (key: string) => ('port' in where ? where.port : masterOfKey(where.cluster.nodes[0]!.port, key));
  if (leased) {
    // every lane's share: the whole level, for an hour (what a coordinator grants a lane alone)
    const [sec] = (await rawCommand(await portOf('{in}'), ['TIME'])) as [string];
    const end = String((Number(sec) + 3600) * 1_000_000);
    for (let k = 0; k < LANES; k++) {
      const key = `${prefix}{${laneTag(k, LANES)}}:global:share`;
      await rawCommand(await portOf(key), ['HSET', key, 'c', String(HUGE), 'h', String(HUGE), 'e', end]);
    }
  }
  let port: number;
  if ('port' in where) port = where.port;
  else {
    // the call's lane (by its account, ACCOUNT below): its record key carries the lane's tag
    const record = commands.templates.find((t) => t.peer === 'p1' && t.account === 'acct')!.record;
    const owner = await masterOfKey(where.cluster.nodes[0]!.port, record);
    port = where.moved ? where.cluster.nodes.find((n) => n.port !== owner)!.port : owner;
    pointedAt.set(variant, port);
  }
  return startKamailio(
    variant,
    cfg,
    [
      `REDIS="name=callgate;addr=127.0.0.1;port=${port}"`,
      ...('cluster' in where ? ['REDIS_CLUSTER'] : []),
      'ACCOUNT="acct"',
      'CALLGATE_POLICY="fail-closed"',
      // with real limits: each admission and release logged with its Redis time (the check below)
      ...(real ? ['LOG_DECISIONS'] : []),
    ],
    uasPort,
    runName,
  );
}

async function startEdge(redisUrl: string, redisPid: number, uasPort: number): Promise<Variant> {
  const port = await freeUdpPort();
  const file = path.join(dir, 'edge.config.json');
  writeFileSync(
    file,
    JSON.stringify({
      listen: `127.0.0.1:${port}`,
      limits: limitsOf(),
      peers: { p1: { sources: ['127.0.0.1'], account: 'acct' } },
      identify: ['source'],
      route: ['A'],
      carriers: { A: { address: `127.0.0.1:${uasPort}` } },
      policy: 'fail-closed',
      timeoutMs: 500,
    }),
  );
  const { child, log } = spawnLogged(
    process.execPath,
    [
      '--import',
      'tsx',
      '--conditions=callgate-source',
      path.join(ROOT, 'examples/sip-edge/main.ts'),
      '--config',
      file,
      '--store',
      'redis',
      '--redis-url',
      redisUrl,
      '--prefix',
      'edge:',
    ],
    'edge',
    ROOT,
  );
  await waitFor('edge', () => /listening|ready|127\.0\.0\.1:\d+/i.test(log()) || child.exitCode !== null, log);
  await sleep(1000);
  if (child.exitCode !== null) throw new Error(`edge exited:\n${log().slice(-3000)}`);
  return {
    name: 'edge',
    port,
    processes: { node: [child.pid!], redis: [redisPid] },
    async stop() {
      killGroup(child, 'SIGTERM');
      await sleep(1000);
      writeFileSync(path.join(dir, 'edge.log'), log());
    },
  };
}

/** CPU seconds of each process group of a variant. */
function cpuGroups(v: Variant): Record<string, number> {
  return Object.fromEntries(
    Object.entries(v.processes).map(([k, pids]) => [k, pids.reduce((s, p) => s + cpuOf(p), 0)]),
  );
}

/** Each variant's process groups' CPU while idle, s per s. */
const idleRate = new Map<Variant, Record<string, number>>();

interface Rung {
  variant: VariantName;
  rate: number;
  calls: number;
  failed: number;
  refused: number;
  noAnswer: number;
  p50Ms: number;
  p99Ms: number;
  /** CPU seconds per 1,000 calls, per process group. */
  cpu: Record<string, number>;
  ok: boolean;
}

const quantile = (sorted: readonly number[], q: number) =>
  sorted.length === 0 ? Number.NaN : sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;

async function rung(
  v: Variant,
  rate: number,
  seconds = SECONDS,
  tag = '',
  callMs = CALL_MS,
): Promise<Rung & { messages: SipLogEntry[] }> {
  const calls = Math.max(1, Math.round(rate * seconds));
  const name = `${v.name}-${rate}${tag}-${Date.now()}`;
  const stat = path.join(dir, `${name}.stat.csv`);
  const short = path.join(dir, `${name}.short.log`);
  const startedAt = Date.now();
  const before = Object.fromEntries(
    Object.entries(v.processes).map(([k, pids]) => [k, pids.reduce((s, p) => s + cpuOf(p), 0)]),
  );
  const port = await freeUdpPort();
  const limit = Math.ceil(rate * (callMs / 1000 + RECV_TIMEOUT_MS / 1000 + 1)) + 100;
  const { child } = spawnLogged(
    'sipp',
    [
      '-sf',
      path.join(BENCH, 'uac.xml'),
      `127.0.0.1:${v.port}`,
      '-i',
      '127.0.0.1',
      '-p',
      String(port),
      '-r',
      String(rate),
      '-m',
      String(calls),
      '-l',
      String(limit),
      '-d',
      String(callMs),
      '-recv_timeout',
      String(RECV_TIMEOUT_MS),
      '-timeout',
      `${seconds + callMs / 1000 + RECV_TIMEOUT_MS / 1000 + 20}s`,
      '-nostdin',
      '-trace_stat',
      '-stf',
      stat,
      '-fd',
      '60',
      '-trace_shortmsg',
      '-shortmessage_file',
      short,
    ],
    name,
  );
  await new Promise((r) => child.once('exit', r));
  const after = Object.fromEntries(
    Object.entries(v.processes).map(([k, pids]) => [k, pids.reduce((s, p) => s + cpuOf(p), 0)]),
  );
  const lines = readFileSync(stat, 'utf8').trim().split('\n');
  const head = lines[0]!.split(';');
  const row = lines[lines.length - 1]!.split(';');
  const field = (n: string) => Number(row[head.indexOf(n)] ?? Number.NaN);
  const log = parseShortLog(readFileSync(short, 'utf8'));
  const sent = new Map<string, number>();
  const answered = new Map<string, number>();
  for (const m of log) {
    if (m.dir === 'sent' && m.method === 'INVITE' && !sent.has(m.callId)) sent.set(m.callId, m.t);
    if (m.dir === 'received' && m.status !== undefined && m.status >= 200 && /INVITE/.test(m.cseq))
      if (!answered.has(m.callId)) answered.set(m.callId, m.t);
  }
  const rtts: number[] = [];
  for (const [id, t] of answered) {
    const s = sent.get(id);
    if (s !== undefined) rtts.push((t - s) / 1000);
  }
  rtts.sort((a, b) => a - b);
  const created = field('TotalCallCreated');
  const failed = field('FailedCall(C)') + Math.max(0, calls - created);
  const refused = field('GenericCounter1(C)');
  const cpu: Record<string, number> = {};
  // what the processes burn idle over the same time (timers, Redis' cron) is not the calls'
  const idle = idleRate.get(v) ?? {};
  const took = (Date.now() - startedAt) / 1000;
  for (const k of Object.keys(after))
    cpu[k] = Math.max(0, ((after[k]! - before[k]! - (idle[k] ?? 0) * took) / calls) * 1000);
  const p50Ms = quantile(rtts, 0.5);
  const p99Ms = quantile(rtts, 0.99);
  rmSync(short, { force: true });
  return {
    variant: v.name,
    rate,
    calls,
    failed,
    refused,
    noAnswer: sent.size - answered.size,
    p50Ms,
    p99Ms,
    cpu,
    ok: failed === 0 && refused === 0 && sent.size === calls && answered.size === calls && p99Ms < P99_BOUND_MS,
    messages: log,
  };
}

const fmt = (x: number, d = 2) => (Number.isFinite(x) ? x.toFixed(d) : '-');
const cpuText = (c: Record<string, number>) =>
  Object.entries(c)
    .map(([k, s]) => `${k} ${fmt(s, 3)}`)
    .join(' + ');
const total = (c: Record<string, number>) => Object.values(c).reduce((a, b) => a + b, 0);

function say(r: Rung) {
  if (values.json) return;
  console.log(
    `  ${r.variant.padEnd(9)} ${String(r.rate).padStart(5)}/s  ${r.ok ? 'ok  ' : 'FAIL'} calls ${r.calls} failed ${r.failed} 503 ${r.refused} unanswered ${r.noAnswer}  p50 ${fmt(r.p50Ms)} ms p99 ${fmt(r.p99Ms)} ms  CPU s/1000 calls ${fmt(total(r.cpu), 3)} (${cpuText(r.cpu)})`,
  );
}

const started = Date.now();
const redis = await startRedisServer();
const info = await rawCommand(redis.port, ['INFO', 'server']);
const redisPid = Number(/process_id:(\d+)/.exec(String(info))?.[1]);
const variants = new Map<VariantName, Variant>();
const stops: (() => unknown)[] = [];
/** The cluster and moved variants' Redis Cluster, started with the first of them. */
let cluster: RedisClusterHandle | undefined;
try {
  // relay only is always there: the base of CPU per call
  for (const name of ['relay', ...chosen] as VariantName[]) {
    if (variants.has(name)) continue;
    const uas = await startUas(name);
    stops.push(() => killGroup(uas.child, 'SIGKILL'));
    let v: Variant;
    if (name === 'relay') v = await startKamailio('relay', path.join(BENCH, 'kamailio-anchor.cfg'), [], uas.port);
    else if (name === 'pipelimit')
      v = await startKamailio('pipelimit', path.join(BENCH, 'kamailio-anchor.cfg'), ['WITH_LIMITS'], uas.port);
    else if (name === 'callgate' || name === 'leased') {
      const k = await startCallgate({ port: redis.port }, uas.port, { name });
      v = { ...k, processes: { ...k.processes, redis: [redisPid] } };
    } else if (name === 'cluster' || name === 'moved') {
      if (cluster === undefined) {
        cluster = await startCluster(3);
        stops.push(() => cluster?.stop());
      }
      const k = await startCallgate({ cluster, moved: name === 'moved' }, uas.port, { name });
      v = { ...k, processes: { ...k.processes, redis: [...cluster.pids] } };
    } else v = await startEdge(redis.url, redisPid, uas.port);
    variants.set(name, v);
    stops.push(() => v.stop());
  }
  const measured = chosen.filter((n) => n !== 'relay');
  const rungs: Rung[] = [];
  const run = async (name: VariantName, rate: number, tag = '') => {
    const r = await rung(variants.get(name)!, rate, SECONDS, tag);
    rungs.push(r);
    say(r);
    return r;
  };

  // every process group's CPU while no call runs (s per s), taken off each rung
  const idleStart = new Map([...variants.values()].map((v) => [v, cpuGroups(v)]));
  const idleFrom = Date.now();
  await sleep(QUICK ? 2_000 : 4_000);
  for (const [v, start] of idleStart) {
    const end = cpuGroups(v);
    const s = (Date.now() - idleFrom) / 1000;
    idleRate.set(v, Object.fromEntries(Object.keys(end).map((k) => [k, (end[k]! - start[k]!) / s])));
  }
  if (!values.json)
    console.log(
      `idle CPU (s per s, taken off every rung): ${[...idleRate].map(([v, r]) => `${v.name} ${cpuText(r)}`).join('; ')}`,
    );

  // warm-up: every variant's first calls (scripts loaded, plans made, JIT) out of the measure
  for (const name of variants.keys()) await rung(variants.get(name)!, 50, 1, '-warm');

  // 1. capacity: x1.5 until a rung fails, then 10 % steps above the last that passed
  if (!values.json) console.log(`capacity rungs (${SECONDS} s each, ${CALL_MS} ms calls):`);
  const state = new Map(measured.map((n) => [n, { pass: 0, fail: 0, next: START, done: false, rungs: 0 }]));
  const searchStart = Date.now();
  while ([...state.values()].some((s) => !s.done)) {
    for (const name of measured) {
      const s = state.get(name)!;
      if (s.done) continue;
      let r = await run(name, s.next);
      // a shared machine stalls now and then: a failed rung counts once it fails again
      if (!r.ok) r = await run(name, s.next, '-again');
      s.rungs++;
      if (r.ok) s.pass = s.next;
      else s.fail = s.next;
      if (s.fail === 0) s.next = Math.round(s.next * 1.5);
      else if (s.pass === 0) {
        // the first rung failed already: down by 1.5 until one passes
        s.next = Math.round(s.fail / 1.5);
        if (s.next < 20) s.done = true;
      } else {
        const step = Math.round(s.pass * 1.1);
        if (s.pass === 0 || step >= s.fail) s.done = true;
        else s.next = step;
      }
      if (s.rungs >= MAX_RUNGS || Date.now() - searchStart > SEARCH_BUDGET_MS) s.done = true;
    }
  }
  const capacity = new Map(measured.map((n) => [n, state.get(n)!.pass]));

  // 2. the common rate (half the anchor's capacity, else half the least): latency and CPU per call
  const anchor = capacity.get('pipelimit') ?? Math.min(...capacity.values());
  const common = Math.max(10, Math.round(anchor / 2));
  if (!values.json) console.log(`at ${common}/s (half the anchor's capacity), every variant:`);
  const commonRungs = new Map<VariantName, Rung>();
  for (const name of ['relay', ...measured] as VariantName[]) commonRungs.set(name, await run(name, common, '-common'));

  // 3. 25 / 50 / 90 % and 1.5 x of each one's own capacity, interleaved
  if (!values.json) console.log('at 25 / 50 / 90 % and 1.5 x of each capacity:');
  const own = new Map<VariantName, Rung[]>();
  for (const f of [0.25, 0.5, 0.9, 1.5]) {
    for (const name of measured) {
      const cap = capacity.get(name)!;
      if (cap === 0) continue;
      const r = await run(name, Math.max(10, Math.round(cap * f)), `-${f}`);
      own.set(name, [...(own.get(name) ?? []), r]);
    }
  }

  // 4. real limits, callgate: offered 3 x the peer's rate, with short calls (the rate limit
  // binds) and long ones (the channel limit binds). From the decisions (Kamailio logs each
  // admission and release with its Redis time): admissions in any second (t - 1 s, t] <= the
  // rate limit, calls holding at once <= the channel limit, one admission per 200; from sipp:
  // every call ended; no hold left in Redis.
  let limitsCheck: Record<string, unknown> | undefined;
  if (measured.includes('callgate')) {
    const real = { cps: 50, channels: 30 };
    const uas = await startUas('limits');
    stops.push(() => killGroup(uas.child, 'SIGKILL'));
    const k = await startCallgate({ port: redis.port }, uas.port, { real });
    stops.push(() => k.stop());
    const check = async (callMs: number) => {
      const logFrom = k.log!().length;
      const r = await rung(k, real.cps * 3, QUICK ? 3 : 5, `-limits-${callMs}`, callMs);
      await sleep(500);
      // from the decisions: Redis times of every admission and release (LOG_DECISIONS)
      const admittedAt: number[] = [];
      const events: { t: number; d: number }[] = [];
      for (const m of k.log!()
        .slice(logFrom)
        .matchAll(/callgate: (admitted|released) \S+ at (-?\d+)/g)) {
        // ndb_redis reads integers as 32 bits: µs modulo 2^32, as a signed number
        const t = (Number(m[2]) + 2 ** 32) % 2 ** 32;
        if (m[1] === 'admitted') admittedAt.push(t);
        events.push({ t, d: m[1] === 'admitted' ? 1 : -1 });
      }
      // the run lasts seconds: a wrap of the 32 bits (every 71 minutes) shows as a gap over 2^31
      const lo = Math.min(...events.map((e) => e.t));
      const unwrap = (t: number) => (t - lo > 2 ** 31 ? t - 2 ** 32 : t);
      for (const e of events) e.t = unwrap(e.t);
      for (let i = 0; i < admittedAt.length; i++) admittedAt[i] = unwrap(admittedAt[i]!);
      // a release at t ends its hold before an admission at t is checked (holds end after t)
      events.sort((x, y) => x.t - y.t || x.d - y.d);
      let inUse = 0;
      let mostInUse = 0;
      for (const e of events) mostInUse = Math.max(mostInUse, (inUse += e.d));
      const decided = { admitted: admittedAt.length, mostInOneSecond: maxInWindow(admittedAt, 1_000_000), mostInUse };
      const byCall = new Map<string, { invite?: number; ok?: number; bye?: number; status?: number }>();
      // an INVITE left after the entry logged before it (sipp reads its clock after a send)
      const bounds = leftAfter(r.messages);
      for (const [i, m] of r.messages.entries()) {
        const c = byCall.get(m.callId) ?? {};
        byCall.set(m.callId, c);
        if (m.dir === 'sent' && m.method === 'INVITE') c.invite ??= bounds[i];
        if (m.dir === 'sent' && m.method === 'BYE') c.bye ??= m.t;
        if (m.dir === 'received' && m.status !== undefined && m.status >= 200 && /INVITE/.test(m.cseq)) {
          c.status ??= m.status;
          if (m.status === 200) c.ok ??= m.t;
        }
      }
      const admitted = [...byCall.values()].filter((c) => c.ok !== undefined);
      const inOneSecond = provenInOneSecond(admitted.map((c) => ({ a: c.invite!, b: c.ok! })));
      // most calls certainly holding at once: +1 at 200 received, -1 at BYE sent
      const edges = admitted.flatMap((c) => [
        { t: c.ok!, d: 1 },
        { t: c.bye ?? Number.POSITIVE_INFINITY, d: -1 },
      ]);
      edges.sort((x, y) => x.t - y.t || x.d - y.d);
      let open = 0;
      let holding = 0;
      for (const e of edges) holding = Math.max(holding, (open += e.d));
      const holds = Number(await rawCommand(redis.port, ['ZCOUNT', 'cgl:peer:p1:ch', '-inf', '+inf']));
      const statuses: Record<string, number> = {};
      for (const c of byCall.values()) statuses[String(c.status)] = (statuses[String(c.status)] ?? 0) + 1;
      const held =
        r.failed === 0 &&
        decided.admitted === statuses['200'] &&
        decided.mostInOneSecond <= real.cps &&
        decided.mostInUse <= real.channels &&
        holds === 0;
      // sipp's log (the entry before the INVITE .. 200 received) is shown beside the decisions,
      // which are the judge: Kamailio logs each decision's Redis time
      const sipp = { inOneSecond, holding };
      return { callMs, offered: r.calls, failed: r.failed, statuses, decided, sipp, holdsLeft: holds, held };
    };
    // short calls: the rate limit binds; long ones: the channel limit
    const runs = [await check(200), await check(2000)];
    limitsCheck = { rateLimit: real.cps, channelLimit: real.channels, runs, held: runs.every((x) => x.held) };
  }

  const summary = measured.map((name) => {
    const c = commonRungs.get(name)!;
    const base = commonRungs.get('relay')!;
    const pl = commonRungs.get('pipelimit');
    const o = own.get(name) ?? [];
    return {
      variant: name,
      capacity: capacity.get(name)!,
      capacityVsAnchor: capacity.get(name)! / anchor,
      common: { rate: common, p50Ms: c.p50Ms, p99Ms: c.p99Ms, cpu: c.cpu },
      cpuPer1000: total(c.cpu),
      cpuAddedOverRelay: total(c.cpu) - total(base.cpu),
      cpuAddedVsAnchor: pl ? (total(c.cpu) - total(base.cpu)) / (total(pl.cpu) - total(base.cpu)) : Number.NaN,
      p50AddedMs: pl ? c.p50Ms - pl.p50Ms : Number.NaN,
      p99AddedMs: pl ? c.p99Ms - pl.p99Ms : Number.NaN,
      own: o.map((r) => ({ rate: r.rate, p50Ms: r.p50Ms, p99Ms: r.p99Ms, failed: r.failed, refused: r.refused })),
    };
  });
  // what the Cluster variants' Kamailio was answered MOVED, at the node it is pointed at
  const moved: Record<string, number> = {};
  for (const [name, port] of pointedAt) moved[name] = await movedAnswers(port);
  if (values.json)
    console.log(JSON.stringify({ seconds: SECONDS, callMs: CALL_MS, summary, rungs, limitsCheck, moved }));
  else {
    const relay = commonRungs.get('relay')!;
    console.log(
      `\nsummary (${SECONDS} s rungs, ${CALL_MS} ms calls, ${((Date.now() - started) / 1000).toFixed(0)} s in all; relay only at ${common}/s: p50 ${fmt(relay.p50Ms)} ms p99 ${fmt(relay.p99Ms)} ms, CPU ${fmt(total(relay.cpu), 3)} s/1000 calls)`,
    );
    console.log(
      "| variant | capacity /s | vs anchor | CPU s/1000 calls (at common rate) | CPU added over relay, vs anchor's | p50 / p99 at common rate, ms | +p50 / +p99 vs anchor, ms | p50/p99 at 25 / 50 / 90 % | at 1.5 x: failed, 503 |",
    );
    console.log('|---|---|---|---|---|---|---|---|---|');
    for (const s of summary) {
      const at = s.own.slice(0, 3).map((r) => `${fmt(r.p50Ms)}/${fmt(r.p99Ms)}`);
      const over = s.own[3];
      console.log(
        `| ${s.variant} | ${s.capacity} | ${fmt(s.capacityVsAnchor)} | ${fmt(s.cpuPer1000, 3)} (${cpuText(s.common.cpu)}) | ${fmt(s.cpuAddedOverRelay, 3)}, ${fmt(s.cpuAddedVsAnchor)} x | ${fmt(s.common.p50Ms)} / ${fmt(s.common.p99Ms)} | ${fmt(s.p50AddedMs)} / ${fmt(s.p99AddedMs)} | ${at.join(', ')} | ${over ? `${over.failed} of ${over.rate * SECONDS}, ${over.refused}` : '-'} |`,
      );
    }
    if (pointedAt.size > 0)
      console.log(
        `MOVED answers at the node each Kamailio is pointed at, over the whole run: ${Object.entries(moved)
          .map(([name, n]) => `${name} ${n}`)
          .join(', ')}`,
      );
    if (limitsCheck)
      console.log(
        `limits held (callgate, peer ${limitsCheck.rateLimit}/s and ${limitsCheck.channelLimit} channels, offered 3 x): ${limitsCheck.held ? 'yes' : 'NO'} (${JSON.stringify(limitsCheck)})`,
      );
  }
} finally {
  for (const stop of stops.reverse()) await stop();
  await redis.stop();
  if (process.env.BENCH_KEEP) console.log(`files kept in ${dir}`);
  else rmSync(dir, { recursive: true, force: true });
}
