/**
 * A routing process for the four-process abuse test (test/attributes-multiprocess.test.ts): its
 * own ioredis connection and CallGate on a RedisStore, live time (Redis TIME), the configuration
 * of scripts/gen-abuse-trace.ts.
 *
 *   node --import tsx test/attributes/worker.ts '<json AbuseWorkerArgs>'
 *
 * Prints {"ready":true} once connected, waits for "go" on stdin, then for `durationMs` offers, side
 * by side: the robocaller (one caller number through this worker's trunks), the scanner (one
 * source address, a new caller number each call) as fast as it can, and normal calls (a caller
 * and source of their own each) one every 50 ms; then prints one JSON line (AbuseWorkerReport).
 */
import { createInterface } from 'node:readline';
import { Redis } from 'ioredis';
import { CallGate } from '../../src/gate.js';
import { parseConfig } from '../../src/config/load.js';
import { RedisStore } from '../../src/store/redis/redis-store.js';
import { ATTACKS, abuseConfig } from '../../scripts/gen-abuse-trace.js';

export interface AbuseWorkerArgs {
  id: string;
  url: string;
  prefix: string;
  durationMs: number;
}

export interface Outcomes {
  offered: number;
  /** Decision times (Redis TIME, µs) of the admitted calls. */
  admitted: number[];
  /** Decision times of the calls refused as banned. */
  banned: number[];
  /** Other refusals, by limited_by and reason. */
  refused: Record<string, number>;
}

export interface AbuseWorkerReport {
  id: string;
  robocaller: Outcomes;
  scanner: Outcomes;
  normal: Outcomes;
  errors: string[];
}

const args = JSON.parse(process.argv[2] ?? '{}') as AbuseWorkerArgs;
const redis = new Redis(args.url, { maxRetriesPerRequest: 1, connectTimeout: 2_000 });
const gate = await CallGate.create({
  config: parseConfig(abuseConfig()),
  store: new RedisStore({ redis, prefix: args.prefix }),
  timeoutMs: 2_000,
});
await redis.ping();
process.stdout.write(`${JSON.stringify({ ready: true })}\n`);
const rl = createInterface({ input: process.stdin });
await new Promise<void>((resolve) => rl.on('line', (line) => line.trim() === 'go' && resolve()));
rl.close();

const outcomes = (): Outcomes => ({ offered: 0, admitted: [], banned: [], refused: {} });
const report: AbuseWorkerReport = {
  id: args.id,
  robocaller: outcomes(),
  scanner: outcomes(),
  normal: outcomes(),
  errors: [],
};
const end = Date.now() + args.durationMs;
let seq = 0;
const offer = async (o: Outcomes, input: { peer: string; caller: string; source: string }) => {
  o.offered++;
  try {
    const d = await gate.admit({ callId: `${args.id}-${++seq}`, ...input, durationUs: 1_000_000 });
    if (d.admitted) o.admitted.push(d.at);
    else if (d.reason === 'banned') o.banned.push(d.at);
    else {
      const k = `${d.limitedBy} ${d.reason ?? ''}`;
      o.refused[k] = (o.refused[k] ?? 0) + 1;
    }
  } catch (err) {
    if (report.errors.length < 5) report.errors.push((err as Error).message);
  }
};
const robo = async (lane: number) => {
  for (let k = 0; Date.now() < end; k++)
    await offer(report.robocaller, {
      peer: `r${args.id}-${(k + lane) % 10}`,
      caller: ATTACKS.robocaller.caller,
      source: `192.0.2.${1 + ((k + lane) % 40)}`,
    });
};
const scan = async (lane: number) => {
  for (let k = 0; Date.now() < end; k++)
    await offer(report.scanner, { peer: 'scan', caller: `${args.id}${lane}-${k}`, source: ATTACKS.scanner.source });
};
const normal = async () => {
  for (let k = 0; Date.now() < end; k++) {
    await offer(report.normal, {
      peer: `p${k % 10}`,
      caller: `+1555${args.id}${k}`,
      source: `10.${args.id.length}.${k % 250}.1`,
    });
    await new Promise((r) => setTimeout(r, 50));
  }
};
await Promise.all([robo(0), robo(1), scan(0), scan(1), scan(2), scan(3), normal()]);
process.stdout.write(`${JSON.stringify(report)}\n`);
await gate.close();
redis.disconnect();
