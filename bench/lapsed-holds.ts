/**
 * npm run build && npx tsx bench/lapsed-holds.ts [--lapsed 1000,10000,100000] [--rounds 3]
 *   [--against DIR]
 *
 * What a decision costs Redis when it meets a holds set full of lapsed holds: calls never
 * released (a routing process that crashed, BYEs that never came), their holds over, left in a
 * set whose channel limit is far above the calls in progress. Such a set is counted by its size
 * until it reaches its limit (includes/channels.lua, liveHolds); the decision there drops the
 * lapsed holds. Each row: a peer with a channel limit of 10, one call in progress, `--lapsed`
 * lapsed holds put in its set; then Redis' µs (INFO commandstats, the script calls') of the first
 * decision at the limit and the longest of the next 20, each on the lone script
 * (admit-lone-held.lua, a call at a time) and on admit.lua (two calls at a time, RedisStore
 * loneUpTo 1: a batch of two); median of `--rounds`.
 *
 * `--against DIR`: another checkout of callgate (built), run in turn with this one, rounds
 * interleaved.
 */
import { resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { peerBucket } from '../src/store/keys.js';
import { RedisKeys } from '../src/store/redis/redis-keys.js';
import { startRedisServer } from '../test/helpers/redis.js';
import { builtEntry } from './shipped.js';

const { values } = parseArgs({
  options: {
    lapsed: { type: 'string', default: '1000,10000,100000' },
    rounds: { type: 'string', default: '3' },
    against: { type: 'string' },
  },
});
const LAPSED = values.lapsed!.split(',').map(Number);
const ROUNDS = Number(values.rounds);
if (!LAPSED.every((n) => Number.isInteger(n) && n > 0)) throw new Error('--lapsed: positive integers');
if (!(Number.isInteger(ROUNDS) && ROUNDS > 0)) throw new Error('--rounds must be a positive integer');
const trees = [resolve('.'), ...(values.against ? [resolve(values.against)] : [])];

const server = await startRedisServer();
const admin = new Redis(server.port, '127.0.0.1');

async function scriptUsec(): Promise<number> {
  const info = await admin.info('commandstats');
  let usec = 0;
  for (const m of info.matchAll(/^cmdstat_(evalsha|eval):calls=\d+,usec=(\d+)/gm)) usec += Number(m[2]);
  return usec;
}

/** Redis µs of the first decision at the limit, and the longest of the next 20. */
async function measure(root: string, path: 'lone' | 'batch', lapsed: number): Promise<[number, number]> {
  const { CallGate, RedisStore } = (await import(builtEntry(root))) as typeof import('../src/index.js');
  await admin.flushall();
  const client = new Redis(server.port, '127.0.0.1');
  const gate = await CallGate.create({
    config: { maxCallDuration: 'PT1H', inbound: { defaultPeer: [{ channels: 10 }] } },
    store: new RedisStore({ redis: client, prefix: 'lh:', holds: { syncMs: 0 }, loneUpTo: 1 }),
    timeoutMs: 5_000,
    shield: false,
  });
  try {
    const first = await gate.admit({ callId: 'live', peer: 'p' });
    if (!first.admitted) throw new Error('the first call was refused');
    // the path's script sent once before (its first call on a socket is an EVAL: compiled there)
    const shape = (i: number) => (path === 'lone' ? [`c${i}`] : [`c${i}`, `d${i}`]);
    await Promise.all(shape(-1).map((callId) => gate.admit({ callId, peer: 'p' })));
    for (const id of shape(-1)) await gate.release(id);
    // the peer's holds set on a single Redis (no hash tags: the tag is not in the name)
    const holds = new RedisKeys('lh:', false).holds('', peerBucket('p'));
    if ((await admin.zcard(holds)) !== 1) throw new Error(`${holds}: expected the one call in progress`);
    const [s, us] = (await admin.time()).map(Number);
    const past = s! * 1e6 + us! - 1e6;
    for (let i = 0; i < lapsed; i += 10_000) {
      const args: string[] = [];
      for (let j = i; j < Math.min(lapsed, i + 10_000); j++) args.push(String(past - j), `old${j}`);
      await admin.zadd(holds, ...args);
    }
    let most = 0;
    const times: number[] = [];
    for (let i = 0; i <= 20; i++) {
      await admin.config('RESETSTAT');
      const ids = shape(i);
      await Promise.all(ids.map((callId) => gate.admit({ callId, peer: 'p' })));
      const t = await scriptUsec();
      times.push(t);
      if (i > 0) most = Math.max(most, t);
      for (const id of ids) await gate.release(id); // the set stays at its limit: each call meets it again
    }
    return [times[0]!, most];
  } finally {
    await gate.close();
    client.disconnect();
  }
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
console.log(
  `Redis µs of a decision at a holds set's limit (10), one call in progress and N lapsed holds; median of ${ROUNDS} rounds; Node ${process.version}`,
);
console.log('tree                     path    lapsed   first decision µs   longest of the next 20 µs');
for (const lapsed of LAPSED)
  for (const path of ['lone', 'batch'] as const) {
    const got = new Map<string, [number, number][]>();
    for (let r = 0; r < ROUNDS; r++)
      for (const root of trees) {
        const list = got.get(root) ?? [];
        list.push(await measure(root, path, lapsed));
        got.set(root, list);
      }
    for (const [root, list] of got)
      console.log(
        `${root.padEnd(24).slice(0, 24)} ${path.padEnd(6)} ${String(lapsed).padStart(7)}   ${String(median(list.map((x) => x[0]))).padStart(17)}   ${String(median(list.map((x) => x[1]))).padStart(25)}`,
      );
  }
admin.disconnect();
await server.stop();
