/**
 * npm run build && npx tsx bench/alloc.ts [--rate 10000] [--seconds 3] [--rounds 2] [--top 12]
 *   [--from dist|src|both] [--against DIR] [--channels]
 *
 * Bytes allocated per decision, and by which function: the three levels of `npm run bench`
 * (shield off; with `--channels` also the three levels with a channel limit each, every other
 * admitted call released as soon as it is decided, as the open loop's row) and
 * rate-limiter-flexible's consume, each driven by the open loop at `--rate`
 * for `--seconds` on a redis-server of its own, after a second of warm-up at half the rate.
 * Every allocation counts, those a young collection freed too: V8's sampling heap profiler
 * (one sample per 512 bytes on average, objects collected by minor and major GC included), the
 * bytes of each sample charged to the function that allocated it. What a process allocates
 * per call sets how often its young collections stop the event loop (each pause delays every
 * call due meanwhile: the open loop's tail). The profiler slows the process, so this prints no
 * latency; `npm run bench -- --only openloop` measures that, with the collector's ms per second.
 *
 * `--from`: callgate as users run it, compiled by tsc (dist/, the default: `npm run build`
 * first), or its TypeScript source as tsx compiles it on the fly (src/), or both in turn. tsx
 * keeps every function's name (esbuild's keepNames), which wraps each closure made at run time
 * in a call that defines its name: a cost that compiled code does not have.
 * `--against DIR`: another checkout of callgate (a worktree with node_modules; built, for
 * dist), run in turn with this one, rounds interleaved.
 */
import { Session } from 'node:inspector/promises';
import { basename, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { RateLimiterRedis } from 'rate-limiter-flexible';
import { startRedisServer } from '../test/helpers/redis.js';
import { ACCOUNTS, CONFIG_3, CONFIG_3CH, PEER_1 } from './limits.js';
import { callIdOf, openLoop } from './driver.js';
import { builtEntry } from './shipped.js';
import { zipfSequence } from './workload.js';

const { values } = parseArgs({
  options: {
    rate: { type: 'string', default: '10000' },
    seconds: { type: 'string', default: '3' },
    rounds: { type: 'string', default: '2' },
    top: { type: 'string', default: '12' },
    from: { type: 'string', default: 'dist' },
    against: { type: 'string' },
    channels: { type: 'boolean', default: false },
  },
});
const RATE = Number(values.rate);
const SECONDS = Number(values.seconds);
const ROUNDS = Number(values.rounds);
const TOP = Number(values.top);
const SAMPLING_BYTES = 512;
const FROM = values.from === 'both' ? ['dist', 'src'] : [values.from!];
if (!FROM.every((f) => f === 'dist' || f === 'src')) throw new Error('--from must be dist, src or both');
const entry = (root: string, from: string) => (from === 'dist' ? builtEntry(root) : resolve(root, 'src/index.ts'));
const seq = zipfSequence(Math.ceil(RATE * SECONDS) + RATE, 1000, 1.1, 1);

interface Row {
  readonly name: string;
  readonly decisions: number;
  /** Bytes allocated, by allocating function (`name file`). */
  readonly by: Map<string, number>;
}

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string };
  children: ProfileNode[];
}
interface SamplingProfile {
  head: ProfileNode;
  samples: { size: number; nodeId: number }[];
}

/** Run `op` in the open loop under the sampling heap profiler; bytes by allocating function. */
async function sampled(name: string, op: (i: number) => Promise<unknown>): Promise<Row> {
  const ignore = () => undefined;
  await openLoop(RATE / 2, 1, (i) => op(seq.length - 1 - i).then(ignore, ignore));
  const session = new Session();
  session.connect();
  try {
    await session.post('HeapProfiler.enable');
    // the options beyond samplingInterval are V8's (Node's typings lack them): count what the collector freed too
    await session.post('HeapProfiler.startSampling', {
      samplingInterval: SAMPLING_BYTES,
      includeObjectsCollectedByMinorGC: true,
      includeObjectsCollectedByMajorGC: true,
    } as { samplingInterval: number });
    const run = await openLoop(RATE, SECONDS, (i) => op(i).then(ignore, ignore));
    const { profile } = (await session.post('HeapProfiler.stopSampling')) as unknown as { profile: SamplingProfile };
    const frames = new Map<number, string>();
    const index = (node: ProfileNode) => {
      const f = node.callFrame;
      frames.set(node.id, `${f.functionName || '(anonymous)'} ${f.url === '' ? '(native)' : basename(f.url)}`);
      for (const child of node.children) index(child);
    };
    index(profile.head);
    const by = new Map<string, number>();
    for (const s of profile.samples) {
      const frame = frames.get(s.nodeId)!;
      by.set(frame, (by.get(frame) ?? 0) + s.size);
    }
    return { name, decisions: run.done, by };
  } finally {
    session.disconnect();
  }
}

async function gateRow(root: string, from: string, label: string, channels = false): Promise<Row> {
  const { CallGate, RedisStore } = (await import(entry(root, from))) as typeof import('../src/index.js');
  const server = await startRedisServer();
  const client = new Redis(server.port, '127.0.0.1');
  const gate = await CallGate.create({
    config: channels ? CONFIG_3CH : CONFIG_3,
    store: new RedisStore({ redis: client, prefix: 'alloc:' }),
    timeoutMs: 5000,
    shield: false,
  });
  try {
    return await sampled(`callgate 3 levels${channels ? ' + channels' : ''}${label}`, (i) => {
      const p = seq[i]!;
      const callId = callIdOf('c', i);
      const decided = gate.admit({ callId, peer: `peer${p}`, account: `acct${p % ACCOUNTS}` });
      if (!channels) return decided;
      // the open loop's row: every other admitted call released at once (its release counted too)
      return decided.then((d): Promise<unknown> | unknown => (d.admitted && (i & 1) === 1 ? gate.release(callId) : d));
    });
  } finally {
    await gate.close();
    client.disconnect();
    await server.stop();
  }
}

async function rlfRow(): Promise<Row> {
  const server = await startRedisServer();
  const client = new Redis(server.port, '127.0.0.1');
  const limiter = new RateLimiterRedis({
    storeClient: client,
    points: PEER_1[0]!.limit,
    duration: PEER_1[0]!.windowUs / 1_000_000,
    keyPrefix: 'rlf',
  });
  try {
    return await sampled('rate-limiter-flexible', (i) => limiter.consume(`peer${seq[i]!}`));
  } finally {
    client.disconnect();
    await server.stop();
  }
}

const total = (r: Row) => [...r.by.values()].reduce((a, b) => a + b, 0);

function print(r: Row): void {
  console.log(`${r.name}: ${Math.round(total(r) / r.decisions)} B per decision (${r.decisions} decisions)`);
  const top = [...r.by].sort((a, b) => b[1] - a[1]).slice(0, TOP);
  for (const [frame, bytes] of top) console.log(`  ${String(Math.round(bytes / r.decisions)).padStart(6)}  ${frame}`);
}

const trees = [resolve('.'), ...(values.against ? [resolve(values.against)] : [])];
const label = (root: string, from: string) =>
  [trees.length > 1 ? basename(root) : '', FROM.length > 1 ? from : ''].filter((x) => x !== '').join(', ');
console.log(
  `bytes allocated per decision at ${RATE}/s, ${SECONDS} s per run, sampled every ${SAMPLING_BYTES} B on average; Node ${process.version}`,
);
const rows: Row[] = [];
for (let round = 1; round <= ROUNDS; round++) {
  for (const root of trees)
    for (const from of FROM) {
      const l = label(root, from);
      rows.push(await gateRow(root, from, l === '' ? '' : ` (${l})`));
      if (values.channels) rows.push(await gateRow(root, from, l === '' ? '' : ` (${l})`, true));
    }
  rows.push(await rlfRow());
}
for (const r of rows) print(r);
console.log('\nper decision, by round:');
for (const name of new Set(rows.map((r) => r.name)))
  console.log(
    `  ${name}: ${rows
      .filter((r) => r.name === name)
      .map((r) => Math.round(total(r) / r.decisions))
      .join(' / ')} B`,
  );
