/**
 * A routing process for the four-process admission test (test/gate-multiprocess.test.ts): its own
 * ioredis connection and CallGate on a RedisStore, live time (Redis TIME), one peer.
 *
 *   node --import tsx test/admission/worker.ts '<json WorkerArgs>'
 *
 * Prints {"ready":true} once connected, waits for a line "go" on stdin, then admits calls of the
 * peer as fast as it can (`concurrency` in flight) until `maxCalls` were offered or `durationMs`
 * passed, and prints one JSON line: the decision time (`at`, Redis µs) of every admitted call.
 */
import { createInterface } from 'node:readline';
import { Redis } from 'ioredis';
import type { LimitInput } from '../../src/config/types.js';
import { CallGate } from '../../src/gate.js';
import { RedisStore } from '../../src/store/redis/redis-store.js';

export interface WorkerArgs {
  id: string;
  url: string;
  prefix: string;
  peer: string;
  limits: LimitInput[];
  maxCalls: number;
  durationMs: number;
  concurrency: number;
}

export interface WorkerReport {
  id: string;
  offered: number;
  /** Decision times (Redis TIME, µs) of the admitted calls. */
  admitted: number[];
  rejected: Record<string, number>;
  errors: string[];
}

const args = JSON.parse(process.argv[2] ?? '{}') as WorkerArgs;
const redis = new Redis(args.url, { maxRetriesPerRequest: 1, connectTimeout: 2_000 });
const gate = await CallGate.create({
  config: { inbound: { peers: { [args.peer]: args.limits } } },
  store: new RedisStore({ redis, prefix: args.prefix }),
  timeoutMs: 2_000,
  // the store's decisions across processes; offering as fast as it can, a shield would refuse
  // most calls in process and spend the offered calls before the capacity is reached (the
  // shield's own four-process test: test/shield.test.ts)
  shield: false,
});
await redis.ping();
process.stdout.write(`${JSON.stringify({ ready: true })}\n`);

const rl = createInterface({ input: process.stdin });
await new Promise<void>((resolve) => rl.on('line', (line) => line.trim() === 'go' && resolve()));
rl.close();

const report: WorkerReport = { id: args.id, offered: 0, admitted: [], rejected: {}, errors: [] };
const end = Date.now() + args.durationMs;
let seq = 0;
const lane = async () => {
  while (report.offered < args.maxCalls && Date.now() < end) {
    report.offered++;
    try {
      const d = await gate.admit({ callId: `${args.id}-${seq++}`, peer: args.peer });
      if (d.admitted) report.admitted.push(d.at);
      else report.rejected[d.limitedBy!] = (report.rejected[d.limitedBy!] ?? 0) + 1;
    } catch (err) {
      report.errors.push(String(err));
    }
  }
};
await Promise.all(Array.from({ length: args.concurrency }, lane));
await gate.close();
redis.disconnect();
process.stdout.write(`${JSON.stringify(report)}\n`);
