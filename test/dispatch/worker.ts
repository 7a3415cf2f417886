/**
 * A routing process for the two-process pacing test (test/dispatch.test.ts): its own ioredis
 * connection, a RedisStore and a Dispatcher on SystemClock in store-time mode (Redis TIME).
 *
 *   node --import tsx test/dispatch/worker.ts '<json WorkerArgs>'
 *
 * Prints {"ready":true} once connected, waits for a line "go" on stdin, offers calls at `rate`
 * per second until `calls` were offered or `durationMs` passed, drains, and prints one JSON line
 * with every call's outcome and, for each call sent, its Redis-time slot and local send time.
 */
import { createInterface } from 'node:readline';
import { Redis } from 'ioredis';
import { SystemClock, systemClockUs } from '../../src/clock.js';
import type { CarrierConfig } from '../../src/config/types.js';
import { Dispatcher, type DispatchResult } from '../../src/dispatch/dispatcher.js';
import { RedisStore } from '../../src/store/redis/redis-store.js';

export interface WorkerArgs {
  id: string;
  url: string;
  prefix: string;
  carriers: Record<string, { cps: number; maxWaitUs: number }>;
  routes: string[][];
  calls: number;
  rate: number;
  durationMs: number;
}

export interface WorkerSend {
  callId: string;
  carrier: string;
  /** Redis-time slot, µs. */
  slotUs: number;
  waitUs: number;
  /** Local process clock (systemClockUs) when the reply arrived and when send ran, µs. */
  replyLocalUs: number;
  sendLocalUs: number;
}

export interface WorkerReport {
  id: string;
  offered: number;
  outcomes: Record<string, number>;
  sends: WorkerSend[];
  errors: string[];
}

const args = JSON.parse(process.argv[2] ?? '{}') as WorkerArgs;
const redis = new Redis(args.url, { maxRetriesPerRequest: 1, connectTimeout: 2_000 });
const store = new RedisStore({ redis, prefix: args.prefix });
const carriers = new Map<string, CarrierConfig>(
  Object.entries(args.carriers).map(([id, c]) => [id, { cps: c.cps, intervalUs: 1e6 / c.cps, maxWaitUs: c.maxWaitUs }]),
);
const dispatcher = new Dispatcher({ store, clock: new SystemClock(true), carriers: () => carriers, timeoutMs: 2_000 });

const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

async function main(): Promise<void> {
  await redis.ping();
  process.stdout.write(`${JSON.stringify({ ready: true })}\n`);
  const rl = createInterface({ input: process.stdin });
  await new Promise<void>((resolve) => rl.on('line', (line) => line.trim() === 'go' && resolve()));
  rl.close();

  const sends: WorkerSend[] = [];
  const errors: string[] = [];
  const outcomes: Record<string, number> = {};
  const results: Promise<DispatchResult>[] = [];
  const start = Date.now();
  let offered = 0;
  while (offered < args.calls && Date.now() - start < args.durationMs) {
    const callId = `${args.id}-${offered}`;
    const route = args.routes[offered % args.routes.length]!;
    let replyLocalUs = 0;
    let slotUs = 0;
    let waitUs = 0;
    results.push(
      dispatcher.dispatch(
        { callId, route },
        (carrier) => {
          sends.push({ callId, carrier, slotUs, waitUs, replyLocalUs, sendLocalUs: systemClockUs() });
        },
        {
          onReserved: (r) => {
            replyLocalUs = systemClockUs();
            slotUs = r.slotAt ?? 0;
            waitUs = r.slotAt === undefined ? 0 : r.slotAt - r.at;
          },
        },
      ),
    );
    offered++;
    // pace the offers: the next one at start + offered / rate
    const due = start + (offered * 1000) / args.rate;
    const ahead = due - Date.now();
    if (ahead > 0) await sleep(ahead);
  }
  for (const r of await Promise.all(results)) {
    outcomes[r.outcome] = (outcomes[r.outcome] ?? 0) + 1;
    if (r.error) errors.push(r.error.message);
  }
  await dispatcher.close();
  const report: WorkerReport = { id: args.id, offered, outcomes, sends, errors };
  process.stdout.write(`${JSON.stringify(report)}\n`);
  await redis.quit().catch(() => redis.disconnect());
}

main().then(
  () => process.exit(0),
  (err) => {
    process.stderr.write(`${String(err?.stack ?? err)}\n`);
    process.exit(1);
  },
);
