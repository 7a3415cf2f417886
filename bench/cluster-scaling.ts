/**
 * Scaling on a Redis Cluster, by Redis time (issue 28): on local Clusters of 1, 2, 3 and 4
 * masters, an open loop of decisions, then per master its script time (EVALSHA + EVAL usec in
 * INFO commandstats) and all its command time, per decision. The projected ceiling is 1 s ÷ the
 * busiest master's script time per decision: what the Cluster could decide per second were
 * Redis the only limit (this machine has two cores shared by the masters and the driver, so
 * wall-clock throughput says nothing about scaling). Workloads:
 *
 *   out        `store.reserve` over 3-carrier routes (12 carriers, each route three consecutive
 *              ones, every carrier with a channel limit, each call holding)
 *   in-global  `gate.admit`, the bench's three levels (bench/limits.ts: a global limit, 20
 *              accounts, 1,000 Zipf peers, two windows each): every key on the platform tag
 *   in         the same without the global level: each account's keys on its own tag
 *   in-global1 the three levels, the global level its 1 s limit alone, unleased: in-leased's
 *              levels, the ceiling it is judged against (a leased level has one limit)
 *   in-leased  in-global1's levels with the global level leased (docs/leasing.md) over --lanes
 *              lanes, a LeaseCoordinator ticking in the bench process on a client of its own
 *              (its scripts are counted too); lanes by account
 *   peers-global, peers-leased  the global level (its 1 s limit) and the peers, no account:
 *              unleased (every key on `{in}`), then leased (lanes by peer)
 *
 *   npx tsx bench/cluster-scaling.ts [--workloads out,in-global,in,in-leased] [--rate 3000]
 *     [--seconds 4] [--masters 1,2,3,4] [--carriers 12] [--lanes 16|masters] [--rounds 1] [--per-master] [--pin] [--balance] [--commands] [--isolate] [--tick 50] [--pin-peers N] [--instructions]
 *
 * --pin: leased runs place their owners (accounts; peers when calls name none) on lanes as an
 * operator would from the demand they see (docs/leasing.md, "Placing accounts"): the busiest
 * first, each onto the least loaded master, there onto its least loaded lane (lane k of N is on
 * master floor(k M / N), as the lanes' tags spread them over masters of equal slot ranges). By
 * peer, the --pin-peers busiest peers (default 4 x --lanes) are pinned, on top of the others'
 * load where their hash puts them.
 *
 * --balance: the unleased workloads `in` and `out` with their account (carrier) tags' slots placed
 * on masters by load, busiest first onto the least loaded master, as an operator would move a hot
 * tag's slot (docs/redis.md): hashing alone put 32-41 % of the work on the busiest of 4 masters.
 *
 * --commands: after each run, every command's calls and µs per decision (those of scripts
 * included), summed over the masters.
 *
 * --per-master: offer --rate per master (4 masters: 4 x --rate), so that each master sees the
 * load one master sees: a decision's Redis time depends on how busy its master is (requests per
 * wake-up, batches), and the same total spread over 4 masters leaves each idler than one. Every
 * limit is as many times as high, so that as many calls in a hundred are refused. A lease
 * coordinator's cost is per lane and tick, not per master: on 4 masters each carries a quarter
 * of it at the same decisions per master. Watch the p99 column: one process drives every
 * master, and a driver that falls behind makes larger batches.
 *
 * --isolate (with --per-master): the Cluster's masters in turn, and beside them a one-master
 * Cluster of the workload (a leased workload: of its unleased twin): SLICE_CALLS of the one
 * master's calls, then each master's (the calls whose first keys' tag it owns; a master with
 * fewer calls a shorter slice, so that every list ends on the same turn), and so on, the driver
 * offering one master's rate throughout. Run at once, M masters and the driver share this
 * machine's two cores: a master waits for a core mid-script (commandstats count wall time), the
 * driver offers M x the calls, and the machine's load drifts between the runs a ratio divides
 * (one master's µs per decision swung from 22 to 45 between rounds of one run). In turn, each
 * master runs as on a core of its own, and both sides of the ratio meet the same drift within a
 * turn (0.5 s on 4 masters). The price: each master idles between its slices, and a leased run's
 * coordinator, which chases demand from lane to lane, runs M + 1 times as long for the same
 * decisions (its cost is per second, not per decision: --tick 1000 takes most of it out of the
 * decisions' time, and the table gives it apart). Approximate for `out`: a rerouted call's next
 * carrier, and a held call's locator (on the call id's tag), may be on another master, which then
 * works outside its slice (its time is counted all the same). The p99 column is the whole run's,
 * both Clusters'.
 *
 * --tick: the lease coordinator's tick, ms (default 50, as the library's; its leadership lasts 4
 * ticks, at least 1 s, so that a slow tick does not lose it). After each leased run
 * the coordinator runs alone for COORDINATOR_S seconds: its script µs per second per master.
 *
 * --instructions: every master runs under valgrind's callgrind, counting the instructions inside
 * Redis' call() (a command's execution, a script's whole run: what commandstats times), zeroed
 * just before the calls and read just after; the tables add each master's thousands per decision
 * and the ceiling by the busiest master's. Instructions do not depend on how busy the machine is
 * nor on how long a master idled before a call (an idle Redis takes 6-8 times as long per
 * script here), so the masters can run at once, without --isolate. Valgrind runs Redis some 50
 * times slower: offer a rate that the masters under it keep up with on two cores (--rate 80
 * with --per-master on 4 masters; watch the p99 column: a master that falls behind makes larger
 * batches). What is paid per second rather than per call then weighs some 40 times what it
 * would at 3,000 decisions/s: a leased run's coordinator grants the shares for an hour and stops
 * before the calls, and a lane's log is still trimmed (its expiry set) up to 4 times a second
 * whatever its calls, so compare leased workloads with --lanes masters. Script and CPU times in
 * such a run are valgrind's, not Redis'. Needs valgrind (Debian: valgrind).
 *
 * --rounds: each round runs every workload on every size, back to back; a last table gives
 * each size's ceiling over one master's of the same round (and, for a leased workload, over its
 * unleased twin's on one master), the median of the rounds, by script time and by CPU time
 * (INFO CPU: not inflated, as commandstats' wall time is, by a master waiting for one of the
 * two cores mid-script).
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Cluster, type Redis } from 'ioredis';
import { CallGate } from '../src/gate.js';
import { LeaseCoordinator } from '../src/lease/coordinator.js';
import { RECOMMENDED_REDIS_OPTIONS, RedisStore } from '../src/store/redis/redis-store.js';
import { startCluster } from '../test/helpers/redis.js';
import type { Carrier, Limit } from '../src/store/types.js';
import { type LanePins, laneOf, laneTag } from '../src/lease/lanes.js';
import { ACCOUNT_3, ACCOUNTS, accountName, GLOBAL_3, limitInput, PEER_3, peerName } from './limits.js';
import { callgrindControl, countedInstructions } from './callgrind.js';
import { openLoop } from './driver.js';
import { redisCpuSeconds, zipfSequence } from './workload.js';
import { accountTag, carrierTag, GLOBAL_TAG } from '../src/store/keys.js';
import { slotOf } from '../src/store/redis/slot.js';
import { scripts } from '../src/store/redis/scripts.js';

const { values } = parseArgs({
  options: {
    workloads: { type: 'string', default: 'out,in-global,in' },
    rate: { type: 'string', default: '3000' },
    seconds: { type: 'string', default: '4' },
    masters: { type: 'string', default: '1,2,3,4' },
    carriers: { type: 'string', default: '12' },
    lanes: { type: 'string', default: '16' },
    rounds: { type: 'string', default: '1' },
    'per-master': { type: 'boolean', default: false },
    pin: { type: 'boolean', default: false },
    balance: { type: 'boolean', default: false },
    commands: { type: 'boolean', default: false },
    isolate: { type: 'boolean', default: false },
    tick: { type: 'string', default: '50' },
    'pin-peers': { type: 'string' },
    instructions: { type: 'boolean', default: false },
  },
});
const rate = Number(values.rate);
const seconds = Number(values.seconds);
const sizes = values.masters.split(',').map(Number);
const WORKLOADS = ['out', 'in-global', 'in', 'in-global1', 'in-leased', 'peers-global', 'peers-leased'] as const;
// `--lanes masters`: as many lanes as the Cluster has masters, whatever its size
const lanesFor = (masters: number) => (values.lanes === 'masters' ? masters : Number(values.lanes));
const ROUNDS = Number(values.rounds);
const PER_MASTER = values['per-master'];
const PIN = values.pin;
const BALANCE = values.balance;
const ISOLATE = values.isolate;
if (ISOLATE && (sizes[0] !== 1 || sizes.length < 2 || !PER_MASTER))
  throw new Error('--isolate: --per-master, and --masters 1 and at least one size more');
const TICK_MS = Number(values.tick);
const INSTRUCTIONS = values.instructions;
if (INSTRUCTIONS && spawnSync('valgrind', ['--version'], { stdio: 'ignore' }).status !== 0)
  throw new Error('--instructions needs valgrind on the PATH (Debian: apt-get install valgrind)');
/** --instructions: where the masters' callgrind files go. */
const CG_DIR = INSTRUCTIONS ? mkdtempSync(join(tmpdir(), 'callgate-scaling-')) : '';
process.on('exit', () => CG_DIR && rmSync(CG_DIR, { recursive: true, force: true }));
/** valgrind runs Redis some 50 times slower: a decision's bound, and a server's start. */
const TIMEOUT_MS = INSTRUCTIONS ? 120_000 : 5000;
type Workload = (typeof WORKLOADS)[number];
const workloads = values.workloads.split(',') as Workload[];
for (const w of workloads)
  if (!WORKLOADS.includes(w)) throw new Error(`--workloads: one of ${WORKLOADS.join(', ')}, not ${w}`);

const CARRIERS = Number(values.carriers);
// each carrier is first choice for 1/12 of the calls; every fourth carrier paces at half its
// share (about half its first-choice calls are rerouted), the others at twice theirs, so some
// 1 call in 8 is rerouted whatever the timer jitter. maxWait is a fixed part of the interval
// (2 ms and 20 ms at 3,000 calls/s), so that the same share is rerouted at any rate
function routesAt(offered: number): Carrier[][] {
  const share = offered / CARRIERS;
  const carriers: Carrier[] = Array.from({ length: CARRIERS }, (_, i) => {
    const intervalUs = i % 4 === 0 ? 1e6 / (share * 0.5) : 1e6 / (share * 2);
    return {
      name: `carrier:k${i}`,
      intervalUs,
      maxWaitUs: i % 4 === 0 ? intervalUs / 4 : intervalUs * 10,
      channels: 100_000,
    };
  });
  return carriers.map((_, i) => [0, 1, 2].map((k) => carriers[(i + k) % CARRIERS]!));
}

/** usec and calls per command of one node's INFO commandstats. */
async function commandstats(node: Redis): Promise<Map<string, { calls: number; usec: number }>> {
  const info = await node.info('commandstats');
  const out = new Map<string, { calls: number; usec: number }>();
  for (const m of info.matchAll(/^cmdstat_([^:]+):calls=(\d+),usec=(\d+)/gm))
    out.set(m[1]!, { calls: Number(m[2]), usec: Number(m[3]) });
  return out;
}

/** A node's script calls and their usec (EVALSHA and EVAL), of its commandstats. */
function scriptsOf(stats: Map<string, { calls: number; usec: number }>): { calls: number; usec: number } {
  const [sha, lua] = [stats.get('evalsha'), stats.get('eval')];
  return { calls: (sha?.calls ?? 0) + (lua?.calls ?? 0), usec: (sha?.usec ?? 0) + (lua?.usec ?? 0) };
}

/** --instructions: dumps the counts of the callgrind'ed server `pid`: the instructions since its zero. */
function dumpedInstructions(pid: number): number {
  callgrindControl('dump', pid);
  // its newest dump: cg.<pid>.<n>, n counting the dumps
  const dumps = readdirSync(CG_DIR)
    .map((f) => new RegExp(`^cg\\.${pid}\\.(\\d+)$`).exec(f))
    .filter((m) => m !== null)
    .sort((a, b) => Number(b[1]) - Number(a[1]));
  if (dumps.length === 0) throw new Error(`no callgrind dump of ${pid} in ${CG_DIR}`);
  return countedInstructions(join(CG_DIR, dumps[0]![0]));
}

/**
 * --isolate: the schedule's first `n` calls split by the master that decides them (the master of
 * their first keys' tag), in schedule order, one list per master of `nodes`.
 */
function byMaster(cluster: Cluster, nodes: Redis[], n: number, tagOf: (i: number) => string): number[][] {
  const at = new Map(nodes.map((node, m) => [`${node.options.host}:${node.options.port}`, m]));
  const phases = nodes.map((): number[] => []);
  for (let i = 0; i < n; i++) {
    const owner = cluster.slots[slotOf(`{${tagOf(i)}}`)]?.[0];
    const m = owner === undefined ? undefined : at.get(owner);
    if (m === undefined) throw new Error(`no master known for call ${i}'s tag ${tagOf(i)}`);
    phases[m]!.push(i);
  }
  return phases;
}

/** --isolate: the calls of the longest list's slice, 100 ms of a master's calls at 3,000/s. */
const SLICE_CALLS = 300;

/**
 * The lists' items in turn until every list is done, all ending on the same turn: the longest
 * gives `chunk` items a turn, each other as many in proportion to its length (a master with
 * fewer calls gets shorter slices, at the same rate, and is never left to run alone at the end).
 */
function inTurn<T>(lists: T[][], chunk: number): T[] {
  const turns = Math.ceil(Math.max(...lists.map((l) => l.length)) / chunk);
  const order: T[] = [];
  for (let t = 0; t < turns; t++)
    for (const l of lists)
      order.push(...l.slice(Math.round((t * l.length) / turns), Math.round(((t + 1) * l.length) / turns)));
  return order;
}

/** One workload's decisions on a store: a warm-up, then one decision per call of the open loop. */
interface Decider {
  warm(): Promise<void>;
  decide(i: number): Promise<void>;
  /** The hash tag of call i's first keys: which master decides it (--isolate). */
  tagOf(i: number): string;
  /** What the decisions came to, for the table. */
  summary(): string;
  close(): Promise<void>;
}

function outbound(store: RedisStore, offered: number): Decider {
  const routes = routesAt(offered);
  let taken = 0;
  let rerouted = 0;
  let refused = 0;
  return {
    // scripts loaded on every master, connections open
    warm: async () => {
      await Promise.all(routes.map((route, i) => store.reserve({ route, hold: { id: `w${i}`, forUs: 1e6 } })));
    },
    async decide(i) {
      const r = await store.reserve({ route: routes[i % CARRIERS]!, hold: { id: `c${i}`, forUs: 2e6 } });
      if (r.index < 0) refused++;
      else {
        taken++;
        if (r.index > 0) rerouted++;
      }
    },
    tagOf: (i) => carrierTag(routes[i % CARRIERS]![0]!.name),
    summary: () => `${taken + refused} decided, ${rerouted} rerouted, ${refused} refused`,
    close: () => store.close(),
  };
}

const PEERS = 1000;
const seq = zipfSequence(Math.ceil(rate * (PER_MASTER ? Math.max(...sizes) : 1) * seconds) + PEERS, PEERS, 1.1, 1);

const leased = (w: Workload) => w === 'in-leased' || w === 'peers-leased';
/** A leased workload's unleased counterpart: the ceiling it is judged against (issue 28). */
const UNLEASED: Partial<Record<Workload, Workload>> = { 'in-leased': 'in-global1', 'peers-leased': 'peers-global' };

/** Each peer's share of the calls (Zipf 1.1 over PEERS, peer 0 the busiest, as `seq` draws them). */
const peerWeights = (() => {
  const w = Array.from({ length: PEERS }, (_, p) => 1 / (p + 1) ** 1.1);
  const sum = w.reduce((a, b) => a + b, 0);
  return w.map((x) => x / sum);
})();

/** A leased global bucket, for laneOf: which lane an owner's calls go to. */
const LEASED_PROBE = { name: 'global', limits: [{ algorithm: 'sliding-log' as const, limit: 1, windowUs: 1e6 }] };

/** --pin's placement of `workload`'s owners on `masters` masters (see the header). */
function pinsFor(workload: Workload, masters: number): LanePins {
  const LANES = lanesFor(masters);
  const byAccount = workload === 'in-leased';
  const owners = new Map<string, number>();
  peerWeights.forEach((w, p) => {
    const id = byAccount ? accountName(p) : peerName(p);
    owners.set(id, (owners.get(id) ?? 0) + w);
  });
  const ranked = [...owners].sort((a, b) => b[1] - a[1]);
  const pinned = ranked.slice(0, byAccount ? ranked.length : Number(values['pin-peers'] ?? 4 * LANES));
  const masterOf = (k: number) => Math.floor((k * masters) / LANES);
  const masterLoad = new Array<number>(masters).fill(0);
  const laneLoad = new Array<number>(LANES).fill(0);
  // the owners left unpinned stay on their hashed lanes
  for (const [id, w] of ranked.slice(pinned.length)) {
    const k = laneOf([LEASED_PROBE, { name: `${byAccount ? 'account' : 'peer'}:${id}`, limits: [] }], LANES);
    laneLoad[k]! += w;
    masterLoad[masterOf(k)]! += w;
  }
  const pins: Record<string, number> = {};
  const masterOfPin = busiestFirst(pinned, masterLoad);
  for (const [id, w] of pinned) {
    const m = masterOfPin.get(id)!;
    let lane = -1;
    for (let k = 0; k < LANES; k++) if (masterOf(k) === m && (lane < 0 || laneLoad[k]! < laneLoad[lane]!)) lane = k;
    laneLoad[lane]! += w;
    pins[id] = lane;
  }
  return byAccount ? { accounts: pins } : { peers: pins };
}

/**
 * Places weighted items on masters as an operator would: the busiest first, each onto the master
 * least loaded so far (`load`, each master's, updated). Each item's master.
 */
function busiestFirst<K>(items: Iterable<readonly [K, number]>, load: number[]): Map<K, number> {
  const placed = new Map<K, number>();
  for (const [item, w] of [...items].sort((a, b) => b[1] - a[1])) {
    const m = load.indexOf(Math.min(...load));
    load[m]! += w;
    placed.set(item, m);
  }
  return placed;
}

/** Limits `k` times as high: with --per-master, the same share of calls refused on every size. */
const scaled = (list: readonly Limit[], k: number) => list.map((l) => limitInput({ ...l, limit: l.limit * k }));

async function inbound(
  store: RedisStore,
  workload: Workload,
  coordinatorClient: () => Cluster,
  k: number,
  lanes: number,
): Promise<Decider> {
  const accounts = Object.fromEntries(
    Array.from({ length: ACCOUNTS }, (_, a) => [accountName(a), scaled(ACCOUNT_3, k)]),
  );
  const defaultPeer = scaled(PEER_3, k);
  const leasedGlobal = { ...GLOBAL_3[0]!, limit: GLOBAL_3[0]!.limit * k };
  const global1 = [limitInput(leasedGlobal)];
  const config = {
    'in-global': { inbound: { accounts, defaultPeer, global: scaled(GLOBAL_3, k) } },
    in: { inbound: { accounts, defaultPeer } },
    'in-global1': { inbound: { accounts, defaultPeer, global: global1 } },
    'in-leased': { inbound: { accounts, defaultPeer, global: global1 } },
    'peers-global': { inbound: { defaultPeer, global: global1 } },
    'peers-leased': { inbound: { defaultPeer, global: global1 } },
    out: undefined,
  }[workload]!;
  const withAccounts = !workload.startsWith('peers');
  const plan = store.leasePlan;
  const gate = await CallGate.create({ config, store, timeoutMs: TIMEOUT_MS, shield: false });
  const coordinator = leased(workload)
    ? new LeaseCoordinator({
        deployments: [{ redis: coordinatorClient(), lanes, prefix: store.prefix }],
        limit: { calls: leasedGlobal.limit, windowUs: leasedGlobal.windowUs },
        // the leadership is renewed once a tick: it must outlive a slow one (the lanes' leases follow it)
        ...(INSTRUCTIONS
          ? // --instructions: the shares granted for an hour, then the coordinator stopped: the
            // count is the decisions' alone (its cost is per second; valgrind makes a second
            // hold some 50 times fewer decisions than Redis would)
            { tickMs: 200, leaderTtlMs: 60_000, leaseMs: 3_600_000, replyTimeoutMs: 10_000 }
          : { tickMs: TICK_MS, leaderTtlMs: Math.max(1000, 4 * TICK_MS) }),
      }).start()
    : undefined;
  // the first shares are granted within a few ticks
  if (coordinator) await new Promise((r) => setTimeout(r, INSTRUCTIONS ? 3000 : 500));
  if (coordinator && INSTRUCTIONS) {
    await coordinator.stop();
    // a lane the coordinator lost (a reply slower than its timeout) would be refused for the run
    const { lost, state } = coordinator.report;
    // the overflow lane, unused here, is listed too, with no share
    const names = coordinator.laneNames;
    const empty = state?.shares.some((share, k) => !names[k]!.startsWith('overflow') && share.calls <= 0);
    if (lost.length > 0 || !state || empty)
      throw new Error(
        `--instructions: the shares were not all granted before the calls (lost lanes: ${lost.join(', ')})`,
      );
  }
  let admitted = 0;
  let refused = 0;
  const admit = async (id: string, p: number) => {
    const d = await gate.admit({
      callId: id,
      peer: peerName(p),
      ...(withAccounts && { account: accountName(p) }),
    });
    if (d.degraded) throw new Error(`call ${id} degraded: the Cluster did not answer in time`);
    if (d.admitted) admitted++;
    else refused++;
  };
  return {
    warm: async () => {
      // every peer once: scripts on every master, each peer's plan made
      await Promise.all(Array.from({ length: PEERS }, (_, p) => admit(`w${p}`, p)));
      admitted = refused = 0;
    },
    decide: (i) => admit(`c${i}`, seq[i]!),
    tagOf: (i) => {
      const p = seq[i]!;
      if (plan === undefined)
        return withAccounts && !('global' in config.inbound) ? accountTag(accountName(p)) : GLOBAL_TAG;
      const owner = withAccounts ? `account:${accountName(p)}` : `peer:${peerName(p)}`;
      return laneTag(laneOf([LEASED_PROBE, { name: owner, limits: [] }], plan), plan.lanes);
    },
    summary: () => `${admitted + refused} decided, ${refused} refused`,
    close: async () => {
      await coordinator?.stop();
      await gate.close();
    },
  };
}

/**
 * --balance: the slots of the `in` workload's account tags, or of the `out` workload's carrier
 * tags, placed on masters by load (busiest first, each onto the least loaded master), as an
 * operator moves a hot tag's slot; every other slot stays in the equal ranges.
 */
function balancedSlots(workload: Workload, masters: number): Map<number, number> {
  const load = new Map<number, number>();
  if (workload === 'in')
    peerWeights.forEach((w, p) => {
      const slot = slotOf(`{${accountTag(accountName(p))}}`);
      load.set(slot, (load.get(slot) ?? 0) + w);
    });
  else if (workload === 'out')
    // each carrier is first choice for 1 call in CARRIERS; about half the calls of every fourth
    // (paced at half its share, routesAt) are taken by the next. A master's work follows the calls
    // its carriers take (a hold each): an attempt that finds the wait too long costs a fifth of
    // one, by instructions (--instructions: 85.7 / 85.5 / 93.4 / 74.0 thousand per decision on
    // masters whose carriers took 3 / 3 / 3.5 / 2.5 twelfths of the calls, when every carrier
    // weighed 1 and the next 1.5)
    for (let i = 0; i < CARRIERS; i++)
      load.set(slotOf(`{${carrierTag(`carrier:k${i}`)}}`), i % 4 === 0 ? 0.6 : i % 4 === 1 ? 1.5 : 1);
  return busiestFirst(load, new Array<number>(masters).fill(0));
}

/** A Cluster of `masters` masters with a workload's store and decider, warmed. */
async function open(masters: number, workload: Workload) {
  const handle = await startCluster(
    masters,
    BALANCE ? balancedSlots(workload, masters) : undefined,
    INSTRUCTIONS
      ? {
          // instructions inside call(): what commandstats times (a command's execution, a
          // script's whole run), not reading requests or writing replies
          prefix: ['valgrind', '--tool=callgrind', '--toggle-collect=call', `--callgrind-out-file=${CG_DIR}/cg.%p`],
          startTimeoutMs: 60_000,
        }
      : undefined,
  );
  const cluster = new Cluster(handle.nodes, {
    redisOptions: RECOMMENDED_REDIS_OPTIONS,
    enableOfflineQueue: true,
    slotsRefreshTimeout: 2_000,
  });
  const own: Cluster[] = [];
  let decider: Decider | undefined;
  const close = async (started?: Decider) => {
    try {
      await started?.close();
    } finally {
      for (const c of own) c.disconnect();
      cluster.disconnect();
      await handle.stop();
    }
  };
  try {
    await cluster.set('warm', '1');
    const store = new RedisStore({
      redis: cluster,
      prefix: `cgbench${masters}:`,
      ...(leased(workload) && { lease: { lanes: lanesFor(masters), ...(PIN && { pin: pinsFor(workload, masters) }) } }),
    });
    const coordinatorClient = () => {
      const c = new Cluster(handle.nodes, { redisOptions: RECOMMENDED_REDIS_OPTIONS, slotsRefreshTimeout: 2_000 });
      own.push(c);
      return c;
    };
    // the same load per master on every size, or the same in all
    const offered = PER_MASTER ? rate * masters : rate;
    decider =
      workload === 'out'
        ? outbound(store, offered)
        : await inbound(store, workload, coordinatorClient, PER_MASTER ? masters : 1, lanesFor(masters));
    await decider.warm();
    // every script on every master: a master that meets one for the first time mid-run (a
    // reroute's next carrier, a lease order) would compile it then, inside the measure
    const nodes = cluster.nodes('master');
    await Promise.all(nodes.flatMap((node) => Object.values(scripts()).map((sc) => node.script('LOAD', sc.lua))));
    const made = decider;
    const pidOf = new Map(handle.nodes.map((n, k) => [n.port, handle.pids[k]!]));
    return {
      masters,
      workload,
      cluster,
      nodes,
      /** Each master's process id, in the order of `nodes` (--instructions). */
      pids: nodes.map((node) => pidOf.get(node.options.port!) ?? -1),
      decider,
      offered,
      close: () => close(made),
    };
  } catch (e) {
    await close(decider);
    throw e;
  }
}
type Setup = Awaited<ReturnType<typeof open>>;

/**
 * The calls of `order` (a setup's index and a call of its schedule each), `rate` a second, and
 * then each setup's row.
 */
async function measure(setups: Setup[], order: (readonly [number, number])[], rate: number) {
  const nodes = setups.flatMap((s) => s.nodes);
  await Promise.all(nodes.map((node) => node.config('RESETSTAT')));
  const pids = setups.flatMap((s) => s.pids);
  const cpu0 = await Promise.all(nodes.map(redisCpuSeconds));
  if (INSTRUCTIONS) for (const pid of pids) callgrindControl('zero', pid);
  const decisions = setups.map(() => 0);
  // openLoop issues floor(rate x seconds) calls: half a call more, so that rounding drops none
  const result = await openLoop(
    rate,
    (order.length + 0.5) / rate,
    async (j) => {
      const call = order[j];
      if (call === undefined) return;
      await setups[call[0]]!.decider.decide(call[1]);
      decisions[call[0]]!++;
    },
    undefined,
    TIMEOUT_MS,
  );
  // a count read with calls still in flight would divide their work by fewer decisions
  if (result.lost > 0) throw new Error(`${result.lost} calls were not decided within ${TIMEOUT_MS} ms of the schedule`);
  const instructions = INSTRUCTIONS ? pids.map(dumpedInstructions) : pids.map(() => Number.NaN);
  const stats = await Promise.all(nodes.map(commandstats));
  const cpuUsed = (await Promise.all(nodes.map(redisCpuSeconds))).map((c, k) => c - cpu0[k]!);
  let from = 0;
  const rows: Row[] = [];
  for (const [k, setup] of setups.entries()) {
    const to = from + setup.nodes.length;
    rows.push(
      await rowOf(
        setup,
        stats.slice(from, to),
        cpuUsed.slice(from, to),
        instructions.slice(from, to),
        decisions[k]!,
        result.hist.getValueAtPercentile(99) / 1e6,
      ),
    );
    from = to;
  }
  return rows;
}

/** A setup's row: per master its script and CPU time per decision, and the ceiling they project. */
async function rowOf(
  { masters, workload, nodes, decider }: Setup,
  stats: Map<string, { calls: number; usec: number }>[],
  cpuUsed: number[],
  instructions: number[],
  decisions: number,
  p99ms: number,
) {
  if (values.commands) {
    // every command, scripts' own included, summed over the masters: calls and µs per decision
    const all = new Map<string, { calls: number; usec: number }>();
    for (const s of stats)
      for (const [cmd, v] of s) {
        const a = all.get(cmd) ?? { calls: 0, usec: 0 };
        all.set(cmd, { calls: a.calls + v.calls, usec: a.usec + v.usec });
      }
    const rows = [...all].filter(([cmd]) => cmd !== 'info' && cmd !== 'config').sort((a, b) => b[1].usec - a[1].usec);
    console.log(
      `${workload} on ${masters}: ${rows.map(([cmd, v]) => `${cmd} ${(v.calls / decisions).toFixed(2)} × ${(v.usec / decisions).toFixed(1)} µs`).join(', ')}`,
    );
  }
  const cpuPer = cpuUsed.map((c) => (c * 1e6) / decisions);
  // where the keys sit (logs, carriers, holds, records, locators), per master
  const keys = (await Promise.all(nodes.map((n) => n.dbsize()))).join(' / ');
  const perMaster = stats.map((s) => {
    let all = 0;
    for (const [cmd, v] of s) if (cmd !== 'config' && cmd !== 'info') all += v.usec;
    const script = scriptsOf(s);
    return { script: script.usec / decisions, all: all / decisions, calls: script.calls / decisions };
  });
  const busiest = Math.max(...perMaster.map((m) => m.script));
  const busiestAll = Math.max(...perMaster.map((m) => m.all));
  return {
    masters,
    keys,
    summary: decider.summary(),
    p99ms,
    callsPerMaster: perMaster.map((m) => m.calls.toFixed(2)).join(' / '),
    cpuPerMaster: cpuPer.map((c) => c.toFixed(1)).join(' / '),
    scriptPerMaster: perMaster.map((m) => m.script.toFixed(1)).join(' / '),
    sumScript: perMaster.reduce((a, m) => a + m.script, 0),
    busiest,
    ceiling: 1e6 / busiest,
    // the same by CPU time (INFO CPU, user + system): not inflated by a master waiting for a
    // core mid-script, as commandstats' wall time is when 4 masters and the driver share 2
    ceilingCpu: 1e6 / Math.max(...cpuPer),
    ceilingAll: 1e6 / busiestAll,
    ...perDecision(instructions, decisions),
    /** A leased run's coordinator alone, script µs per second per master (coordinatorAlone). */
    coordinator: '–',
  };
}
type Row = Awaited<ReturnType<typeof rowOf>>;

/** --instructions: each master's `instructions` per decision, their sum, and the ceiling they project. */
function perDecision(instructions: number[], decisions: number) {
  const per = instructions.map((n) => n / decisions);
  return {
    /** Thousands of instructions inside call() per decision, per master. */
    instrPerMaster: per.map((n) => (n / 1e3).toFixed(1)).join(' / '),
    sumInstr: per.reduce((a, n) => a + n, 0),
    /** The ceiling by instructions: decisions per 10^9 of the busiest master's. */
    ceilingInstr: 1e9 / Math.max(...per),
  };
}

/**
 * A leased setup's coordinator alone, once the calls are done and out of the window: its
 * scripts' µs per second per master, over COORDINATOR_S seconds with no call (a fixed cost per
 * lane and tick, where a decision's is per call: the ceiling pays it once a second, whatever the
 * load). Idle, it reads every lane each tick and orders little; under load a lane may also get
 * a shrink or a grant each tick.
 */
const COORDINATOR_S = 2;
async function coordinatorAlone(setup: Setup): Promise<string> {
  // --instructions: the coordinator stopped before the calls
  if (!leased(setup.workload) || INSTRUCTIONS) return '–';
  // the lanes' logs are trimmed of the calls' events meanwhile (a window, 1 s), and demand decays
  await new Promise((r) => setTimeout(r, COORDINATOR_S * 1000));
  await Promise.all(setup.nodes.map((node) => node.config('RESETSTAT')));
  await new Promise((r) => setTimeout(r, COORDINATOR_S * 1000));
  const stats = await Promise.all(setup.nodes.map(commandstats));
  return stats.map((s) => Math.round(scriptsOf(s).usec / COORDINATOR_S)).join(' / ');
}

/** One workload on `masters` masters, every call on its schedule. */
async function run(masters: number, workload: Workload): Promise<Row> {
  const setup = await open(masters, workload);
  try {
    const n = Math.floor(setup.offered * seconds);
    const [row] = await measure(
      [setup],
      Array.from({ length: n }, (_, i) => [0, i] as const),
      setup.offered,
    );
    return { ...row!, coordinator: await coordinatorAlone(setup) };
  } finally {
    await setup.close();
  }
}

/**
 * --isolate: `workload` on `masters` masters and its paired one-master run (its unleased twin,
 * for a leased workload) side by side, in turn: SLICE_CALLS of the one master's calls, then as
 * many of each master's, and so on, at one master's rate.
 */
async function runInTurn(masters: number, workload: Workload): Promise<{ one: Row; many: Row }> {
  const one = await open(1, UNLEASED[workload] ?? workload);
  try {
    const many = await open(masters, workload);
    try {
      const n1 = Math.floor(one.offered * seconds);
      const lists: (readonly [number, number])[][] = [
        Array.from({ length: n1 }, (_, i) => [0, i] as const),
        ...byMaster(many.cluster, many.nodes, Math.floor(many.offered * seconds), many.decider.tagOf).map((l) =>
          l.map((i) => [1, i] as const),
        ),
      ];
      const [r1, rm] = await measure([one, many], inTurn(lists, SLICE_CALLS), one.offered);
      return { one: r1!, many: { ...rm!, coordinator: await coordinatorAlone(many) } };
    } finally {
      await many.close();
    }
  } finally {
    await one.close();
  }
}

const TITLES: Record<Workload, string> = {
  out: `outbound: reservations over 3-carrier routes, ${CARRIERS} carriers`,
  'in-global': 'inbound: three levels with a global limit (every key on the platform tag)',
  in: 'inbound: accounts and peers, no global limit',
  'in-global1': 'inbound: three levels, the global one its 1 s limit alone (every key on the platform tag)',
  'in-leased': `inbound: three levels, the global one leased over ${values.lanes} lanes (lanes by account${PIN ? ', pinned' : ''})`,
  'peers-global': 'inbound: global and peer levels, no account (every key on the platform tag)',
  'peers-leased': `inbound: global and peer levels, the global one leased over ${values.lanes} lanes (lanes by peer${PIN ? ', the busiest pinned' : ''})`,
};
/** Of several rounds of one size, the one with the median busiest master (script µs per decision on a shared two-core machine swing by 2x between rounds). */
function median(rounds: Row[]): Row {
  const sorted = [...rounds].sort((a, b) => a.busiest - b.busiest);
  return sorted[Math.floor(sorted.length / 2)]!;
}
// rounds outermost, so that each round's sizes and workloads run side by side and a ratio
// pairs runs minutes apart at most (a master's µs per decision drifts by ± 15 % over a run)
const byRound: Map<string, Row>[] = [];
for (let r = 0; r < ROUNDS; r++) {
  const rows = new Map<string, Row>();
  for (const w of workloads)
    for (const m of sizes)
      if (!ISOLATE) rows.set(`${w}/${m}`, await run(m, w));
      else if (m > 1) {
        const { one, many } = await runInTurn(m, w);
        rows.set(`${w}/${m}`, many);
        rows.set(`${w}/1@${m}`, one);
        // the table's one-master row: the pairing of the first size
        if (m === sizes[1]) rows.set(`${w}/1`, one);
      }
  byRound.push(rows);
}
const load = PER_MASTER ? `${rate} decisions/s per master` : `${rate} decisions/s`;
for (const w of workloads) {
  const rows = sizes.map((m) => median(byRound.map((b) => b.get(`${w}/${m}`)!)));
  const base = rows[0]!.ceiling;
  console.log(`${TITLES[w]}; ${load} for ${seconds} s; of ${ROUNDS} rounds, the median busiest master's`);
  if (ISOLATE && UNLEASED[w]) console.log(`(in turn: the one-master row is ${UNLEASED[w]}, run beside the first size)`);
  console.log(
    `masters | keys per master | decisions | script µs/decision per master | sum | busiest | ceiling/s | x one master | ceiling/s, all commands | p99 ms | CPU µs/decision per master | script calls/decision | coordinator alone, script µs/s per master${INSTRUCTIONS ? ' | k instructions/decision per master | sum | x one master by instructions' : ''}`,
  );
  for (const r of rows)
    console.log(
      `${r.masters} | ${r.keys} | ${r.summary} | ${r.scriptPerMaster} | ${r.sumScript.toFixed(1)} | ${r.busiest.toFixed(1)} | ${Math.round(r.ceiling)} | ${(r.ceiling / base).toFixed(2)} | ${Math.round(r.ceilingAll)} | ${r.p99ms.toFixed(1)} | ${r.cpuPerMaster} | ${r.callsPerMaster} | ${r.coordinator}${INSTRUCTIONS ? ` | ${r.instrPerMaster} | ${(r.sumInstr / 1e3).toFixed(1)} | ${(r.ceilingInstr / rows[0]!.ceilingInstr).toFixed(2)}` : ''}`,
    );
}
const mid = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
/** Each column's median over the rounds, and each round's, of ratios `of` gives per round. */
const ratios = (of: (b: Map<string, Row>) => number[]) => {
  const each = byRound.map(of);
  return each[0]!
    .map((_, c) => `${mid(each.map((x) => x[c]!)).toFixed(2)} (${each.map((x) => x[c]!.toFixed(2)).join(', ')})`)
    .join(' | ');
};
/** The ratios of ceilings of `r` over `one`: by script time, CPU time (and instructions). */
const over = (r: Row, one: Row) => [
  r.ceiling / one.ceiling,
  r.ceilingCpu / one.ceilingCpu,
  ...(INSTRUCTIONS ? [r.ceilingInstr / one.ceilingInstr] : []),
];
const BY = `by script time | by CPU${INSTRUCTIONS ? ' | by instructions' : ''}`;
console.log(`\nceiling ÷ one master's, paired within each round; the median of ${ROUNDS} rounds (each round's)`);
if (ISOLATE) {
  console.log(`workload | masters | ÷ the one-master run beside it (a leased workload: its unleased twin): ${BY}`);
  for (const w of workloads)
    for (const m of sizes.slice(1)) {
      const paired = ratios((b) => over(b.get(`${w}/${m}`)!, b.get(`${w}/1@${m}`)!));
      console.log(`${w} | ${m} | ${paired}`);
    }
  process.exit(0);
}
console.log(`workload | masters | ÷ itself on 1 master: ${BY} | ÷ the unleased level on 1 master: ${BY}`);
for (const w of workloads)
  for (const m of sizes.slice(1)) {
    const own = ratios((b) => over(b.get(`${w}/${m}`)!, b.get(`${w}/${sizes[0]}`)!));
    const u = UNLEASED[w];
    const vsUnleased =
      u && workloads.includes(u)
        ? ratios((b) => over(b.get(`${w}/${m}`)!, b.get(`${u}/${sizes[0]}`)!))
        : BY.split('|')
            .map(() => '–')
            .join(' | ');
    console.log(`${w} | ${m} | ${own} | ${vsUnleased}`);
  }
