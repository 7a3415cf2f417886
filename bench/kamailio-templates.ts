/**
 * npx tsx bench/kamailio-templates.ts [--calls 3000] [--rounds 3] [--lanes 4]
 *
 * Redis time per INVITE of Kamailio's ndb_redis path (src/kamailio/redis-commands.ts): the
 * template of a lone script (admit-lone-held.lua here: three levels with channels, what
 * `callgate kamailio` writes for such a peer) against the same call through admit.lua (what it
 * wrote before 2026-11-28), and the lone template on a leased global level (`--lease-lanes`:
 * the call on its lane, checked against the lane's share, granted whole here), each filled as
 * kamailio-redis.cfg and hiredis fill it and run on a redis-server of its own, interleaved
 * rounds; EVALSHA µs per call from INFO commandstats.
 */
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { planFor } from '../src/admission/plan.js';
import { parseConfig } from '../src/config/index.js';
import { kamailioCommands } from '../src/kamailio/redis-commands.js';
import { laneTag } from '../src/lease/lanes.js';
import { type AdmitEnv, admitArgv } from '../src/store/redis/admit-args.js';
import { bucketArgsOf } from '../src/store/redis/bucket-args.js';
import type { KnownLogs } from '../src/store/redis/known-logs.js';
import { RedisKeys } from '../src/store/redis/redis-keys.js';
import { startRedisServer } from '../test/helpers/redis.js';

const { values } = parseArgs({
  options: {
    calls: { type: 'string', default: '3000' },
    rounds: { type: 'string', default: '3' },
    lanes: { type: 'string', default: '4' },
  },
});
const CALLS = Number(values.calls);
const ROUNDS = Number(values.rounds);
const LANES = Number(values.lanes);
type Via = 'admit.lua' | 'lone' | 'leased';
const VIAS: readonly Via[] = ['admit.lua', 'lone', 'leased'];

// limits high enough that every call is admitted and written: the cost of a full decision
const config = parseConfig({
  maxCallDuration: 'PT2S',
  inbound: {
    global: [{ limit: 100_000, window: 'PT1S' }, { channels: 100_000 }],
    accounts: { acct: [{ limit: 50_000, window: 'PT1S' }, { channels: 50_000 }] },
    peers: { p1: [{ limit: 40_000, window: 'PT1S' }, { limit: 100_000, window: 'PT10S' }, { channels: 30_000 }] },
  },
});

/** A template filled as kamailio-redis.cfg does: the deadline at '|', then hiredis' %s and %%. */
function fill(template: string, vals: readonly string[]): string[] {
  const format = template.replace('|', String(Date.now() * 1000 + 10_000_000));
  let n = 0;
  return format.split(' ').map((t) => t.replace(/%[s%]/g, (m) => (m === '%%' ? '%' : vals[n++]!)));
}

/** The template of peer p1 with account acct: the generated one (leased or not), or admit.lua's for the same call. */
function templateOf(prefix: string, via: Via): { command: string; values: 'iii' | 'ini' } {
  const cmds = kamailioCommands(config, prefix, 1, via === 'leased' ? { lease: { lanes: LANES } } : {});
  const t = cmds.templates.find((x) => x.peer === 'p1' && x.account === 'acct')!;
  if (via !== 'admit.lua') return t;
  // as redis-commands.ts packed every template before: admit.lua's layout for a batch of one
  const keys = new RedisKeys(prefix, false);
  const plan = planFor(config, 'p1', 'acct');
  if (plan === 'unknown-peer') throw new Error('p1 is configured');
  const buckets = plan.buckets.map((b) => bucketArgsOf(plan.tag, keys.base(plan.tag, b.name), b));
  const ID = '\uE000';
  const env: AdmitEnv = {
    virtualTtlMs: 0,
    known: { boundOf: () => '0' } as unknown as KnownLogs,
    member: () => `~k${ID}`,
    deadline: () => '|',
    recordPrefix: (tag) => keys.inboundRecord(tag, ''),
    declareRecords: false,
  };
  const item = { buckets, now: '\uE001', id: ID, forUs: 2e6, signal: undefined, resolve() {}, reject() {} };
  const argv = admitArgv([item], '0', env) as string[];
  return {
    command: ['EVALSHA', cmds.admit.sha, ...argv.map((a) => a.replace(/[\uE000\uE001]/g, '%s'))].join(' '),
    values: 'ini',
  };
}

const server = await startRedisServer();
const redis = new Redis({ host: server.host, port: server.port });
try {
  const cmds = kamailioCommands(config, 'k:');
  for (const s of [...cmds.admitScripts, cmds.release]) await redis.script('LOAD', s.lua);
  const us: Record<Via, number[]> = { lone: [], 'admit.lua': [], leased: [] };
  const [sec] = (await redis.time()) as unknown as [string];
  for (let r = 0; r < ROUNDS; r++) {
    for (const via of VIAS) {
      // each round and way its own keys ('lone' and 'leased' share their first letter)
      const prefix = `k${r}${via}:`;
      const t = templateOf(prefix, via);
      // a leased lane's share: the whole level, for an hour (what the coordinator grants a lone lane)
      for (let k = 0; via === 'leased' && k < LANES; k++)
        await redis.hset(
          `${prefix}{${laneTag(k, LANES)}}:global:share`,
          'c',
          '100000',
          'h',
          '100000',
          'e',
          String((Number(sec) + 3600) * 1e6),
        );
      await redis.config('RESETSTAT');
      for (let i = 0; i < CALLS; i++) {
        const id = `${i}`;
        const reply = await redis.call(
          ...(fill(t.command, t.values === 'iii' ? [id, id, id] : [id, '', id]) as [string]),
        );
        if (!Array.isArray(reply) || reply[0] !== 0) throw new Error(`call ${i}: not admitted: ${String(reply)}`);
      }
      const m = /cmdstat_evalsha:calls=(\d+),usec=(\d+)/.exec(await redis.info('commandstats'))!;
      us[via].push(Number(m[2]) / Number(m[1]));
    }
  }
  const median = (v: number[]) => [...v].sort((a, b) => a - b)[Math.floor(v.length / 2)]!;
  console.log(`Redis µs per INVITE (EVALSHA, ${CALLS} calls per round, ${ROUNDS} interleaved rounds):`);
  for (const via of VIAS)
    console.log(
      `  ${via.padEnd(10)} ${us[via].map((x) => x.toFixed(1)).join(' / ')}  median ${median(us[via]).toFixed(1)}`,
    );
  console.log(`  lone ÷ admit.lua: ${(median(us.lone) / median(us['admit.lua'])).toFixed(2)}`);
  console.log(`  leased (${LANES} lanes) ÷ lone: ${(median(us.leased) / median(us.lone)).toFixed(2)}`);
} finally {
  redis.disconnect();
  await server.stop();
}
